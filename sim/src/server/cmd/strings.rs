//! Strings and expiry: `GET`, `SET` (`NX`, `XX`, `GET`, `PX`, `EX`, and
//! `IFEQ` where the flavour knows it), `DEL`, `DELIFEQ` (Valkey 9),
//! `DELEX` (Redis 8.4), `MGET`, `EXISTS`, `PEXPIRE`, `EXPIRE`,
//! `PEXPIREAT`, `EXPIREAT`, `PTTL`, `TTL`, `INCR`, `LPUSH` (only so that
//! `WRONGTYPE` can be exercised), `FLUSHALL`, `FLUSHDB` and `TIME`.
//!
//! Each command is parsed and applied in one function, on the keyspace
//! ([`Db`]) at the node's clock reading: expiry deadlines are absolute
//! times on that clock, and the effects returned carry them as such (what
//! Redis replicates as `PEXPIREAT`).

use redis_protocol::resp2::types::OwnedFrame as Frame;

use super::answer::{Answer, not_integer, reply, syntax_error, wrong_args};
use crate::server::{
    db::{Db, Effect, NodeTime, Value, WRONGTYPE},
    flavour::Flavour,
    frame::{bulk, error, ok, parse_i64},
};

/// The commands of this family that write (a replica refuses them).
pub const WRITES: &[&[u8]] = &[
    b"SET",
    b"DEL",
    b"DELIFEQ",
    b"DELEX",
    b"PEXPIRE",
    b"EXPIRE",
    b"INCR",
    b"LPUSH",
    b"PEXPIREAT",
    b"EXPIREAT",
    b"FLUSHALL",
    b"FLUSHDB",
];

/// Runs the command `name` (upper case) of this family; `None` for a
/// command of another.
pub fn execute(db: &mut Db, name: &[u8], args: &[Vec<u8>], now: NodeTime) -> Option<Answer> {
    Some(match name {
        b"GET" => get(db, args, now),
        b"SET" => set(db, args, now),
        b"DEL" => del(db, args, now),
        // `DELIFEQ key value` (Valkey 9): deletes the key if it holds
        // a string equal to `value`. The connection refuses it on a node
        // that presents as another server.
        b"DELIFEQ" => {
            if args.len() != 3 {
                return Some(wrong_args(args));
            }
            del_if_equal(db, &args[1], &args[2], now)
        }
        b"DELEX" => delex(db, args, now),
        b"MGET" => mget(db, args, now),
        b"EXISTS" => exists(db, args, now),
        b"PEXPIRE" | b"EXPIRE" => expire(db, name, args, now),
        b"PEXPIREAT" | b"EXPIREAT" => expire_at(db, name, args, now),
        b"PTTL" | b"TTL" => ttl(db, name, args, now),
        b"INCR" => {
            if args.len() != 2 {
                return Some(wrong_args(args));
            }
            match incr(db, &args[1], now) {
                Ok((value, effect)) => (Frame::Integer(value), vec![effect]),
                Err(frame) => reply(frame),
            }
        }
        b"LPUSH" => lpush(db, args, now),
        b"FLUSHALL" | b"FLUSHDB" => {
            db.apply(&Effect::Flush);
            (ok(), vec![Effect::Flush])
        }
        b"TIME" => reply(Frame::Array(vec![
            bulk((now.us / 1_000_000).to_string().as_bytes()),
            bulk((now.us % 1_000_000).to_string().as_bytes()),
        ])),
        _ => return None,
    })
}

/// What a node of `flavour` answers instead of running `args`, if the
/// command or its option is not that server's: `SET … IFEQ` is Valkey
/// 8.1's and Redis 8.4's (Redis 7.0 and 8.2 know no such option),
/// `DELIFEQ` Valkey 9's, `DELEX` Redis 8.4's.
pub fn refused_by(flavour: Flavour, args: &[Vec<u8>]) -> Option<Frame> {
    if matches!(flavour, Flavour::Redis7 | Flavour::Redis82)
        && args[0].eq_ignore_ascii_case(b"SET")
        && args
            .iter()
            .skip(3)
            .any(|option| option.eq_ignore_ascii_case(b"IFEQ"))
    {
        return Some(error("ERR syntax error"));
    }
    let known = if args[0].eq_ignore_ascii_case(b"DELIFEQ") {
        flavour == Flavour::Valkey91
    } else if args[0].eq_ignore_ascii_case(b"DELEX") {
        flavour == Flavour::Redis84
    } else {
        true
    };
    (!known).then(|| {
        error(&format!(
            "ERR unknown command '{}', with args beginning with: ",
            String::from_utf8_lossy(&args[0])
        ))
    })
}

/// Whether `args` is a native release (`DELIFEQ` or `DELEX`), which the
/// node counts for the reports.
pub fn is_native_release(args: &[Vec<u8>]) -> bool {
    args[0].eq_ignore_ascii_case(b"DELIFEQ") || args[0].eq_ignore_ascii_case(b"DELEX")
}

/// `GET key`.
fn get(db: &Db, args: &[Vec<u8>], now: NodeTime) -> Answer {
    if args.len() != 2 {
        return wrong_args(args);
    }
    match db.get(&args[1], now) {
        Ok(Some(value)) => reply(bulk(value)),
        Ok(None) => reply(Frame::Null),
        Err(frame) => reply(frame),
    }
}

/// `SET key value [NX|XX|IFEQ value] [GET] [PX ms|EX s]`.
fn set(db: &mut Db, args: &[Vec<u8>], now: NodeTime) -> Answer {
    if args.len() < 3 {
        return wrong_args(args);
    }
    let options = match SetOptions::parse(&args[3..], now) {
        Ok(options) => options,
        Err(answer) => return answer,
    };
    // IFEQ reads the key as a string: WRONGTYPE, setting
    // nothing, for another type (with or without GET).
    let current_matches = match options.if_equal {
        None => true,
        Some(expected) => match db.get(&args[1], now) {
            Ok(current) => current == Some(expected),
            Err(frame) => return reply(frame),
        },
    };
    // SET … GET answers the old value (nil if none) instead of
    // OK, and fails with WRONGTYPE, setting nothing, if the old
    // value is not a string (Redis 7 also allows it with NX).
    let old = if options.get {
        match db.get(&args[1], now) {
            Ok(old) => Some(old.map(<[u8]>::to_vec)),
            Err(frame) => return reply(frame),
        }
    } else {
        None
    };
    let answer = |set: bool| match &old {
        Some(Some(value)) => bulk(value),
        Some(None) => Frame::Null,
        None if set => ok(),
        None => Frame::Null,
    };
    let exists = db.exists(&args[1], now);
    if (options.nx && exists) || (options.xx && !exists) || !current_matches {
        return reply(answer(false));
    }
    let effect = db.set(&args[1], &args[2], options.expires_at);
    (answer(true), vec![effect])
}

/// `DEL key …`.
fn del(db: &mut Db, args: &[Vec<u8>], now: NodeTime) -> Answer {
    if args.len() < 2 {
        return wrong_args(args);
    }
    let mut effects = Vec::new();
    for key in &args[1..] {
        if db.del(key, now) {
            effects.push(Effect::Del { key: key.clone() });
        }
    }
    (Frame::Integer(effects.len() as i64), effects)
}

/// Deletes `key` if it holds a string equal to `value`: 1 if deleted,
/// 0 if missing or different, `WRONGTYPE` for another type.
fn del_if_equal(db: &mut Db, key: &[u8], value: &[u8], now: NodeTime) -> Answer {
    match db.get(key, now) {
        Ok(Some(stored)) if stored == value => {
            db.del(key, now);
            (Frame::Integer(1), vec![Effect::Del { key: key.to_vec() }])
        }
        Ok(_) => reply(Frame::Integer(0)),
        Err(frame) => reply(frame),
    }
}

/// `DELEX key [IFEQ value]` (Redis 8.4; of its conditions, only
/// `IFEQ`). The connection refuses it on other servers.
fn delex(db: &mut Db, args: &[Vec<u8>], now: NodeTime) -> Answer {
    match args.len() {
        2 => {
            let deleted = db.del(&args[1], now);
            let effects = if deleted {
                vec![Effect::Del {
                    key: args[1].clone(),
                }]
            } else {
                Vec::new()
            };
            (Frame::Integer(i64::from(deleted)), effects)
        }
        4 if args[2].eq_ignore_ascii_case(b"IFEQ") => del_if_equal(db, &args[1], &args[3], now),
        _ => syntax_error(),
    }
}

/// `MGET key …`.
fn mget(db: &Db, args: &[Vec<u8>], now: NodeTime) -> Answer {
    if args.len() < 2 {
        return wrong_args(args);
    }
    // A key of another type reads as nil, as in Redis.
    let values = args[1..]
        .iter()
        .map(|key| match db.get(key, now) {
            Ok(Some(value)) => bulk(value),
            _ => Frame::Null,
        })
        .collect();
    reply(Frame::Array(values))
}

/// `EXISTS key …`.
fn exists(db: &Db, args: &[Vec<u8>], now: NodeTime) -> Answer {
    if args.len() < 2 {
        return wrong_args(args);
    }
    let count = args[1..].iter().filter(|key| db.exists(key, now)).count();
    reply(Frame::Integer(count as i64))
}

/// `PEXPIRE key ms` and `EXPIRE key s` (`name`, upper case).
fn expire(db: &mut Db, name: &[u8], args: &[Vec<u8>], now: NodeTime) -> Answer {
    let at = match deadline(name == b"EXPIRE", args) {
        Ok(amount) => amount.and_then(|ms| now.ms.checked_add(ms)),
        Err(answer) => return answer,
    };
    let Some(at) = at else {
        return invalid_expire_time(args);
    };
    if db.expire_at(&args[1], at, now) {
        (
            Frame::Integer(1),
            vec![Effect::ExpireAt {
                key: args[1].clone(),
                at,
            }],
        )
    } else {
        reply(Frame::Integer(0))
    }
}

/// `PEXPIREAT key unix-ms` and `EXPIREAT key unix-s` (`name`, upper
/// case).
fn expire_at(db: &mut Db, name: &[u8], args: &[Vec<u8>], now: NodeTime) -> Answer {
    let at = match deadline(name == b"EXPIREAT", args) {
        Ok(at) => at,
        Err(answer) => return answer,
    };
    let Some(at) = at else {
        return invalid_expire_time(args);
    };
    if !db.exists(&args[1], now) {
        reply(Frame::Integer(0))
    } else if at <= now.ms {
        // A deadline already passed deletes the key (Redis
        // replicates that as a DEL).
        db.del(&args[1], now);
        (
            Frame::Integer(1),
            vec![Effect::Del {
                key: args[1].clone(),
            }],
        )
    } else {
        db.expire_at(&args[1], at, now);
        (
            Frame::Integer(1),
            vec![Effect::ExpireAt {
                key: args[1].clone(),
                at,
            }],
        )
    }
}

/// The amount of an expiry command `key amount` in ms (`seconds`: given
/// in seconds), `None` when it does not fit, or the answer to a wrong
/// arity or a non-integer.
fn deadline(seconds: bool, args: &[Vec<u8>]) -> Result<Option<i64>, Answer> {
    if args.len() != 3 {
        return Err(wrong_args(args));
    }
    let Some(amount) = parse_i64(&args[2]) else {
        return Err(not_integer());
    };
    Ok(if seconds {
        amount.checked_mul(1000)
    } else {
        Some(amount)
    })
}

/// The answer to an expiry command (in `args`) whose deadline does not fit.
fn invalid_expire_time(args: &[Vec<u8>]) -> Answer {
    let name = String::from_utf8_lossy(&args[0]).to_lowercase();
    reply(error(&format!(
        "ERR invalid expire time in '{name}' command"
    )))
}

/// `PTTL key` and `TTL key` (`name`, upper case).
fn ttl(db: &Db, name: &[u8], args: &[Vec<u8>], now: NodeTime) -> Answer {
    if args.len() != 2 {
        return wrong_args(args);
    }
    let pttl = db.pttl(&args[1], now);
    let answer = if name == b"TTL" && pttl >= 0 {
        (pttl + 500) / 1000
    } else {
        pttl
    };
    reply(Frame::Integer(answer))
}

/// `INCR key`: the new value and its effect (the key keeps its ttl).
fn incr(db: &mut Db, key: &[u8], now: NodeTime) -> Result<(i64, Effect), Frame> {
    let current = match db.get(key, now)? {
        None => 0,
        Some(bytes) => {
            parse_i64(bytes).ok_or_else(|| error("ERR value is not an integer or out of range"))?
        }
    };
    let next = current
        .checked_add(1)
        .ok_or_else(|| error("ERR increment or decrement would overflow"))?;
    let expires_at = db.expires_at(key, now);
    Ok((next, db.set(key, next.to_string().as_bytes(), expires_at)))
}

/// `LPUSH key value …`.
fn lpush(db: &mut Db, args: &[Vec<u8>], now: NodeTime) -> Answer {
    if args.len() < 3 {
        return wrong_args(args);
    }
    db.purge(&args[1], now);
    if matches!(
        db.value(&args[1], now),
        Some(Value::Str(_) | Value::ZSet(_))
    ) {
        return reply(error(WRONGTYPE));
    }
    let effect = Effect::Push {
        key: args[1].clone(),
        values: args[2..].to_vec(),
    };
    db.apply(&effect);
    let len = match db.value(&args[1], now) {
        Some(Value::List(list)) => list.len(),
        _ => 0,
    };
    (Frame::Integer(len as i64), vec![effect])
}

/// The options of one `SET`, after its key and value.
#[derive(Default)]
struct SetOptions<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    /// The deadline `PX` or `EX` asks for, on the node's clock.
    expires_at: Option<i64>,
    /// `IFEQ value` (Valkey 8.1): set only if the key holds a string equal
    /// to `value`. The connection refuses it on a node that presents as
    /// Redis 7.
    if_equal: Option<&'a [u8]>,
}

impl<'a> SetOptions<'a> {
    /// Reads `options`, or returns the error Redis answers.
    fn parse(options: &'a [Vec<u8>], now: NodeTime) -> Result<Self, Answer> {
        let mut parsed = Self::default();
        let mut options = options.iter();
        while let Some(option) = options.next() {
            match option.to_ascii_uppercase().as_slice() {
                b"NX" => parsed.nx = true,
                b"XX" => parsed.xx = true,
                b"GET" => parsed.get = true,
                b"IFEQ" => match options.next() {
                    Some(value) if parsed.if_equal.is_none() => {
                        parsed.if_equal = Some(value.as_slice());
                    }
                    _ => return Err(syntax_error()),
                },
                unit @ (b"PX" | b"EX") => {
                    let Some(amount) = options.next().and_then(|a| parse_i64(a)) else {
                        return Err(not_integer());
                    };
                    // Redis refuses a ttl whose deadline would
                    // not fit in its clock's 64 bits, too.
                    let at = if unit == b"EX" {
                        amount.checked_mul(1000)
                    } else {
                        Some(amount)
                    }
                    .filter(|ms| *ms > 0)
                    .and_then(|ms| now.ms.checked_add(ms));
                    let Some(at) = at else {
                        return Err(reply(error("ERR invalid expire time in 'set' command")));
                    };
                    parsed.expires_at = Some(at);
                }
                _ => return Err(syntax_error()),
            }
        }
        // IFEQ excludes NX and XX (Valkey 8.1.8 answers a syntax
        // error to either).
        if (parsed.nx && parsed.xx) || (parsed.if_equal.is_some() && (parsed.nx || parsed.xx)) {
            return Err(syntax_error());
        }
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::cmd::data::run_words;

    #[test]
    fn set_nx_px_expires_on_the_node_clock() {
        let mut db = Db::default();
        assert_eq!(
            run_words(&mut db, &["SET", "k", "a", "NX", "PX", "100"], 1_000),
            ok()
        );
        assert_eq!(
            run_words(&mut db, &["SET", "k", "b", "NX", "PX", "100"], 1_050),
            Frame::Null
        );
        assert_eq!(
            run_words(&mut db, &["PTTL", "k"], 1_050),
            Frame::Integer(50)
        );
        assert_eq!(run_words(&mut db, &["GET", "k"], 1_099), bulk(b"a"));
        assert_eq!(
            run_words(&mut db, &["GET", "k"], 1_100),
            Frame::Null,
            "gone at the deadline"
        );
        assert_eq!(
            run_words(&mut db, &["PTTL", "k"], 1_100),
            Frame::Integer(-2)
        );
        assert_eq!(
            run_words(&mut db, &["SET", "k", "b", "NX", "PX", "100"], 1_100),
            ok()
        );
    }

    #[test]
    fn set_ifeq_sets_only_over_an_equal_string() {
        let mut db = Db::default();
        let renew = ["SET", "k", "a", "IFEQ", "a", "PX", "500"];
        assert_eq!(
            run_words(&mut db, &renew, 0),
            Frame::Null,
            "no key: nothing set"
        );
        assert_eq!(run_words(&mut db, &["EXISTS", "k"], 0), Frame::Integer(0));
        run_words(&mut db, &["SET", "k", "a", "PX", "100"], 0);
        assert_eq!(run_words(&mut db, &renew, 50), ok());
        assert_eq!(run_words(&mut db, &["PTTL", "k"], 50), Frame::Integer(500));
        let theirs = ["SET", "k", "b", "IFEQ", "b", "PX", "900"];
        assert_eq!(run_words(&mut db, &theirs, 60), Frame::Null);
        assert_eq!(run_words(&mut db, &["GET", "k"], 60), bulk(b"a"));
        assert_eq!(run_words(&mut db, &["PTTL", "k"], 60), Frame::Integer(490));
        assert_eq!(
            run_words(&mut db, &["SET", "k", "c", "IFEQ", "a", "GET"], 70),
            bulk(b"a")
        );
        assert_eq!(run_words(&mut db, &["PTTL", "k"], 70), Frame::Integer(-1));
        assert_eq!(run_words(&mut db, &renew, 600), Frame::Null, "c is not a");
        run_words(&mut db, &["LPUSH", "l", "x"], 0);
        assert_eq!(
            run_words(&mut db, &["SET", "l", "a", "IFEQ", "a"], 0),
            error(WRONGTYPE)
        );
        for bad in [
            &["SET", "k", "a", "IFEQ"][..],
            &["SET", "k", "a", "IFEQ", "a", "NX"],
            &["SET", "k", "a", "XX", "IFEQ", "a"],
            &["SET", "k", "a", "IFEQ", "a", "IFEQ", "a"],
        ] {
            assert_eq!(
                run_words(&mut db, bad, 0),
                error("ERR syntax error"),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn wrong_types_and_bad_arguments_are_errors() {
        let mut db = Db::default();
        run_words(&mut db, &["LPUSH", "l", "x"], 0);
        assert_eq!(run_words(&mut db, &["GET", "l"], 0), error(WRONGTYPE));
        assert_eq!(
            run_words(&mut db, &["SET", "k", "v", "PX", "soon"], 0),
            error("ERR value is not an integer or out of range")
        );
        assert_eq!(
            run_words(&mut db, &["SET", "k", "v", "BOGUS"], 0),
            error("ERR syntax error")
        );
        assert!(matches!(run_words(&mut db, &["GET"], 0), Frame::Error(_)));
        run_words(&mut db, &["SET", "s", "abc"], 0);
        assert!(matches!(
            run_words(&mut db, &["INCR", "s"], 0),
            Frame::Error(_)
        ));
        for huge in [
            &["SET", "k", "v", "EX", "9223372036854775807"][..],
            &["SET", "k", "v", "PX", "9223372036854775807"],
            &["PEXPIRE", "s", "9223372036854775807"],
            &["EXPIRE", "s", "-9223372036854775808"],
        ] {
            assert!(
                matches!(run_words(&mut db, huge, 1_000), Frame::Error(e) if e.starts_with("ERR invalid expire time")),
                "{huge:?}"
            );
        }
    }
}
