//! lock-core's Lua script, executed natively and addressed by its SHA1.
//!
//! [`run`] is a transcription of `lock.lua` (lock-core/src/scripts/),
//! operation by operation, including Lua's and Redis's conversions: a Lua
//! number returned to Redis becomes an integer reply, a table an array, an
//! error table caught by `redis.pcall` an error entry in that array, and an
//! error raised by `redis.call` the error reply of the whole call. The
//! differential test (sim/tests/differential.rs) runs the same command
//! sequences here and on a real `redis-server` running the real Lua, and
//! compares the replies: that is what keeps this transcription honest.
//!
//! A script that writes on a replica meets `READONLY` at its first write,
//! as Redis 7 does for scripts without a `no-writes` flag.

use lock_core::scripts;
use redis_protocol::resp2::types::OwnedFrame as Frame;

use super::{
    db::{Db, Effect, NodeTime, is_write},
    frame::error,
};

/// Which of lock-core's scripts a SHA1 names.
pub fn known(sha1: &str) -> Option<scripts::Script> {
    scripts::ALL
        .into_iter()
        .find(|script| script.sha1.eq_ignore_ascii_case(sha1))
}

/// The error a script meets when a write hits a replica.
pub const READONLY: &str = "READONLY You can't write against a read only replica.";

/// What Lua's redis library says of a nil command argument.
const NIL_ARGUMENT: &str = "ERR Lua redis lib command arguments must be strings or integers";

struct Run<'a> {
    db: &'a mut Db,
    now: NodeTime,
    writable: bool,
    effects: Vec<Effect>,
}

impl Run<'_> {
    /// `redis.pcall`: the command's reply, an error frame if it failed.
    fn pcall(&mut self, args: &[&[u8]]) -> Frame {
        if !self.writable && is_write(args[0]) {
            return error(READONLY);
        }
        let args: Vec<Vec<u8>> = args.iter().map(|arg| arg.to_vec()).collect();
        match self.db.execute(&args, self.now) {
            Some((reply, effects)) => {
                self.effects.extend(effects);
                reply
            }
            None => error("ERR unknown command"),
        }
    }

    /// `redis.call`: like `pcall`, but an error aborts the whole script.
    fn call(&mut self, args: &[&[u8]]) -> Result<Frame, Frame> {
        match self.pcall(args) {
            Frame::Error(text) => Err(Frame::Error(text)),
            reply => Ok(reply),
        }
    }
}

/// Runs the script `script` with `keys` and `args` on `db`. Returns the
/// reply and the effects to replicate.
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
        "lock" => lock(&mut run, keys, args),
        _ => Err(error("ERR unknown script")),
    };
    // A script error leaves the writes made before it in place (Redis has
    // no rollback), so the effects so far still replicate.
    match result {
        Ok(frame) | Err(frame) => (frame, run.effects),
    }
}

/// KEYS[i] / ARGV[i], or `None` where Lua would see nil.
fn at(list: &[Vec<u8>], index: usize) -> Option<&[u8]> {
    list.get(index).map(Vec::as_slice)
}

/// The operations of one call, as (code, key index, argument index).
fn operations(keys: &[Vec<u8>], args: &[Vec<u8>]) -> Vec<(Vec<u8>, usize, usize)> {
    let _ = keys;
    let mut ops = Vec::new();
    let (mut k, mut a) = (0, 0);
    while a < args.len() {
        let code = args[a].clone();
        ops.push((code.clone(), k, a));
        match code.as_slice() {
            b"t" | b"T" | b"c" | b"C" => (k, a) = (k + 2, a + 3),
            b"n" | b"N" | b"r" => (k, a) = (k + 1, a + 3),
            b"d" | b"q" => (k, a) = (k + 1, a + 2),
            _ => break,
        }
    }
    ops
}

/// Whether `code` is an acquire.
fn is_acquire(code: &[u8]) -> bool {
    matches!(code, b"n" | b"N" | b"t" | b"T" | b"c" | b"C")
}

/// lock.lua's main loop.
fn lock(run: &mut Run<'_>, keys: &[Vec<u8>], args: &[Vec<u8>]) -> Result<Frame, Frame> {
    let mut replies = Vec::new();
    for (code, k, a) in operations(keys, args) {
        let reply = match code.as_slice() {
            b"n" | b"N" | b"t" | b"T" | b"c" | b"C" => {
                let mode = code.to_ascii_lowercase();
                let fence_key = if mode == b"n" { None } else { at(keys, k + 1) };
                acquire(
                    run,
                    [at(keys, k), fence_key],
                    [at(args, a + 1), at(args, a + 2)],
                    mode[0],
                    code[0].is_ascii_uppercase(),
                )?
            }
            b"r" => renew(run, at(keys, k), at(args, a + 1), at(args, a + 2))?,
            // Only `d` announces: see `released_channels`.
            b"d" | b"q" => release(run, at(keys, k), at(args, a + 1))?,
            _ => {
                return Err(error(&format!(
                    "ERR lock.lua: unknown operation {}",
                    String::from_utf8_lossy(&code)
                )));
            }
        };
        replies.push(reply);
    }
    // A single operation answers its reply alone (an error as the call's
    // error reply).
    if replies.len() == 1 {
        return Ok(replies.remove(0));
    }
    Ok(Frame::Array(replies))
}

/// The decimal text of a Lua number, as `string.format('%.0f', n)`.
fn fmt(number: f64) -> String {
    format!("{number:.0}")
}

/// `tonumber(text) or 0` for a value read back from Redis.
fn number(text: Option<&[u8]>) -> f64 {
    text.and_then(|bytes| std::str::from_utf8(bytes).ok()?.trim().parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// The bytes of a bulk reply, `None` for nil.
fn bulk_bytes(frame: &Frame) -> Option<&[u8]> {
    match frame {
        Frame::BulkString(bytes) | Frame::SimpleString(bytes) => Some(bytes),
        _ => None,
    }
}

/// A Lua number returned to Redis: an integer reply (truncated).
fn integer(number: f64) -> Frame {
    Frame::Integer(number as i64)
}

/// `fence_for` of lock.lua: the fence of a grant that just set `lock`, in
/// mode `t` or `c`. `compat`: the server's SET knows no GET option (before
/// 6.2), so the floor is read, then set.
fn fence_for(
    run: &mut Run<'_>,
    lock: &[u8],
    fence_key: Option<&[u8]>,
    ttl: &[u8],
    mode: u8,
    compat: bool,
) -> Result<Frame, Frame> {
    let Some(fence_key) = fence_key else {
        // redis.pcall with a nil key: an error entry, then the undo.
        let failure = error(NIL_ARGUMENT);
        run.call(&[b"DEL", lock])?;
        return Ok(failure);
    };
    if mode == b'c' {
        return match run.pcall(&[b"INCR", fence_key]) {
            Frame::Integer(value) => Ok(Frame::Integer(value)),
            failure => {
                run.call(&[b"DEL", lock])?;
                Ok(failure)
            }
        };
    }
    // TIME, read once per call: the node's clock is frozen for the whole
    // script, as Redis freezes time during a script.
    let now_text = run.now.us.to_string();
    let now = run.now.us as f64;
    let previous = if compat {
        run.pcall(&[b"GET", fence_key])
    } else {
        run.pcall(&[b"SET", fence_key, now_text.as_bytes(), b"PX", ttl, b"GET"])
    };
    if let Frame::Error(_) = previous {
        run.call(&[b"DEL", lock])?;
        return Ok(previous);
    }
    let floor = number(bulk_bytes(&previous));
    if floor < now {
        if compat {
            run.call(&[b"SET", fence_key, now_text.as_bytes(), b"PX", ttl])?;
        }
        return Ok(integer(now));
    }
    let fence = floor + 1.0;
    let lifetime = number(Some(ttl)) + ((fence - now) / 1000.0).ceil();
    run.call(&[
        b"SET",
        fence_key,
        fmt(fence).as_bytes(),
        b"PX",
        fmt(lifetime).as_bytes(),
    ])?;
    Ok(integer(fence))
}

/// `acquire` of lock.lua, in mode `n`, `t` or `c` (`compat`: the
/// uppercase code, for servers before 7.0).
fn acquire(
    run: &mut Run<'_>,
    [lock, fence_key]: [Option<&[u8]>; 2],
    [token, ttl]: [Option<&[u8]>; 2],
    mode: u8,
    compat: bool,
) -> Result<Frame, Frame> {
    let (Some(lock), Some(token), Some(ttl)) = (lock, token, ttl) else {
        return Ok(error(NIL_ARGUMENT));
    };
    let current = if compat {
        run.pcall(&[b"GET", lock])
    } else {
        run.pcall(&[b"SET", lock, token, b"NX", b"PX", ttl, b"GET"])
    };
    if let Frame::Error(_) = current {
        return Ok(current);
    }
    match bulk_bytes(&current) {
        Some(holder) if holder == token => {
            run.call(&[b"PEXPIRE", lock, ttl])?;
        }
        Some(_) => {
            return match run.call(&[b"PTTL", lock])? {
                Frame::Integer(pttl) => Ok(Frame::Integer(-2 - pttl)),
                other => Ok(other),
            };
        }
        None if compat => {
            // Under pcall: a refused SET (OOM) fails this acquire alone.
            let set = run.pcall(&[b"SET", lock, token, b"PX", ttl]);
            if let Frame::Error(_) = set {
                return Ok(set);
            }
        }
        None => {}
    }
    if mode == b'n' {
        return Ok(Frame::Integer(0));
    }
    fence_for(run, lock, fence_key, ttl, mode, compat)
}

/// `renew` of lock.lua.
fn renew(
    run: &mut Run<'_>,
    lock: Option<&[u8]>,
    token: Option<&[u8]>,
    ttl: Option<&[u8]>,
) -> Result<Frame, Frame> {
    let Some(lock) = lock else {
        return Ok(error(NIL_ARGUMENT));
    };
    let current = run.pcall(&[b"GET", lock]);
    if let Frame::Error(_) = current {
        return Ok(current);
    }
    match (bulk_bytes(&current), token) {
        (Some(holder), Some(token)) if holder == token => {
            let Some(ttl) = ttl else {
                return Err(error(NIL_ARGUMENT));
            };
            run.call(&[b"PEXPIRE", lock, ttl])
        }
        _ => Ok(Frame::Integer(0)),
    }
}

/// `release` of lock.lua; the PUBLISH is done by the caller, which owns
/// the channels (see [`released_channels`]).
fn release(run: &mut Run<'_>, lock: Option<&[u8]>, token: Option<&[u8]>) -> Result<Frame, Frame> {
    let Some(lock) = lock else {
        return Ok(error(NIL_ARGUMENT));
    };
    let current = run.pcall(&[b"GET", lock]);
    if let Frame::Error(_) = current {
        return Ok(current);
    }
    match (bulk_bytes(&current), token) {
        (Some(holder), Some(token)) if holder == token => {
            run.call(&[b"DEL", lock])?;
            Ok(Frame::Integer(1))
        }
        _ => Ok(Frame::Integer(0)),
    }
}

/// How many of a call's grants were issued while the server clock (`now_us`)
/// was behind the time-mixed fence floor, i.e. an earlier fence: such a
/// grant's fence is `floor + 1 > now + 1`. Only the floor kept it above the
/// fences before it.
pub fn grants_behind_floor(reply: &Frame, now_us: i64) -> usize {
    per_operation(reply)
        .iter()
        .filter(|reply| matches!(reply, Frame::Integer(fence) if *fence > now_us.saturating_add(1)))
        .count()
}

/// A call's replies, one per operation: the array, or the lone reply of a
/// single-operation call.
fn per_operation(reply: &Frame) -> &[Frame] {
    match reply {
        Frame::Array(replies) => replies,
        single => std::slice::from_ref(single),
    }
}

/// How many of a call's operations succeeded as grants and as renewals,
/// given the call's keys, arguments and reply.
pub fn successes(keys: &[Vec<u8>], args: &[Vec<u8>], reply: &Frame) -> (usize, usize) {
    let replies = per_operation(reply);
    let mut counts = (0, 0);
    for ((code, _, _), reply) in operations(keys, args).into_iter().zip(replies) {
        match (code.as_slice(), reply) {
            (code, Frame::Integer(fence)) if is_acquire(code) && *fence >= 0 => counts.0 += 1,
            (b"r", Frame::Integer(1)) => counts.1 += 1,
            _ => {}
        }
    }
    counts
}

/// The channels a call's successful releases publish on (the lock key +
/// `:released`), given the call's keys, arguments and reply.
pub fn released_channels(keys: &[Vec<u8>], args: &[Vec<u8>], reply: &Frame) -> Vec<Vec<u8>> {
    let replies = per_operation(reply);
    operations(keys, args)
        .into_iter()
        .zip(replies)
        .filter(|((code, _, _), reply)| code == b"d" && **reply == Frame::Integer(1))
        .filter_map(|((_, k, _), _)| {
            let mut channel = keys.get(k)?.clone();
            channel.extend_from_slice(b":released");
            Some(channel)
        })
        .collect()
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

    fn call(db: &mut Db, keys: &[&str], args: &[&str], at: i64) -> Frame {
        run(scripts::LOCK, db, now(at), true, &strs(keys), &strs(args)).0
    }

    /// The reply of a one-operation call, which comes alone.
    fn one(frame: Frame) -> Frame {
        match frame {
            Frame::Array(items) => panic!("expected one reply alone, got {items:?}"),
            other => other,
        }
    }

    fn granted(fence: i64) -> Frame {
        Frame::Integer(fence)
    }

    #[test]
    fn every_path_of_every_operation() {
        let mut db = Db::default();
        let keys = ["{l}", "{l}:fence"];
        let acquire = |token: &'static str| ["t", token, "1000"];
        assert_eq!(
            one(call(&mut db, &keys, &acquire("a"), 5_000)),
            granted(5000007)
        );
        // Held by another owner: contended with its pttl.
        assert_eq!(
            one(call(&mut db, &keys, &acquire("b"), 5_400)),
            Frame::Integer(-2 - 600)
        );
        // Our own retry refreshes the ttl and issues a fresh fence.
        assert_eq!(
            one(call(&mut db, &keys, &acquire("a"), 5_500)),
            granted(5500007)
        );
        assert_eq!(db.pttl(b"{l}", now(5_500)), 1000);
        assert_eq!(
            one(call(&mut db, &["{l}"], &["r", "b", "1000"], 5_600)),
            Frame::Integer(0)
        );
        assert_eq!(
            one(call(&mut db, &["{l}"], &["r", "a", "1000"], 5_600)),
            Frame::Integer(1)
        );
        assert_eq!(
            one(call(&mut db, &["{l}"], &["d", "b"], 5_700)),
            Frame::Integer(0)
        );
        assert_eq!(
            one(call(&mut db, &["{l}"], &["d", "a"], 5_700)),
            Frame::Integer(1)
        );
        assert_eq!(
            one(call(&mut db, &["{l}"], &["d", "a"], 5_700)),
            Frame::Integer(0)
        );
        assert_eq!(
            one(call(&mut db, &["{l}"], &["r", "a", "1000"], 5_800)),
            Frame::Integer(0)
        );
        // The next grant's fence is above the last even if time went back,
        // and the floor then lives until the clock has passed it by a ttl.
        assert_eq!(
            one(call(&mut db, &keys, &acquire("c"), 1_000)),
            granted(5500008)
        );
        assert_eq!(db.pttl(b"{l}:fence", now(1_000)), 1000 + 4501);
    }

    #[test]
    fn grants_behind_the_floor_are_counted() {
        let mut db = Db::default();
        let keys = ["{l}", "{l}:fence"];
        let acquire = |token: &'static str| ["t", token, "1000"];
        let ahead = call(&mut db, &keys, &acquire("a"), 5_000);
        assert_eq!(grants_behind_floor(&ahead, now(5_000).us), 0);
        call(&mut db, &["{l}"], &["d", "a"], 5_100);
        let behind = call(&mut db, &keys, &acquire("b"), 4_000);
        assert_eq!(behind, granted(5000008));
        assert_eq!(grants_behind_floor(&behind, now(4_000).us), 1);
        let counter = call(&mut db, &["{m}", "{c}"], &["c", "x", "10"], 0);
        assert_eq!(grants_behind_floor(&counter, now(0).us), 0);
    }

    #[test]
    fn the_fence_floor_expires_one_ttl_after_its_grant() {
        let mut db = Db::default();
        let keys = ["{l}", "{l}:fence"];
        call(&mut db, &keys, &["t", "t", "1000"], 0);
        call(&mut db, &["{l}"], &["d", "t"], 10);
        assert!(db.get(b"{l}:fence", now(999)).unwrap().is_some());
        assert!(db.get(b"{l}:fence", now(1_000)).unwrap().is_none());
        assert!(db.get(b"{l}", now(10)).unwrap().is_none());
    }

    #[test]
    fn a_batch_runs_every_operation_in_order() {
        let mut db = Db::default();
        let reply = call(
            &mut db,
            &["{x}", "{y}", "{y}:fence", "{x}"],
            &["n", "t", "1000", "c", "u", "1000", "d", "t"],
            0,
        );
        assert_eq!(
            reply,
            Frame::Array(vec![granted(0), granted(1), Frame::Integer(1)])
        );
        assert_eq!(
            released_channels(
                &strs(&["{x}", "{y}", "{y}:fence", "{x}"]),
                &strs(&["n", "t", "1000", "c", "u", "1000", "d", "t"]),
                &reply
            ),
            vec![b"{x}:released".to_vec()]
        );
    }

    #[test]
    fn a_quiet_release_deletes_and_announces_nothing() {
        let mut db = Db::default();
        let keys = ["{x}", "{y}", "{x}", "{y}"];
        let args = ["n", "a", "1000", "n", "b", "1000", "q", "a", "d", "b"];
        let reply = call(&mut db, &keys, &args, 0);
        assert_eq!(
            reply,
            Frame::Array(vec![
                granted(0),
                granted(0),
                Frame::Integer(1),
                Frame::Integer(1)
            ])
        );
        assert!(db.get(b"{x}", now(10)).unwrap().is_none());
        assert_eq!(
            released_channels(&strs(&keys), &strs(&args), &reply),
            vec![b"{y}:released".to_vec()]
        );
        assert_eq!(
            one(call(&mut db, &["{x}"], &["q", "a"], 0)),
            Frame::Integer(0)
        );
    }

    #[test]
    fn compat_acquire_and_counter_fencing() {
        let mut db = Db::default();
        let keys = ["{l}", "{lock}:fence-counter"];
        for expected in [1, 2] {
            let reply = one(call(&mut db, &keys, &["C", "a", "10"], 0));
            assert_eq!(reply, granted(expected));
            call(&mut db, &["{l}"], &["d", "a"], 0);
        }
    }

    #[test]
    fn writes_on_a_replica_fail_readonly_per_operation() {
        let mut db = Db::default();
        let (reply, effects) = run(
            scripts::LOCK,
            &mut db,
            now(0),
            false,
            &strs(&["{l}", "{l}:fence", "{m}"]),
            &strs(&["t", "a", "10", "n", "b", "10"]),
        );
        assert_eq!(reply, Frame::Array(vec![error(READONLY), error(READONLY)]));
        assert!(effects.is_empty());
        // Alone, an operation's error is the call's error reply.
        let (reply, _) = run(
            scripts::LOCK,
            &mut db,
            now(0),
            false,
            &strs(&["{m}"]),
            &strs(&["n", "b", "10"]),
        );
        assert_eq!(reply, error(READONLY));
    }

    #[test]
    fn an_unknown_operation_fails_the_call() {
        let mut db = Db::default();
        assert!(matches!(
            call(&mut db, &["{l}"], &["x", "t"], 0),
            Frame::Error(_)
        ));
    }

    #[test]
    fn successes_count_grants_and_renewals_but_not_refusals() {
        let mut db = Db::default();
        let keys = ["{lock:k}", "{lock:k}:fence", "{lock:k}"];
        let args = ["t", "t1", "1000", "r", "t1", "1000"];
        let reply = call(&mut db, &keys, &args, 1_000);
        assert_eq!(successes(&strs(&keys), &strs(&args), &reply), (1, 1));
        let other = ["t", "t2", "1000", "r", "t2", "1000"];
        let reply = call(&mut db, &keys, &other, 1_100);
        assert_eq!(
            successes(&strs(&keys), &strs(&other), &reply),
            (0, 0),
            "contended and not the owner"
        );
    }
}
