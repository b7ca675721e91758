//! The checkers: every property, run over every history.
//!
//! They read only the history. A client *believes* it holds a lock from its
//! `AcquireOk` until the first of: its `Lost`, its `ReleaseInvoke`, or its
//! deadline passing (the last `valid_until` it learnt before then). The
//! deadline ends belief even when the client was frozen and could not
//! react: a paused process that wakes checks `is_held()` and finds false.

use std::{collections::BTreeMap, time::Duration};

use crate::{
    config::{FencingMode, Property, Scenario},
    history::{History, Op, Phase, Process},
    outcome::{ConcreteFault, Verdict, Violation},
};

/// Slack for "at the deadline": the simulation advances in 1 ms ticks.
const TICK_SLACK: Duration = Duration::from_millis(2);

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
    /// History index of the `AcquireOk`.
    pub entry: usize,
    /// History index of the `Lost`, if any.
    pub lost_entry: Option<usize>,
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
                        entry: index,
                        lost_entry: None,
                    },
                );
            }
            Op::Renewed { token, valid_until } => {
                if let Some(hold) = open.get_mut(token.as_str()) {
                    hold.deadline = hold.deadline.max(*valid_until);
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
            Op::ReleaseInvoke { token } => {
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
    let run_end = scenario.duration;
    let holds = holds(history, run_end);
    let mut verdict = Verdict::default();
    lease_exclusion(&holds, &mut verdict);
    server_oracle(history, &holds, &mut verdict);
    tokens(scenario.lock.fencing, &holds, &mut verdict);
    fenced_writes(history, &holds, &mut verdict);
    owner_only(history, &holds, &mut verdict);
    timely_loss(history, &holds, &mut verdict);
    liveness(scenario, schedule, history, &holds, &mut verdict);
    facts(scenario, history, &holds, &mut verdict);
    verdict.violations.sort_by_key(|v| (v.at, v.property));
    verdict
}

/// S1: no two clients believe they hold at the same true instant.
fn lease_exclusion(holds: &[Hold], verdict: &mut Verdict) {
    for (i, a) in holds.iter().enumerate() {
        for b in &holds[i + 1..] {
            if b.start >= a.end {
                continue;
            }
            if a.client == b.client || b.end <= b.start || a.end <= a.start {
                continue;
            }
            verdict.violations.push(Violation {
                property: Property::LeaseExclusion,
                at: b.start,
                message: format!(
                    "client-{} and client-{} both held the lock from {:?} to {:?} (fences {} and {})",
                    a.client,
                    b.client,
                    b.start,
                    a.end.min(b.end),
                    a.fence,
                    b.fence
                ),
                evidence: vec![a.entry, b.entry],
            });
        }
    }
}

/// The authoritative owner of the lock key over time, from `Oracle` entries.
fn oracle_timeline(history: &History) -> Vec<(Duration, Option<&str>, usize)> {
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

/// S2: whenever a client believes it holds the lock, the authoritative
/// primary holds the key with that client's token.
fn server_oracle(history: &History, holds: &[Hold], verdict: &mut Verdict) {
    let timeline = oracle_timeline(history);
    if timeline.is_empty() {
        return;
    }
    for hold in holds {
        // The owner in force at each instant of the hold: the last sample
        // at or before its start, then every change inside. Samples are
        // per tick, so a tick of slack at each edge absorbs the sampling.
        let (start, end) = (hold.start + TICK_SLACK, hold.end.saturating_sub(TICK_SLACK));
        if end <= start {
            continue;
        }
        let before = timeline.iter().rev().find(|(at, _, _)| *at <= start);
        let inside = timeline
            .iter()
            .filter(|(at, _, _)| *at > start && *at < end);
        for (at, owner, index) in before.into_iter().chain(inside) {
            if *owner != Some(hold.token.as_str()) {
                let at = (*at).max(start);
                verdict.violations.push(Violation {
                    property: Property::ServerOracle,
                    at,
                    message: format!(
                        "client-{} believed it held the lock at {at:?}, but the authoritative key (the primary's; Redlock: a majority's) was {}",
                        hold.client,
                        owner.map_or_else(|| "absent".to_owned(), |o| format!("owned by {}", short(o)))
                    ),
                    evidence: vec![hold.entry, *index],
                });
                break;
            }
        }
    }
}

/// S3: fences are unique and increase in grant order.
fn tokens(fencing: FencingMode, holds: &[Hold], verdict: &mut Verdict) {
    if fencing == FencingMode::None {
        return;
    }
    let mut highest: Option<&Hold> = None;
    for hold in holds {
        if let Some(previous) = highest
            && hold.fence <= previous.fence
        {
            verdict.violations.push(Violation {
                property: Property::Tokens,
                at: hold.start,
                message: format!(
                    "client-{} was granted fence {} at {:?}, not above fence {} granted to client-{} at {:?}",
                    hold.client, hold.fence, hold.start, previous.fence, previous.client, previous.start
                ),
                evidence: vec![previous.entry, hold.entry],
            });
        }
        if highest.is_none_or(|previous| hold.fence > previous.fence) {
            highest = Some(hold);
        }
    }
}

/// Grant time of each token, for ordering writers.
fn grant_times(holds: &[Hold]) -> BTreeMap<&str, (Duration, usize)> {
    holds
        .iter()
        .map(|hold| (hold.token.as_str(), (hold.start, hold.client)))
        .collect()
}

/// Finds writes, in the storage's own order, from a holder granted before
/// one that had already written: stale writes. Returns (stale, newer) pairs
/// of history indexes.
fn stale_writes<'a>(
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

/// S4: the storage never accepts a write from a holder older than one whose
/// write it already accepted (fencing must make it refuse such writes).
fn fenced_writes(history: &History, holds: &[Hold], verdict: &mut Verdict) {
    let grants = grant_times(holds);
    let accepted = history
        .entries
        .iter()
        .enumerate()
        .filter_map(|(index, entry)| match (&entry.process, &entry.op) {
            (
                Process::Storage,
                Op::WriteOk {
                    token,
                    accepted: true,
                    ..
                },
            ) => Some((index, token.as_str())),
            _ => None,
        });
    for (stale, newer) in stale_writes(accepted, &grants) {
        let entry = &history.entries[stale];
        verdict.violations.push(Violation {
            property: Property::FencedWrites,
            at: entry.at,
            message: format!(
                "storage accepted a write at {:?} from an older holder after a newer holder had written",
                entry.at
            ),
            evidence: vec![newer, stale],
        });
    }
}

/// S5: a release that deleted a key, or a renewal that extended one, acted
/// on the caller's own key: the primary showed that owner during the hold.
fn owner_only(history: &History, holds: &[Hold], verdict: &mut Verdict) {
    let timeline = oracle_timeline(history);
    if timeline.is_empty() {
        return;
    }
    let by_token: BTreeMap<&str, &Hold> = holds.iter().map(|h| (h.token.as_str(), h)).collect();
    for (index, entry) in history.entries.iter().enumerate() {
        let Op::ReleaseOk { token, outcome } = &entry.op else {
            continue;
        };
        if outcome != "Deleted" {
            continue;
        }
        let since = by_token
            .get(token.as_str())
            .map_or(Duration::ZERO, |h| h.start);
        let owned = timeline.iter().any(|(at, owner, _)| {
            *at >= since && *at <= entry.at && *owner == Some(token.as_str())
        }) || timeline
            .iter()
            .rev()
            .find(|(at, _, _)| *at <= since)
            .is_some_and(|(_, owner, _)| *owner == Some(token.as_str()));
        if !owned {
            verdict.violations.push(Violation {
                property: Property::OwnerOnly,
                at: entry.at,
                message: format!(
                    "a release by {} deleted a key the authoritative view never showed as theirs",
                    short(token)
                ),
                evidence: vec![index],
            });
        }
    }
}

/// True-time intervals during which each client was frozen or crashed.
fn stopped_intervals(history: &History) -> BTreeMap<String, Vec<(Duration, Duration)>> {
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

/// S6: Lost is delivered no later than the holder's deadline (unless the
/// client was frozen or crashed then and could not run at all).
fn timely_loss(history: &History, holds: &[Hold], verdict: &mut Verdict) {
    let stopped = stopped_intervals(history);
    for hold in holds {
        if hold.ended_by != HoldEnd::Deadline {
            continue;
        }
        let target = format!("client:{}", hold.client);
        let was_stopped = stopped.get(&target).is_some_and(|intervals| {
            intervals
                .iter()
                .any(|(from, to)| *from <= hold.deadline + TICK_SLACK && hold.deadline < *to)
        });
        if was_stopped {
            continue;
        }
        let lost_at = hold.lost_entry.map(|index| history.entries[index].at);
        let late = lost_at.is_none_or(|at| at > hold.deadline + TICK_SLACK);
        // A hold still open at the end of the run has no Lost to deliver yet.
        if late
            && hold.deadline + TICK_SLACK < history.entries.last().map_or(Duration::ZERO, |e| e.at)
        {
            verdict.violations.push(Violation {
                property: Property::TimelyLoss,
                at: hold.deadline,
                message: format!(
                    "client-{}'s lock ran out at {:?} but Lost came {}",
                    hold.client,
                    hold.deadline,
                    lost_at.map_or_else(|| "never".to_owned(), |at| format!("at {at:?}"))
                ),
                evidence: hold.lost_entry.into_iter().chain([hold.entry]).collect(),
            });
        }
    }
}

/// L1: once every fault has healed, some client acquires within a bound.
fn liveness(
    scenario: &Scenario,
    schedule: &[ConcreteFault],
    history: &History,
    holds: &[Hold],
    verdict: &mut Verdict,
) {
    use crate::config::FaultKind;
    // Faults that never heal (a crashed Redis, a restart that wiped the
    // key is fine) leave liveness undefined.
    let permanent = schedule
        .iter()
        .any(|fault| fault.kind == FaultKind::Crash && fault.target.starts_with("redis"));
    if permanent {
        return;
    }
    let healed = schedule
        .iter()
        .map(|fault| fault.at + fault.duration.unwrap_or_default())
        .max()
        .unwrap_or_default();
    let clients_alive = (0..scenario.clients.count).any(|client| {
        !schedule
            .iter()
            .any(|f| f.kind == FaultKind::Crash && f.target == format!("client:{client}"))
    });
    if !clients_alive {
        return;
    }
    let ttl = scenario.lock.ttl;
    let bound = healed + ttl * 2 + Duration::from_secs(1);
    if bound + scenario.clients.hold.max >= scenario.duration {
        return;
    }
    let progressed = holds
        .iter()
        .any(|hold| hold.start >= healed && hold.start <= bound)
        || holds
            .iter()
            .any(|hold| hold.start < healed && hold.end > bound);
    if !progressed {
        let evidence = history
            .entries
            .iter()
            .enumerate()
            .rev()
            .find(|(_, e)| e.at <= bound)
            .map(|(index, _)| vec![index])
            .unwrap_or_default();
        verdict.violations.push(Violation {
            property: Property::Liveness,
            at: bound,
            message: format!("faults healed at {healed:?} but no client acquired by {bound:?}"),
            evidence,
        });
    }
}

/// "Sometimes" facts: proof that the faults actually bit.
fn facts(scenario: &Scenario, history: &History, holds: &[Hold], verdict: &mut Verdict) {
    let mut fact = |name: &str| {
        verdict.facts.insert(name.to_owned());
    };
    if !holds.is_empty() {
        fact("lock-acquired");
    }
    if holds.iter().any(|h| h.lost_entry.is_some()) {
        fact("lock-lost-while-held");
    }
    let stopped = stopped_intervals(history);
    for hold in holds {
        let target = format!("client:{}", hold.client);
        if let Some(intervals) = stopped.get(&target)
            && intervals.iter().any(|(from, to)| {
                *from >= hold.start
                    && *from < hold.end
                    && to.saturating_sub(*from) > scenario.lock.ttl
            })
        {
            fact("pause-outlived-ttl");
        }
    }
    let grants = grant_times(holds);
    let mut register = Vec::new();
    for (index, entry) in history.entries.iter().enumerate() {
        match (&entry.process, &entry.op) {
            (
                Process::Storage,
                Op::WriteOk {
                    accepted: false, ..
                },
            ) => fact("fenced-write-rejected"),
            (Process::Storage, Op::RegisterWrite { token, .. }) => {
                register.push((index, token.as_str()))
            }
            (
                _,
                Op::Failover {
                    old_owner: Some(old),
                    new_owner,
                    ..
                },
            ) if new_owner.as_deref() != Some(old.as_str()) => fact("failover-lost-lock-key"),
            (_, Op::AcquireFail { .. }) => fact("acquire-gave-up"),
            _ => {}
        }
    }
    if !stale_writes(register.into_iter(), &grants).is_empty() {
        fact("unfenced-register-stale-write");
    }
}

fn short(token: &str) -> &str {
    token.get(..8).unwrap_or(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Entry;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn entry(at: u64, process: Process, op: Op) -> Entry {
        Entry {
            at: ms(at),
            local: ms(at),
            process,
            op,
        }
    }

    fn granted(at: u64, client: usize, token: &str, fence: u64, until: u64) -> Entry {
        entry(
            at,
            Process::Client(client),
            Op::AcquireOk {
                token: token.into(),
                fence,
                valid_until: ms(until),
            },
        )
    }

    #[test]
    fn overlapping_beliefs_break_lease_exclusion() {
        let history = History {
            entries: vec![granted(0, 0, "a", 1, 1000), granted(500, 1, "b", 2, 1500)],
        };
        let holds = holds(&history, ms(2000));
        let mut verdict = Verdict::default();
        lease_exclusion(&holds, &mut verdict);
        assert_eq!(verdict.violated().len(), 1);
        assert_eq!(verdict.violations[0].at, ms(500));
    }

    #[test]
    fn deadline_ends_belief_even_without_lost() {
        let history = History {
            entries: vec![granted(0, 0, "a", 1, 1000), granted(1000, 1, "b", 2, 2000)],
        };
        let holds = holds(&history, ms(3000));
        assert_eq!(holds[0].end, ms(1000));
        assert_eq!(holds[0].ended_by, HoldEnd::Deadline);
        let mut verdict = Verdict::default();
        lease_exclusion(&holds, &mut verdict);
        assert!(verdict.violations.is_empty());
    }

    #[test]
    fn renewals_extend_belief_and_reused_fences_break_tokens() {
        let history = History {
            entries: vec![
                granted(0, 0, "a", 5, 1000),
                entry(
                    300,
                    Process::Client(0),
                    Op::Renewed {
                        token: "a".into(),
                        valid_until: ms(1300),
                    },
                ),
                entry(
                    1200,
                    Process::Client(0),
                    Op::ReleaseInvoke { token: "a".into() },
                ),
                granted(1250, 1, "b", 5, 2000),
            ],
        };
        let holds = holds(&history, ms(3000));
        assert_eq!(holds[0].end, ms(1200));
        let mut verdict = Verdict::default();
        tokens(FencingMode::Counter, &holds, &mut verdict);
        assert_eq!(verdict.violated().len(), 1);
        let mut verdict = Verdict::default();
        tokens(FencingMode::None, &holds, &mut verdict);
        assert!(
            verdict.violations.is_empty(),
            "no fencing, nothing to check"
        );
    }

    #[test]
    fn stale_accepted_write_breaks_fenced_writes() {
        let write = |at, token: &str| {
            entry(
                at,
                Process::Storage,
                Op::WriteOk {
                    token: token.into(),
                    fence: 0,
                    value: at,
                    accepted: true,
                },
            )
        };
        let history = History {
            entries: vec![
                granted(0, 0, "a", 0, 1000),
                write(10, "a"),
                granted(1000, 1, "b", 0, 2000),
                write(1010, "b"),
                write(1020, "a"),
            ],
        };
        let holds = holds(&history, ms(3000));
        let mut verdict = Verdict::default();
        fenced_writes(&history, &holds, &mut verdict);
        assert_eq!(verdict.violated().len(), 1);
        assert_eq!(verdict.violations[0].at, ms(1020));
    }

    #[test]
    fn late_lost_breaks_timely_loss_unless_frozen() {
        let lost = |at| {
            entry(
                at,
                Process::Client(0),
                Op::Lost {
                    token: "a".into(),
                    reason: "expired".into(),
                    valid_until: ms(at),
                },
            )
        };
        let late = History {
            entries: vec![
                granted(0, 0, "a", 1, 1000),
                lost(1500),
                granted(2000, 1, "x", 2, 2100),
            ],
        };
        let holds_late = holds(&late, ms(3000));
        let mut verdict = Verdict::default();
        timely_loss(&late, &holds_late, &mut verdict);
        assert_eq!(verdict.violated().len(), 1);

        let fault = |at, phase| {
            entry(
                at,
                Process::Controller,
                Op::Fault {
                    kind: "pause".into(),
                    target: "client:0".into(),
                    phase,
                },
            )
        };
        let frozen = History {
            entries: vec![
                granted(0, 0, "a", 1, 1000),
                fault(900, Phase::Start),
                fault(1500, Phase::End),
                lost(1500),
                granted(2000, 1, "x", 2, 2100),
            ],
        };
        let mut verdict = Verdict::default();
        timely_loss(&frozen, &holds(&frozen, ms(3000)), &mut verdict);
        assert!(verdict.violations.is_empty());
    }
}
