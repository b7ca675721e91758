//! The journal of a real run: every owner the lock key ever had on the
//! primary, read from its replication stream, so that S5 (`owner_only`),
//! which needs them all, can be checked on real processes. The polled
//! [`oracle`](super::oracle) can miss an owner that lived less than a
//! round; the stream cannot.
//!
//! How a replica learns what its primary did: it sends
//! `REPLCONF listening-port`, `REPLCONF capa eof capa psync2` and
//! `PSYNC ? -1`; the primary answers `+FULLRESYNC <replid> <offset>`, may
//! send bare `\n` while it prepares a snapshot, then sends the snapshot
//! (an RDB payload) as `$<len>\r\n<len bytes>`, or, diskless, as
//! `$EOF:<40 bytes>\r\n<payload><the same 40 bytes>`; then every write,
//! as commands in RESP. A diskless primary starts that command stream only
//! once the replica has acknowledged the snapshot (`REPLCONF ACK`), and
//! ignores an acknowledgement that comes before it has seen the snapshot
//! sent.
//!
//! The primary replicates effects, not commands: a granted `SET NX PX`
//! comes as `SET key token PXAT <ms>`, a refused one not at all; a
//! release's `DEL` only when it deleted; a renewal as `PEXPIREAT`; and the
//! primary itself sends `DEL` (or `UNLINK`, under `lazyfree-lazy-expire`)
//! when the key expires or is evicted, before any write that finds it
//! expired. So the stream is every owner the key ever had there, in order
//! (Redis 7.0 and 8.2, Valkey 8.1 and 9.1 checked).
//!
//! The journal acknowledges offset 0, and publishes on a channel nobody
//! reads until its own message comes down the stream, before any client
//! starts; then every [`ACK_EVERY`]. It never acknowledges more:
//! `WAIT` counts a replica only when its acknowledged offset reaches the
//! write's, so it never counts the journal (nothing here sets
//! `min-replicas-to-write`, which would count it as a replica in good
//! standing), and the primary, which drops a replica silent for
//! `repl-timeout`, keeps it. It follows one node: a restart or a failover ends it
//! (`Op::JournalEnd`, or the checker's cut at the first failover), and S5
//! is unchecked from there on.

use std::time::Duration;

use redis_protocol::resp2::{decode::decode, types::OwnedFrame as Frame};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use super::recorder::Recorder;
use crate::{
    chaos::{ChaosError, deploy::admin, wire::mono_ns},
    history::{Op, Process},
};

/// How often the journal acknowledges offset 0: a diskless primary starts
/// the command stream at the first acknowledgement after the snapshot,
/// and ignores one that comes before it has marked the replica online.
const ACK_EVERY: Duration = Duration::from_millis(100);

/// How long the handshake and the snapshot may take.
const SYNC_LIMIT: Duration = Duration::from_secs(5);

/// A journal whose command stream is live: nothing recorded yet.
pub(super) struct Follower {
    node: usize,
    key: String,
    stream: TcpStream,
    buffer: Vec<u8>,
    conn: redis::aio::MultiplexedConnection,
}

/// Follows node `node` (on `port`) as a replica, up to a live command
/// stream. Call it before any client starts, so that the owner
/// [`Follower::start`] reads is the one the stream starts from.
pub(super) async fn connect(node: usize, port: u16, key: String) -> Result<Follower, ChaosError> {
    let (stream, buffer) = tokio::time::timeout(SYNC_LIMIT, sync(port))
        .await
        .map_err(|_| failed(node, format!("no snapshot in {SYNC_LIMIT:?}")))?
        .map_err(|error| failed(node, error.to_string()))?;
    let mut conn = admin(port).await?;
    let (stream, buffer) = tokio::time::timeout(SYNC_LIMIT, live(stream, buffer, &mut conn))
        .await
        .map_err(|_| failed(node, format!("no command stream in {SYNC_LIMIT:?}")))?
        .map_err(|error| failed(node, error.to_string()))?;
    Ok(Follower {
        node,
        key,
        stream,
        buffer,
        conn,
    })
}

/// Starts `follower`, if any ([`Follower::start`]).
pub(super) async fn start(
    follower: Option<Follower>,
    recorder: &Recorder,
) -> Result<Option<tokio::task::JoinHandle<()>>, ChaosError> {
    match follower {
        Some(follower) => Ok(Some(follower.start(recorder.clone()).await?)),
        None => Ok(None),
    }
}

fn failed(node: usize, why: String) -> ChaosError {
    ChaosError::Start {
        what: format!("the replication journal of node {node}"),
        why,
    }
}

impl Follower {
    /// Records the key's owner now, and returns the task that records
    /// every later change of it until the stream ends.
    pub(super) async fn start(
        mut self,
        recorder: Recorder,
    ) -> Result<tokio::task::JoinHandle<()>, ChaosError> {
        let owner: Option<String> = redis::cmd("GET")
            .arg(&self.key)
            .query_async(&mut self.conn)
            .await
            .map_err(|error| failed(self.node, error.to_string()))?;
        let node = self.node;
        recorder.record(Process::Controller, Op::Journal { node, owner });
        Ok(tokio::spawn(record(
            node,
            self.stream,
            self.buffer,
            self.key,
            recorder,
        )))
    }
}

/// The handshake, up to the end of the snapshot: the stream, and whatever
/// came after the snapshot.
async fn sync(port: u16) -> std::io::Result<(TcpStream, Vec<u8>)> {
    let mut stream = TcpStream::connect((std::net::Ipv4Addr::LOCALHOST, port)).await?;
    stream.set_nodelay(true)?;
    let mut buffer = Vec::with_capacity(64 * 1024);
    let local = stream.local_addr()?.port().to_string();
    for command in [
        &["REPLCONF", "listening-port", &local][..],
        &["REPLCONF", "capa", "eof", "capa", "psync2"],
        &["PSYNC", "?", "-1"],
    ] {
        stream.write_all(&resp(command)).await?;
        let line = read_line(&mut stream, &mut buffer).await?;
        if !line.starts_with('+') {
            return Err(invalid(format!("{} answered {line}", command.join(" "))));
        }
    }
    // Bare newlines keep the link alive while the snapshot is made.
    let header = loop {
        let line = read_line(&mut stream, &mut buffer).await?;
        if !line.is_empty() {
            break line;
        }
    };
    let Some(size) = header.strip_prefix('$') else {
        return Err(invalid(format!("expected a snapshot, got {header}")));
    };
    if let Some(mark) = size.strip_prefix("EOF:") {
        // Diskless: the payload ends with the 40 bytes of the header.
        let mark = mark.as_bytes().to_vec();
        loop {
            if let Some(at) = find(&buffer, &mark) {
                buffer.drain(..at + mark.len());
                break;
            }
            // Keep the tail that may hold the start of the mark.
            let keep = buffer.len().min(mark.len());
            buffer.drain(..buffer.len() - keep);
            fill(&mut stream, &mut buffer).await?;
        }
    } else {
        let mut left: usize = size
            .parse()
            .map_err(|_| invalid(format!("bad snapshot size {size}")))?;
        while left > 0 {
            if buffer.is_empty() {
                fill(&mut stream, &mut buffer).await?;
            }
            let take = left.min(buffer.len());
            buffer.drain(..take);
            left -= take;
        }
    }
    Ok((stream, buffer))
}

/// The channel the journal publishes on to see its stream start (a
/// `PUBLISH` is replicated; nobody listens).
const PROBE: &str = "sim:journal";

/// Acknowledges and publishes on [`PROBE`] over `conn` until the probe
/// comes down the stream: from then on, the stream carries every write
/// as it happens. Returns the stream and what followed the probe.
async fn live(
    mut stream: TcpStream,
    mut buffer: Vec<u8>,
    conn: &mut redis::aio::MultiplexedConnection,
) -> std::io::Result<(TcpStream, Vec<u8>)> {
    loop {
        stream.write_all(&resp(&["REPLCONF", "ACK", "0"])).await?;
        redis::cmd("PUBLISH")
            .arg(PROBE)
            .arg("probe")
            .query_async::<i64>(conn)
            .await
            .map_err(|error| invalid(error.to_string()))?;
        let wait = tokio::time::sleep(Duration::from_millis(20));
        tokio::pin!(wait);
        loop {
            match decode(&buffer) {
                Ok(Some((frame, used))) => {
                    buffer.drain(..used);
                    if is_probe(&frame) {
                        return Ok((stream, buffer));
                    }
                    continue;
                }
                Ok(None) => {}
                Err(error) => return Err(invalid(error.to_string())),
            }
            tokio::select! {
                more = fill(&mut stream, &mut buffer) => more?,
                () = &mut wait => break,
            }
        }
    }
}

fn is_probe(frame: &Frame) -> bool {
    matches!(frame, Frame::Array(items)
        if matches!(items.as_slice(), [Frame::BulkString(name), Frame::BulkString(channel), ..]
            if name.eq_ignore_ascii_case(b"publish") && channel == PROBE.as_bytes()))
}

/// Records every change of `key` in the command stream until it ends.
async fn record(
    node: usize,
    mut stream: TcpStream,
    mut buffer: Vec<u8>,
    key: String,
    recorder: Recorder,
) {
    let mut ack = tokio::time::interval(ACK_EVERY);
    let why = loop {
        let frame = match decode(&buffer) {
            Ok(Some((frame, used))) => {
                buffer.drain(..used);
                frame
            }
            Ok(None) => {
                let more = tokio::select! {
                    more = fill(&mut stream, &mut buffer) => more,
                    _ = ack.tick() => stream.write_all(&resp(&["REPLCONF", "ACK", "0"])).await,
                };
                if let Err(error) = more {
                    break format!("the stream ended: {error}");
                }
                continue;
            }
            Err(error) => break format!("the stream did not parse: {error}"),
        };
        let at = mono_ns();
        match effect(&frame, key.as_bytes()) {
            Effect::None => {}
            Effect::Owner(owner) => {
                recorder.record_at(at, Process::Controller, Op::Journal { node, owner });
            }
            Effect::Unknown(command) => {
                break format!("{command} on the lock key, whose effect it does not read");
            }
        }
    };
    recorder.record(Process::Controller, Op::JournalEnd { why });
}

/// What one replicated command did to the lock key.
#[derive(Debug, PartialEq, Eq)]
enum Effect {
    /// Nothing that changes its owner.
    None,
    /// Set it (`Some`) or deleted it.
    Owner(Option<String>),
    /// A command on the key that the journal cannot read.
    Unknown(String),
}

/// The effect of `frame` on `key`. The primary sends only these on the
/// lock key: `SET` (a grant), `PEXPIREAT` (a renewal), `DEL`/`UNLINK` (a
/// release, an expiry, an eviction); `FLUSHALL`/`FLUSHDB` empty it.
fn effect(frame: &Frame, key: &[u8]) -> Effect {
    let Frame::Array(items) = frame else {
        return Effect::None;
    };
    let args: Vec<&[u8]> = items
        .iter()
        .filter_map(|item| match item {
            Frame::BulkString(bytes) => Some(&bytes[..]),
            _ => None,
        })
        .collect();
    let Some((name, rest)) = args.split_first() else {
        return Effect::None;
    };
    let name = String::from_utf8_lossy(name).to_ascii_uppercase();
    match name.as_str() {
        "FLUSHALL" | "FLUSHDB" => Effect::Owner(None),
        "SET" if rest.first() == Some(&key) => Effect::Owner(
            rest.get(1)
                .map(|owner| String::from_utf8_lossy(owner).into_owned()),
        ),
        "DEL" | "UNLINK" if rest.contains(&key) => Effect::Owner(None),
        "PEXPIREAT" | "PEXPIRE" | "EXPIREAT" | "EXPIRE" => Effect::None,
        _ if rest.contains(&key) => Effect::Unknown(name),
        _ => Effect::None,
    }
}

/// `command` as a RESP array of bulk strings.
fn resp(command: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", command.len()).into_bytes();
    for part in command {
        out.extend_from_slice(format!("${}\r\n{part}\r\n", part.len()).as_bytes());
    }
    out
}

/// One `\r\n`- or `\n`-ended line from the stream (through `buffer`).
async fn read_line(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> std::io::Result<String> {
    loop {
        if let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line[..end]);
            return Ok(text.trim_end_matches('\r').to_owned());
        }
        fill(stream, buffer).await?;
    }
}

/// Reads more of the stream into `buffer`; an end is an error.
async fn fill(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> std::io::Result<()> {
    if stream.read_buf(buffer).await? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

fn invalid(why: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(parts: &[&str]) -> Frame {
        Frame::Array(
            parts
                .iter()
                .map(|p| Frame::BulkString(p.as_bytes().to_vec()))
                .collect(),
        )
    }

    #[test]
    fn the_stream_says_who_owns_the_key_and_when_it_is_gone() {
        let key = b"lock";
        let effect_of = |parts: &[&str]| effect(&command(parts), key);
        assert_eq!(
            effect_of(&["SET", "lock", "tok-a", "PXAT", "1795989112908"]),
            Effect::Owner(Some("tok-a".to_owned()))
        );
        assert_eq!(effect_of(&["PEXPIREAT", "lock", "1"]), Effect::None);
        assert_eq!(effect_of(&["del", "lock"]), Effect::Owner(None));
        assert_eq!(effect_of(&["UNLINK", "lock"]), Effect::Owner(None));
        assert_eq!(effect_of(&["SET", "fence", "7"]), Effect::None);
        assert_eq!(effect_of(&["SELECT", "0"]), Effect::None);
        assert_eq!(
            effect_of(&["RENAME", "lock", "other"]),
            Effect::Unknown("RENAME".to_owned())
        );
    }
}
