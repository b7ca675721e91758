//! What every checker reads first: the holds rebuilt from a history, who
//! the oracle saw owning the key, grant order, stale writes, and when each
//! client was stopped. Shared by the checkers beside this file, none of
//! which imports another's.

use std::{collections::BTreeMap, time::Duration};

use super::hold::{Hold, HoldEnd};
use crate::history::{History, Op, Phase, Process};

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
