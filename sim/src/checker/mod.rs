//! The checkers: every property, run over every history.
//!
//! They read only the history. A client *believes* it holds a lock from its
//! `AcquireOk` until the first of: its `Lost`, its `ReleaseInvoke` or
//! `GuardDropped`, or its deadline passing (the last `valid_until` it
//! learnt before then). The deadline ends belief even when the client was
//! frozen and could not react: a paused process that wakes checks
//! `is_held()` and finds false.

use std::{collections::BTreeMap, time::Duration};

pub mod family;
mod progress;
mod safety;

use crate::{
    config::{Scenario, WorkloadKind},
    history::{History, Op, Phase, Process},
    outcome::{ConcreteFault, Verdict},
};

/// Slack for "at the deadline": the simulation advances in 1 ms ticks.
pub(crate) const TICK_SLACK: Duration = Duration::from_millis(2);

/// One grant, as the history shows it.
#[derive(Debug, Clone)]
pub struct Hold {
    /// The client that held it.
    pub client: usize,
    /// The owner token.
    pub token: String,
    /// The fence.
    pub fence: u64,
    /// True time of the grant.
    pub start: Duration,
    /// True time belief ended.
    pub end: Duration,
    /// Why belief ended.
    pub ended_by: HoldEnd,
    /// The deadline in force when belief ended.
    pub deadline: Duration,
    /// The deadline as the client last learnt it (acquire or renewal),
    /// before any clock change moved it: the client's timers, which run
    /// on the simulation's true clock, were set for this instant.
    pub timer_deadline: Duration,
    /// History index of the `AcquireOk`.
    pub entry: usize,
    /// History index of the `Lost`, if any.
    pub lost_entry: Option<usize>,
    /// A shared hold (a reader's).
    pub shared: bool,
}

/// What ended a belief interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldEnd {
    /// The client released.
    Release,
    /// The client was told it lost the lock before the deadline.
    Lost,
    /// The deadline passed.
    Deadline,
    /// The run ended first.
    EndOfRun,
}

/// Rebuilds every hold of the history.
pub fn holds(history: &History, run_end: Duration) -> Vec<Hold> {
    let mut open: BTreeMap<&str, Hold> = BTreeMap::new();
    let mut done = Vec::new();
    for (index, entry) in history.entries.iter().enumerate() {
        let Process::Client(client) = entry.process else {
            continue;
        };
        // Close any hold whose deadline passed before this entry.
        let expired: Vec<&str> = open
            .iter()
            .filter(|(_, hold)| hold.deadline <= entry.at)
            .map(|(token, _)| *token)
            .collect();
        for token in expired {
            if let Some(mut hold) = open.remove(token) {
                hold.end = hold.deadline;
                hold.ended_by = HoldEnd::Deadline;
                done.push(hold);
            }
        }
        match &entry.op {
            Op::AcquireOk {
                token,
                fence,
                valid_until,
                shared,
            } => {
                open.insert(
                    token,
                    Hold {
                        client,
                        token: token.clone(),
                        fence: *fence,
                        start: entry.at,
                        end: run_end,
                        ended_by: HoldEnd::EndOfRun,
                        deadline: *valid_until,
                        timer_deadline: *valid_until,
                        entry: index,
                        lost_entry: None,
                        shared: *shared,
                    },
                );
            }
            Op::Renewed { token, valid_until } => {
                if let Some(hold) = open.get_mut(token.as_str()) {
                    hold.deadline = hold.deadline.max(*valid_until);
                    hold.timer_deadline = hold.deadline;
                }
            }
            // The clock moved under the deadline: it now falls elsewhere.
            Op::Deadline { token, valid_until } => {
                if let Some(hold) = open.get_mut(token.as_str()) {
                    hold.deadline = *valid_until;
                }
            }
            Op::Lost { token, .. } => {
                if let Some(mut hold) = open.remove(token.as_str()) {
                    hold.end = entry.at;
                    hold.ended_by = HoldEnd::Lost;
                    hold.lost_entry = Some(index);
                    done.push(hold);
                } else if let Some(hold) = done.iter_mut().rev().find(|h| &h.token == token) {
                    hold.lost_entry.get_or_insert(index);
                }
            }
            Op::ReleaseInvoke { token } | Op::GuardDropped { token } => {
                if let Some(mut hold) = open.remove(token.as_str()) {
                    hold.end = entry.at;
                    hold.ended_by = HoldEnd::Release;
                    done.push(hold);
                }
            }
            _ => {}
        }
    }
    for (_, mut hold) in open {
        if hold.deadline <= run_end {
            hold.end = hold.deadline;
            hold.ended_by = HoldEnd::Deadline;
        }
        done.push(hold);
    }
    done.sort_by_key(|hold| (hold.start, hold.entry));
    done
}

/// Runs every checker over `history`.
pub fn check(scenario: &Scenario, schedule: &[ConcreteFault], history: &History) -> Verdict {
    check_with_slack(scenario, schedule, history, TICK_SLACK, true)
}

/// Runs every checker over a history recorded on real processes, whose
/// events and oracle samples carry real timing error: `slack` instead of
/// a tick at the edges of a hold (S2) and at a deadline (S6). Its oracle
/// is polled, not told of every change, so S2 counts only samples inside
/// a hold, and S5 (which needs every owner the key ever had) is not
/// checked.
pub fn check_real(
    scenario: &Scenario,
    schedule: &[ConcreteFault],
    history: &History,
    slack: Duration,
) -> Verdict {
    check_with_slack(scenario, schedule, history, slack, false)
}

fn check_with_slack(
    scenario: &Scenario,
    schedule: &[ConcreteFault],
    history: &History,
    slack: Duration,
    complete_oracle: bool,
) -> Verdict {
    let run_end = scenario.duration;
    let holds = holds(history, run_end);
    let mut verdict = Verdict::default();
    let kind = scenario.clients.workload.kind;
    // The plain lock's key is one string, one owner: S1, and the checkers
    // that read that key on the primary (S2, S5, A1), are the mutex's and
    // the fair lock's. A read-write lock has F1 instead, a semaphore F2.
    let one_owner = matches!(kind, WorkloadKind::Mutex | WorkloadKind::Fair);
    match kind {
        WorkloadKind::Mutex | WorkloadKind::Fair => safety::lease_exclusion(&holds, &mut verdict),
        WorkloadKind::ReadWrite => family::writer_exclusion(&holds, &mut verdict),
        WorkloadKind::Semaphore => {
            family::capacity(&holds, scenario.clients.workload.permits, &mut verdict);
        }
    }
    if one_owner {
        safety::server_oracle(history, &holds, slack, complete_oracle, &mut verdict);
    }
    // Fences order the exclusive holds (a reader has none; a semaphore's
    // holders overlap, so grant order at the clients is not the server's).
    if kind != WorkloadKind::Semaphore {
        let exclusive: Vec<Hold> = holds.iter().filter(|h| !h.shared).cloned().collect();
        safety::tokens(scenario.lock.fencing, &exclusive, &mut verdict);
    }
    safety::fenced_writes(history, &holds, &mut verdict);
    let command_timeout = crate::client::lock_options(&scenario.lock).effective_command_timeout();
    if complete_oracle && one_owner {
        safety::owner_only(history, &holds, command_timeout, &mut verdict);
    }
    safety::timely_loss(history, &holds, slack, &mut verdict);
    if one_owner {
        family::fairness(scenario, history, &mut verdict);
    }
    progress::liveness(scenario, schedule, history, &holds, &mut verdict);
    if one_owner {
        progress::orphans(scenario, history, &holds, &mut verdict);
    }
    progress::availability(scenario, schedule, history, &holds, &mut verdict);
    progress::facts(scenario, history, &holds, &mut verdict);
    verdict.violations.sort_by_key(|v| (v.at, v.property));
    verdict
}

/// The authoritative owner of the lock key over time, from `Oracle` entries.
pub(crate) fn oracle_timeline(history: &History) -> Vec<(Duration, Option<&str>, usize)> {
    history
        .entries
        .iter()
        .enumerate()
        .filter_map(|(index, entry)| match &entry.op {
            Op::Oracle { owner, .. } => Some((entry.at, owner.as_deref(), index)),
            _ => None,
        })
        .collect()
}

/// Grant time of each token, for ordering writers.
pub(crate) fn grant_times(holds: &[Hold]) -> BTreeMap<&str, (Duration, usize)> {
    holds
        .iter()
        .map(|hold| (hold.token.as_str(), (hold.start, hold.client)))
        .collect()
}

/// Finds writes, in the storage's own order, from a holder granted before
/// one that had already written: stale writes. Returns (stale, newer) pairs
/// of history indexes.
pub(crate) fn stale_writes<'a>(
    writes: impl Iterator<Item = (usize, &'a str)>,
    grants: &BTreeMap<&str, (Duration, usize)>,
) -> Vec<(usize, usize)> {
    let mut newest: Option<(Duration, usize)> = None;
    let mut stale = Vec::new();
    for (index, token) in writes {
        let Some(&(granted, _)) = grants.get(token) else {
            continue;
        };
        match newest {
            Some((newest_grant, newest_index)) if granted < newest_grant => {
                stale.push((index, newest_index));
            }
            _ => newest = Some((granted, index)),
        }
    }
    stale
}

/// True-time intervals during which each client was frozen or crashed.
pub(crate) fn stopped_intervals(history: &History) -> BTreeMap<String, Vec<(Duration, Duration)>> {
    // Pauses on one client may overlap (a repeating fault): the client is
    // stopped from the first start until the last of them ends.
    let mut open: BTreeMap<String, (Duration, usize)> = BTreeMap::new();
    let mut intervals: BTreeMap<String, Vec<(Duration, Duration)>> = BTreeMap::new();
    for entry in &history.entries {
        let Op::Fault {
            kind,
            target,
            phase,
        } = &entry.op
        else {
            continue;
        };
        if kind != "pause" && kind != "crash" {
            continue;
        }
        match phase {
            Phase::Start => {
                open.entry(target.clone()).or_insert((entry.at, 0)).1 += 1;
            }
            Phase::End => {
                if let Some((start, depth)) = open.get_mut(target) {
                    *depth -= 1;
                    if *depth == 0 {
                        let start = *start;
                        open.remove(target);
                        intervals
                            .entry(target.clone())
                            .or_default()
                            .push((start, entry.at));
                    }
                }
            }
        }
    }
    for (target, (start, _)) in open {
        intervals
            .entry(target)
            .or_default()
            .push((start, Duration::MAX));
    }
    intervals
}

pub(crate) fn short(token: &str) -> &str {
    token.get(..8).unwrap_or(token)
}
