//! Eviction under memory pressure (`evict` faults): a held lock key that
//! Redis evicts is a second holder waiting to happen, and the checkers must
//! say so; without the fault, nothing is evicted and the same setup is safe.

use crate::common;

use proptest::prelude::*;
use sim::{
    config::{FaultKind, FencingMode, Property},
    history::Op,
    world,
};

const SEED: u64 = 0xE71C;

#[test]
fn an_evicted_held_lock_key_breaks_lease_exclusion() {
    let mut scenario = common::single("eviction");
    scenario.clients.hold = common::range(300, 900);
    let evict = (1_000u64..7_000)
        .prop_map(|at| vec![common::fault(FaultKind::Evict, at, "redis:primary", None)]);
    let (schedule, outcome) =
        common::find_violation(&scenario, SEED, evict, Property::LeaseExclusion, 200);
    assert_eq!(schedule.len(), 1, "{}", common::as_toml(&schedule));
    assert!(
        outcome.verdict.facts.contains("evicted-held-lock-key"),
        "{:?}",
        outcome.verdict.facts
    );
}

#[test]
fn an_eviction_on_the_primary_reaches_the_replica() {
    // The replica is promoted right after the eviction: had the DEL not been
    // replicated, the new primary would still show the evicted owner.
    let mut scenario = common::primary_replica("eviction-replicated");
    scenario.clients.hold = common::range(600, 900);
    scenario.lock.fencing = FencingMode::None;
    let mut checked = 0;
    for at in (1_000..6_000).step_by(250) {
        let schedule = vec![
            common::fault(FaultKind::Evict, at, "redis:primary", None),
            common::fault(FaultKind::Failover, at + 100, "redis:primary", None),
        ];
        let outcome = world::run_schedule(&scenario, SEED + at, &schedule);
        let evicted = outcome.history.entries.iter().find_map(|e| match &e.op {
            Op::Evicted { key, value, .. } if key.ends_with('}') => value.clone(),
            _ => None,
        });
        let Some(evicted) = evicted else { continue };
        let new_owner = outcome.history.entries.iter().find_map(|e| match &e.op {
            Op::Failover { new_owner, .. } => Some(new_owner.clone()),
            _ => None,
        });
        assert_ne!(
            new_owner,
            Some(Some(evicted)),
            "the promoted replica still held the evicted key (eviction at {at} ms)"
        );
        checked += 1;
    }
    assert!(checked > 5, "only {checked} runs evicted a lock key");
}

#[test]
fn without_evictions_the_same_setup_is_safe() {
    let mut scenario = common::single("no-eviction");
    scenario.clients.hold = common::range(300, 900);
    let outcome = world::run_schedule(&scenario, SEED, &[]);
    common::assert_only(&outcome, &[]);
    assert!(
        !outcome
            .history
            .entries
            .iter()
            .any(|e| matches!(e.op, Op::Evicted { .. }))
    );
}
