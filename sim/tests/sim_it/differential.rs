//! The simulated Redis answers like a real `redis-server`: the same command
//! sequences (every path of every lock script, expiry, wrong types, missing
//! scripts) go to both, and the replies are compared. This is what holds
//! the simulation's model of Redis to reality.

use std::{cell::RefCell, rc::Rc, time::Duration};

use lock_core::{
    Fencing,
    scripts::{self, op},
};
use redis::Value;
use servers::{Binaries, Family, Server, Version, Want};
use sim::server::{Flavour, NodeConfig, NodeHandle};

#[derive(Debug, Clone)]
enum Step {
    Cmd(Vec<String>),
    Sleep(u64),
}

fn cmd(parts: &[&str]) -> Step {
    Step::Cmd(parts.iter().map(|p| (*p).to_owned()).collect())
}

fn eval(keys: &[&str], args: &[&str]) -> Step {
    let mut parts = vec!["EVALSHA", scripts::LOCK.sha1];
    let count = keys.len().to_string();
    parts.push(&count);
    parts.extend_from_slice(keys);
    parts.extend_from_slice(args);
    cmd(&parts)
}

/// A call of one of the lock family's scripts (prelude + body), by SHA1.
fn family(script: scripts::Script, keys: &[&str], args: &[&str]) -> Step {
    let mut parts = vec!["EVALSHA", script.sha1];
    let count = keys.len().to_string();
    parts.push(&count);
    parts.extend_from_slice(keys);
    parts.extend_from_slice(args);
    cmd(&parts)
}

/// The lock family's scripts through every operation: grants, refusals,
/// queueing, renewals, releases, lapses and wrong types. Waiter and lease
/// ttls are short where a sequence sleeps past them.
fn family_sequences() -> Vec<(&'static str, Vec<Step>)> {
    vec![fair_sequence(), read_write_sequence(), semaphore_sequence()]
}

/// `SCRIPT LOAD` of one of the lock family's scripts.
fn load(script: scripts::Script) -> Step {
    cmd(&["SCRIPT", "LOAD", script.source])
}

/// The fair lock: queueing in arrival order, renewed places, lapses,
/// giving up, release, wrong types.
fn fair_sequence() -> (&'static str, Vec<Step>) {
    let fair = ["{f}", "{f}:queue", "{f}:waiters", "{f}:fence"];
    let fair_call = |args: &[&str]| family(scripts::FAIR, &fair, args);
    (
        "fair: queue in arrival order, renew places, lapse, give up, release",
        vec![
            load(scripts::FAIR),
            fair_call(&["a", "h", "1000", "100"]),
            fair_call(&["a", "x", "1000", "100"]),
            fair_call(&["a", "y", "1000", "5000"]),
            fair_call(&["a", "x", "1000", "100"]),
            cmd(&["ZRANGE", fair[1], "0", "-1"]),
            cmd(&["ZCARD", fair[2]]),
            fair_call(&["w", "x", "100"]),
            fair_call(&["w", "nobody", "100"]),
            fair_call(&["r", "h", "1000"]),
            fair_call(&["r", "x", "1000"]),
            fair_call(&["d", "x"]),
            fair_call(&["d", "h"]),
            // x heads the queue: y is refused, x is granted.
            fair_call(&["a", "y", "1000", "5000"]),
            fair_call(&["a", "x", "1000", "100"]),
            cmd(&["ZRANGE", fair[1], "0", "-1"]),
            fair_call(&["d", "x"]),
            fair_call(&["a", "z", "1000", "100"]),
            fair_call(&["c", "z"]),
            fair_call(&["c", "z"]),
            // y's place lapses only after 5 s: a newcomer queues behind.
            fair_call(&["a", "n", "1000", "60"]),
            cmd(&["ZRANGE", fair[1], "0", "-1"]),
            fair_call(&["c", "y"]),
            Step::Sleep(150),
            // n's place lapsed: the queue is empty, the next is granted.
            cmd(&["EXISTS", fair[1], fair[2]]),
            fair_call(&["a", "m", "1000", "60"]),
            fair_call(&["bogus", "m"]),
            cmd(&["SET", "{f}:queue", "str"]),
            fair_call(&["a", "k", "1000", "60"]),
        ],
    )
}

/// The read-write lock: shared readers, a writer's intent, lapses,
/// wrong types.
fn read_write_sequence() -> (&'static str, Vec<Step>) {
    let rw = ["{w}", "{w}:readers", "{w}:intent", "{w}:fence"];
    let rw_call = |args: &[&str]| family(scripts::RWLOCK, &rw, args);
    (
        "read-write: readers share, a writer's intent holds readers back, leases lapse",
        vec![
            load(scripts::RWLOCK),
            rw_call(&["r", "r1", "1000"]),
            rw_call(&["r", "r2", "60"]),
            rw_call(&["r", "r1", "1000"]),
            rw_call(&["w", "w1", "1000", "5000"]),
            cmd(&["GET", rw[2]]),
            rw_call(&["r", "r3", "1000"]),
            rw_call(&["w", "w2", "1000", "5000"]),
            rw_call(&["e", "r1", "1000"]),
            rw_call(&["e", "nobody", "1000"]),
            rw_call(&["i", "w1", "5000"]),
            rw_call(&["i", "w2", "5000"]),
            rw_call(&["x", "r1"]),
            rw_call(&["x", "r1"]),
            Step::Sleep(150),
            // r2's lease lapsed: the writer with the intent is granted.
            cmd(&["ZCARD", rw[1]]),
            rw_call(&["w", "w1", "1000", "5000"]),
            cmd(&["EXISTS", rw[2]]),
            rw_call(&["r", "r4", "1000"]),
            rw_call(&["f", "w1", "1000"]),
            rw_call(&["f", "w2", "1000"]),
            rw_call(&["y", "w2"]),
            rw_call(&["y", "w1"]),
            rw_call(&["w", "w2", "1000", "5000"]),
            rw_call(&["z", "w2"]),
            rw_call(&["y", "w2"]),
            rw_call(&["r", "r5", "1000"]),
            rw_call(&["bogus", "r5"]),
            cmd(&["SET", "{w}:readers", "str"]),
            rw_call(&["r", "r6", "1000"]),
        ],
    )
}

/// The semaphore: permits, refusals, renewals, lapses, owner-only
/// release, wrong types.
fn semaphore_sequence() -> (&'static str, Vec<Step>) {
    let sem = ["{s}:leases", "{s}:fence"];
    let sem_call = |args: &[&str]| family(scripts::SEMAPHORE, &sem, args);
    (
        "semaphore: permits, refusals, renewals, lapses, owner-only release",
        vec![
            load(scripts::SEMAPHORE),
            sem_call(&["a", "p1", "1000", "2"]),
            sem_call(&["a", "p2", "60", "2"]),
            sem_call(&["a", "p3", "1000", "2"]),
            sem_call(&["a", "p1", "1000", "2"]),
            cmd(&["ZCARD", sem[0]]),
            sem_call(&["r", "p1", "1000"]),
            sem_call(&["r", "p3", "1000"]),
            sem_call(&["d", "p3"]),
            Step::Sleep(150),
            // p2's lease lapsed: p3 gets the permit.
            sem_call(&["a", "p3", "1000", "2"]),
            cmd(&["ZRANGE", sem[0], "0", "-1"]),
            sem_call(&["d", "p1"]),
            sem_call(&["d", "p3"]),
            cmd(&["EXISTS", sem[0]]),
            sem_call(&["bogus", "p1", "1000"]),
            cmd(&["SET", "{s}:fence", "x"]),
            cmd(&["LPUSH", "{s}:fence", "x"]),
            cmd(&["DEL", "{s}:fence"]),
            cmd(&["LPUSH", "{s}:fence", "x"]),
            sem_call(&["a", "p4", "1000", "2"]),
            cmd(&["EXISTS", sem[0]]),
            cmd(&["SET", "{s}:leases", "str"]),
            sem_call(&["a", "p5", "1000", "2"]),
        ],
    )
}

/// The lock script's keys with a time-mixed fence.
const LOCK_KEYS: [&str; 2] = ["{l}", "{l}:fence"];

/// `SCRIPT LOAD` of the lock script.
fn load_lock() -> Step {
    cmd(&["SCRIPT", "LOAD", scripts::LOCK.source])
}

/// `steps` after loading the lock script.
fn with_load(steps: Vec<Step>) -> Vec<Step> {
    let mut all = vec![load_lock()];
    all.extend(steps);
    all
}

/// Every sequence the comparison runs; each starts from an empty keyspace.
fn sequences() -> Vec<(&'static str, Vec<Step>)> {
    let mut out = vec![lock_sequence(false), lock_sequence(true)];
    out.extend(lock_script_sequences());
    out.push(sorted_set_sequence());
    out.push(sorted_set_expiry_sequence());
    out.extend(family_sequences());
    out.push(missing_script_sequence());
    out
}

/// The lock's life through the script: grants (by `SET … NX GET`, or
/// by the compatible path with `compat`), contention, renewal, release.
fn lock_sequence(compat: bool) -> (&'static str, Vec<Step>) {
    let acquire = move |token: &'static str, mode: Fencing| {
        let keys: &[&str] = match mode {
            Fencing::None => &["{l}"],
            Fencing::Counter => &["{l}", "{lock}:fence-counter"],
            _ => &["{l}", "{l}:fence"],
        };
        eval(keys, &[op::acquire(mode, compat), token, "1000"])
    };
    (
        if compat {
            "acquire (compat), contend, retry, renew, release"
        } else {
            "acquire (SET NX GET), contend, retry, renew, release"
        },
        with_load(vec![
            acquire("a", Fencing::TimeMixed),
            acquire("b", Fencing::TimeMixed),
            acquire("a", Fencing::TimeMixed),
            cmd(&["GET", "{l}"]),
            cmd(&["PTTL", "{l}:fence"]),
            eval(&["{l}"], &["r", "b", "1000"]),
            eval(&["{l}"], &["r", "a", "1000"]),
            eval(&["{l}"], &["d", "b"]),
            cmd(&["GET", "{l}"]),
            eval(&["{l}"], &["d", "a"]),
            eval(&["{l}"], &["d", "a"]),
            eval(&["{l}"], &["r", "a", "1000"]),
            cmd(&["EXISTS", "{l}"]),
            acquire("c", Fencing::TimeMixed),
            acquire("d", Fencing::Counter),
            acquire("e", Fencing::None),
            eval(&["{l}"], &["d", "c"]),
            acquire("g", Fencing::None),
            eval(&["{l}"], &["q", "h"]),
            eval(&["{l}"], &["q", "g"]),
            cmd(&["EXISTS", "{l}"]),
            acquire("e", Fencing::None),
            acquire("e", Fencing::None),
            acquire("f", Fencing::None),
            acquire("f", Fencing::Counter),
        ]),
    )
}

/// The lock script's other fencing modes, batches, expiry and errors.
fn lock_script_sequences() -> Vec<(&'static str, Vec<Step>)> {
    vec![
        (
            "counter and none fencing",
            with_load(vec![
                eval(&["{l}", "{lock}:fence-counter"], &["c", "a", "1000"]),
                eval(&["{l}"], &["d", "a"]),
                eval(&["{l}", "{lock}:fence-counter"], &["c", "b", "1000"]),
                cmd(&["GET", "{lock}:fence-counter"]),
                cmd(&["PTTL", "{lock}:fence-counter"]),
                eval(&["{m}"], &["n", "a", "1000"]),
                cmd(&["EXISTS", "{m}:fence"]),
            ]),
        ),
        (
            "a batch of operations in one call",
            with_load(vec![
                eval(
                    &["{x}", "{x}:fence", "{y}", "{x}", "{y}", "{x}"],
                    &[
                        "t", "t", "1000", "n", "u", "1000", "r", "t", "1000", "d", "u", "d",
                        "nobody",
                    ],
                ),
                cmd(&["EXISTS", "{x}", "{y}"]),
                cmd(&["SET", "{z}", "other", "PX", "5000"]),
                eval(
                    &["{z}", "{z}:fence", "{w}", "{w}:fence"],
                    &["c", "t", "1000", "T", "t", "1000"],
                ),
                eval(&["{w}"], &["x", "t"]),
                eval(&["{w}"], &["d"]),
            ]),
        ),
        (
            "expiry on the server's clock",
            with_load(vec![
                eval(&LOCK_KEYS, &["t", "a", "60"]),
                Step::Sleep(150),
                cmd(&["GET", "{l}"]),
                cmd(&["EXISTS", "{l}:fence"]),
                eval(&["{l}"], &["r", "a", "1000"]),
                eval(&LOCK_KEYS, &["t", "b", "60"]),
                cmd(&["SET", "plain", "v", "NX", "PX", "60", "GET"]),
                cmd(&["SET", "plain", "w", "NX", "PX", "60", "GET"]),
                cmd(&["SET", "plain", "w", "NX", "PX", "60"]),
                Step::Sleep(150),
                cmd(&["GET", "plain"]),
                cmd(&["PTTL", "plain"]),
                cmd(&["SET", "forever", "v"]),
                cmd(&["PTTL", "forever"]),
            ]),
        ),
        (
            "wrong types, missing scripts, bad arguments",
            with_load(vec![
                cmd(&["LPUSH", "{l}", "x"]),
                eval(&LOCK_KEYS, &["t", "a", "1000"]),
                eval(&LOCK_KEYS, &["T", "a", "1000"]),
                eval(&["{l}"], &["n", "a", "1000"]),
                eval(&["{l}"], &["N", "a", "1000"]),
                eval(&["{l}"], &["r", "a", "1000"]),
                eval(&["{l}"], &["d", "a"]),
                cmd(&["SET", "{l}", "v", "NX", "PX", "100", "GET"]),
                cmd(&["LPUSH", "{f}:fence", "x"]),
                eval(&["{f}", "{f}:fence"], &["t", "a", "1000"]),
                cmd(&["EXISTS", "{f}"]),
                cmd(&["LPUSH", "{lock}:fence-counter", "x"]),
                eval(&["{g}", "{lock}:fence-counter"], &["c", "a", "1000"]),
                cmd(&["EXISTS", "{g}"]),
                eval(&["{h}"], &["n", "a", "soon"]),
                eval(&["{h}"], &["n", "a", "-5"]),
                eval(&["{h}"], &["t", "a", "1000"]),
                eval(&["{h}"], &["n", "a"]),
                eval(&["{h}"], &["d"]),
                cmd(&["EVALSHA", "0123456789012345678901234567890123456789", "0"]),
                cmd(&["SET", "k", "v", "PX", "soon"]),
                cmd(&["SET", "k", "v", "BOGUS"]),
                cmd(&["INCR", "k"]),
                cmd(&["SET", "k", "1"]),
                cmd(&["INCR", "k"]),
                cmd(&["DEL", "k", "k", "nothing"]),
                cmd(&["PEXPIRE", "nothing", "100"]),
                // Valkey's option: a syntax error on Redis 7.0.
                cmd(&["SET", "k", "1", "IFEQ", "1", "PX", "100"]),
                cmd(&["SET", "nothing", "1", "IFEQ", "1"]),
            ]),
        ),
    ]
}

/// Sorted sets, as the lock family's scripts use them: every command,
/// then how scores are written, bad arguments and wrong types.
fn sorted_set_sequence() -> (&'static str, Vec<Step>) {
    let mut steps = sorted_set_commands();
    steps.extend(sorted_set_scores_and_errors());
    (
        "sorted sets: add, score, range, remove, expire, wrong types",
        steps,
    )
}

/// `ZADD` with its flags, `ZCARD`, `ZSCORE`, `ZRANGE` (by rank and by
/// score), `ZRANGEBYSCORE`, `ZREM` and `ZREMRANGEBYSCORE`.
fn sorted_set_commands() -> Vec<Step> {
    vec![
        cmd(&["ZADD", "z", "3", "c", "1", "a", "2", "b"]),
        cmd(&["ZADD", "z", "1", "a", "5", "b"]),
        cmd(&["ZADD", "z", "CH", "1", "a", "6", "b"]),
        cmd(&["ZADD", "z", "XX", "9", "nobody", "7", "b"]),
        cmd(&["ZADD", "z", "NX", "0", "a", "0.5", "d"]),
        cmd(&["ZADD", "z", "GT", "CH", "0", "a", "8", "b"]),
        cmd(&["ZADD", "z", "LT", "CH", "0", "a"]),
        cmd(&["ZADD", "z", "INCR", "2", "a"]),
        cmd(&["ZADD", "z", "XX", "INCR", "2", "nobody"]),
        cmd(&["ZCARD", "z"]),
        cmd(&["ZCARD", "nothing"]),
        cmd(&["ZSCORE", "z", "a"]),
        cmd(&["ZSCORE", "z", "nobody"]),
        cmd(&["ZSCORE", "nothing", "a"]),
        cmd(&["ZRANGE", "z", "0", "-1"]),
        cmd(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        cmd(&["ZRANGE", "z", "0", "0"]),
        cmd(&["ZRANGE", "z", "-1", "-1", "WITHSCORES"]),
        cmd(&["ZRANGE", "z", "-100", "1"]),
        cmd(&["ZRANGE", "z", "2", "100"]),
        cmd(&["ZRANGE", "z", "3", "1"]),
        cmd(&["ZRANGE", "z", "10", "20"]),
        cmd(&["ZRANGE", "z", "0", "-1", "REV", "WITHSCORES"]),
        cmd(&["ZRANGE", "z", "(1", "+inf", "BYSCORE", "LIMIT", "1", "5"]),
        cmd(&["ZRANGE", "nothing", "0", "-1"]),
        cmd(&["ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES"]),
        cmd(&["ZRANGEBYSCORE", "z", "(0.5", "3"]),
        cmd(&["ZRANGEBYSCORE", "z", "0.5", "(3"]),
        cmd(&["ZRANGEBYSCORE", "z", "-inf", "4", "LIMIT", "1", "1"]),
        cmd(&["ZRANGEBYSCORE", "z", "-inf", "4", "LIMIT", "0", "-1"]),
        cmd(&["ZRANGEBYSCORE", "z", "5", "1"]),
        cmd(&["ZREM", "z", "a", "a", "nobody"]),
        cmd(&["ZREMRANGEBYSCORE", "z", "-inf", "(3"]),
        cmd(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        cmd(&["ZREMRANGEBYSCORE", "z", "(3", "+inf"]),
        cmd(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        cmd(&["ZREM", "z", "c"]),
        cmd(&["EXISTS", "z"]),
        cmd(&["ZREMRANGEBYSCORE", "z", "-inf", "+inf"]),
    ]
}

/// Scores as Redis writes them, bad arguments, and wrong types both ways.
fn sorted_set_scores_and_errors() -> Vec<Step> {
    vec![
        // Scores as Redis writes them.
        cmd(&[
            "ZADD",
            "s",
            "0.1",
            "a",
            "1e20",
            "b",
            "1700000000000001",
            "c",
            "-0",
            "d",
            "3.0",
            "e",
            "1.5e-7",
            "f",
            "inf",
            "g",
            "-inf",
            "h",
            "-2.5",
            "i",
            "123456789.125",
            "j",
        ]),
        cmd(&["ZRANGE", "s", "0", "-1", "WITHSCORES"]),
        // Bad arguments.
        cmd(&["ZADD", "s", "nan", "x"]),
        cmd(&["ZADD", "s", "soon", "x"]),
        cmd(&["ZADD", "s", "XX", "NX", "1", "a"]),
        cmd(&["ZADD", "s", "GT", "LT", "1", "a"]),
        cmd(&["ZADD", "s", "INCR", "1", "a", "2", "b"]),
        cmd(&["ZADD", "s", "1"]),
        cmd(&["ZADD", "s", "1", "a", "2"]),
        cmd(&["ZRANGEBYSCORE", "s", "a", "b"]),
        cmd(&["ZRANGE", "s", "a", "b"]),
        cmd(&["ZRANGE", "s", "0", "1", "LIMIT", "0", "1"]),
        cmd(&["ZRANGE", "s", "0", "1", "BOGUS"]),
        cmd(&["ZCARD", "s", "t"]),
        // Wrong types both ways.
        cmd(&["SET", "str", "v"]),
        cmd(&["ZADD", "str", "1", "a"]),
        cmd(&["ZCARD", "str"]),
        cmd(&["ZRANGE", "str", "0", "-1"]),
        cmd(&["ZRANGEBYSCORE", "str", "-inf", "+inf"]),
        cmd(&["ZSCORE", "str", "a"]),
        cmd(&["ZREM", "str", "a"]),
        cmd(&["ZREMRANGEBYSCORE", "str", "-inf", "+inf"]),
        cmd(&["GET", "s"]),
        cmd(&["INCR", "s"]),
        cmd(&["LPUSH", "s", "x"]),
        cmd(&["SET", "s", "v", "GET"]),
        cmd(&["MGET", "s", "str"]),
        cmd(&["SET", "s", "v"]),
        cmd(&["ZCARD", "s"]),
        cmd(&["GET", "s"]),
    ]
}

/// Sorted sets expire like strings, by `PEXPIRE` and `PEXPIREAT`.
fn sorted_set_expiry_sequence() -> (&'static str, Vec<Step>) {
    (
        "sorted sets and PEXPIREAT expire on the server's clock",
        vec![
            cmd(&["ZADD", "z", "1", "a"]),
            cmd(&["PEXPIREAT", "z", "99999999999999"]),
            cmd(&["PEXPIREAT", "nothing", "99999999999999"]),
            cmd(&["PTTL", "z"]),
            cmd(&["PEXPIREAT", "z", "1"]),
            cmd(&["EXISTS", "z"]),
            cmd(&["PEXPIREAT", "z", "soon"]),
            cmd(&["PEXPIREAT", "z"]),
            cmd(&["ZADD", "z", "1", "a"]),
            cmd(&["PEXPIRE", "z", "60"]),
            cmd(&["ZADD", "z", "2", "b"]),
            cmd(&["ZCARD", "z"]),
            Step::Sleep(150),
            cmd(&["ZCARD", "z"]),
            cmd(&["ZRANGE", "z", "0", "-1"]),
            cmd(&["ZADD", "z", "XX", "1", "a"]),
            cmd(&["EXISTS", "z"]),
        ],
    )
}

/// `EVALSHA` of a script not loaded yet, then loaded.
fn missing_script_sequence() -> (&'static str, Vec<Step>) {
    (
        "scripts are missing until loaded",
        vec![
            eval(&LOCK_KEYS, &["t", "a", "1000"]),
            cmd(&["SCRIPT", "EXISTS", scripts::LOCK.sha1]),
            load_lock(),
            cmd(&["SCRIPT", "EXISTS", scripts::LOCK.sha1]),
            cmd(&["PING"]),
        ],
    )
}

/// The sequences for a server with `SET … IFEQ` (Valkey 8.1): the native
/// renewal the lock sends there, beside the script's renew it replaces.
fn valkey_sequences() -> Vec<(&'static str, Vec<Step>)> {
    let load = cmd(&["SCRIPT", "LOAD", scripts::LOCK.source]);
    vec![
        (
            "SET IFEQ renews only an equal string, as the script's renew",
            vec![
                load,
                cmd(&["SET", "{l}", "a", "IFEQ", "a", "PX", "1000"]),
                cmd(&["EXISTS", "{l}"]),
                eval(&["{l}"], &["r", "a", "1000"]),
                cmd(&["SET", "{l}", "a", "PX", "100"]),
                cmd(&["SET", "{l}", "a", "IFEQ", "a", "PX", "1000"]),
                cmd(&["PTTL", "{l}"]),
                cmd(&["SET", "{l}", "b", "IFEQ", "b", "PX", "5000"]),
                eval(&["{l}"], &["r", "b", "5000"]),
                cmd(&["GET", "{l}"]),
                eval(&["{l}"], &["r", "a", "1000"]),
                cmd(&["SET", "{l}", "c", "IFEQ", "a", "GET"]),
                cmd(&["PTTL", "{l}"]),
                cmd(&["set", "{l}", "a", "ifeq", "c", "px", "60"]),
                Step::Sleep(150),
                cmd(&["SET", "{l}", "a", "IFEQ", "a", "PX", "1000"]),
                cmd(&["EXISTS", "{l}"]),
            ],
        ),
        (
            "DELIFEQ deletes only an equal string (unknown before Valkey 9)",
            vec![
                cmd(&["SET", "{d}", "a"]),
                cmd(&["DELIFEQ", "{d}", "b"]),
                cmd(&["EXISTS", "{d}"]),
                cmd(&["DELIFEQ", "{d}", "a"]),
                cmd(&["EXISTS", "{d}"]),
                cmd(&["DELIFEQ", "{d}", "a"]),
                cmd(&["LPUSH", "{dw}", "x"]),
                cmd(&["DELIFEQ", "{dw}", "x"]),
                cmd(&["DELIFEQ", "{d}"]),
            ],
        ),
        (
            "WAITAOF without an AOF: counts, and the refusals of numlocal",
            vec![
                cmd(&["SET", "k", "a"]),
                cmd(&["WAITAOF", "0", "0", "10"]),
                cmd(&["WAITAOF", "1", "0", "10"]),
                cmd(&["WAITAOF", "2", "0", "10"]),
                cmd(&["WAITAOF", "0", "1", "20"]),
            ],
        ),
        (
            "SET IFEQ: wrong types and bad arguments",
            vec![
                cmd(&["LPUSH", "{w}", "x"]),
                cmd(&["SET", "{w}", "a", "IFEQ", "a", "PX", "1000"]),
                cmd(&["SET", "{w}", "a", "IFEQ", "a", "GET"]),
                cmd(&["SET", "k", "a"]),
                cmd(&["SET", "k", "a", "IFEQ"]),
                cmd(&["SET", "k", "a", "IFEQ", "a", "NX"]),
                cmd(&["SET", "k", "a", "XX", "IFEQ", "a"]),
                cmd(&["SET", "k", "a", "IFEQ", "a", "IFEQ", "a"]),
                cmd(&["SET", "k", "a", "IFEQ", "a", "PX", "0"]),
                cmd(&["SET", "k", "a", "IFEQ", "a", "PX", "soon"]),
                cmd(&["GET", "k"]),
                cmd(&["PTTL", "k"]),
            ],
        ),
    ]
}

/// Makes replies comparable: fences issued from server time become
/// "<time-fence>", positive ttls "<ttl>", and errors keep only their code.
fn normalise(value: Value) -> String {
    match value {
        Value::Array(items) => {
            let inner: Vec<String> = items.into_iter().map(normalise).collect();
            format!("[{}]", inner.join(", "))
        }
        Value::BulkString(bytes) => {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            match text.parse::<u64>() {
                Ok(n) if n > 1_000_000_000_000 => "<time-fence>".to_owned(),
                _ => format!("{text:?}"),
            }
        }
        Value::Int(n) if n > 0 && n <= 60_000 && n != 1 => "<ttl>".to_owned(),
        // An acquire's fence issued from server time, and the -2 - pttl of
        // a contended acquire: both follow each side's own clock.
        Value::Int(n) if n > 1_000_000_000_000 => "<time-fence>".to_owned(),
        Value::Int(n) if (-60_002..=-3).contains(&n) => "<held: -2 - ttl>".to_owned(),
        Value::ServerError(error) => format!("error {}", error.code()),
        Value::Okay => "OK".to_owned(),
        Value::SimpleString(text) => text,
        other => format!("{other:?}"),
    }
}

fn as_cmd(parts: &[String]) -> redis::Cmd {
    let mut command = redis::cmd(&parts[0]);
    for part in &parts[1..] {
        command.arg(part);
    }
    command
}

fn reply_or_error(result: redis::RedisResult<Value>) -> String {
    match result {
        Ok(value) => normalise(value),
        Err(error) => format!("error {}", error.code().unwrap_or("?")),
    }
}

fn real_replies(port: u16, steps: &[Step]) -> Vec<String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("url");
    let mut conn = client.get_connection().expect("connect to redis-server");
    let _: () = redis::cmd("FLUSHALL").query(&mut conn).expect("flush");
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut conn)
        .expect("script flush");
    let mut replies = Vec::new();
    for step in steps {
        match step {
            Step::Cmd(parts) => replies.push(reply_or_error(as_cmd(parts).query(&mut conn))),
            Step::Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
        }
    }
    replies
}

fn sim_replies(steps: &[Step], flavour: Flavour) -> Vec<String> {
    let replies = Rc::new(RefCell::new(Vec::new()));
    let mut sim = crate::common::loopback_world();
    let node = NodeHandle::new(NodeConfig::standalone(
        flavour,
        sim::config::Persistence::None,
    ));
    sim.host("redis-0", move || sim::server::serve(node.clone()));
    let (steps, out) = (steps.to_vec(), Rc::clone(&replies));
    sim.client("tester", async move {
        let stream = turmoil::net::TcpStream::connect(("redis-0", 6379)).await?;
        let info = redis::RedisConnectionInfo::default().set_skip_set_lib_name();
        let config = redis::AsyncConnectionConfig::new();
        let connect = redis::aio::MultiplexedConnection::new_with_config(&info, stream, config);
        let (mut conn, driver) = tokio::time::timeout(Duration::from_secs(1), connect).await??;
        tokio::task::spawn_local(driver);
        for step in steps {
            match step {
                Step::Cmd(parts) => {
                    let reply = as_cmd(&parts).query_async::<Value>(&mut conn).await;
                    out.borrow_mut().push(reply_or_error(reply));
                }
                Step::Sleep(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            }
        }
        Ok(())
    });
    sim.run().expect("the simulated exchange completes");
    replies.take()
}

/// A real server from `binaries`, for one comparison.
fn start_server(binaries: &Binaries) -> Server {
    Server::start(binaries)
        .unwrap_or_else(|error| panic!("the differential test needs a real server: {error}"))
}

#[test]
fn simulated_redis_answers_like_redis_server() {
    // The tests' server (REDIS_SERVER_BIN, else PATH), which must be Redis.
    let binaries = Binaries::for_tests()
        .and_then(|found| found.expecting(Want::family(Family::Redis)))
        .unwrap_or_else(|error| panic!("the differential test needs a real Redis: {error}"));
    let real = start_server(&binaries);
    for (name, steps) in sequences() {
        let expected = real_replies(real.port(), &steps);
        let actual = sim_replies(&steps, Flavour::Redis7);
        assert_eq!(
            actual, expected,
            "sequence {name:?} differs (left: sim, right: redis-server)"
        );
    }
}

/// Where a Valkey 8.1+ server is: `VALKEY_SERVER_BIN`, else a
/// `redis-server` or `valkey-server` on `PATH` that says it is Valkey 8.1
/// or later (`scripts/valkey.sh` prints a directory whose `redis-server`
/// is).
fn valkey_binaries() -> Option<Binaries> {
    let valkey_81 = |identity: &servers::Identity| {
        let since = Version {
            major: 8,
            minor: 1,
            patch: 0,
        };
        identity.family == Family::Valkey && identity.version >= since
    };
    if let Ok(binary) = std::env::var("VALKEY_SERVER_BIN") {
        let found = Binaries::at(&binary).unwrap_or_else(|error| panic!("{error}"));
        assert!(
            valkey_81(&found.identity()),
            "VALKEY_SERVER_BIN={binary} is {}, not a Valkey 8.1+ server",
            found.identity()
        );
        return Some(found);
    }
    Binaries::on_path_where(valkey_81)
}

/// The simulated node presenting as Valkey 8.1 (or 9.1, when the real
/// server is a Valkey 9) answers `SET … IFEQ` and `DELIFEQ` as the real
/// one does. Runs where a Valkey binary is found; without one
/// it says so and passes, unless `LOCK_REQUIRE_VALKEY=1` (CI's setting
/// where Valkey must be there), which fails it.
#[test]
fn simulated_valkey_answers_like_valkey_server() {
    let Some(binaries) = valkey_binaries() else {
        assert_ne!(
            std::env::var("LOCK_REQUIRE_VALKEY").as_deref(),
            Ok("1"),
            "LOCK_REQUIRE_VALKEY=1 but no Valkey 8.1+ server found: set VALKEY_SERVER_BIN, or put \
             the directory `bash scripts/valkey.sh` prints first on PATH"
        );
        eprintln!(
            "SKIPPED simulated_valkey_answers_like_valkey_server: no Valkey 8.1+ server \
             (VALKEY_SERVER_BIN, or scripts/valkey.sh's directory on PATH)"
        );
        return;
    };
    // The simulated flavour of the real server's release: Valkey 9 answers
    // `DELIFEQ`, Valkey 8.1 knows no such command, and both sides must agree.
    let identity = binaries.identity();
    let (flavour, label) = if identity.version.major >= 9 {
        (Flavour::Valkey91, "Valkey 9.1")
    } else {
        (Flavour::Valkey81, "Valkey 8.1")
    };
    let real = start_server(&binaries);
    for (name, steps) in valkey_sequences() {
        let expected = real_replies(real.port(), &steps);
        let actual = sim_replies(&steps, flavour);
        assert_eq!(
            actual,
            expected,
            "sequence {name:?} differs (left: sim as {label}, right: {identity} at {})",
            binaries.server().display()
        );
    }
}
