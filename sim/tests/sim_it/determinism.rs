//! The same seed and schedule give the same history, byte for byte.

use crate::common;

use sim::{config::FaultKind, world};

#[test]
fn same_seed_same_history_hash() {
    let scenario = common::primary_replica("determinism");
    let schedule = vec![
        common::fault(FaultKind::Pause, 2_000, "client:0", Some(700)),
        common::fault(FaultKind::Partition, 3_500, "client:1", Some(1_500)),
        common::fault(FaultKind::Failover, 6_000, "redis:primary", None),
    ];
    let first = world::run_schedule(&scenario, 42, &schedule);
    let second = world::run_schedule(&scenario, 42, &schedule);
    assert!(first.history.entries.len() > 50, "the run did something");
    assert_eq!(first.history.hash(), second.history.hash());
    assert_eq!(first.history, second.history);
    let other = world::run_schedule(&scenario, 43, &schedule);
    assert_ne!(
        first.history.hash(),
        other.history.hash(),
        "the seed matters"
    );
}

#[test]
fn redlock_same_seed_same_history_hash() {
    let scenario = common::redlock("determinism-redlock", 3);
    let schedule = vec![
        common::fault(FaultKind::Partition, 1_000, "redis:0", Some(1_500)),
        common::fault(FaultKind::Restart, 3_000, "redis:1", Some(200)),
        common::fault(FaultKind::Pause, 5_000, "client:2", Some(700)),
    ];
    let first = world::run_schedule(&scenario, 7, &schedule);
    let second = world::run_schedule(&scenario, 7, &schedule);
    assert!(first.history.entries.len() > 50, "the run did something");
    assert_eq!(first.history.hash(), second.history.hash());
    assert_eq!(first.history, second.history);
}

#[test]
fn batching_dropping_and_cancelling_clients_replay_exactly() {
    // Several locks per client (group commit), dropped guards and
    // cancelled acquires: the same seed, the same history.
    let mut scenario = common::single("determinism-batches");
    scenario.clients.locks = 3;
    scenario.clients.drop_guard = 0.3;
    scenario.clients.cancel = 0.2;
    let schedule = vec![
        common::fault(FaultKind::PartitionOneway, 1_500, "redis:0", Some(80)),
        common::fault(FaultKind::Pause, 3_000, "client:1", Some(400)),
    ];
    let first = world::run_schedule(&scenario, 11, &schedule);
    let second = world::run_schedule(&scenario, 11, &schedule);
    assert!(
        first.verdict.facts.contains("batched-script-call"),
        "batches ran: {:?}",
        first.verdict.facts
    );
    assert_eq!(first.history.hash(), second.history.hash());
    assert_eq!(first.history, second.history);
}
