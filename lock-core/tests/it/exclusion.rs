//! Mutual exclusion on a real Redis: a non-atomic counter stays exact and
//! fences strictly increase across every grant.

#![cfg(feature = "redis")]

use crate::support;

use std::{sync::Arc, time::Duration};

use lock_core::{LockOptions, Locker};
use redis::AsyncCommands;
use tokio::sync::Mutex;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_atomic_counter_is_exact_under_the_lock() {
    let server = support::redis_url_or_spawn();
    let url = server.url();
    let lockers = [
        Locker::connect(&url).await.expect("first locker"),
        Locker::connect(&url).await.expect("second locker"),
    ];
    let client = redis::Client::open(url.as_str()).expect("a valid url");
    let mut setup = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let _: () = setup
        .set("exclusion:counter", 0)
        .await
        .expect("reset counter");

    let fences = Arc::new(Mutex::new(Vec::new()));
    let opts = LockOptions::new(Duration::from_secs(2)).wait(Duration::from_secs(30));
    let mut tasks = Vec::new();
    for task in 0..8 {
        let locker = lockers[task % 2].clone();
        let opts = opts.clone();
        let fences = Arc::clone(&fences);
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        tasks.push(tokio::spawn(async move {
            for _ in 0..50 {
                let guard = locker.acquire("exclusion", &opts).await.expect("acquire");
                // Record the fence inside the critical section, so the
                // vector's order is the grant order.
                fences.lock().await.push(guard.fence());
                let value: i64 = conn.get("exclusion:counter").await.expect("get");
                tokio::task::yield_now().await;
                let _: () = conn.set("exclusion:counter", value + 1).await.expect("set");
                assert!(guard.is_held(), "the lock must outlive this short section");
                guard.release().await.expect("release");
            }
        }));
    }
    for task in tasks {
        task.await.expect("worker finished");
    }
    let value: i64 = setup.get("exclusion:counter").await.expect("get");
    assert_eq!(value, 400, "lost updates mean two holders overlapped");
    let fences = fences.lock().await;
    assert_eq!(fences.len(), 400);
    for pair in fences.windows(2) {
        assert!(pair[0] < pair[1], "fences must strictly increase: {pair:?}");
    }
}
