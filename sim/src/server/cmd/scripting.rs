//! Scripting: `EVAL`, `EVALSHA` and `SCRIPT` on a node. Only lock-core's
//! scripts run, in the embedded Lua ([`crate::server::scripts`]),
//! with the node's keyspace lent to the call; what the call wrote streams
//! to the replicas as its effects (Redis 7's effects replication).

use redis_protocol::resp2::types::OwnedFrame as Frame;

use crate::{
    clock,
    server::{
        bus,
        frame::{bulk, error, ok, parse_i64},
        node::{NodeHandle, Role},
        scripts,
    },
};

/// `SCRIPT LOAD | EXISTS | FLUSH`.
pub(super) fn script(node: &NodeHandle, args: &[Vec<u8>]) -> Frame {
    let sub = args
        .get(1)
        .map(|s| s.to_ascii_uppercase())
        .unwrap_or_default();
    let mut state = node.0.borrow_mut();
    match sub.as_slice() {
        b"LOAD" if args.len() == 3 => {
            // Only lock-core's scripts run here, and their SHA1s are known:
            // comparing the source is much cheaper than hashing it.
            let Some(script) = lock_core::scripts::ALL
                .into_iter()
                .find(|script| script.source.as_bytes() == args[2].as_slice())
            else {
                return error("ERR the simulated Redis runs only lock-core's scripts");
            };
            state.scripts.insert(script.sha1.to_owned());
            bulk(script.sha1.as_bytes())
        }
        b"EXISTS" => Frame::Array(
            args[2..]
                .iter()
                .map(|sha| {
                    let sha = String::from_utf8_lossy(sha).to_lowercase();
                    Frame::Integer(i64::from(state.scripts.contains(&sha)))
                })
                .collect(),
        ),
        b"FLUSH" => {
            state.scripts.clear();
            ok()
        }
        _ => error("ERR unknown subcommand or wrong number of arguments for 'script' command"),
    }
}

/// `EVAL` (`by_source`) and `EVALSHA`: runs one of lock-core's scripts on
/// the node's keyspace, streams its effects, and counts what the reports
/// observe of it.
pub(super) fn eval(node: &NodeHandle, args: &[Vec<u8>], by_source: bool) -> Frame {
    if args.len() < 3 {
        return error("ERR wrong number of arguments for 'evalsha' command");
    }
    let sha = if by_source {
        // lock-core's scripts' SHA1s are known: look the source up rather
        // than hash it (any other source is refused below anyway).
        lock_core::scripts::ALL
            .into_iter()
            .find(|script| script.source.as_bytes() == args[1].as_slice())
            .map_or_else(
                || sha1_smol::Sha1::from(&args[1]).digest().to_string(),
                |script| script.sha1.to_owned(),
            )
    } else {
        String::from_utf8_lossy(&args[1]).to_lowercase()
    };
    let Some(numkeys) = parse_i64(&args[2]).and_then(|n| usize::try_from(n).ok()) else {
        return error("ERR value is not an integer or out of range");
    };
    if numkeys > args.len() - 3 {
        return error("ERR Number of keys can't be greater than number of args");
    }
    let (keys, rest) = args[3..].split_at(numkeys);
    let (mut db, script, time, writable) = {
        let mut state = node.0.borrow_mut();
        let script = match scripts::known(&sha) {
            Some(script) if by_source || state.scripts.contains(&sha) => script,
            Some(_) => return error("NOSCRIPT No matching script. Please use EVAL."),
            None if by_source => {
                return error("ERR the simulated Redis runs only lock-core's scripts");
            }
            None => return error("NOSCRIPT No matching script. Please use EVAL."),
        };
        state.scripts.insert(sha);
        let time = state.time_at(clock::now());
        let writable = state.role == Role::Primary;
        // The keyspace leaves the node while the script runs: what the
        // script publishes reaches subscribers on this node (and, in a
        // cluster, on the others), which must not find it borrowed.
        (std::mem::take(&mut state.db), script, time, writable)
    };
    let publisher = node.clone();
    let (reply, effects) = scripts::run(
        script,
        &mut db,
        time,
        writable,
        keys,
        rest,
        Box::new(move |channel, message| {
            bus::publish(&publisher.0.borrow(), channel, message) as i64
        }),
    );
    let mut state = node.0.borrow_mut();
    state.db = db;
    if state.deposed {
        let (grants, renewals) = scripts::successes(script, rest, &reply);
        state.deposed_acks.grants += grants as u64;
        state.deposed_acks.renewals += renewals as u64;
    }
    state.propagate(effects);
    state.grants_behind_floor += scripts::grants_behind_floor(&reply, time.us) as u64;
    if scripts::operations(script, rest) > 1 {
        state.batched_calls += 1;
    }
    reply
}
