//! Redlock against three real `redis-server` processes: acquire, renew and
//! release reach every node; a majority keeps the lock through a minority
//! kill; losing the majority loses the lock.

#![cfg(feature = "redis")]

mod support;

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
    for server in &servers {
        assert_eq!(
            support::get(server, KEY).as_deref(),
            Some(guard.token()),
            "every node holds the same token"
        );
    }
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
    for server in &servers {
        assert_eq!(support::get(server, KEY), None, "released on every node");
    }
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

/// A round waits for a slow node's answer (within the command timeout)
/// rather than settling for the first majority: the slow node's grant is
/// part of the lock from the start and is renewed with the others, so the
/// lock survives losing one of the nodes that answered first.
#[tokio::test]
async fn a_slow_node_s_grant_is_part_of_the_lock() {
    let mut servers = three();
    let locker = connect(&servers).await;
    // Command timeout 150 ms (renew_every / 2): the slow answer comes well
    // within it.
    let opts = LockOptions::new(Duration::from_millis(900));
    servers[2].query::<()>(&["CLIENT", "PAUSE", "60", "WRITE"]);
    let guard = locker.acquire("orders", &opts).await.expect("acquire");
    assert_eq!(
        support::get(&servers[2], KEY).as_deref(),
        Some(guard.token()),
        "the round waited for the paused node"
    );
    tokio::time::sleep(Duration::from_millis(1_200)).await;
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
