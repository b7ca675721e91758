//! A lock taken away behind the holder's back is reported lost, and the old
//! holder's release never touches the new owner's key.

#![cfg(feature = "redis")]

use crate::support;

use std::time::Duration;

use lock_core::{LockOptions, Locker, LostReason, ReleaseError};

#[tokio::test]
async fn overwritten_key_is_lost_at_the_next_renewal() {
    let server = support::RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let opts = LockOptions::new(Duration::from_millis(900));
    let guard = locker.acquire("lost", &opts).await.expect("acquire");

    server.cmd(&["SET", "{lock:lost}", "someone-else", "PX", "60000"]);
    let reason = tokio::time::timeout(Duration::from_millis(900), guard.lost())
        .await
        .expect("lost() resolves by the next renewal (every 300 ms)");
    assert_eq!(reason, LostReason::NotOwner);
    assert!(!guard.is_held());

    let error = guard
        .release()
        .await
        .expect_err("release after loss errors");
    assert_eq!(error, ReleaseError::AlreadyLost(LostReason::NotOwner));
    assert_eq!(
        support::get(&server, "{lock:lost}").as_deref(),
        Some("someone-else"),
        "the new owner's key is untouched"
    );
}

#[tokio::test]
async fn deleted_key_is_lost_and_can_be_taken_again() {
    let server = support::RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let opts = LockOptions::new(Duration::from_millis(900));
    let guard = locker.acquire("gone", &opts).await.expect("acquire");
    server.cmd(&["DEL", "{lock:gone}"]);
    let reason = tokio::time::timeout(Duration::from_millis(900), guard.lost())
        .await
        .expect("lost() resolves by the next renewal");
    assert_eq!(reason, LostReason::NotOwner);
    let next = locker.acquire("gone", &opts).await.expect("free again");
    assert!(
        next.fence() > guard.fence(),
        "a new grant gets a larger fence"
    );
}
