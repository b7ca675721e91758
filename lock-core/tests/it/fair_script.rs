//! The fair lock's script (`src/scripts/fair.lua`) on a real server:
//! grants in arrival order, no newcomer overtakes a live waiter, a dead
//! waiter holds the queue up by its own waiter ttl at most, a release wakes
//! the head of the queue alone. The script comes first: fair mode in the
//! machine and the adapter (issue: the lock family) is built on its replies.
//!
//! Each wait clears the place it waits out, and each place that must still
//! hold has at least 250 ms to spare; no assertion is about speed.

#![cfg(feature = "redis")]

use crate::support;

use std::{thread, time::Duration};

use support::RedisServer;

/// What Redis runs: the family's prelude (the clock, the fence), then the
/// script.
const SCRIPT: &str = concat!(
    include_str!("../../src/scripts/family_prelude.lua"),
    include_str!("../../src/scripts/fair.lua")
);
const KEYS: [&str; 4] = [
    "{fair:job}",
    "{fair:job}:queue",
    "{fair:job}:waiters",
    "{fair}:fence-floor",
];

fn call(server: &RedisServer, args: &[&str]) -> i64 {
    let mut command = vec!["EVAL", SCRIPT, "4"];
    command.extend_from_slice(&KEYS);
    command.extend_from_slice(args);
    server.query(&command)
}

fn acquire(server: &RedisServer, token: &str, waiter_ttl: u64) -> i64 {
    call(server, &["a", token, "10000", &waiter_ttl.to_string()])
}

fn queue(server: &RedisServer) -> Vec<String> {
    server.query(&["ZRANGE", KEYS[1], "0", "-1"])
}

/// A connection for the subscriber (its `PubSub` unsubscribes when dropped,
/// so each test keeps one for as long as it listens).
fn subscriber(server: &RedisServer) -> redis::Connection {
    let client = redis::Client::open(server.url()).expect("a valid url");
    let conn = client.get_connection().expect("a connection");
    conn.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("a timeout");
    conn
}

/// The channels published on until a read times out.
fn woken(pubsub: &mut redis::PubSub<'_>) -> Vec<String> {
    let mut channels = Vec::new();
    while let Ok(message) = pubsub.get_message() {
        channels.push(message.get_channel_name().to_owned());
    }
    channels
}

#[test]
fn waiters_are_granted_in_arrival_order_and_newcomers_queue_behind() {
    let server = RedisServer::start();
    let first = acquire(&server, "a", 10_000);
    assert!(first > 0);
    assert!(acquire(&server, "b", 10_000) < 0);
    assert!(acquire(&server, "c", 10_000) < 0);
    assert_eq!(queue(&server), ["b", "c"]);
    assert_eq!(call(&server, &["d", "a"]), 1);
    // Free, but b is ahead: neither c nor a newcomer is granted.
    let refused = acquire(&server, "c", 10_000);
    assert!((-2 - 10_000..=-2).contains(&refused), "{refused}");
    assert!(acquire(&server, "newcomer", 10_000) < 0);
    assert_eq!(queue(&server), ["b", "c", "newcomer"]);
    let second = acquire(&server, "b", 10_000);
    assert!(second > first, "fences {first}, {second}");
    assert_eq!(call(&server, &["d", "b"]), 1);
    assert!(acquire(&server, "c", 10_000) > second);
}

#[test]
fn a_release_wakes_the_head_of_the_queue_alone() {
    let server = RedisServer::start();
    assert!(acquire(&server, "a", 10_000) > 0);
    assert!(acquire(&server, "b", 10_000) < 0);
    assert!(acquire(&server, "c", 10_000) < 0);
    let mut conn = subscriber(&server);
    let mut subscriber = conn.as_pubsub();
    subscriber
        .psubscribe(format!("{}:released:*", KEYS[0]))
        .expect("psubscribe");
    assert_eq!(call(&server, &["d", "a"]), 1);
    assert_eq!(woken(&mut subscriber), [format!("{}:released:b", KEYS[0])]);
    // The head gives up: the next one is woken.
    assert_eq!(call(&server, &["c", "b"]), 1);
    assert_eq!(woken(&mut subscriber), [format!("{}:released:c", KEYS[0])]);
    assert!(acquire(&server, "c", 10_000) > 0);
}

#[test]
fn a_dead_waiter_holds_the_queue_up_by_its_waiter_ttl_at_most() {
    let server = RedisServer::start();
    assert!(acquire(&server, "a", 10_000) > 0);
    assert!(acquire(&server, "dead", 200) < 0);
    assert!(acquire(&server, "c", 10_000) < 0);
    assert_eq!(call(&server, &["d", "a"]), 1);
    let refused = acquire(&server, "c", 10_000);
    assert!(
        (-2 - 200..=-2).contains(&refused),
        "c is told to come back when dead's place lapses: {refused}"
    );
    thread::sleep(Duration::from_millis(300));
    assert!(acquire(&server, "c", 10_000) > 0, "dead's place lapsed");
    assert_eq!(
        call(&server, &["w", "dead", "200"]),
        0,
        "it must join again"
    );
}

#[test]
fn a_live_waiter_keeps_its_place_by_renewing_it() {
    let server = RedisServer::start();
    assert!(acquire(&server, "a", 10_000) > 0);
    assert!(acquire(&server, "b", 400) < 0);
    assert!(acquire(&server, "c", 10_000) < 0);
    for _ in 0..4 {
        thread::sleep(Duration::from_millis(150));
        assert_eq!(call(&server, &["w", "b", "400"]), 1);
    }
    assert_eq!(call(&server, &["d", "a"]), 1);
    assert!(acquire(&server, "c", 10_000) < 0, "b is still ahead");
    assert!(acquire(&server, "b", 400) > 0);
}

#[test]
fn nothing_is_left_but_the_lock_once_nobody_waits() {
    let server = RedisServer::start();
    assert!(acquire(&server, "a", 10_000) > 0);
    assert!(acquire(&server, "b", 10_000) < 0);
    let pttl: i64 = server.query(&["PTTL", KEYS[1]]);
    assert!(
        (9_000..=10_000).contains(&pttl),
        "the queue lives as long as its latest place: {pttl}"
    );
    assert_eq!(call(&server, &["d", "a"]), 1);
    assert!(acquire(&server, "b", 10_000) > 0);
    let left: i64 = server.query(&["EXISTS", KEYS[1], KEYS[2]]);
    assert_eq!(left, 0);
    assert_eq!(call(&server, &["r", "a", "1000"]), 0, "not a's any more");
    assert_eq!(call(&server, &["r", "b", "1000"]), 1);
}

#[test]
fn a_waiters_release_gives_up_its_place_and_wakes_the_next() {
    let server = RedisServer::start();
    let mut conn = subscriber(&server);
    let mut pubsub = conn.as_pubsub();
    pubsub
        .subscribe(&["{fair:job}:released:b", "{fair:job}:released:c"])
        .expect("subscribe");
    assert!(acquire(&server, "a", 10_000) > 0);
    assert!(acquire(&server, "b", 10_000) < 0);
    assert!(acquire(&server, "c", 10_000) < 0);
    // c gives up with a release: nothing of a's is touched.
    assert_eq!(call(&server, &["d", "c"]), 0, "c held nothing");
    assert_eq!(queue(&server), ["b"]);
    assert_eq!(call(&server, &["d", "a"]), 1);
    assert_eq!(woken(&mut pubsub), ["{fair:job}:released:b"]);
    // b, the head, gives up while the lock is free: the wake-up passes on.
    assert!(acquire(&server, "c", 10_000) < 0, "b is ahead");
    assert_eq!(call(&server, &["d", "b"]), 0);
    assert_eq!(woken(&mut pubsub), ["{fair:job}:released:c"]);
    assert!(acquire(&server, "c", 10_000) > 0);
}
