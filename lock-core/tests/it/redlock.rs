//! Redlock against three real `redis-server` processes: acquire, renew and
//! release reach every node; a majority keeps the lock through a minority
//! kill; losing the majority loses the lock.
//!
//! An acquire returns once a majority granted and a release once a
//! majority deleted: the last node's answer may come after. So right after
//! either, the tests check the majority exactly and the last node with
//! [`eventually`].

#![cfg(feature = "redis")]

use crate::support;

use std::time::Duration;

use lock_core::{ConnectError, LockOptions, Locker, LockerBuilder, LostReason};
use support::RedisServer;

const KEY: &str = "{lock:orders}";

fn three() -> [RedisServer; 3] {
    [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ]
}

/// How long the last node gets to answer: the command timeout of the
/// options below (renew_every / 2 = 150 ms) with room to spare.
const LAST_NODE: Duration = Duration::from_secs(2);

/// Polls `check` every 5 ms until it holds or `within` has passed; returns
/// whether it held.
async fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if check() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// How many of `servers` hold `token` at `KEY` now.
fn holding(servers: &[RedisServer], token: Option<&str>) -> usize {
    servers
        .iter()
        .filter(|server| support::get(server, KEY).as_deref() == token)
        .count()
}

async fn connect(servers: &[RedisServer]) -> Locker {
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    Locker::connect_redlock(&urls).await.expect("connect")
}

#[tokio::test]
async fn acquire_renew_and_release_reach_every_node() {
    let servers = three();
    let locker = connect(&servers).await;
    let opts = LockOptions::new(Duration::from_millis(900));
    let guard = locker.acquire("orders", &opts).await.expect("acquire");
    let token = Some(guard.token());
    assert!(holding(&servers, token) >= 2, "a majority holds the token");
    assert!(
        eventually(LAST_NODE, || holding(&servers, token) == 3).await,
        "every node holds the same token"
    );
    assert!(guard.fence() >= 1);

    // Three renewals' worth (every 300 ms): the keys stay and the deadline
    // moves on.
    let first = guard.valid_until().expect("held");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert!(guard.is_held(), "renewed past its first ttl");
    assert!(guard.valid_until().expect("held") > first);
    for server in &servers {
        let pttl = support::pttl(server, KEY);
        assert!(pttl > 300, "renewed on every node: pttl {pttl}");
    }

    guard.release().await.expect("release");
    assert!(holding(&servers, None) >= 2, "released on a majority");
    assert!(
        eventually(LAST_NODE, || holding(&servers, None) == 3).await,
        "released on every node"
    );
}

#[tokio::test]
async fn a_minority_held_elsewhere_still_grants_a_majority_does_not() {
    let servers = three();
    let locker = connect(&servers).await;
    let opts = LockOptions::new(Duration::from_millis(900)).wait(Duration::ZERO);

    servers[0].cmd(&["SET", KEY, "someone-else", "PX", "60000"]);
    let guard = locker
        .try_acquire("orders", &opts)
        .await
        .expect("no error")
        .expect("two of three is a majority");
    assert_eq!(
        support::get(&servers[0], KEY).as_deref(),
        Some("someone-else")
    );
    guard.release().await.expect("release");

    servers[1].cmd(&["SET", KEY, "someone-else", "PX", "60000"]);
    let refused = locker.try_acquire("orders", &opts).await.expect("no error");
    assert!(refused.is_none(), "one of three is not a majority");
    assert_eq!(
        support::get(&servers[2], KEY),
        None,
        "the failed round was undone on the node that granted it"
    );
}

#[tokio::test]
async fn killing_a_minority_keeps_the_lock_killing_a_majority_loses_it() {
    let mut servers = three();
    let locker = connect(&servers).await;
    let opts = LockOptions::new(Duration::from_millis(900));
    let guard = locker.acquire("orders", &opts).await.expect("acquire");

    servers[0].kill();
    // Several renewals after the kill, the other two still renew it.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(guard.is_held(), "two of three keep the lock");
    for server in &servers[1..] {
        assert_eq!(support::get(server, KEY).as_deref(), Some(guard.token()));
    }

    servers[1].kill();
    let reason = tokio::time::timeout(Duration::from_millis(1_500), guard.lost())
        .await
        .expect("lost() resolves within one ttl of losing the majority");
    assert_eq!(reason, LostReason::Expired);
    assert!(!guard.is_held());
}

/// A round grants as soon as a majority holds the lock, without waiting
/// for a slow node; the slow node's grant joins the lock when it comes and
/// is renewed with the others, so the lock survives losing one of the
/// nodes that answered first.
#[tokio::test]
async fn a_slow_node_s_grant_joins_the_lock() {
    let mut servers = three();
    let locker = connect(&servers).await;
    // 300 ms leaves the acquire and the check below plenty of time to run
    // within the pause. Redis ends a pause on its next cron tick (every
    // 100 ms), so it lasts up to 400 ms: the command timeout leaves room.
    let opts =
        LockOptions::new(Duration::from_millis(900)).command_timeout(Duration::from_millis(600));
    servers[2].query::<()>(&["CLIENT", "PAUSE", "300", "WRITE"]);
    let guard = locker.acquire("orders", &opts).await.expect("acquire");
    assert_eq!(
        support::get(&servers[2], KEY),
        None,
        "the grant came from the first two nodes, before the paused one set the key"
    );
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert_eq!(
        support::get(&servers[2], KEY).as_deref(),
        Some(guard.token()),
        "the paused node's grant joined the lock"
    );
    assert!(
        support::pttl(&servers[2], KEY) > 300,
        "the slow node's grant is renewed with the others"
    );
    servers[0].kill();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(guard.is_held(), "the second and third node keep the lock");
}

#[tokio::test]
async fn connecting_needs_a_majority() {
    let mut servers = three();
    servers[0].kill();
    // One of three down: connects, and the lock works on the other two.
    let locker = connect(&servers).await;
    let opts = LockOptions::new(Duration::from_millis(900));
    let guard = locker.acquire("orders", &opts).await.expect("acquire");
    guard.release().await.expect("release");

    servers[1].kill();
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let error = LockerBuilder::redlock(&urls)
        .expect("urls parse")
        .connect_timeout(Duration::from_secs(1))
        .connect()
        .await
        .expect_err("one of three is not a majority");
    assert!(
        matches!(
            error,
            ConnectError::NoQuorum {
                connected: 1,
                needed: 2,
                ..
            }
        ),
        "{error}"
    );
    assert!(matches!(
        LockerBuilder::redlock(&[]),
        Err(ConnectError::NoNodes)
    ));
}
