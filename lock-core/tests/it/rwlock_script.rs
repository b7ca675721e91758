//! The read-write lock's script (`src/scripts/rwlock.lua`) on a real
//! server: readers share, a writer excludes everyone, each reader's lease
//! ends on its own, a waiting writer holds new readers back (writer
//! preference) for at most its intent's short lease, releases by owner
//! only, writers fenced. The script comes first: the machine and guard
//! (issue: the lock family) are built on these replies.
//!
//! Each wait clears the lease it waits out, and each lease that must still
//! hold has at least 250 ms to spare (most several seconds); no assertion
//! is about speed.

#![cfg(feature = "redis")]

use crate::support;

use std::{thread, time::Duration};

use support::RedisServer;

/// What Redis runs: the family's prelude (the clock, the fence), then the
/// script.
const SCRIPT: &str = concat!(
    include_str!("../../src/scripts/family_prelude.lua"),
    include_str!("../../src/scripts/rwlock.lua")
);
const KEYS: [&str; 4] = [
    "{rw:doc}",
    "{rw:doc}:readers",
    "{rw:doc}:intent",
    "{rw}:fence-floor",
];

fn call(server: &RedisServer, args: &[&str]) -> i64 {
    let mut command = vec!["EVAL", SCRIPT, "4"];
    command.extend_from_slice(&KEYS);
    command.extend_from_slice(args);
    server.query(&command)
}

fn read(server: &RedisServer, token: &str, ttl: u64) -> i64 {
    call(server, &["r", token, &ttl.to_string()])
}

fn write(server: &RedisServer, token: &str, ttl: u64, intent_ttl: u64) -> i64 {
    call(
        server,
        &["w", token, &ttl.to_string(), &intent_ttl.to_string()],
    )
}

#[test]
fn readers_share_and_a_writer_waits_for_all_of_them() {
    let server = RedisServer::start();
    assert_eq!(read(&server, "r1", 10_000), 0);
    assert_eq!(read(&server, "r2", 10_000), 0);
    let refused = write(&server, "w", 10_000, 5_000);
    assert!((-2 - 10_000..=-2).contains(&refused), "{refused}");
    assert_eq!(call(&server, &["x", "r1"]), 1);
    assert!(write(&server, "w", 10_000, 5_000) < 0, "r2 still reads");
    assert_eq!(call(&server, &["x", "r2"]), 1);
    assert!(write(&server, "w", 10_000, 5_000) > 0, "no reader left");
}

#[test]
fn a_writer_excludes_readers_and_writers() {
    let server = RedisServer::start();
    let fence = write(&server, "w1", 10_000, 5_000);
    assert!(fence > 0);
    assert!(read(&server, "r", 10_000) < 0);
    assert!(write(&server, "w2", 10_000, 5_000) < 0);
    assert_eq!(call(&server, &["y", "w3"]), 0, "not w3's hold");
    assert_eq!(call(&server, &["y", "w1"]), 1);
    // w2 claimed the intent while it waited: a reader now waits for it.
    assert!(
        read(&server, "r", 10_000) < 0,
        "a waiting writer goes first"
    );
    let next = write(&server, "w2", 10_000, 5_000);
    assert!(next > fence, "fences {fence}, {next}");
}

#[test]
fn a_stream_of_readers_does_not_starve_a_waiting_writer() {
    let server = RedisServer::start();
    assert_eq!(read(&server, "r1", 10_000), 0);
    assert!(write(&server, "w", 10_000, 5_000) < 0, "r1 reads");
    assert!(read(&server, "r2", 10_000) < 0, "held back by w's intent");
    assert_eq!(call(&server, &["x", "r1"]), 1);
    assert!(write(&server, "w", 10_000, 5_000) > 0);
    let intent: i64 = server.query(&["EXISTS", KEYS[2]]);
    assert_eq!(intent, 0, "a grant clears the writer's own intent");
}

#[test]
fn a_dead_waiting_writer_holds_readers_back_for_its_intent_ttl_only() {
    let server = RedisServer::start();
    assert_eq!(read(&server, "r1", 10_000), 0);
    assert!(write(&server, "dead", 10_000, 150) < 0);
    assert!(read(&server, "r2", 10_000) < 0);
    thread::sleep(Duration::from_millis(250));
    assert_eq!(read(&server, "r2", 10_000), 0, "the intent ended");
    // A live waiting writer keeps its intent by renewing it.
    assert!(write(&server, "live", 10_000, 400) < 0);
    for _ in 0..3 {
        thread::sleep(Duration::from_millis(200));
        assert_eq!(call(&server, &["i", "live", "400"]), 1);
    }
    assert!(read(&server, "r3", 10_000) < 0, "still held back");
    assert_eq!(call(&server, &["i", "other", "150"]), 0, "one intent");
    assert_eq!(call(&server, &["z", "live"]), 1, "withdrawn");
    assert_eq!(read(&server, "r3", 10_000), 0);
}

#[test]
fn a_dead_reader_stops_blocking_writers_one_ttl_after_its_last_renewal() {
    let server = RedisServer::start();
    assert_eq!(read(&server, "dead", 100), 0);
    assert_eq!(read(&server, "alive", 400), 0);
    thread::sleep(Duration::from_millis(150));
    assert_eq!(call(&server, &["e", "alive", "2000"]), 1);
    assert_eq!(call(&server, &["e", "dead", "2000"]), 0, "its lease ended");
    thread::sleep(Duration::from_millis(400));
    assert!(write(&server, "w", 10_000, 5_000) < 0, "alive was renewed");
    thread::sleep(Duration::from_millis(2_000));
    assert!(write(&server, "w", 10_000, 5_000) > 0, "both leases ended");
}

#[test]
fn renewals_extend_only_what_is_held() {
    let server = RedisServer::start();
    assert!(write(&server, "w", 300, 5_000) > 0);
    assert_eq!(call(&server, &["f", "other", "300"]), 0);
    assert_eq!(
        call(&server, &["e", "w", "300"]),
        0,
        "a writer is no reader"
    );
    thread::sleep(Duration::from_millis(150));
    assert_eq!(call(&server, &["f", "w", "300"]), 1);
    thread::sleep(Duration::from_millis(200));
    assert!(
        read(&server, "r", 10_000) < 0,
        "the write lease was extended"
    );
}

#[test]
fn nothing_is_left_once_everyone_released() {
    let server = RedisServer::start();
    assert_eq!(read(&server, "r", 10_000), 0);
    assert!(write(&server, "w", 10_000, 5_000) < 0);
    assert_eq!(call(&server, &["x", "r"]), 1);
    assert!(write(&server, "w", 10_000, 5_000) > 0);
    assert_eq!(call(&server, &["y", "w"]), 1);
    let left: i64 = server.query(&["EXISTS", KEYS[0], KEYS[1], KEYS[2]]);
    assert_eq!(left, 0, "only the fence floor stays");
}

#[test]
fn a_waiting_writers_release_withdraws_its_intent_and_nothing_else() {
    let server = RedisServer::start();
    let fence = write(&server, "w1", 10_000, 5_000);
    assert!(fence > 0);
    assert!(write(&server, "w2", 10_000, 5_000) < 0, "w1 holds it");
    assert_eq!(server.query::<String>(&["GET", "{rw:doc}:intent"]), "w2");
    // w2 gives up (its acquire timed out or was dropped): its release
    // deletes no hold, but its intent goes with it.
    assert_eq!(call(&server, &["y", "w2"]), 0, "w2 held nothing");
    assert_eq!(
        server.query::<Option<String>>(&["GET", "{rw:doc}:intent"]),
        None
    );
    assert_eq!(server.query::<String>(&["GET", "{rw:doc}"]), "w1");
    assert_eq!(call(&server, &["y", "w1"]), 1);
    assert_eq!(read(&server, "r", 10_000), 0, "no writer waits any more");
}
