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

/// True-time intervals during which each client was frozen or crashed,
/// by target (`client:N`): a pause and a crash that overlap make one.
pub(crate) fn stopped_intervals(history: &History) -> BTreeMap<String, Vec<(Duration, Duration)>> {
    fault_spans(history, |kind, target| {
        matches!(kind, "pause" | "crash").then(|| (target.to_owned(), target.to_owned()))
    })
}

/// The spans of the faults `key` picks, from the history's fault entries:
/// from a fault's start to its end, or to `Duration::MAX` if it never
/// ends. `key` maps a fault's kind and target to the group its spans are
/// filed under and the stack its depth is counted on, or to `None` to
/// leave it out. Faults that overlap on one stack (a repeating fault) make
/// one span, from the first start until the last of them ends. Each
/// group's spans come in the order they end; those still open at the end
/// of the history come last, in stack order.
pub(crate) fn fault_spans<G: Ord, S: Ord>(
    history: &History,
    key: impl Fn(&str, &str) -> Option<(G, S)>,
) -> BTreeMap<G, Vec<(Duration, Duration)>> {
    let mut open: BTreeMap<S, (G, Duration, usize)> = BTreeMap::new();
    let mut spans: BTreeMap<G, Vec<(Duration, Duration)>> = BTreeMap::new();
    for entry in &history.entries {
        let Op::Fault {
            kind,
            target,
            phase,
        } = &entry.op
        else {
            continue;
        };
        let Some((group, stack)) = key(kind, target) else {
            continue;
        };
        match phase {
            Phase::Start => open.entry(stack).or_insert((group, entry.at, 0)).2 += 1,
            Phase::End => {
                if let Some((_, start, depth)) = open.get_mut(&stack) {
                    *depth -= 1;
                    if *depth == 0 {
                        let start = *start;
                        open.remove(&stack);
                        spans.entry(group).or_default().push((start, entry.at));
                    }
                }
            }
        }
    }
    for (group, start, _) in open.into_values() {
        spans.entry(group).or_default().push((start, Duration::MAX));
    }
    spans
}

pub(crate) fn short(token: &str) -> &str {
    token.get(..8).unwrap_or(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(at_ms: u64, kind: &str, target: &str, phase: Phase) -> crate::history::Entry {
        crate::history::Entry {
            at: Duration::from_millis(at_ms),
            local: Duration::from_millis(at_ms),
            process: Process::Controller,
            op: Op::Fault {
                kind: kind.to_owned(),
                target: target.to_owned(),
                phase,
            },
        }
    }

    fn ms(at: u64) -> Duration {
        Duration::from_millis(at)
    }

    /// A repeating pause overlaps itself, a crash overlaps the pause, a
    /// partition is never healed.
    fn history() -> History {
        History {
            entries: vec![
                fault(100, "pause", "client:0", Phase::Start),
                fault(150, "crash", "client:0", Phase::Start),
                fault(200, "pause", "client:0", Phase::Start),
                fault(300, "pause", "client:0", Phase::End),
                fault(350, "partition", "client:1", Phase::Start),
                fault(400, "crash", "client:0", Phase::End),
                fault(500, "pause", "client:0", Phase::End),
                fault(600, "pause", "redis:0", Phase::Start),
                fault(700, "pause", "redis:0", Phase::End),
            ],
        }
    }

    #[test]
    fn overlapping_faults_on_one_stack_make_one_span() {
        let by_target = fault_spans(&history(), |kind, target| {
            (kind != "partition").then(|| (target.to_owned(), target.to_owned()))
        });
        assert_eq!(by_target["client:0"], vec![(ms(100), ms(500))]);
        assert_eq!(by_target["redis:0"], vec![(ms(600), ms(700))]);
        assert!(!by_target.contains_key("client:1"), "left out");
        let by_kind = fault_spans(&history(), |kind, target| {
            Some((target.to_owned(), (target.to_owned(), kind.to_owned())))
        });
        assert_eq!(
            by_kind["client:0"],
            vec![(ms(150), ms(400)), (ms(100), ms(500))],
            "a span per kind, in the order they end"
        );
        assert_eq!(
            by_kind["client:1"],
            vec![(ms(350), Duration::MAX)],
            "never healed"
        );
    }
}
