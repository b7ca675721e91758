//! The commands a data node answers, one family a file, each command
//! parsed and applied in one place (mini-redis's `cmd`):
//! - [`strings`]: strings and expiry;
//! - [`zset`]: sorted sets;
//! - [`scripting`]: `EVAL`, `EVALSHA`, `SCRIPT` (the Lua runs in
//!   [`scripts`](super::scripts));
//! - [`pubsub`]: `SUBSCRIBE`, `UNSUBSCRIBE`, and delivery (for sentinels
//!   too);
//! - [`replication`]: `ROLE`, `INFO`, `WAIT`, `WAITAOF`;
//! - [`cluster`]: `CLUSTER`, `ASKING`, `READONLY`, and the redirections.
//!
//! [`data`] routes the keyspace commands (those a script may call too),
//! [`answer`] holds what they answer. This file dispatches a client's
//! command to its family, and serves the node's connections through the
//! one connection loop ([`conn`](super::conn)).

pub mod answer;
pub mod cluster;
pub mod data;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod strings;
pub mod zset;

use redis_protocol::resp2::types::OwnedFrame as Frame;
use turmoil::net::TcpStream;

use super::{
    bus,
    conn::{Server, Session},
    flavour::Flavour,
    frame::{bulk, error, ok},
    node::NodeHandle,
    replication as stream,
};
use crate::clock;
use pubsub::Push;

/// Runs one command on a fresh connection `id` and returns its reply
/// frames (SUBSCRIBE answers one per channel; everything else answers one).
pub async fn dispatch(node: &NodeHandle, id: u64, push: &Push, args: &[Vec<u8>]) -> Vec<Frame> {
    let mut session = Session {
        id,
        ..Session::default()
    };
    dispatch_in(node, &mut session, push, args).await
}

/// Whether a write pause holds command `name` (upper case): Valkey's
/// `PAUSE_ACTIONS_CLIENT_WRITE_SET` holds writes and scripts not flagged
/// read-only (the lock's scripts all write).
fn pauses(name: &[u8]) -> bool {
    data::is_write(name) || matches!(name, b"EVAL" | b"EVALSHA")
}

/// Runs one command on the connection whose state is `session`.
pub async fn dispatch_in(
    node: &NodeHandle,
    session: &mut Session,
    push: &Push,
    args: &[Vec<u8>],
) -> Vec<Frame> {
    let Some(name) = args.first().map(|name| name.to_ascii_uppercase()) else {
        return vec![error("ERR Protocol error: empty command")];
    };
    let now = loop {
        let now = clock::now();
        node.0.borrow_mut().touch();
        if let Some(answer) = cluster::gate(node, session, &name, args, now) {
            return vec![answer];
        }
        // A paused write waits, then is processed again from the start, as
        // Valkey postpones a client and re-runs its command: after an
        // atomic migration's cut-over that answers `MOVED`.
        match node.write_pause() {
            Some(resumed) if pauses(&name) => resumed.notified().await,
            _ => break now,
        }
    };
    if now < node.0.borrow().busy_until {
        return vec![error(
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.",
        )];
    }
    match name.as_slice() {
        b"PING" => vec![Frame::SimpleString(b"PONG".to_vec())],
        b"ECHO" if args.len() == 2 => vec![bulk(&args[1])],
        b"SELECT" | b"CLIENT" | b"READONLY" => vec![ok()],
        b"ROLE" => vec![replication::role(node)],
        b"INFO" => vec![replication::info(node, args.get(1).map(Vec::as_slice))],
        b"SCRIPT" => vec![scripting::script(node, args)],
        b"EVAL" | b"EVALSHA" => vec![scripting::eval(node, args, name == b"EVAL")],
        b"PUBLISH" if args.len() == 3 => {
            let reached = bus::publish(&node.0.borrow(), &args[1], &args[2]);
            vec![Frame::Integer(reached as i64)]
        }
        b"SUBSCRIBE" if args.len() >= 2 => {
            let id = session.id;
            node.0
                .borrow_mut()
                .subscribers
                .subscribe(id, push, &args[1..])
        }
        b"UNSUBSCRIBE" => node
            .0
            .borrow_mut()
            .subscribers
            .unsubscribe(session.id, &args[1..]),
        b"WAIT" if args.len() == 3 => vec![replication::wait(node, &args[1], &args[2]).await],
        // Redis 7.0 has no WAITAOF: it falls through to unknown command.
        b"WAITAOF" if args.len() == 4 && node.0.borrow().flavour != Flavour::Redis7 => {
            vec![replication::waitaof(node, &args[1], &args[2], &args[3]).await]
        }
        _ => vec![data::run(node, args)],
    }
}

impl Server for NodeHandle {
    const READ_CHUNK: usize = 4096;

    fn open(&self) -> u64 {
        self.0.borrow_mut().next_id()
    }

    async fn dispatch(&self, session: &mut Session, push: &Push, args: &[Vec<u8>]) -> Vec<Frame> {
        dispatch_in(self, session, push, args).await
    }

    fn close(&self, id: u64) {
        self.0.borrow_mut().subscribers.close(id);
    }

    fn generation(&self) -> u64 {
        self.clients_generation()
    }

    async fn killed(&self) {
        self.clients_killed().await;
    }

    fn read_pass(&self) {
        self.loop_pass();
    }

    fn hands_over(&self, args: &[Vec<u8>]) -> bool {
        args[0].eq_ignore_ascii_case(b"REPLSYNC")
    }

    async fn take_over(&self, stream: TcpStream, args: &[Vec<u8>], pending: Vec<u8>) {
        stream::serve_replica(self.clone(), stream, args, pending).await;
    }
}
