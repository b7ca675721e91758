//! The lock script's acquires for servers before 7.0 (operations `N`, `T`,
//! `C`), run on a real `redis-server` under `MONITOR`: they use only
//! commands and options that every server they are chosen for knows — no
//! `SET … GET`, which came in 6.2 — and answer as the 7.0 operations (`n`,
//! `t`, `c`) do. And on a full server one fails alone, as its 7.0 twin
//! does, leaving the renewals batched with it to run.

#![cfg(feature = "redis")]

use crate::support;

use std::time::Duration;

use lock_core::{
    Fencing,
    scripts::{KeyNames, LOCK, op},
};
use redis::{ConnectionLike, Value};
use support::RedisServer;

const TTL_MS: u64 = 5_000;

/// A blocking connection to `server`.
fn connect(server: &RedisServer) -> redis::Connection {
    let client = redis::Client::open(server.url()).expect("a valid url");
    let conn = client
        .get_connection_with_timeout(Duration::from_secs(1))
        .expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("a read timeout");
    conn
}

/// One operation of the lock script: its keys and its arguments.
struct Op {
    keys: Vec<String>,
    args: Vec<String>,
}

/// An acquire in `mode`, for a server before 7.0 when `compat`.
fn acquire(compat: bool, names: &KeyNames, token: &str, mode: Fencing) -> Op {
    let mut keys = vec![names.lock.clone()];
    if op::acquire_sends_fence_key(mode) {
        keys.push(names.fence_key(mode).to_owned());
    }
    Op {
        keys,
        args: vec![
            op::acquire(mode, compat).to_owned(),
            token.to_owned(),
            TTL_MS.to_string(),
        ],
    }
}

fn renew(names: &KeyNames, token: &str) -> Op {
    Op {
        keys: vec![names.lock.clone()],
        args: vec![op::RENEW.to_owned(), token.to_owned(), TTL_MS.to_string()],
    }
}

/// Runs a batch of operations with `EVAL` (the script's own text) and
/// returns the raw reply: an error reply to the whole batch as
/// `Value::ServerError`, and each operation's error reply in place.
fn run(conn: &mut redis::Connection, ops: &[Op]) -> Value {
    let mut eval = redis::cmd("EVAL");
    eval.arg(LOCK.source)
        .arg(ops.iter().map(|op| op.keys.len()).sum::<usize>());
    for op in ops {
        eval.arg(&op.keys);
    }
    for op in ops {
        eval.arg(&op.args);
    }
    conn.req_command(&eval).expect("EVAL answers")
}

/// The fence of a grant (a single operation answers its reply alone);
/// panics on any other reply.
fn granted(reply: &Value) -> u64 {
    match reply {
        Value::Int(fence) => {
            u64::try_from(*fence).unwrap_or_else(|_| panic!("not a grant: {reply:?}"))
        }
        _ => panic!("not a lone integer: {reply:?}"),
    }
}

/// `-2 - pttl`: another owner holds the key (with a ttl).
fn contended(reply: &Value) -> bool {
    matches!(reply, Value::Int(held) if *held < -2)
}

/// The commands scripts ran, read from a `MONITOR` connection up to the
/// `ECHO marker` sent after them.
fn script_commands(monitor: &mut redis::Connection, marker: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    loop {
        let line = match monitor.recv_response().expect("a MONITOR line") {
            Value::SimpleString(line) => line,
            other => panic!("MONITOR sent {other:?}"),
        };
        if line.contains(marker) {
            return commands;
        }
        if line.contains(" lua] ") {
            commands.push(support::monitor_args(&line));
        }
    }
}

#[test]
fn compat_acquire_uses_only_commands_old_servers_know() {
    let server = RedisServer::start();
    let mut conn = connect(&server);
    let mut monitor = connect(&server);
    let _: String = redis::cmd("MONITOR").query(&mut monitor).expect("MONITOR");

    for mode in [Fencing::None, Fencing::Counter, Fencing::TimeMixed] {
        let compat = KeyNames::new("compat", mode.name());
        let modern = KeyNames::new("modern", mode.name());
        // Free, then a retry by the holder, then another owner.
        let first = granted(&run(&mut conn, &[acquire(true, &compat, "t1", mode)]));
        let again = granted(&run(&mut conn, &[acquire(true, &compat, "t1", mode)]));
        assert!(contended(&run(
            &mut conn,
            &[acquire(true, &compat, "t2", mode)]
        )));
        let modern_first = granted(&run(&mut conn, &[acquire(false, &modern, "t1", mode)]));
        match mode {
            Fencing::None => assert_eq!((first, again, modern_first), (0, 0, 0)),
            // One counter per namespace: `compat` and `modern` have one each.
            Fencing::Counter => assert_eq!((first, again, modern_first), (1, 2, 1)),
            _ => {
                assert!(
                    again > first && modern_first > again,
                    "{first} {again} {modern_first}"
                );
                // The compat grant keeps the namespace's floor without a
                // ttl, as `t` does, holding the last fence.
                assert_eq!(support::pttl(&server, &compat.fence), -1, "the floor stays");
                let floor: u64 = server.query(&["GET", &compat.fence]);
                assert_eq!(floor, again);
            }
        }
        assert_eq!(support::get(&server, &compat.lock).as_deref(), Some("t1"));
    }
    // A floor ahead of the server clock (as after the clock stepped back).
    let behind = KeyNames::new("compat", "behind");
    let (seconds, micros): (u64, u64) = server.query(&["TIME"]);
    let planted = (seconds + 60) * 1_000_000 + micros;
    let _: () = server.query(&["SET", &behind.fence, &planted.to_string(), "PX", "5000"]);
    let fence = granted(&run(
        &mut conn,
        &[acquire(true, &behind, "t1", Fencing::TimeMixed)],
    ));
    assert_eq!(fence, planted + 1);
    assert_eq!(
        support::pttl(&server, &behind.fence),
        -1,
        "the floor stays, without a ttl"
    );

    let _: String = redis::cmd("ECHO")
        .arg("end-of-script-compat")
        .query(&mut conn)
        .expect("ECHO");
    let commands = script_commands(&mut monitor, "end-of-script-compat");
    assert!(!commands.is_empty(), "MONITOR showed the scripts' commands");
    let mut compat_sets = 0;
    for command in &commands {
        let (name, args) = command.split_first().expect("a command name");
        let name = name.to_ascii_uppercase();
        assert!(
            [
                "GET", "SET", "PEXPIRE", "PTTL", "DEL", "INCR", "TIME", "PUBLISH"
            ]
            .contains(&name.as_str()),
            "a command the script has no business running: {command:?}"
        );
        let on_compat = args.first().is_some_and(|key| key.starts_with("{compat:"));
        if name == "SET" && on_compat {
            compat_sets += 1;
            assert!(
                !args.iter().any(|arg| arg.eq_ignore_ascii_case("GET")),
                "SET … GET needs Redis 6.2, and `N`/`T`/`C` run on servers before 7.0: {command:?}"
            );
        }
    }
    assert!(compat_sets >= 4, "the compat keys were set: {commands:?}");
}

#[test]
fn a_compat_acquire_on_a_full_server_fails_alone() {
    let server = RedisServer::start();
    let mut conn = connect(&server);
    let held = KeyNames::new("full", "held");
    let free = KeyNames::new("full", "free");
    let _: () = server.query(&["SET", &held.lock, "t1", "PX", "1000"]);
    // A full server: every command that may grow memory gets OOM.
    let _: () = server.query(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    let _: () = server.query(&["CONFIG", "SET", "maxmemory", "1"]);

    let reply = run(
        &mut conn,
        &[
            acquire(true, &free, "t2", Fencing::None),
            renew(&held, "t1"),
        ],
    );
    let _: () = server.query(&["CONFIG", "SET", "maxmemory", "0"]);
    let Value::Array(entries) = &reply else {
        panic!("the batch failed as a whole: {reply:?}");
    };
    assert!(
        matches!(&entries[..], [Value::ServerError(error), Value::Int(1)] if error.code() == "OOM"),
        "the acquire fails with OOM and the renewal runs: {reply:?}"
    );
    assert!(support::get(&server, &free.lock).is_none(), "nothing set");
    assert!(
        support::pttl(&server, &held.lock) > 1_000,
        "renewed to the new ttl"
    );
}
