//! Dropping things cleans up: a dropped guard releases its key, and a
//! dropped locker's driver stops.

#![cfg(feature = "redis")]

use crate::support;

use std::time::Duration;

use lock_core::{LockOptions, LockerBuilder};

#[tokio::test]
async fn dropped_guard_releases_within_a_second() {
    let server = support::RedisServer::start();
    let locker = lock_core::Locker::connect(&server.url())
        .await
        .expect("connect");
    let opts = LockOptions::new(Duration::from_secs(30));
    let guard = locker.acquire("dropped", &opts).await.expect("acquire");
    assert!(support::get(&server, "{lock:dropped}").is_some());
    drop(guard);
    let started = tokio::time::Instant::now();
    while support::get(&server, "{lock:dropped}").is_some() {
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "key still there after 1 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn dropped_locker_stops_its_driver() {
    let server = support::RedisServer::start();
    let (locker, driver) = LockerBuilder::from_url(&server.url())
        .expect("valid url")
        .connect()
        .await
        .expect("connect");
    let task = tokio::spawn(driver);
    let opts = LockOptions::new(Duration::from_secs(30));
    let guard = locker.acquire("stop", &opts).await.expect("acquire");
    drop(locker);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!task.is_finished(), "a live guard keeps the driver running");
    assert!(guard.is_held());
    drop(guard);
    tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .expect("the driver stops once the locker and its guards are gone")
        .expect("the driver did not panic");
    assert!(
        support::get(&server, "{lock:stop}").is_none(),
        "the guard's release ran first"
    );
}
