//! Overlapping partitions compose as a real network's cuts do: a link
//! stays cut until every fault that cut it has ended. A mix draws
//! partitions at random, so one often ends inside another; before the
//! world counted its cuts, the end of a client's partition healed that
//! client's link to a server still partitioned (`scenarios/README.md`,
//! "Overlapping partitions").

use std::time::Duration;

use crate::common;

use sim::{config::FaultKind, history::Op, world};

/// The instants of `outcome`'s grants and renewals, in seconds.
fn answered_at(outcome: &sim::outcome::SeedOutcome) -> Vec<Duration> {
    outcome
        .history
        .entries
        .iter()
        .filter(|entry| matches!(entry.op, Op::AcquireOk { .. } | Op::Renewed { .. }))
        .map(|entry| entry.at)
        .collect()
}

#[test]
fn a_client_partition_ending_inside_the_servers_leaves_the_server_cut_off() {
    let scenario = common::single("overlapping-partitions");
    // client-0 is cut off from 0.5 s to 2 s, the server from 1 s to 4 s:
    // nobody reaches the server from 1 s to 4 s, client-0 no sooner than
    // anyone else.
    let schedule = [
        common::fault(FaultKind::Partition, 500, "client:0", Some(1_500)),
        common::fault(FaultKind::Partition, 1_000, "redis:0", Some(3_000)),
    ];
    for seed in 0..20 {
        let outcome = world::run_schedule(&scenario, seed, &schedule);
        let answers = answered_at(&outcome);
        let inside: Vec<&Duration> = answers
            .iter()
            .filter(|at| (common::ms(1_010)..common::ms(4_000)).contains(*at))
            .collect();
        assert!(
            inside.is_empty(),
            "seed {seed}: answered while the server was cut off: {inside:?}"
        );
        // Not vacuous: the lock is granted before the cut and after it.
        assert!(
            answers.iter().any(|at| *at < common::ms(1_000)),
            "seed {seed}"
        );
        assert!(
            answers.iter().any(|at| *at > common::ms(4_000)),
            "seed {seed}"
        );
    }
}
