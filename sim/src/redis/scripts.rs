//! lock-core's Lua scripts, executed natively and addressed by their SHA1.
//!
//! Each function below is a line-by-line transcription of the `.lua` file
//! it names (lock-core/src/scripts/), including Lua 5.1's conversions: a
//! Lua number returned to Redis becomes an integer reply, a table an array.
//! The differential test (sim/tests/differential.rs) runs the same command
//! sequences here and on a real `redis-server` running the real Lua, and
//! compares the replies: that is what keeps this transcription honest.
//!
//! A script that writes on a replica fails at its first write with
//! `READONLY`, as Redis 7 does for scripts without a `no-writes` flag.

use lock_core::scripts;
use redis_protocol::resp2::types::OwnedFrame as Frame;

use super::db::{Db, Effect, NodeTime, bulk, error, parse_i64};

/// Which of lock-core's scripts a SHA1 names.
pub fn known(sha1: &str) -> Option<scripts::Script> {
    scripts::ALL
        .into_iter()
        .find(|script| script.sha1.eq_ignore_ascii_case(sha1))
}

/// The error a script raises when a write hits a replica.
pub const READONLY: &str = "READONLY You can't write against a read only replica.";

struct Run<'a> {
    db: &'a mut Db,
    now: NodeTime,
    writable: bool,
    effects: Vec<Effect>,
}

impl Run<'_> {
    fn write(&self) -> Result<(), Frame> {
        if self.writable {
            Ok(())
        } else {
            Err(error(READONLY))
        }
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Frame> {
        Ok(self.db.get(key, self.now)?.map(<[u8]>::to_vec))
    }

    fn set(&mut self, key: &[u8], value: &[u8], expires_at: Option<i64>) -> Result<(), Frame> {
        self.write()?;
        let effect = self.db.set(key, value, expires_at);
        self.effects.push(effect);
        Ok(())
    }

    fn pexpire(&mut self, key: &[u8], ms: i64) -> Result<i64, Frame> {
        self.write()?;
        let at = self.now.ms + ms;
        if self.db.expire_at(key, at, self.now) {
            self.effects.push(Effect::ExpireAt {
                key: key.to_vec(),
                at,
            });
            Ok(1)
        } else {
            Ok(0)
        }
    }
}

/// Runs the script `sha1` with `keys` and `args` on `db`. Returns the reply
/// and the effects to replicate, or an error reply.
pub fn run(
    script: scripts::Script,
    db: &mut Db,
    now: NodeTime,
    writable: bool,
    keys: &[Vec<u8>],
    args: &[Vec<u8>],
) -> (Frame, Vec<Effect>) {
    let mut run = Run {
        db,
        now,
        writable,
        effects: Vec::new(),
    };
    let result = match script.name {
        "acquire" => acquire(&mut run, keys, args),
        "renew" => renew(&mut run, keys, args),
        "release" => release(&mut run, keys, args),
        _ => Err(error("ERR unknown script")),
    };
    // A script error leaves the writes made before it in place (Redis has
    // no rollback), so the effects so far still replicate.
    match result {
        Ok(frame) => (frame, run.effects),
        Err(frame) => (frame, run.effects),
    }
}

fn arg(list: &[Vec<u8>], index: usize) -> &[u8] {
    // A missing KEYS[i]/ARGV[i] is nil in Lua; the lock's scripts always
    // get theirs, and nil compares unequal to every string, as "" does here
    // for any real token.
    list.get(index).map_or(&[], Vec::as_slice)
}

fn ttl_arg(value: &[u8]) -> Result<i64, Frame> {
    parse_i64(value).ok_or_else(|| error("ERR value is not an integer or out of range"))
}

/// acquire.lua
fn acquire(run: &mut Run<'_>, keys: &[Vec<u8>], args: &[Vec<u8>]) -> Result<Frame, Frame> {
    let (lock, fence_key) = (arg(keys, 0), arg(keys, 1));
    let (token, ttl, mode) = (arg(args, 0), arg(args, 1), arg(args, 2));
    let current = run.get(lock)?;
    if current.as_deref() == Some(token) {
        run.pexpire(lock, ttl_arg(ttl)?)?;
        let fence = run.get(fence_key)?.unwrap_or_else(|| b"0".to_vec());
        return Ok(Frame::Array(vec![Frame::Integer(1), bulk(&fence)]));
    }
    if current.is_some() {
        return Ok(Frame::Array(vec![
            Frame::Integer(0),
            Frame::Integer(run.db.pttl(lock, run.now)),
        ]));
    }
    let fence = match mode {
        b"counter" => {
            run.write()?;
            let (value, effect) = run.db.incr(fence_key, run.now)?;
            run.effects.push(effect);
            value.to_string()
        }
        b"time-mixed" => {
            let now_us = run.now.us;
            // tonumber(GET fence or '0') or 0: a non-number counts as 0.
            let stored = run
                .get(fence_key)?
                .and_then(|bytes| std::str::from_utf8(&bytes).ok()?.trim().parse::<f64>().ok())
                .unwrap_or(0.0);
            let next = (stored + 1.0).max(now_us as f64);
            let fence = format!("{next:.0}");
            run.set(fence_key, fence.as_bytes(), None)?;
            fence
        }
        _ => "0".to_owned(),
    };
    let ttl = ttl_arg(ttl)?;
    run.set(lock, token, Some(run.now.ms + ttl))?;
    Ok(Frame::Array(vec![
        Frame::Integer(1),
        bulk(fence.as_bytes()),
    ]))
}

/// renew.lua
fn renew(run: &mut Run<'_>, keys: &[Vec<u8>], args: &[Vec<u8>]) -> Result<Frame, Frame> {
    let lock = arg(keys, 0);
    if run.get(lock)?.as_deref() == Some(arg(args, 0)) {
        return Ok(Frame::Integer(run.pexpire(lock, ttl_arg(arg(args, 1))?)?));
    }
    Ok(Frame::Integer(0))
}

/// release.lua; the PUBLISH is done by the caller, which owns the channels.
fn release(run: &mut Run<'_>, keys: &[Vec<u8>], args: &[Vec<u8>]) -> Result<Frame, Frame> {
    let lock = arg(keys, 0);
    if run.get(lock)?.as_deref() == Some(arg(args, 0)) {
        run.write()?;
        run.db.del(lock, run.now);
        run.effects.push(Effect::Del { key: lock.to_vec() });
        return Ok(Frame::Integer(1));
    }
    Ok(Frame::Integer(0))
}

/// The channel a successful release publishes on (`ARGV[2]`), if any.
pub fn release_channel(
    script: scripts::Script,
    reply: &Frame,
    args: &[Vec<u8>],
) -> Option<Vec<u8>> {
    (script.name == "release" && *reply == Frame::Integer(1)).then(|| arg(args, 1).to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now(ms: i64) -> NodeTime {
        NodeTime {
            ms,
            us: ms * 1000 + 7,
        }
    }

    fn strs(items: &[&str]) -> Vec<Vec<u8>> {
        items.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    fn call(db: &mut Db, script: scripts::Script, keys: &[&str], args: &[&str], at: i64) -> Frame {
        run(script, db, now(at), true, &strs(keys), &strs(args)).0
    }

    #[test]
    fn every_path_of_every_script() {
        let mut db = Db::default();
        let keys = ["{l}", "{l}:fence"];
        let granted = call(
            &mut db,
            scripts::ACQUIRE,
            &keys,
            &["a", "1000", "time-mixed"],
            5_000,
        );
        assert_eq!(
            granted,
            Frame::Array(vec![Frame::Integer(1), bulk(b"5000007")])
        );
        // Held by another owner: contended with its pttl.
        let held = call(
            &mut db,
            scripts::ACQUIRE,
            &keys,
            &["b", "1000", "time-mixed"],
            5_400,
        );
        assert_eq!(
            held,
            Frame::Array(vec![Frame::Integer(0), Frame::Integer(600)])
        );
        // Our own retry refreshes the ttl and returns the same fence.
        let again = call(
            &mut db,
            scripts::ACQUIRE,
            &keys,
            &["a", "1000", "time-mixed"],
            5_500,
        );
        assert_eq!(
            again,
            Frame::Array(vec![Frame::Integer(1), bulk(b"5000007")])
        );
        assert_eq!(
            call(&mut db, scripts::RENEW, &["{l}"], &["b", "1000"], 5_600),
            Frame::Integer(0)
        );
        assert_eq!(
            call(&mut db, scripts::RENEW, &["{l}"], &["a", "1000"], 5_600),
            Frame::Integer(1)
        );
        assert_eq!(
            call(&mut db, scripts::RELEASE, &["{l}"], &["b", "ch"], 5_700),
            Frame::Integer(0)
        );
        assert_eq!(
            call(&mut db, scripts::RELEASE, &["{l}"], &["a", "ch"], 5_700),
            Frame::Integer(1)
        );
        assert_eq!(
            call(&mut db, scripts::RELEASE, &["{l}"], &["a", "ch"], 5_700),
            Frame::Integer(0)
        );
        assert_eq!(
            call(&mut db, scripts::RENEW, &["{l}"], &["a", "1000"], 5_800),
            Frame::Integer(0)
        );
        // The next grant's fence is above the last even if time went back.
        let next = call(
            &mut db,
            scripts::ACQUIRE,
            &keys,
            &["c", "1000", "time-mixed"],
            1_000,
        );
        assert_eq!(
            next,
            Frame::Array(vec![Frame::Integer(1), bulk(b"5000008")])
        );
    }

    #[test]
    fn counter_and_none_fencing() {
        let mut db = Db::default();
        let keys = ["{l}", "{l}:fence"];
        for expected in ["1", "2"] {
            let reply = call(&mut db, scripts::ACQUIRE, &keys, &["a", "10", "counter"], 0);
            assert_eq!(
                reply,
                Frame::Array(vec![Frame::Integer(1), bulk(expected.as_bytes())])
            );
            call(&mut db, scripts::RELEASE, &["{l}"], &["a", "ch"], 0);
        }
        let reply = call(
            &mut db,
            scripts::ACQUIRE,
            &["{m}", "{m}:fence"],
            &["a", "10", "none"],
            0,
        );
        assert_eq!(reply, Frame::Array(vec![Frame::Integer(1), bulk(b"0")]));
    }

    #[test]
    fn writes_on_a_replica_fail_readonly() {
        let mut db = Db::default();
        let (reply, effects) = run(
            scripts::ACQUIRE,
            &mut db,
            now(0),
            false,
            &strs(&["{l}", "{l}:fence"]),
            &strs(&["a", "10", "time-mixed"]),
        );
        assert_eq!(reply, error(READONLY));
        assert!(effects.is_empty());
    }
}
