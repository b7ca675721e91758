//! The one connection loop, for a data node's clients and a sentinel's:
//! it frames commands out of what the connection reads
//! ([`frame`](super::frame)), has its server answer each, and writes
//! the replies, and between them the pushes (`message` frames) a
//! subscribed connection receives.
//!
//! A server says what differs: how it answers a command, what a closed
//! connection leaves behind, and, for a data node, the connections its
//! demotion closes, the event-loop pass a read makes (the AOF
//! acknowledgements of [`NodeHandle::loop_pass`](super::node::NodeHandle)),
//! and the `REPLSYNC` that turns a connection into a replication stream.

use redis_protocol::resp2::types::OwnedFrame as Frame;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    sync::mpsc,
};
use turmoil::net::TcpStream;

use super::{
    cmd::pubsub::Push,
    frame::{error, next_command, to_bytes},
};

/// What a connection remembers between commands.
#[derive(Debug, Clone, Copy, Default)]
pub struct Session {
    /// The connection's id (its subscriptions are filed under it).
    pub id: u64,
    /// Redis Cluster: `ASKING` came just before; it lasts one command.
    pub asking: bool,
    /// Redis Cluster: `READONLY` was sent (a replica serves reads).
    pub readonly: bool,
}

/// A server the connection loop serves: a data node or a sentinel.
pub(super) trait Server {
    /// The most bytes one read takes (and the read buffer's first size).
    const READ_CHUNK: usize;

    /// Opens a connection: returns its id.
    fn open(&self) -> u64;

    /// Answers one command on the connection whose state is `session`;
    /// `push` carries the connection's pub/sub messages. Returns the reply
    /// frames (`SUBSCRIBE` answers one per channel; most commands one).
    async fn dispatch(&self, session: &mut Session, push: &Push, args: &[Vec<u8>]) -> Vec<Frame>;

    /// Forgets what connection `id` left behind (its subscriptions).
    fn close(&self, id: u64);

    /// The generation of client connections now: a connection ends once
    /// it moves (see [`killed`](Self::killed)).
    fn generation(&self) -> u64 {
        0
    }

    /// Resolves when the server closes its client connections; a server
    /// that never does stays pending.
    async fn killed(&self) {
        std::future::pending::<()>().await;
    }

    /// A pass of the server's event loop, after a read.
    fn read_pass(&self) {}

    /// Whether command `args` hands the connection over to another
    /// protocol (a replica's `REPLSYNC`): [`take_over`](Self::take_over)
    /// serves it from then on.
    fn hands_over(&self, _args: &[Vec<u8>]) -> bool {
        false
    }

    /// Serves a connection handed over by command `args`, `pending` the
    /// bytes read after it.
    async fn take_over(&self, _stream: TcpStream, _args: &[Vec<u8>], _pending: Vec<u8>) {}
}

/// Serves one connection of `server` until it closes.
pub(super) async fn serve<S: Server>(server: S, stream: TcpStream) {
    let id = server.open();
    let mut session = Session {
        id,
        ..Session::default()
    };
    let (mut reader, mut writer) = stream.into_split();
    let (push, mut pushes) = mpsc::unbounded_channel::<Frame>();
    let mut buffer = Vec::with_capacity(S::READ_CHUNK);
    let mut chunk = vec![0u8; S::READ_CHUNK];
    let generation = server.generation();
    'connection: loop {
        // A demotion closes every client connection (checked here too, in
        // case it came while this one was busy writing).
        if server.generation() != generation {
            break;
        }
        tokio::select! {
            biased;
            () = server.killed() => {}
            Some(frame) = pushes.recv() => {
                if writer.write_all(&to_bytes(&frame)).await.is_err() {
                    break;
                }
            }
            read = reader.read(&mut chunk) => {
                let Ok(read) = read else { break };
                if read == 0 {
                    break;
                }
                buffer.extend_from_slice(&chunk[..read]);
                server.read_pass();
                loop {
                    let args = match next_command(&mut buffer) {
                        Ok(Some(args)) => args,
                        Ok(None) => break,
                        Err(problem) => {
                            // As Redis does: the error, then the connection closes.
                            let _ = writer.write_all(&to_bytes(&error(&problem))).await;
                            break 'connection;
                        }
                    };
                    if server.hands_over(&args) {
                        // What came after the command belongs to the new
                        // protocol.
                        let pending = std::mem::take(&mut buffer);
                        if let Ok(stream) = reader.reunite(writer) {
                            server.take_over(stream, &args, pending).await;
                        }
                        break 'connection;
                    }
                    for reply in server.dispatch(&mut session, &push, &args).await {
                        if writer.write_all(&to_bytes(&reply)).await.is_err() {
                            break 'connection;
                        }
                    }
                }
            }
        }
    }
    server.close(id);
}
