//! The lock over a real Sentinel group (one primary, one replica, three
//! sentinels), through failovers, with `wait_replicas 1`: there is never a
//! double holder, waiters get the lock within the ttl plus a few seconds,
//! and fences keep increasing.
#![cfg(feature = "redis")]

use crate::support;

use std::time::{Duration, Instant};

use lock_core::{LockOptions, Locker};
use support::{
    sentinel::{SentinelGroup, SentinelSetup},
    workload::{self, Step, Workload},
};

/// Four tasks over two lockers contend for one key, each holding it ~40 ms.
async fn contend(urls: &[String], opts: &LockOptions) -> Workload {
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let mut lockers = Vec::new();
    for _ in 0..2 {
        lockers.push(
            Locker::connect_sentinel(&urls, support::sentinel::MASTER_NAME)
                .await
                .expect("connect through the sentinels"),
        );
    }
    workload::contend(&lockers, "failover", opts, Duration::from_millis(20))
}

fn options() -> LockOptions {
    // A wide drift margin, so a holder that learns of its loss late on a
    // busy machine is still out before the key can expire.
    LockOptions::new(Duration::from_secs(2))
        .renew_every(Duration::from_millis(500))
        .drift_factor(0.1)
        .wait(Duration::from_secs(10))
        .wait_replicas(1, Duration::from_millis(200))
}

/// Two replicas, so that after a failover the new primary still has one
/// and `WAIT 1` can succeed (with one, it has none until the old primary
/// rejoins as its replica, about ten seconds later).
fn two_replicas() -> SentinelSetup {
    SentinelSetup {
        down_after: Duration::from_millis(1000),
        replicas: 2,
        ..SentinelSetup::default()
    }
}

/// The grant times among `steps`.
fn grant_times(steps: &[Step]) -> Vec<Instant> {
    workload::grants(steps).map(|(at, _)| at).collect()
}

/// The longest time without a grant after `since`.
fn longest_gap_after(grants: &[Instant], since: Instant) -> Duration {
    grants
        .windows(2)
        .filter(|pair| pair[1] >= since)
        .map(|pair| pair[1].saturating_duration_since(pair[0]))
        .max()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_failover_never_makes_two_holders() {
    let group = SentinelGroup::start_with(&two_replicas());
    let old = group.master_port();
    let work = contend(&group.sentinel_urls(), &options()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let failed_over_at = Instant::now();
    let new = tokio::task::spawn_blocking(move || {
        let new = group.failover();
        (group, new)
    })
    .await
    .expect("failover");
    let (group, new) = new;
    assert_ne!(old, new, "the sentinels named a new primary");
    tokio::time::sleep(Duration::from_secs(6)).await;
    let grants = grant_times(&work.finish().await);
    let after: Vec<&Instant> = grants.iter().filter(|at| **at > failed_over_at).collect();
    assert!(
        after.len() >= 5,
        "the lock keeps being granted after the failover: {} grants",
        after.len()
    );
    let gap = longest_gap_after(&grants, failed_over_at);
    assert!(
        gap < Duration::from_secs(2) + Duration::from_secs(4),
        "waiters got the lock within the ttl plus a few seconds (longest gap {gap:?})"
    );
    drop(group);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_never_makes_two_holders() {
    let mut group = SentinelGroup::start_with(&two_replicas());
    let work = contend(&group.sentinel_urls(), &options()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let killed_at = Instant::now();
    let (group, new) = tokio::task::spawn_blocking(move || {
        let new = group.kill_master();
        (group, new)
    })
    .await
    .expect("kill");
    tokio::time::sleep(Duration::from_secs(6)).await;
    let grants = grant_times(&work.finish().await);
    let gap = longest_gap_after(&grants, killed_at);
    assert!(
        grants
            .iter()
            .any(|at| *at > killed_at + Duration::from_secs(1)),
        "the lock is granted again after the new primary ({new}) takes over"
    );
    assert!(
        gap < Duration::from_secs(2) + Duration::from_secs(5),
        "waiters got the lock within the ttl plus a few seconds (longest gap {gap:?})"
    );
    drop(group);
}
