//! The Sentinel topology and stale primaries: the simulated sentinels name
//! the primary from the world's record, lock-core's Sentinel mode follows
//! their announcements, and a failover that leaves the old primary up and
//! writable (its stale window) makes two holders without `WAIT` and none
//! with it.

use crate::common;

use std::collections::BTreeSet;

use sim::{
    config::{FaultKind, Property, Scenario, Topology},
    history::Op,
    world::{self, WorldOptions},
};

use crate::common::load;

/// Two replicas, three sentinels that all adopt a failover at once.
fn sentinel(name: &str) -> Scenario {
    Scenario {
        topology: Topology::Sentinel {
            replicas: 2,
            sentinels: 3,
            replication_lag: common::range(1, 20),
            sentinel_lag: common::range(0, 0),
        },
        ..common::single(name)
    }
}

#[test]
fn clients_follow_the_announced_primary() {
    // The old primary is never demoted within the run and every sentinel
    // names the new one at once: only the announcement (or asking the
    // sentinels again) can move the clients off the old primary.
    let scenario = sentinel("sentinel-follow");
    let schedule = vec![common::fault(
        FaultKind::Failover,
        3_000,
        "redis:primary",
        Some(60_000),
    )];
    for seed in 0..4 {
        let outcome = world::run_schedule(&scenario, seed, &schedule);
        let entries = &outcome.history.entries;
        let new_primary = entries
            .iter()
            .find_map(|entry| match &entry.op {
                Op::Failover { new_primary, .. } => Some(*new_primary),
                _ => None,
            })
            .expect("a failover happened");
        assert_ne!(new_primary, 0);
        let on_new: BTreeSet<&str> = entries
            .iter()
            .filter_map(|entry| match &entry.op {
                Op::Oracle {
                    primary,
                    owner: Some(owner),
                    ..
                } if *primary == new_primary => Some(owner.as_str()),
                _ => None,
            })
            .collect();
        let late: Vec<&str> = entries
            .iter()
            .filter(|entry| entry.at >= common::ms(3_500))
            .filter_map(|entry| match &entry.op {
                Op::AcquireOk { token, .. } => Some(token.as_str()),
                _ => None,
            })
            .collect();
        assert!(late.len() > 3, "seed {seed}: clients kept working");
        for token in late {
            assert!(
                on_new.contains(token),
                "seed {seed}: the grant {token} after the failover is not on the new primary redis-{new_primary}"
            );
        }
        common::assert_only(&outcome, &[Property::NoOrphans]);
    }
}

#[test]
fn the_stale_window_makes_two_holders_without_wait_and_none_with_it() {
    common::assert_stale_window_pair("sentinel-stale-primary", "sentinel-stale-primary-wait", 12);
}

#[test]
fn a_primary_replica_stale_window_catches_the_double_holder_at_ttl_5s() {
    // ttl 5 s, a renewal every second: without a stale window the old
    // primary dies and this setup almost never fails.
    let scenario = load("failover-stale-primary");
    assert_eq!(scenario.lock.ttl, common::ms(5_000));
    let caught = (0..6)
        .map(|seed| world::run_seed(&scenario, seed))
        .find(|outcome| {
            outcome
                .verdict
                .violated()
                .contains(&Property::LeaseExclusion)
        });
    let outcome = caught.expect("some seed of 6 breaks lease exclusion");
    assert!(
        outcome.verdict.facts.contains("grant-on-deposed-primary"),
        "{:?}",
        outcome.verdict.facts
    );
}

#[test]
fn sentinel_runs_replay_exactly_with_skipping_on_and_off() {
    for name in ["sentinel-stale-primary", "sentinel-stale-primary-wait"] {
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
