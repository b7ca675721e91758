//! The Sentinel topology and stale primaries: the simulated sentinels name
//! the primary from the world's record, lock-core's Sentinel mode follows
//! their announcements, and a failover that leaves the old primary up and
//! writable (its stale window) makes two holders without `WAIT`, and with
//! it while the other replica still follows the old primary.

use crate::common;

use std::collections::BTreeSet;

use sim::{
    config::{FaultKind, Property, Scenario, Topology},
    history::Op,
    world,
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
    // The old primary is never demoted within the run and no sentinel lags
    // another's hello: the others name the new primary once the promotion
    // shows (1 s after it), the leader at the failover's end (2 s after).
    // Only the announcement (or asking the sentinels again) can move the
    // clients off the old primary.
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
            .filter(|entry| entry.at >= common::ms(5_500))
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
        // Until the sentinels name the new primary the clients still work
        // on the old one, which the oracle no longer counts: the stale
        // window's S2 and S5 (and S1, when it crosses a move) are expected
        // there, and nothing else.
        common::assert_only(
            &outcome,
            &[
                Property::NoOrphans,
                Property::ServerOracle,
                Property::OwnerOnly,
                Property::LeaseExclusion,
            ],
        );
    }
}

#[test]
fn wait_closes_the_stale_window_when_every_replica_moves_at_the_promotion() {
    // Without Sentinel (an operator's `REPLICAOF`), the other replica is
    // re-pointed at the promotion: the old primary has none left at once.
    common::assert_stale_window_pair("failover-stale-primary", "failover-stale-primary-wait", 12);
}

#[test]
fn under_sentinel_the_replica_not_yet_re_pointed_lets_a_wait_pass_on_the_old_primary() {
    // Sentinel re-points the other replica a second after the promotion;
    // until then it acknowledges the old primary's `WAIT`s. A hold granted
    // there inside that second, which the new primary never had, overlaps
    // a hold the new primary grants. (Other seeds break lease exclusion
    // later, by clients still talking to the deposed primary: the search
    // looks for this sequence, not for the first violation.)
    let scenario = load("sentinel-stale-primary-wait");
    let found =
        (0..200).find(|&seed| wait_passed_on_the_old_primary(&world::run_seed(&scenario, seed)));
    assert!(
        found.is_some(),
        "no seed of 200 breaks lease exclusion through a WAIT passed on the old primary"
    );
}

/// Whether `outcome` broke lease exclusion with a hold granted within a
/// second of the failover that the new primary never held, while the old
/// primary's `WAIT`s came up short afterwards.
fn wait_passed_on_the_old_primary(outcome: &sim::outcome::SeedOutcome) -> bool {
    let Some(violation) = outcome
        .verdict
        .violations
        .iter()
        .find(|v| v.property == Property::LeaseExclusion)
    else {
        return false;
    };
    let entries = &outcome.history.entries;
    let Some((failover_at, new_primary)) = entries.iter().find_map(|entry| match &entry.op {
        Op::Failover { new_primary, .. } => Some((entry.at, *new_primary)),
        _ => None,
    }) else {
        return false;
    };
    let first = &entries[violation.evidence[0]];
    let Op::AcquireOk { token, .. } = &first.op else {
        panic!("evidence starts at a grant: {first:?}");
    };
    let in_window = failover_at <= first.at && first.at <= failover_at + common::ms(1_000);
    let on_new = entries.iter().any(|entry| {
        matches!(&entry.op, Op::Oracle { primary, owner: Some(owner), .. }
            if *primary == new_primary && owner == token)
    });
    in_window
        && !on_new
        && outcome
            .verdict
            .facts
            .contains("wait-short-on-deposed-primary")
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
        common::assert_replays_exactly(name, &[1, 2]);
    }
}
