//! The keyspace commands, as a node and a script run them: the router to
//! their families ([`super::strings`], [`super::zset`]),
//! which of them write, and the checks a node makes before it runs one
//! (its flavour's commands, a replica's refusal to write).

use redis_protocol::resp2::types::OwnedFrame as Frame;

use super::{answer::Answer, strings, zset};
use crate::{
    clock,
    server::{
        db::{Db, NodeTime},
        frame::error,
        node::{NodeHandle, Role},
    },
};

/// The error a write on a replica meets, from a client or a script.
pub const READONLY: &str = "READONLY You can't write against a read only replica.";

/// Runs a keyspace command on `db` at the node's clock reading `now`.
/// Returns `None` for commands that are not keyspace commands (the
/// connection's other families answer those).
pub fn execute(db: &mut Db, args: &[Vec<u8>], now: NodeTime) -> Option<Answer> {
    let name = args.first()?.to_ascii_uppercase();
    strings::execute(db, &name, args, now).or_else(|| zset::execute(db, &name, args, now))
}

/// Whether a command writes (and so is refused by a replica).
pub fn is_write(name: &[u8]) -> bool {
    let name = name.to_ascii_uppercase();
    strings::WRITES
        .iter()
        .chain(zset::WRITES)
        .any(|write| *write == name.as_slice())
}

/// Runs a keyspace command on `node` for a client: refused if the node's
/// flavour does not know it, or if it writes and the node is a replica;
/// a primary streams its effects to its replicas.
pub(super) fn run(node: &NodeHandle, args: &[Vec<u8>]) -> Frame {
    let mut state = node.0.borrow_mut();
    if let Some(refusal) = strings::refused_by(state.flavour, args) {
        return refusal;
    }
    if strings::is_native_release(args) {
        state.native_releases += 1;
    }
    if is_write(&args[0]) && state.role != Role::Primary {
        return error(READONLY);
    }
    let time = state.time_at(clock::now());
    match execute(&mut state.db, args, time) {
        Some((reply, effects)) => {
            state.propagate(effects);
            reply
        }
        None => error(&format!(
            "ERR unknown command '{}', with args beginning with: ",
            String::from_utf8_lossy(&args[0])
        )),
    }
}

/// Runs a keyspace command written as words on `db` at `now_ms` and
/// returns its reply, for the families' tests.
#[cfg(test)]
pub(super) fn run_words(db: &mut Db, args: &[&str], now_ms: i64) -> Frame {
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    execute(db, &args, NodeTime::at(now_ms))
        .expect("a keyspace command")
        .0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::frame::bulk;

    #[test]
    fn snapshots_replay_into_an_equal_keyspace() {
        let mut db = Db::default();
        run_words(&mut db, &["SET", "a", "1", "PX", "500"], 0);
        run_words(&mut db, &["SET", "b", "2"], 0);
        run_words(&mut db, &["LPUSH", "l", "x", "y"], 0);
        run_words(&mut db, &["SET", "gone", "3", "PX", "5"], 0);
        let mut replica = Db::default();
        for effect in db.snapshot(NodeTime::at(10)) {
            replica.apply(&effect);
        }
        assert_eq!(run_words(&mut replica, &["GET", "a"], 10), bulk(b"1"));
        assert_eq!(
            run_words(&mut replica, &["PTTL", "a"], 10),
            Frame::Integer(490)
        );
        assert_eq!(run_words(&mut replica, &["GET", "gone"], 10), Frame::Null);
        db.del(b"gone", NodeTime::at(10));
        assert_eq!(replica, db);
    }

    #[test]
    fn every_write_is_known_as_one() {
        for name in [
            &b"set"[..],
            b"DELIFEQ",
            b"FlushAll",
            b"zadd",
            b"ZREMRANGEBYSCORE",
        ] {
            assert!(is_write(name), "{}", String::from_utf8_lossy(name));
        }
        for name in [&b"GET"[..], b"PTTL", b"ZRANGE", b"TIME", b"EVAL"] {
            assert!(!is_write(name), "{}", String::from_utf8_lossy(name));
        }
    }
}
