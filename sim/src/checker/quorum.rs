//! Quorum availability (L3): under Redlock, a fault on fewer than a
//! majority of the nodes costs no availability.
//!
//! A Redlock grants, renews and releases on a majority, so a minority of
//! nodes down, cut off or slow changes nothing a client can see: the lock
//! goes from one holder to the next as it would with every node up, and the
//! first grant comes as soon as the clients have connected to a majority.
//! L2 (`availability`) excuses every fault and the start; L3 excuses only
//! what a Redlock cannot ride out: a fault on a client or the storage
//! (a paused or cut-off holder keeps the lock until its ttl), and any time
//! a majority of the nodes is under a fault, each with the liveness bound
//! after it. Nothing excuses the start: a locker that waits for every node
//! to connect (a node cut off at start holds it up for the connect timeout)
//! leaves the lock unheld from the first instant.

use std::time::Duration;

use super::{
    hold::Hold,
    progress::{merged, uncovered},
};
use crate::{
    config::{FaultKind, FaultTarget, Property, Scenario, Topology},
    outcome::{ConcreteFault, Verdict, Violation},
};

/// The longest a Redlock under minority faults may leave the lock unheld:
/// half the ttl. A free lock is taken within a waiter's backoff (at most
/// 200 ms) plus a few rounds, and a holder's think and hold times are the
/// workload's; half a lease is well above that and well below what waiting
/// for a silent node at connect costs (the connect timeout, the ttl here).
pub(super) fn bound(scenario: &Scenario) -> Duration {
    scenario.lock.ttl / 2
}

/// L3 on a Redlock run: outside the excused windows (see the module), no
/// stretch longer than [`bound`] passes with nobody holding the lock.
pub(super) fn quorum_availability(
    scenario: &Scenario,
    schedule: &[ConcreteFault],
    holds: &[Hold],
    verdict: &mut Verdict,
) {
    let Topology::Redlock { nodes } = scenario.topology else {
        return;
    };
    let run_end = scenario.duration;
    let after = scenario.lock.ttl * 2 + Duration::from_secs(1);
    // Each fault's window, with the liveness bound after it (a crash lasts
    // to the end of the run).
    let window = |fault: &ConcreteFault| {
        let end = match fault.kind {
            FaultKind::Crash => run_end,
            _ => fault.at + fault.duration.unwrap_or_default(),
        };
        (fault.at, end.saturating_add(after))
    };
    let mut excused: Vec<(Duration, Duration)> = schedule
        .iter()
        .filter(|fault| !matches!(fault.target, FaultTarget::Redis(_)))
        .map(window)
        .collect();
    let node_windows: Vec<(usize, (Duration, Duration))> = schedule
        .iter()
        .filter_map(|fault| match fault.target {
            FaultTarget::Redis(node) => Some((node, window(fault))),
            _ => None,
        })
        .collect();
    excused.extend(majority_down(&node_windows, nodes / 2 + 1));
    excused.extend(holds.iter().map(|hold| (hold.start, hold.end)));
    let covered = merged(excused);
    let bound = bound(scenario);
    if let Some((from, to)) = uncovered(Duration::ZERO, run_end, &covered)
        .into_iter()
        .find(|(from, to)| to.saturating_sub(*from) > bound)
    {
        verdict.violations.push(Violation {
            property: Property::QuorumAvailability,
            at: from + bound,
            message: format!(
                "nobody held the lock from {from:?} to {to:?}, with fewer than a majority of \
                 the nodes and no client under a fault (bound {bound:?})"
            ),
            evidence: Vec::new(),
        });
    }
}

/// The stretches during which at least `majority` distinct nodes are inside
/// one of their `windows` (node, window).
fn majority_down(
    windows: &[(usize, (Duration, Duration))],
    majority: usize,
) -> Vec<(Duration, Duration)> {
    // Each node's windows merged, so that a node counts once however many
    // of its faults overlap.
    let mut nodes: Vec<usize> = windows.iter().map(|(node, _)| *node).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let mut edges: Vec<(Duration, i32)> = Vec::new();
    for node in nodes {
        let own = windows
            .iter()
            .filter(|(of, _)| *of == node)
            .map(|(_, window)| *window)
            .collect();
        for (start, end) in merged(own) {
            edges.push((start, 1));
            edges.push((end, -1));
        }
    }
    // Ends before starts at one instant: windows that only touch do not
    // overlap.
    edges.sort();
    let mut down = 0;
    let mut since = Duration::ZERO;
    let mut stretches = Vec::new();
    for (at, change) in edges {
        let was = down;
        down += change;
        if was < majority as i32 && down >= majority as i32 {
            since = at;
        } else if was >= majority as i32 && down < majority as i32 {
            stretches.push((since, at));
        }
    }
    stretches
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{checker::HoldEnd, scenario::parse_scenario};

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    /// Five nodes, ttl 2 s (the bound is 1 s), 10 s.
    fn redlock() -> Scenario {
        let text = "name = \"planted\"\ndescription = \"\"\nduration = \"10s\"\nexpect = \"safe\"\n\
                    [topology]\nkind = \"redlock\"\nnodes = 5\n[lock]\nttl = \"2s\"\n";
        parse_scenario("planted.toml", text).expect("a valid scenario")
    }

    fn partition(target: FaultTarget, at: Duration, lasts: Duration) -> ConcreteFault {
        ConcreteFault {
            kind: FaultKind::Partition,
            at,
            target,
            duration: Some(lasts),
            rate: None,
            offset: None,
            delay: None,
        }
    }

    /// Back-to-back holds of 200 ms from `from` to the end of the run.
    fn held_from(from: Duration, run_end: Duration) -> Vec<Hold> {
        let mut holds = Vec::new();
        let mut at = from;
        while at < run_end {
            let end = (at + ms(200)).min(run_end);
            holds.push(Hold {
                client: holds.len() % 3,
                token: format!("t{}", holds.len()),
                fence: 0,
                start: at,
                end,
                ended_by: HoldEnd::Release,
                deadline: at + s(2),
                timer_deadline: at + s(2),
                entry: 0,
                lost_entry: None,
                shared: false,
            });
            at = end;
        }
        holds
    }

    fn broken(scenario: &Scenario, schedule: &[ConcreteFault], holds: &[Hold]) -> bool {
        let mut verdict = Verdict::default();
        quorum_availability(scenario, schedule, holds, &mut verdict);
        verdict.violated().contains(&Property::QuorumAvailability)
    }

    #[test]
    fn a_first_grant_held_up_by_a_minority_cut_at_start_breaks_it() {
        let scenario = redlock();
        let cut = [
            partition(FaultTarget::Redis(3), Duration::ZERO, s(4)),
            partition(FaultTarget::Redis(4), Duration::ZERO, s(4)),
        ];
        // Granted 0.4 s in: within the bound. Granted once the connect
        // timeout (the ttl) has passed: broken, the cut notwithstanding.
        assert!(!broken(&scenario, &cut, &held_from(ms(400), s(10))));
        assert!(broken(&scenario, &cut, &held_from(ms(2_001), s(10))));
    }

    #[test]
    fn a_majority_under_faults_or_a_client_fault_excuses_the_wait() {
        let scenario = redlock();
        let late = held_from(ms(2_001), s(10));
        let majority = [
            partition(FaultTarget::Redis(2), Duration::ZERO, s(4)),
            partition(FaultTarget::Redis(3), Duration::ZERO, s(4)),
            partition(FaultTarget::Redis(4), ms(500), s(4)),
        ];
        // Two nodes cut from 0 and a third from 0.5 s: the first 0.5 s
        // alone is not excused, and 0.5 s is within the bound.
        assert!(!broken(&scenario, &majority, &late));
        let client = [partition(FaultTarget::Client(0), Duration::ZERO, s(1))];
        assert!(!broken(&scenario, &client, &late));
    }

    #[test]
    fn only_a_redlock_is_judged() {
        let mut scenario = redlock();
        scenario.topology = Topology::Single;
        assert!(!broken(&scenario, &[], &held_from(s(5), s(10))));
    }

    #[test]
    fn a_majority_is_down_only_while_enough_distinct_nodes_overlap() {
        // Node 0 twice (overlapping itself), node 1 and node 2 overlapping
        // it from 4 s to 5 s: two distinct nodes from 2 to 3 s and from 4 to
        // 6 s, three from 4 to 5 s.
        let windows = [
            (0, (s(1), s(3))),
            (0, (s(2), s(6))),
            (1, (s(2), s(3))),
            (2, (s(4), s(5))),
            (1, (s(4), s(7))),
        ];
        assert_eq!(majority_down(&windows, 2), vec![(s(2), s(3)), (s(4), s(6))]);
        assert_eq!(majority_down(&windows, 3), vec![(s(4), s(5))]);
        // Windows of two nodes that only touch never overlap.
        assert_eq!(
            majority_down(&[(0, (s(1), s(2))), (1, (s(2), s(3)))], 2),
            Vec::new()
        );
    }
}
