//! The counting semaphore's script (`src/scripts/semaphore.lua`) on a real
//! server: at most N leases, each ending on its own, released by its owner
//! only, fences that only go up, nothing left once nobody holds it, and an
//! error reply that changes nothing. The script comes first: the semaphore's
//! machine and guard (issue: the lock family) are built on these replies.
//!
//! Each wait clears the lease it waits out, and each lease that must still
//! hold has at least 250 ms to spare (most several seconds); no assertion
//! is about speed.

#![cfg(feature = "redis")]

use crate::support;

use std::{thread, time::Duration};

use redis::Value;
use support::RedisServer;

/// What Redis runs: the family's prelude (the clock, the fence), then the
/// script.
const SCRIPT: &str = concat!(
    include_str!("../../src/scripts/family_prelude.lua"),
    include_str!("../../src/scripts/semaphore.lua")
);
const LEASES: &str = "{sem:jobs}";
const FLOOR: &str = "{sem}:fence-floor";

fn acquire(server: &RedisServer, token: &str, ttl_ms: u64, permits: u32) -> i64 {
    server.query(&[
        "EVAL",
        SCRIPT,
        "2",
        LEASES,
        FLOOR,
        "a",
        token,
        &ttl_ms.to_string(),
        &permits.to_string(),
    ])
}

fn renew(server: &RedisServer, token: &str, ttl_ms: u64) -> i64 {
    server.query(&["EVAL", SCRIPT, "1", LEASES, "r", token, &ttl_ms.to_string()])
}

fn release(server: &RedisServer, token: &str) -> i64 {
    server.query(&["EVAL", SCRIPT, "1", LEASES, "d", token])
}

fn holders(server: &RedisServer) -> Vec<String> {
    server.query(&["ZRANGE", LEASES, "0", "-1"])
}

#[test]
fn never_more_than_n_leases_and_the_refusal_says_how_long_to_wait() {
    let server = RedisServer::start();
    let first = acquire(&server, "a", 10_000, 2);
    let second = acquire(&server, "b", 10_000, 2);
    assert!(first > 0 && second > first, "fences {first}, {second}");
    let refused = acquire(&server, "c", 10_000, 2);
    // -2 - the ms until the first lease ends: between 0 and the ttl away.
    assert!(
        (-2 - 10_000..=-2).contains(&refused),
        "a third holder with two permits: {refused}"
    );
    assert_eq!(holders(&server), ["a", "b"]);
}

#[test]
fn only_the_owner_releases_and_a_release_frees_a_permit() {
    let server = RedisServer::start();
    assert!(acquire(&server, "a", 10_000, 1) > 0);
    assert_eq!(release(&server, "c"), 0, "not c's lease");
    assert!(acquire(&server, "c", 10_000, 1) < 0);
    assert_eq!(release(&server, "a"), 1);
    assert_eq!(release(&server, "a"), 0, "released once");
    assert!(acquire(&server, "c", 10_000, 1) > 0);
}

#[test]
fn a_dead_holder_stops_counting_one_ttl_after_its_grant_whatever_the_others_do() {
    let server = RedisServer::start();
    assert!(acquire(&server, "dead", 100, 2) > 0);
    assert!(acquire(&server, "alive", 10_000, 2) > 0);
    assert!(acquire(&server, "late", 10_000, 2) < 0, "both permits held");
    thread::sleep(Duration::from_millis(200));
    // The live holder's renewal keeps the set alive, not the dead lease.
    assert_eq!(renew(&server, "alive", 10_000), 1);
    assert!(
        acquire(&server, "late", 10_000, 2) > 0,
        "the dead lease ended"
    );
    assert_eq!(renew(&server, "dead", 10_000), 0, "an ended lease is lost");
    assert_eq!(holders(&server), ["alive", "late"]);
}

#[test]
fn a_renewal_extends_only_its_own_lease() {
    let server = RedisServer::start();
    assert!(acquire(&server, "a", 400, 1) > 0);
    thread::sleep(Duration::from_millis(150));
    assert_eq!(renew(&server, "a", 2_000), 1);
    thread::sleep(Duration::from_millis(400));
    assert!(
        acquire(&server, "b", 1_000, 1) < 0,
        "a's lease was extended"
    );
    assert_eq!(renew(&server, "b", 1_000), 0, "b holds nothing to renew");
}

#[test]
fn a_retry_by_a_holder_keeps_its_one_permit_and_gets_a_new_fence() {
    let server = RedisServer::start();
    let first = acquire(&server, "a", 10_000, 1);
    let again = acquire(&server, "a", 10_000, 1);
    assert!(again > first, "fences {first}, {again}");
    assert_eq!(holders(&server), ["a"]);
}

#[test]
fn nothing_is_left_once_nobody_holds_it() {
    let server = RedisServer::start();
    assert!(acquire(&server, "a", 1_000, 2) > 0);
    assert!(acquire(&server, "b", 10_000, 2) > 0);
    let pttl: i64 = server.query(&["PTTL", LEASES]);
    assert!(
        (9_000..=10_000).contains(&pttl),
        "the set lives as long as its latest lease: {pttl}"
    );
    assert_eq!(release(&server, "b"), 1);
    let pttl: i64 = server.query(&["PTTL", LEASES]);
    assert!((0..=1_000).contains(&pttl), "now as long as a's: {pttl}");
    thread::sleep(Duration::from_millis(1_200));
    let exists: i64 = server.query(&["EXISTS", LEASES]);
    assert_eq!(exists, 0);
}

#[test]
fn a_key_of_another_type_is_an_error_that_changes_nothing() {
    let server = RedisServer::start();
    let _: String = server.query(&["SET", LEASES, "not a sorted set"]);
    let reply =
        server.try_query::<Value>(&["EVAL", SCRIPT, "2", LEASES, FLOOR, "a", "a", "1000", "1"]);
    let error = reply.expect_err("WRONGTYPE on the leases key");
    assert!(error.to_string().contains("WRONGTYPE"), "{error}");
    let _: String = server.query(&["DEL", LEASES]);
    // A floor of the wrong type fails the grant, and undoes it.
    let _: i64 = server.query(&["LPUSH", FLOOR, "x"]);
    let reply =
        server.try_query::<Value>(&["EVAL", SCRIPT, "2", LEASES, FLOOR, "a", "a", "1000", "1"]);
    assert!(reply.is_err(), "{reply:?}");
    assert_eq!(holders(&server), Vec::<String>::new());
}
