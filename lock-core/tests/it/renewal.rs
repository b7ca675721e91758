//! The watchdog keeps a lock alive past its ttl, and the key never lapses.

#![cfg(feature = "redis")]

use crate::support;

use std::time::Duration;

use lock_core::{LockOptions, Locker};

#[tokio::test]
async fn watchdog_holds_a_lock_four_times_its_ttl() {
    let server = support::RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let opts = LockOptions::new(Duration::from_secs(1));
    let guard = locker.acquire("renewal", &opts).await.expect("acquire");
    let first_deadline = guard.valid_until().expect("held");

    let started = tokio::time::Instant::now();
    while started.elapsed() < Duration::from_secs(4) {
        let pttl = support::pttl(&server, "{lock:renewal}");
        assert!(pttl > 0, "the key lapsed while held (PTTL {pttl})");
        assert!(guard.is_held());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let deadline = guard.valid_until().expect("still held");
    assert!(
        deadline > first_deadline + Duration::from_secs(3),
        "renewals moved the deadline"
    );
    guard.release().await.expect("release");
    assert_eq!(
        support::pttl(&server, "{lock:renewal}"),
        -2,
        "release deletes the key"
    );
}
