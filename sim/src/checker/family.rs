//! The lock family's own properties, over the holds the history shows: a
//! read-write lock's writer overlaps no other holder, a semaphore never has
//! more than its permits held at one instant, and a fair lock lets no live
//! waiter be overtaken by one that started waiting after it.
//!
//! Each checker is a pure function of the holds (and, for fairness, the
//! waits), so that the kinds' clients only have to say which hold is which;
//! a hold means what it means for the plain lock (`super::holds`): from the
//! grant until the client's belief ended.

use std::{collections::BTreeMap, time::Duration};

use super::{
    hold::{Hold, TICK_SLACK},
    timeline::fault_spans,
};
use crate::{
    config::{Property, Scenario, WorkloadKind},
    history::{History, Op, Process},
    net::BASE_LATENCY,
    outcome::{Verdict, Violation},
};

/// F1: no writer's hold overlaps any other client's hold, reader or
/// writer (the history marks readers' grants `shared`).
pub(super) fn writer_exclusion(holds: &[Hold], verdict: &mut Verdict) {
    let live: Vec<Hold> = holds.iter().filter(|h| h.end > h.start).cloned().collect();
    let shares: Vec<Share> = live
        .iter()
        .map(|h| {
            if h.shared {
                Share::Shared
            } else {
                Share::Exclusive
            }
        })
        .collect();
    let by_entry: BTreeMap<usize, &Hold> = live.iter().map(|h| (h.entry, h)).collect();
    for overlap in exclusive_overlaps(&live, &shares) {
        let (a, b) = (by_entry[&overlap.first], by_entry[&overlap.second]);
        let role = |h: &Hold| if h.shared { "reader" } else { "writer" };
        verdict.violations.push(Violation {
            property: Property::WriterExclusion,
            at: overlap.at,
            message: format!(
                "client-{} ({}) and client-{} ({}) both held the read-write lock from {:?} to {:?}",
                a.client,
                role(a),
                b.client,
                role(b),
                overlap.at,
                a.end.min(b.end)
            ),
            evidence: vec![overlap.first, overlap.second],
        });
    }
}

/// F2: never more than `permits` holds of the semaphore at one instant.
pub(super) fn capacity(holds: &[Hold], permits: u32, verdict: &mut Verdict) {
    let live: Vec<Hold> = holds.iter().filter(|h| h.end > h.start).cloned().collect();
    if let Some((at, grants)) = over_capacity(&live, permits as usize) {
        verdict.violations.push(Violation {
            property: Property::Capacity,
            at,
            message: format!(
                "{} clients held the semaphore at {at:?}, over its {permits} permit(s)",
                grants.len()
            ),
            evidence: grants,
        });
    }
}

/// How far apart two waits must start for the checker to order them: a
/// client records its first refusal when the reply arrives, so the
/// server may have queued it up to a one-way delay earlier, and a tick.
pub(crate) const ORDER_SLACK: Duration =
    Duration::from_millis(2 * BASE_LATENCY.as_millis() as u64 + TICK_SLACK.as_millis() as u64);

/// F3, or the fact it stands for: in fair mode every grant that overtook
/// a live waiter is an `F3` violation; with the plain lock the same
/// overtakings are a fact (`waiter-overtaken`, and their count in the
/// verdict and the run's summary), so a report shows what fair mode buys.
pub(super) fn fairness(scenario: &Scenario, history: &History, verdict: &mut Verdict) {
    let opts = crate::client::lock_options(&scenario.lock);
    // A request sent into a partition is answered by its command timeout,
    // not when the partition heals: the client's absence lasts that long
    // after the fault (the orphans checker's rule too).
    let waits = waits(
        history,
        scenario.duration,
        opts.effective_command_timeout() + ORDER_SLACK,
    );
    // A waiter absent for its waiter ttl less one renewal period (a third
    // of it) may have lost its place.
    let lapse_after = opts.effective_waiter_ttl() * 2 / 3;
    let found = overtakings(
        &waits,
        |entry| history.entries[entry].at,
        lapse_after,
        ORDER_SLACK,
    );
    verdict.overtakings = found.len() as u64;
    if found.is_empty() {
        return;
    }
    if scenario.clients.workload.kind == WorkloadKind::Fair {
        for overtaking in found {
            let waited_since = waits
                .iter()
                .find(|w| {
                    w.client == overtaking.waiter
                        && w.started <= overtaking.at
                        && overtaking.at < w.ended
                })
                .map_or(Duration::ZERO, |w| w.started);
            verdict.violations.push(Violation {
                property: Property::FairOrder,
                at: overtaking.at,
                message: format!(
                    "client-{} was granted the fair lock at {:?} while client-{}, waiting since {waited_since:?} (before it) and live, still waited",
                    overtaking.overtaker, overtaking.at, overtaking.waiter
                ),
                evidence: vec![overtaking.grant],
            });
        }
    } else {
        verdict.facts.insert("waiter-overtaken".to_owned());
    }
}

/// Every wait of the history: from a client's `Waiting` (its first
/// refused attempt) to its grant, its giving up or cancelling, or the run's
/// end; a grant without a refusal is a wait that starts at the grant (it
/// may overtake, and cannot be overtaken). Absences: the spans in which the
/// client was paused, crashed or cut off.
///
/// Each absence is extended by `after` past the fault's end.
pub fn waits(history: &History, run_end: Duration, after: Duration) -> Vec<Wait> {
    let absent: BTreeMap<usize, Vec<(Duration, Duration)>> = absences(history)
        .into_iter()
        .map(|(client, spans)| {
            let spans = spans
                .into_iter()
                .map(|(from, to)| (from, to.saturating_add(after)))
                .collect();
            (client, spans)
        })
        .collect();
    let mut open: BTreeMap<usize, Duration> = BTreeMap::new();
    let mut done = Vec::new();
    for (index, entry) in history.entries.iter().enumerate() {
        let Process::Client(client) = entry.process else {
            continue;
        };
        let absent_of = || absent.get(&client).cloned().unwrap_or_default();
        match &entry.op {
            Op::Waiting => {
                open.entry(client).or_insert(entry.at);
            }
            Op::AcquireOk { shared: false, .. } => done.push(Wait {
                client,
                started: open.remove(&client).unwrap_or(entry.at),
                ended: entry.at,
                granted: Some(index),
                absent: absent_of(),
            }),
            Op::AcquireFail { .. } | Op::AcquireCancel => {
                if let Some(started) = open.remove(&client) {
                    done.push(Wait {
                        client,
                        started,
                        ended: entry.at,
                        granted: None,
                        absent: absent_of(),
                    });
                }
            }
            _ => {}
        }
    }
    for (client, started) in open {
        done.push(Wait {
            client,
            started,
            ended: run_end,
            granted: None,
            absent: absent.get(&client).cloned().unwrap_or_default(),
        });
    }
    done.sort_by_key(|w| (w.started, w.client));
    done
}

/// The spans each client could not act in: paused, crashed, or cut off by
/// a partition (either way), from the fault entries. Faults of different
/// kinds make spans of their own, even where they overlap.
pub(super) fn absences(history: &History) -> BTreeMap<usize, Vec<(Duration, Duration)>> {
    fault_spans(history, |kind, target| {
        if !matches!(kind, "pause" | "crash" | "partition" | "partition-oneway") {
            return None;
        }
        let client = target.strip_prefix("client:")?.parse::<usize>().ok()?;
        Some((client, (client, kind.to_owned())))
    })
}

/// How a hold shares the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// A writer (or the plain lock's holder): alone.
    Exclusive,
    /// A reader: with other readers only.
    Shared,
}

/// Two holds that must not overlap, and the instant they both held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// History index of the earlier grant.
    pub first: usize,
    /// History index of the later grant.
    pub second: usize,
    /// When the later one was granted, inside the earlier one.
    pub at: Duration,
}

/// Every pair of holds where one is exclusive and the two overlap in time.
/// `holds` and `shares` are parallel; holds sorted by start (as
/// `super::holds` returns them).
pub fn exclusive_overlaps(holds: &[Hold], shares: &[Share]) -> Vec<Overlap> {
    let mut found = Vec::new();
    for (i, earlier) in holds.iter().enumerate() {
        for (j, later) in holds.iter().enumerate().skip(i + 1) {
            if later.start >= earlier.end {
                // Sorted by start: every hold after this one starts after
                // `earlier` ended too.
                break;
            }
            let exclusive = shares[i] == Share::Exclusive || shares[j] == Share::Exclusive;
            if exclusive && later.client != earlier.client {
                found.push(Overlap {
                    first: earlier.entry,
                    second: later.entry,
                    at: later.start,
                });
            }
        }
    }
    found
}

/// The first instant more than `permits` holds overlap, with the grants
/// (history indexes) in force then.
pub fn over_capacity(holds: &[Hold], permits: usize) -> Option<(Duration, Vec<usize>)> {
    // A sweep over starts and ends; at one instant ends come first, since a
    // hold ending at t and one starting at t do not overlap.
    let mut events: Vec<(Duration, bool, usize)> = holds
        .iter()
        .enumerate()
        .flat_map(|(i, hold)| [(hold.start, true, i), (hold.end, false, i)])
        .collect();
    events.sort_by_key(|&(at, starts, i)| (at, starts, i));
    let mut open: Vec<usize> = Vec::new();
    for (at, starts, i) in events {
        if starts {
            open.push(i);
            if open.len() > permits {
                let mut grants: Vec<usize> = open.iter().map(|&k| holds[k].entry).collect();
                grants.sort_unstable();
                return Some((at, grants));
            }
        } else {
            open.retain(|&k| k != i);
        }
    }
    None
}

/// One client's wait for a fair lock, as the history shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// The waiting client.
    pub client: usize,
    /// When it started waiting (its first refused acquire).
    pub started: Duration,
    /// When the wait ended: granted, given up, or the run's end.
    pub ended: Duration,
    /// History index of the grant that ended it, if one did.
    pub granted: Option<usize>,
    /// Spans in which the client could not act (paused, crashed or cut
    /// off): a waiter is live outside them and keeps its place only then.
    pub absent: Vec<(Duration, Duration)>,
}

impl Wait {
    fn live_at(&self, at: Duration) -> bool {
        self.started <= at
            && at < self.ended
            && !self.absent.iter().any(|&(from, to)| from <= at && at < to)
    }
}

/// A live waiter overtaken: `overtaker` started waiting after `waiter` and
/// was granted while `waiter` was still waiting and live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overtaking {
    /// The client that was overtaken.
    pub waiter: usize,
    /// The client granted in its place.
    pub overtaker: usize,
    /// History index of the overtaking grant.
    pub grant: usize,
    /// When it was granted.
    pub at: Duration,
}

/// Every grant that overtook a live waiter, given each wait and the grant's
/// time (`grant_at` maps a history index to its instant).
///
/// A waiter's place lapses when it stops renewing it for long enough, so a
/// waiter that was absent for `lapse_after` or longer (its waiter ttl less
/// one renewal period) before the grant may have lost its place
/// legitimately, and does not count as overtaken: it joins at the back when
/// it comes back.
///
/// Waits that started within `order_slack` of each other are not ordered
/// (the history records when a refusal arrived, not when the server queued
/// it).
pub fn overtakings(
    waits: &[Wait],
    grant_at: impl Fn(usize) -> Duration,
    lapse_after: Duration,
    order_slack: Duration,
) -> Vec<Overtaking> {
    let mut found = Vec::new();
    for later in waits {
        let Some(grant) = later.granted else {
            continue;
        };
        let at = grant_at(grant);
        for earlier in waits {
            if earlier.client == later.client || earlier.started + order_slack >= later.started {
                continue;
            }
            let may_have_lapsed = earlier
                .absent
                .iter()
                .any(|&(from, to)| from < at && to.min(at).saturating_sub(from) >= lapse_after);
            if earlier.live_at(at) && !may_have_lapsed {
                found.push(Overtaking {
                    waiter: earlier.client,
                    overtaker: later.client,
                    grant,
                    at,
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::hold::HoldEnd;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn hold(client: usize, entry: usize, start: u64, end: u64) -> Hold {
        Hold {
            client,
            token: format!("t{entry}"),
            fence: entry as u64,
            start: ms(start),
            end: ms(end),
            ended_by: HoldEnd::Release,
            deadline: ms(end),
            timer_deadline: ms(end),
            entry,
            lost_entry: None,
            shared: false,
        }
    }

    #[test]
    fn readers_share_but_a_writer_overlaps_nobody() {
        let holds = [
            hold(0, 1, 0, 100),
            hold(1, 2, 50, 150),
            hold(2, 3, 120, 200),
        ];
        let readers = [Share::Shared, Share::Shared, Share::Shared];
        assert_eq!(exclusive_overlaps(&holds, &readers), []);
        let writer_last = [Share::Shared, Share::Shared, Share::Exclusive];
        assert_eq!(
            exclusive_overlaps(&holds, &writer_last),
            [Overlap {
                first: 2,
                second: 3,
                at: ms(120)
            }]
        );
        // Back to back is no overlap.
        let handoff = [hold(0, 1, 0, 100), hold(1, 2, 100, 200)];
        assert_eq!(exclusive_overlaps(&handoff, &[Share::Exclusive; 2]), []);
    }

    #[test]
    fn a_semaphore_over_its_permits_is_found_at_the_first_instant() {
        let holds = [
            hold(0, 1, 0, 100),
            hold(1, 2, 10, 100),
            hold(2, 3, 100, 200),
            hold(3, 4, 150, 300),
        ];
        assert_eq!(over_capacity(&holds, 2), None, "ends come before starts");
        let crowded = [hold(0, 1, 0, 100), hold(1, 2, 10, 100), hold(2, 3, 50, 60)];
        assert_eq!(over_capacity(&crowded, 2), Some((ms(50), vec![1, 2, 3])));
        assert_eq!(over_capacity(&crowded, 3), None);
    }

    fn wait(client: usize, started: u64, ended: u64, granted: Option<usize>) -> Wait {
        Wait {
            client,
            started: ms(started),
            ended: ms(ended),
            granted,
            absent: Vec::new(),
        }
    }

    #[test]
    fn a_later_waiter_granted_first_overtakes_a_live_one() {
        let grants = |entry: usize| ms(entry as u64);
        // Client 1 waited from 10, client 2 from 20; 2 granted at 500 while
        // 1 still waited (until 900).
        let waits = [wait(1, 10, 900, Some(900)), wait(2, 20, 500, Some(500))];
        assert_eq!(
            overtakings(&waits, grants, ms(100), ms(5)),
            [Overtaking {
                waiter: 1,
                overtaker: 2,
                grant: 500,
                at: ms(500)
            }]
        );
        // In arrival order: nobody overtaken.
        let fair = [wait(1, 10, 500, Some(500)), wait(2, 20, 900, Some(900))];
        assert_eq!(overtakings(&fair, grants, ms(100), ms(5)), []);
    }

    #[test]
    fn an_absent_waiter_may_lose_its_place() {
        let grants = |entry: usize| ms(entry as u64);
        let mut paused = wait(1, 10, 900, Some(900));
        paused.absent.push((ms(300), ms(700)));
        let waits = [paused.clone(), wait(2, 20, 500, Some(500))];
        assert_eq!(overtakings(&waits, grants, ms(100), ms(5)), []);
        // A pause too short to lapse its place keeps it.
        paused.absent = vec![(ms(300), ms(350))];
        let waits = [paused, wait(2, 20, 500, Some(500))];
        assert_eq!(overtakings(&waits, grants, ms(100), ms(5)).len(), 1);
    }

    // Planted bugs: histories with a violation of each family property put
    // in on purpose, run through the whole checker as a run's history is.
}
