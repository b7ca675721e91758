//! Sorted sets, the lock family's queues and leases: `ZADD` (`NX`, `XX`,
//! `GT`, `LT`, `CH`, `INCR`), `ZCARD`, `ZSCORE`, `ZREM`, `ZRANGE` (by
//! index, `REV`, `BYSCORE`, `LIMIT`, `WITHSCORES`; not `BYLEX`),
//! `ZRANGEBYSCORE` (`WITHSCORES`, `LIMIT`) and `ZREMRANGEBYSCORE`, each
//! parsed and applied on the keyspace ([`Db`]). Scores read and print as
//! Redis 7.0 reads and prints them.

use redis_protocol::resp2::types::OwnedFrame as Frame;

use super::answer::{Answer, not_integer, syntax_error, wrong_args};
use crate::server::{
    db::{Db, Effect, NodeTime, ZSet},
    frame::{bulk, error, parse_i64},
};

/// The commands of this family that write (a replica refuses them).
pub const WRITES: &[&[u8]] = &[b"ZADD", b"ZREM", b"ZREMRANGEBYSCORE"];

/// Runs the command `name` (upper case) of this family; `None` for a
/// command of another.
pub fn execute(db: &mut Db, name: &[u8], args: &[Vec<u8>], now: NodeTime) -> Option<Answer> {
    matches!(
        name,
        b"ZADD"
            | b"ZCARD"
            | b"ZSCORE"
            | b"ZREM"
            | b"ZRANGE"
            | b"ZRANGEBYSCORE"
            | b"ZREMRANGEBYSCORE"
    )
    .then(|| sorted_set_command(db, name, args, now))
}

/// The sorted-set commands: `ZADD` (`NX`, `XX`, `GT`, `LT`, `CH`,
/// `INCR`), `ZCARD`, `ZSCORE`, `ZREM`, `ZRANGE` (by index, `REV`,
/// `BYSCORE`, `LIMIT`, `WITHSCORES`; not `BYLEX`), `ZRANGEBYSCORE`
/// (`WITHSCORES`, `LIMIT`) and `ZREMRANGEBYSCORE`. A set left empty is
/// deleted, as Redis deletes it.
fn sorted_set_command(db: &mut Db, name: &[u8], args: &[Vec<u8>], now: NodeTime) -> Answer {
    let min_arity = match name {
        b"ZCARD" => 2,
        b"ZSCORE" | b"ZREM" => 3,
        b"ZADD" | b"ZRANGE" | b"ZRANGEBYSCORE" | b"ZREMRANGEBYSCORE" => 4,
        _ => return (error("ERR unknown command"), Vec::new()),
    };
    let exact = matches!(name, b"ZCARD" | b"ZSCORE" | b"ZREMRANGEBYSCORE");
    if args.len() < min_arity || (exact && args.len() != min_arity) {
        return wrong_args(args);
    }
    let key = &args[1];
    let set = match db.zset(key, now) {
        Ok(set) => set.cloned(),
        Err(frame) => return (frame, Vec::new()),
    };
    match name {
        b"ZCARD" => (
            Frame::Integer(set.map_or(0, |set| set.len() as i64)),
            Vec::new(),
        ),
        b"ZSCORE" => match set.and_then(|set| set.score(&args[2])) {
            Some(score) => (bulk(format_score(score).as_bytes()), Vec::new()),
            None => (Frame::Null, Vec::new()),
        },
        b"ZADD" => zadd(db, key, set, &args[2..], now),
        b"ZREM" => {
            let Some(set) = set else {
                return (Frame::Integer(0), Vec::new());
            };
            let mut removed: Vec<Vec<u8>> = Vec::new();
            for member in &args[2..] {
                if set.score(member).is_some() && !removed.contains(member) {
                    removed.push(member.clone());
                }
            }
            remove_members(db, key, removed)
        }
        b"ZREMRANGEBYSCORE" => {
            let (Some(min), Some(max)) = (parse_bound(&args[2]), parse_bound(&args[3])) else {
                return (error("ERR min or max is not a float"), Vec::new());
            };
            let Some(set) = set else {
                return (Frame::Integer(0), Vec::new());
            };
            let removed = set
                .ordered()
                .into_iter()
                .filter(|(score, _)| in_range(*score, min, max))
                .map(|(_, member)| member.to_vec())
                .collect();
            remove_members(db, key, removed)
        }
        _ => zrange(name, args, set.as_ref()),
    }
}

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member …`, the set as it
/// stands (`None`: missing) and the arguments after the key.
fn zadd(db: &mut Db, key: &[u8], set: Option<ZSet>, rest: &[Vec<u8>], now: NodeTime) -> Answer {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, false);
    let mut at = 0;
    while let Some(option) = rest.get(at) {
        match option.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            b"CH" => ch = true,
            b"INCR" => incr = true,
            _ => break,
        }
        at += 1;
    }
    let pairs = &rest[at..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return (error("ERR syntax error"), Vec::new());
    }
    if nx && xx {
        return (
            error("ERR XX and NX options at the same time are not compatible"),
            Vec::new(),
        );
    }
    if (gt && lt) || (nx && (gt || lt)) {
        return (
            error("ERR GT, LT, and/or NX options at the same time are not compatible"),
            Vec::new(),
        );
    }
    if incr && pairs.len() > 2 {
        return (
            error("ERR INCR option supports a single increment-element pair"),
            Vec::new(),
        );
    }
    // Every score is checked before anything changes.
    let mut scores = Vec::new();
    for pair in pairs.chunks(2) {
        match parse_score(&pair[0]) {
            Some(score) => scores.push((score, pair[1].clone())),
            None => return (error("ERR value is not a valid float"), Vec::new()),
        }
    }
    let mut current = set.unwrap_or_default();
    let (mut added, mut changed) = (0, 0);
    let mut written: Vec<(f64, Vec<u8>)> = Vec::new();
    let mut incremented: Option<f64> = None;
    for (score, member) in scores {
        let old = current.score(&member);
        if (nx && old.is_some()) || (xx && old.is_none()) {
            continue;
        }
        let new = match (incr, old) {
            (true, Some(old)) => old + score,
            _ => score,
        };
        if new.is_nan() {
            return (
                error("ERR resulting score is not a number (NaN)"),
                Vec::new(),
            );
        }
        if let Some(old) = old
            && ((gt && new <= old) || (lt && new >= old))
        {
            continue;
        }
        if incr {
            incremented = Some(new);
        }
        match old {
            None => added += 1,
            Some(old) if old != new => changed += 1,
            Some(_) => continue,
        }
        current.insert(member.clone(), new);
        written.push((new, member));
    }
    let effects = if written.is_empty() {
        Vec::new()
    } else {
        let effect = Effect::ZAdd {
            key: key.to_vec(),
            members: written,
        };
        db.purge(key, now);
        db.apply(&effect);
        vec![effect]
    };
    let reply = if incr {
        match incremented {
            Some(score) => bulk(format_score(score).as_bytes()),
            None => Frame::Null,
        }
    } else {
        Frame::Integer(if ch { added + changed } else { added })
    };
    (reply, effects)
}

/// Removes `members` from the sorted set at `key`: how many, and the
/// effect (none when nothing was removed).
fn remove_members(db: &mut Db, key: &[u8], members: Vec<Vec<u8>>) -> Answer {
    let count = members.len() as i64;
    if members.is_empty() {
        return (Frame::Integer(0), Vec::new());
    }
    let effect = Effect::ZRem {
        key: key.to_vec(),
        members,
    };
    db.apply(&effect);
    (Frame::Integer(count), vec![effect])
}

/// The options of one `ZRANGE` or `ZRANGEBYSCORE`, after its bounds.
struct RangeOptions {
    by_score: bool,
    rev: bool,
    with_scores: bool,
    /// `LIMIT offset count`.
    limit: Option<(i64, i64)>,
}

impl RangeOptions {
    /// Reads `options` of `ZRANGEBYSCORE` (`by_score_command`) or
    /// `ZRANGE`, or returns the error Redis answers.
    fn parse(options: &[Vec<u8>], by_score_command: bool) -> Result<Self, Answer> {
        let mut parsed = Self {
            by_score: by_score_command,
            rev: false,
            with_scores: false,
            limit: None,
        };
        let mut options = options.iter();
        while let Some(option) = options.next() {
            match option.to_ascii_uppercase().as_slice() {
                b"WITHSCORES" => parsed.with_scores = true,
                b"BYSCORE" if !by_score_command => parsed.by_score = true,
                b"REV" if !by_score_command => parsed.rev = true,
                b"LIMIT" => {
                    let (Some(offset), Some(count)) = (options.next(), options.next()) else {
                        return Err(syntax_error());
                    };
                    let (Some(offset), Some(count)) = (parse_i64(offset), parse_i64(count)) else {
                        return Err(not_integer());
                    };
                    parsed.limit = Some((offset, count));
                }
                _ => return Err(syntax_error()),
            }
        }
        if parsed.limit.is_some() && !parsed.by_score {
            return Err((
                error(
                    "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
                ),
                Vec::new(),
            ));
        }
        Ok(parsed)
    }
}

/// `ZRANGE` and `ZRANGEBYSCORE` (`name`, upper case) on `set` (`None`:
/// missing).
fn zrange(name: &[u8], args: &[Vec<u8>], set: Option<&ZSet>) -> Answer {
    let options = match RangeOptions::parse(&args[4..], name == b"ZRANGEBYSCORE") {
        Ok(options) => options,
        Err(answer) => return answer,
    };
    let members = if options.by_score {
        range_by_score(&args[2], &args[3], set, &options)
    } else {
        range_by_index(&args[2], &args[3], set, options.rev)
    };
    let members = match members {
        Ok(members) => members,
        Err(answer) => return answer,
    };
    let mut reply = Vec::new();
    for (score, member) in members {
        reply.push(bulk(&member));
        if options.with_scores {
            reply.push(bulk(format_score(score).as_bytes()));
        }
    }
    (Frame::Array(reply), Vec::new())
}

/// The members of `set` whose scores lie between the bounds `first` and
/// `second` (max first with `REV`), in order, then `LIMIT`ed.
fn range_by_score(
    first: &[u8],
    second: &[u8],
    set: Option<&ZSet>,
    options: &RangeOptions,
) -> Result<Vec<(f64, Vec<u8>)>, Answer> {
    // With REV the bounds come max first.
    let (low, high) = if options.rev {
        (second, first)
    } else {
        (first, second)
    };
    let (Some(min), Some(max)) = (parse_bound(low), parse_bound(high)) else {
        return Err((error("ERR min or max is not a float"), Vec::new()));
    };
    let mut found: Vec<(f64, Vec<u8>)> = set
        .map(ZSet::ordered)
        .unwrap_or_default()
        .into_iter()
        .filter(|(score, _)| in_range(*score, min, max))
        .map(|(score, member)| (score, member.to_vec()))
        .collect();
    if options.rev {
        found.reverse();
    }
    Ok(match options.limit {
        Some((offset, _)) if offset < 0 => Vec::new(),
        Some((offset, count)) => {
            let skipped = found.into_iter().skip(offset as usize);
            if count < 0 {
                skipped.collect()
            } else {
                skipped.take(count as usize).collect()
            }
        }
        None => found,
    })
}

/// The members of `set` from index `start` to `stop` (Redis's inclusive,
/// negative-from-the-end indexes), reversed first with `rev`.
fn range_by_index(
    start: &[u8],
    stop: &[u8],
    set: Option<&ZSet>,
    rev: bool,
) -> Result<Vec<(f64, Vec<u8>)>, Answer> {
    let (Some(start), Some(stop)) = (parse_i64(start), parse_i64(stop)) else {
        return Err(not_integer());
    };
    let mut all: Vec<(f64, Vec<u8>)> = set
        .map(ZSet::ordered)
        .unwrap_or_default()
        .into_iter()
        .map(|(score, member)| (score, member.to_vec()))
        .collect();
    if rev {
        all.reverse();
    }
    Ok(match index_range(start, stop, all.len()) {
        Some((from, to)) => all.drain(from..=to).collect(),
        None => Vec::new(),
    })
}

/// A score as Redis 7.0 replies it: `%.17g` (17 significant digits, the
/// exponent form outside 1e-4..1e17), `inf` and `-inf`.
pub fn format_score(score: f64) -> String {
    if score.is_infinite() {
        return if score > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if score == 0.0 {
        return "0".to_owned();
    }
    let scientific = format!("{score:.16e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .unwrap_or((scientific.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let trim = |text: &str| -> String {
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            text.to_owned()
        }
    };
    if !(-4..17).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exponent.abs())
    } else {
        let decimals = usize::try_from(16 - exponent).unwrap_or(0);
        trim(&format!("{score:.decimals$}"))
    }
}

/// A score argument as Redis reads one: a decimal or exponent float, or
/// `inf`, `+inf`, `-inf` (any case); never NaN. Negative zero is zero.
fn parse_score(text: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(text).ok()?;
    let lower = text.to_ascii_lowercase();
    let score = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ if lower.contains("inf") || lower.contains("nan") || text.trim() != text => {
            return None;
        }
        _ => text.parse::<f64>().ok()?,
    };
    Some(score + 0.0)
}

/// One end of a score range: the score and whether it is excluded
/// (`(x`).
type Bound = (f64, bool);

fn parse_bound(text: &[u8]) -> Option<Bound> {
    match text.strip_prefix(b"(") {
        Some(rest) => Some((parse_score(rest)?, true)),
        None => Some((parse_score(text)?, false)),
    }
}

fn in_range(score: f64, (min, min_open): Bound, (max, max_open): Bound) -> bool {
    let above = if min_open { score > min } else { score >= min };
    let below = if max_open { score < max } else { score <= max };
    above && below
}

/// `ZRANGE`'s index range over `len` members, negative indexes counting
/// from the end: the inclusive positions, or `None` when empty.
fn index_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (start + len).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        stop + len
    } else {
        stop.min(len - 1)
    };
    if start > stop || start >= len {
        return None;
    }
    Some((start as usize, stop as usize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::cmd::data::run_words;
    use crate::server::frame::bulk;

    #[test]
    fn sorted_sets_replicate_and_snapshot_with_their_expiry() {
        let mut db = Db::default();
        let mut replica = Db::default();
        let mut effects = Vec::new();
        for command in [
            &["ZADD", "q", "2", "b", "1", "a", "3", "c"][..],
            &["PEXPIREAT", "q", "5000"],
            &["ZADD", "q", "XX", "9", "a"],
            &["ZREM", "q", "b"],
            &["ZREMRANGEBYSCORE", "q", "-inf", "(9"],
        ] {
            let args: Vec<Vec<u8>> = command.iter().map(|a| a.as_bytes().to_vec()).collect();
            effects.extend(
                crate::server::cmd::data::execute(&mut db, &args, NodeTime::at(0))
                    .expect("a keyspace command")
                    .1,
            );
        }
        for effect in &effects {
            replica.apply(effect);
        }
        assert_eq!(replica, db);
        assert_eq!(
            run_words(&mut replica, &["ZRANGE", "q", "0", "-1", "WITHSCORES"], 0),
            Frame::Array(vec![bulk(b"a"), bulk(b"9")])
        );
        let mut synced = Db::default();
        for effect in db.snapshot(NodeTime::at(10)) {
            synced.apply(&effect);
        }
        assert_eq!(synced, db);
        assert_eq!(
            run_words(&mut synced, &["PTTL", "q"], 10),
            Frame::Integer(4990)
        );
        assert_eq!(
            run_words(&mut db, &["ZREM", "q", "a"], 0),
            Frame::Integer(1)
        );
        assert_eq!(
            run_words(&mut db, &["EXISTS", "q"], 0),
            Frame::Integer(0),
            "an emptied set is gone"
        );
    }

    #[test]
    fn scores_print_as_redis_prints_them() {
        for (score, text) in [
            (0.1, "0.10000000000000001"),
            (1e20, "1e+20"),
            (1.5e-7, "1.4999999999999999e-07"),
            (1_700_000_000_000_001.0, "1700000000000001"),
            (3.0, "3"),
            (-2.5, "-2.5"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(format_score(score), text);
        }
    }
}
