//! The Redis Cluster topology: lock-core's Cluster mode, unchanged, routes
//! by slot through the simulated nodes' redirections. A slot migration
//! moves the lock under its clients without breaking it; a shard failover
//! whose old primary stays up (its stale window) makes two holders without
//! `WAIT` and none with it.

mod common;

use std::collections::BTreeSet;

use sim::{
    config::{FaultKind, Property, Scenario, Topology},
    history::Op,
    world::{self, WorldOptions},
};

use common::load;

/// Three shards with one replica each.
fn cluster(name: &str) -> Scenario {
    Scenario {
        topology: Topology::Cluster {
            shards: 3,
            replicas: 1,
            replication_lag: common::range(1, 20),
        },
        ..common::single(name)
    }
}

/// The owners the oracle saw on `node`.
fn owners_on(entries: &[sim::history::Entry], node: usize) -> BTreeSet<&str> {
    entries
        .iter()
        .filter_map(|entry| match &entry.op {
            Op::Oracle {
                primary,
                owner: Some(owner),
                ..
            } if *primary == node => Some(owner.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn clients_follow_the_lock_slot_to_its_new_shard() {
    // The lock key's slot (3196) starts on redis-0 and moves, key by key,
    // to another shard's primary between 3 s and 3.5 s.
    let scenario = cluster("cluster-follow");
    let schedule = vec![common::fault(
        FaultKind::SlotMigration,
        3_000,
        "redis:primary",
        Some(500),
    )];
    let mut asked = false;
    for seed in 0..4 {
        let outcome = world::run_schedule(&scenario, seed, &schedule);
        let entries = &outcome.history.entries;
        let target = entries
            .iter()
            .find_map(|entry| match &entry.op {
                Op::Oracle { primary, .. } if *primary != 0 => Some(*primary),
                _ => None,
            })
            .expect("the lock key moved");
        assert!([2, 4].contains(&target), "a shard primary: {target}");
        let on_target = owners_on(entries, target);
        let late: Vec<&str> = entries
            .iter()
            .filter(|entry| entry.at >= common::ms(3_600))
            .filter_map(|entry| match &entry.op {
                Op::AcquireOk { token, .. } => Some(token.as_str()),
                _ => None,
            })
            .collect();
        assert!(late.len() > 3, "seed {seed}: clients kept working");
        for token in late {
            assert!(
                on_target.contains(token),
                "seed {seed}: the grant {token} after the migration is not on redis-{target}"
            );
        }
        let facts = &outcome.verdict.facts;
        assert!(facts.contains("answered-moved"), "seed {seed}: {facts:?}");
        asked |= facts.contains("answered-ask") || facts.contains("answered-tryagain");
        common::assert_only(&outcome, &[Property::NoOrphans]);
    }
    assert!(asked, "some migration split the keys under a client");
}

#[test]
fn a_forced_shard_failover_moves_the_clients_to_the_promoted_replica() {
    // No stale window: the old primary answers MOVED at once.
    let scenario = cluster("cluster-forced-failover");
    let schedule = vec![common::fault(
        FaultKind::ShardFailover,
        3_000,
        "redis:primary",
        None,
    )];
    for seed in 0..4 {
        let outcome = world::run_schedule(&scenario, seed, &schedule);
        let entries = &outcome.history.entries;
        assert!(
            entries
                .iter()
                .any(|entry| matches!(entry.op, Op::Failover { new_primary: 1, .. })),
            "seed {seed}: redis-1, redis-0's replica, took over"
        );
        let on_new = owners_on(entries, 1);
        let late = entries
            .iter()
            .filter(|entry| entry.at >= common::ms(3_500))
            .filter_map(|entry| match &entry.op {
                Op::AcquireOk { token, .. } => Some(token.as_str()),
                _ => None,
            });
        let mut count = 0;
        for token in late {
            count += 1;
            assert!(on_new.contains(token), "seed {seed}: {token}");
        }
        assert!(count > 3, "seed {seed}: clients kept working");
        assert!(outcome.verdict.facts.contains("answered-moved"));
    }
}

#[test]
fn the_stale_window_makes_two_holders_without_wait_and_none_with_it() {
    common::assert_stale_window_pair("cluster-shard-failover", "cluster-shard-failover-wait", 8);
}

#[test]
fn cluster_runs_replay_exactly_with_skipping_on_and_off() {
    for name in [
        "cluster-slot-migration",
        "cluster-shard-failover",
        "cluster-shard-failover-wait",
    ] {
        let scenario = load(name);
        for seed in [1, 2] {
            let schedule = world::draw_schedule(&scenario, seed);
            let run = |skip_idle| {
                let options = WorldOptions {
                    skip_idle,
                    ..WorldOptions::default()
                };
                world::run_with(&scenario, seed, &schedule, options)
            };
            let (first, again, stepped) = (run(true), run(true), run(false));
            assert!(first.history.entries.len() > 100, "{name} {seed}");
            assert_eq!(first.history.hash(), again.history.hash(), "{name} {seed}");
            assert_eq!(
                first.history.hash(),
                stepped.history.hash(),
                "{name} {seed}"
            );
        }
    }
}
