//! A waiter is woken by the release's announcement after a failover too.
//! The old primary dies silently (no FIN, no reset), so the pub/sub
//! connection the waiters listen on stays open to a dead node; unless the
//! adapter notices, every release after the failover is announced on the
//! new primary to nobody, and each waiter is granted only at its backoff
//! retry (`lock-core`'s `background/pubsub.rs`, module docs).

use std::time::Duration;

use crate::common;

use sim::{
    config::FaultKind,
    history::{Op, Process},
    world,
};

/// The gaps between a release and the next grant to a client that was
/// already waiting when it came, by the release's instant.
fn handoffs(history: &sim::history::History) -> Vec<(Duration, Duration)> {
    let mut waiting: Vec<Option<Duration>> = vec![None; 2];
    let mut last_release: Option<(Duration, Process)> = None;
    let mut gaps = Vec::new();
    for entry in &history.entries {
        let Process::Client(client) = entry.process else {
            continue;
        };
        match &entry.op {
            Op::Waiting => waiting[client] = Some(entry.at),
            Op::ReleaseOk { .. } => last_release = Some((entry.at, entry.process)),
            Op::AcquireOk { .. } => {
                if let (Some(since), Some((released, by))) = (waiting[client], last_release)
                    && by != entry.process
                    && since < released
                {
                    gaps.push((released, entry.at - released));
                }
                waiting[client] = None;
                last_release = None;
            }
            _ => {}
        }
    }
    gaps
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort_unstable();
    values[values.len() / 2]
}

#[test]
fn waiters_are_woken_by_releases_after_a_silent_failover() {
    let mut scenario = common::primary_replica("wakeups-after-failover");
    scenario.topology = sim::config::Topology::PrimaryReplica {
        replicas: 1,
        replication_lag: common::range(1, 2),
    };
    scenario.duration = common::ms(10_000);
    scenario.clients.count = 2;
    scenario.clients.hold = common::range(50, 100);
    scenario.clients.think = common::range(0, 5);
    // The old primary is cut off and crashed at 2 s; the replica serves.
    let schedule = [common::fault(
        FaultKind::Failover,
        2_000,
        "redis:primary",
        None,
    )];
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for seed in 0..8 {
        let outcome = world::run_schedule(&scenario, seed, &schedule);
        for (released, gap) in handoffs(&outcome.history) {
            if released < common::ms(2_000) {
                before.push(gap);
            } else if released > common::ms(5_000) {
                // From 5 s: the dead connection's check (a PING every
                // second, unanswered for the 1 s connect timeout) and the
                // reconnection to the new primary are over.
                after.push(gap);
            }
        }
    }
    // Handed over as often after the failover as before it (per second of
    // each window: 2 s before, 5 s after). Left to its backoff retry, a
    // waiter mostly loses to the holder, which releases and takes the lock
    // again within its 0-5 ms think.
    let rate = |handoffs: &[Duration], window_ms: u32| {
        handoffs.len() as f64 * 1_000.0 / f64::from(window_ms)
    };
    let (rate_before, rate_after) = (rate(&before, 2_000), rate(&after, 5_000));
    assert!(
        before.len() >= 20 && rate_after >= rate_before / 2.0,
        "handoffs per second (8 seeds): {rate_before} before the failover, {rate_after} after"
    );
    // And at once: woken, a waiter is granted a round trip after the
    // release (the announcement, then its SET), a millisecond or so here;
    // at its backoff retry (10-200 ms, doubling), tens of milliseconds.
    let (before, after) = (median(before), median(after));
    assert!(
        after <= before * 2 + common::ms(2),
        "the median handoff took {after:?} after the failover, {before:?} before"
    );
}
