//! The lock over a real Redis Cluster: locks spread over every shard, and
//! through `CLUSTER FAILOVER`, a slot migration and `kill -9` of a
//! primary there is never a double holder, fences keep increasing, and
//! wake-ups still arrive.
#![cfg(feature = "redis")]

use crate::support;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use lock_core::{Fencing, LockOptions, Locker};
use support::{
    cluster::Cluster,
    workload::{self, Step, Workload},
};

fn seeds(cluster: &Cluster) -> Vec<String> {
    cluster.seed_urls()
}

async fn connect(cluster: &Cluster) -> Locker {
    let urls = seeds(cluster);
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    Locker::connect_cluster(&urls)
        .await
        .expect("connect to the cluster")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_spread_over_every_shard() {
    let cluster = Cluster::start(3, 0);
    let locker = connect(&cluster).await;
    let opts = LockOptions::new(Duration::from_secs(10));
    let mut guards = Vec::new();
    for index in 0..60 {
        let key = format!("spread:{index}");
        guards.push(locker.acquire(&key, &opts).await.expect("acquire"));
    }
    let mut owners = std::collections::BTreeSet::new();
    for guard in &guards {
        let owner = cluster.owner_of_key(guard.redis_key());
        let held: Option<String> = owner.query(&["GET", guard.redis_key()]);
        assert_eq!(
            held.as_deref(),
            Some(guard.token()),
            "the key is on its slot's owner"
        );
        owners.insert(owner.port());
    }
    assert_eq!(owners.len(), 3, "locks landed on every shard");
    for guard in guards {
        guard.release().await.expect("release");
    }
    // Counter fencing: the counter lives in each lock's slot, so the
    // acquire's script touches one slot, and fences increase per key.
    let counted = opts.clone().fencing(Fencing::Counter);
    for key in ["counted:a", "counted:b", "counted:c"] {
        let first = locker.acquire(key, &counted).await.expect("acquire");
        let first_fence = first.fence();
        first.release().await.expect("release");
        let second = locker.acquire(key, &counted).await.expect("acquire again");
        assert!(second.fence() > first_fence, "fences increase per key");
        second.release().await.expect("release");
    }
}

/// Four tasks over two lockers contend for `key`, each holding it ~40 ms.
/// Their backoff is long (2–3 s), so a quick handoff proves a wake-up.
async fn contend(cluster: &Cluster, key: &'static str, opts: &LockOptions) -> Workload {
    let lockers = [connect(cluster).await, connect(cluster).await];
    workload::contend(&lockers, key, opts, Duration::ZERO)
}

/// The grants after `since`, and the median release-to-grant time among
/// them.
fn alive_after(steps: &[Step], since: Instant) -> (usize, Duration) {
    let mut handoffs = Vec::new();
    let mut grants_after = 0;
    let mut last_release: Option<Instant> = None;
    for step in steps {
        match *step {
            Step::Released { at } => last_release = Some(at),
            Step::Granted { at, .. } if at > since => {
                grants_after += 1;
                if let Some(released) = last_release.filter(|released| *released > since) {
                    handoffs.push(at.saturating_duration_since(released));
                }
            }
            Step::Granted { .. } => {}
        }
    }
    handoffs.sort_unstable();
    let median = handoffs
        .get(handoffs.len() / 2)
        .copied()
        .unwrap_or_default();
    (grants_after, median)
}

fn options() -> LockOptions {
    LockOptions::new(Duration::from_secs(2))
        .renew_every(Duration::from_millis(500))
        // A wide drift margin: a holder that learns of its loss late on a
        // busy machine is still out before the key can expire.
        .drift_factor(0.1)
        .wait(Duration::from_secs(15))
        .retry_delay(Duration::from_secs(2), Duration::from_secs(3))
        .wait_replicas(1, Duration::from_millis(200))
}

/// After a fault: the lock keeps being granted, and handoffs are quick
/// (well under the 2 s backoff), so wake-ups arrive.
fn assert_alive_after((grants, handoff): (usize, Duration)) {
    assert!(
        grants >= 5,
        "the lock keeps being granted after the fault: {grants}"
    );
    assert!(
        handoff < Duration::from_millis(800),
        "waiters are woken (median handoff {handoff:?}, backoff is 2 s)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_failover_never_makes_two_holders() {
    let cluster = Cluster::start(3, 1);
    let key = "cluster-failover";
    let owner = cluster.owner_of_key(&format!("{{lock:{key}}}")).port();
    let work = contend(&cluster, key, &options()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cluster = Arc::new(cluster);
    let failing = Arc::clone(&cluster);
    let at = Instant::now();
    tokio::task::spawn_blocking(move || failing.failover(owner))
        .await
        .expect("failover");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_alive_after(alive_after(&work.finish().await, at));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slot_migration_never_makes_two_holders() {
    let cluster = Cluster::start(3, 1);
    let key = "cluster-migration";
    let lock_key = format!("{{lock:{key}}}");
    let slot = cluster.slot_of(&lock_key);
    let source = cluster.owner_of_key(&lock_key).port();
    let target = cluster.other_primary(source).port();
    let work = contend(&cluster, key, &options()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cluster = Arc::new(cluster);
    let migrating = Arc::clone(&cluster);
    let at = Instant::now();
    tokio::task::spawn_blocking(move || {
        // Step by step, with the lock in use: the keys leave first (ASK),
        // then the slot (MOVED).
        let migration = migrating.begin_migration(slot, target);
        std::thread::sleep(Duration::from_millis(300));
        // The lock key and the namespace's fence floor of that slot.
        migration.move_remaining_keys();
        std::thread::sleep(Duration::from_millis(500));
        migration.finish();
    })
    .await
    .expect("migration");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_alive_after(alive_after(&work.finish().await, at));
    assert_eq!(
        cluster.owner_of_slot(slot).port(),
        target,
        "the slot moved to its target"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_never_makes_two_holders() {
    // Two replicas per shard: the elected one keeps a replica (the other
    // follows it), so WAIT 1 can still succeed. With one, the shard has
    // none left and refuses every grant until a replica joins.
    let cluster = Cluster::start(3, 2);
    let key = "cluster-kill";
    let owner = cluster.owner_of_key(&format!("{{lock:{key}}}")).port();
    let work = contend(&cluster, key, &options()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut cluster = cluster;
    let at = Instant::now();
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.kill_primary(owner);
        cluster
    })
    .await
    .expect("kill");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_alive_after(alive_after(&work.finish().await, at));
    drop(cluster);
}
