//! Faults of the Redis server itself: a frozen server, a restart that loses
//! the dataset, and a failover that loses an unreplicated lock key.

#![cfg(feature = "redis")]

use crate::support;

use std::time::Duration;

use lock_core::{AcquireError, LockOptions, Locker, LostReason};

/// The loss signal must beat the server's own expiry: validity ends
/// ttl × drift_factor + 2 ms before the key can expire, so a generous drift
/// factor gives the test room for scheduler noise without weakening it.
#[tokio::test]
async fn frozen_server_means_lost_before_the_key_can_expire() {
    let server = support::RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let ttl = Duration::from_millis(1_000);
    let opts = LockOptions::new(ttl).drift_factor(0.1);
    let guard = locker.acquire("frozen", &opts).await.expect("acquire");

    server.pause();
    // Renewals from here on go unanswered, so this is the last deadline.
    let valid_until = guard.valid_until().expect("held");
    let reason = tokio::time::timeout(ttl * 2, guard.lost())
        .await
        .expect("lost() resolves while the server is frozen");
    let lost_at = tokio::time::Instant::now().into_std();
    assert_eq!(reason, LostReason::Expired);
    assert!(!guard.is_held());
    // valid_until = last successful send + ttl − (100 ms + 2 ms); the key
    // cannot expire before that send + ttl. Allow 50 ms of scheduler lag.
    assert!(
        lost_at <= valid_until + Duration::from_millis(50),
        "lost {:?} after the deadline",
        lost_at.saturating_duration_since(valid_until)
    );
    tokio::time::sleep(ttl).await;
    server.resume();

    // The locker reconnects and works again.
    let opts = opts.wait(Duration::from_secs(5));
    let next = locker
        .acquire("frozen", &opts)
        .await
        .expect("works after SIGCONT");
    assert!(next.fence() > 0);
    next.release().await.expect("release");
}

#[tokio::test]
async fn restart_without_persistence_is_reported_lost() {
    let mut server = support::RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let opts = LockOptions::new(Duration::from_millis(900)).wait(Duration::from_secs(5));
    let guard = locker.acquire("restart", &opts).await.expect("acquire");

    server.restart();
    let reason = tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("lost() resolves after the restart");
    // Either the renewal found the key gone, or it never got through in time.
    assert!(
        matches!(reason, LostReason::NotOwner | LostReason::Expired),
        "{reason:?}"
    );
    let again = locker
        .acquire("restart", &opts)
        .await
        .expect("acquire after restart");
    again.release().await.expect("release");
}

/// Cuts the replication link, acquires on the primary (so the key never
/// reaches the replica), kills the primary, promotes the replica and
/// acquires there.
async fn failover_with(opts: &LockOptions) -> (Result<lock_core::LockGuard, AcquireError>, bool) {
    let mut primary = support::RedisServer::start();
    let (replica, link) = support::RedisServer::replica_via(&primary);
    link.drop_everything();
    let first = Locker::connect(&primary.url())
        .await
        .expect("connect primary");
    let granted = first.acquire("failover", opts).await;
    let Ok(holder) = granted else {
        return (granted, false);
    };
    primary.kill();
    replica.promote();
    let second = Locker::connect(&replica.url())
        .await
        .expect("connect promoted replica");
    let result = second
        .acquire("failover", &opts.clone().wait(Duration::ZERO))
        .await;
    let both_hold = result.is_ok() && holder.is_held();
    (result, both_hold)
}

#[tokio::test]
async fn failover_without_wait_grants_the_lock_twice() {
    let opts = LockOptions::new(Duration::from_secs(5));
    let (second, both_hold) = failover_with(&opts).await;
    assert!(
        second.is_ok(),
        "the promoted replica never saw the key: {second:?}"
    );
    assert!(
        both_hold,
        "two holders at once: async replication lost the lock"
    );
}

#[tokio::test]
async fn wait_replicas_refuses_an_unreplicated_grant() {
    let opts =
        LockOptions::new(Duration::from_secs(5)).wait_replicas(1, Duration::from_millis(200));
    let (first, _) = failover_with(&opts).await;
    assert_eq!(
        first.expect_err("the stopped replica cannot acknowledge"),
        AcquireError::NotReplicated {
            acked: 0,
            wanted: 1
        }
    );
}

#[tokio::test]
async fn wait_replicas_grants_once_a_replica_acknowledges() {
    let primary = support::RedisServer::start();
    let replica = support::RedisServer::replica_of(&primary);
    let locker = Locker::connect(&primary.url()).await.expect("connect");
    let opts =
        LockOptions::new(Duration::from_secs(5)).wait_replicas(1, Duration::from_millis(500));
    let guard = locker
        .acquire("replicated", &opts)
        .await
        .expect("one replica acknowledges");
    assert_eq!(
        support::get(&replica, "{lock:replicated}").as_deref(),
        Some(guard.token()),
        "the key reached the replica before the grant"
    );
    guard.release().await.expect("release");
}
