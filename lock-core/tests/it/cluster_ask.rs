//! `ASK` is a one-command detour, not a new owner: while a slot migrates,
//! a lock whose keys already moved keeps working on the importing node
//! (each command sent there right after `ASKING`), a lock whose keys are
//! still on the source keeps working there, and nothing is ever sent to
//! the importing node as if it owned the slot, which would earn a `MOVED`
//! back (the importing node's `errorstat_MOVED` stays at zero). Against a
//! real Redis Cluster; a locker that took `ASK` for `MOVED` loses the moved
//! lock at its deadline and sends the importing node plain commands.
#![cfg(feature = "redis")]

use crate::support;

use std::time::Duration;

use lock_core::{LockOptions, Locker, scripts::KeyNames};
use support::cluster::{Cluster, ClusterNode};

/// How many times `node` answered `code` (`INFO errorstats`).
fn errors(node: &ClusterNode, code: &str) -> u64 {
    let info: String = node.query(&["INFO", "errorstats"]);
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("errorstat_{code}:count=")))
        .map_or(0, |count| count.trim().parse().expect("a count"))
}

/// The keys `node` holds in `slot` (a read that needs no `ASKING`).
fn keys_in_slot(node: &ClusterNode, slot: u16) -> Vec<String> {
    node.query(&["CLUSTER", "GETKEYSINSLOT", &slot.to_string(), "100"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_leaves_the_slot_map_alone_and_both_sides_keep_serving() {
    let cluster = Cluster::start(3, 0);
    let urls = cluster.seed_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let locker = Locker::connect_cluster(&urls).await.expect("connect");
    let opts =
        LockOptions::new(Duration::from_millis(1_500)).renew_every(Duration::from_millis(200));
    // Two locks in one slot: their names repeat one hash tag.
    let (moving, staying) = ("ask-test", "ask-test}:stays");
    let moving_keys = KeyNames::new(opts.key_namespace(), moving);
    let staying_keys = KeyNames::new(opts.key_namespace(), staying);
    let slot = cluster.slot_of(&moving_keys.lock);
    assert_eq!(cluster.slot_of(&staying_keys.lock), slot, "one slot");

    let moved = locker.acquire(moving, &opts).await.expect("acquire");
    let stays = locker.acquire(staying, &opts).await.expect("acquire");
    let source_port = cluster.owner_of_slot(slot).port();
    let target_port = cluster.other_primary(source_port).port();
    let migration = cluster.begin_migration(slot, target_port);
    // The lock key alone: the slot's fence floor, which both locks share,
    // stays on the source (renewals and releases do not touch it).
    migration.move_keys(&[&moving_keys.lock]);
    let (source, target) = (migration.source(), migration.target());
    let asks_before = errors(source, "ASK");

    // Longer than the ttl: only renewals that reach the keys keep both.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert!(moved.is_held(), "the moved lock is renewed through ASK");
    assert!(
        stays.is_held(),
        "the lock left on the source is renewed there"
    );
    // (A renewal succeeds only if it finds its own token: the moved
    // lock's renewals ran on the importing node, where its key is.)
    assert!(keys_in_slot(target, slot).contains(&moving_keys.lock));
    let on_source: Option<String> = source.query(&["GET", &staying_keys.lock]);
    assert_eq!(on_source.as_deref(), Some(stays.token()));

    moved.release().await.expect("release through ASK");
    stays.release().await.expect("release on the source");
    assert!(
        !keys_in_slot(target, slot).contains(&moving_keys.lock),
        "the release reached the importing node"
    );
    assert!(
        errors(source, "ASK") > asks_before,
        "the source sent the moved lock's commands on with ASK"
    );
    assert_eq!(
        errors(target, "MOVED"),
        0,
        "nothing went to the importing node as if it owned the slot"
    );
    migration.finish();
}
