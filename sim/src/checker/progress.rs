//! Progress: liveness (L1), orphaned keys (A1), and the "sometimes" facts
//! that prove a fault actually bit.

use std::{collections::BTreeMap, time::Duration};

use lock_core::scripts::KeyNames;

use super::{
    Hold, TICK_SLACK, grant_times, oracle_timeline, short, stale_writes, stopped_intervals,
};
use crate::{
    client::{KEY, lock_options},
    config::{Property, Scenario},
    history::{History, Op, Phase, Process},
    outcome::{ConcreteFault, Verdict, Violation},
    world::BASE_LATENCY,
};

/// L1: once every fault has healed, some client acquires within a bound.
pub(super) fn liveness(
    scenario: &Scenario,
    schedule: &[ConcreteFault],
    history: &History,
    holds: &[Hold],
    verdict: &mut Verdict,
) {
    use crate::config::{FaultKind, FaultTarget};
    // Faults that never heal (a crashed Redis, a restart that wiped the
    // key is fine) leave liveness undefined.
    let permanent = schedule.iter().any(|fault| {
        fault.kind == FaultKind::Crash
            && matches!(fault.target, FaultTarget::Redis(_) | FaultTarget::Primary)
    });
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
            .any(|f| f.kind == FaultKind::Crash && f.target == FaultTarget::Client(client))
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
pub(super) fn facts(scenario: &Scenario, history: &History, holds: &[Hold], verdict: &mut Verdict) {
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
            (_, Op::Evicted { key, value, .. }) => {
                let names = KeyNames::new("lock", KEY);
                if *key == names.fence {
                    fact("evicted-fence-floor");
                }
                let held = holds.iter().any(|hold| {
                    value.as_deref() == Some(hold.token.as_str())
                        && hold.start <= entry.at
                        && entry.at < hold.end
                });
                if *key == names.lock && held {
                    fact("evicted-held-lock-key");
                }
            }
            _ => {}
        }
    }
    if !stale_writes(register.into_iter(), &grants).is_empty() {
        fact("unfenced-register-stale-write");
    }
}

/// The client a token belongs to: tokens end in `:client-N:sim`.
fn client_of_token(token: &str) -> Option<usize> {
    let rest = token.strip_suffix(":sim")?;
    let (_, client) = rest.rsplit_once(":client-")?;
    client.parse().ok()
}

/// Sorted, merged intervals.
fn merged(mut intervals: Vec<(Duration, Duration)>) -> Vec<(Duration, Duration)> {
    intervals.sort();
    let mut out: Vec<(Duration, Duration)> = Vec::new();
    for (start, end) in intervals {
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

/// `from..to` minus `excused`, as sorted stretches.
fn uncovered(
    from: Duration,
    to: Duration,
    excused: &[(Duration, Duration)],
) -> Vec<(Duration, Duration)> {
    let mut stretches = Vec::new();
    let mut at = from;
    for &(start, end) in excused {
        if end <= at || start >= to {
            continue;
        }
        if start > at {
            stretches.push((at, start));
        }
        at = at.max(end);
    }
    if at < to {
        stretches.push((at, to));
    }
    stretches
}

/// Per client, when it had a reason to have a key: it believed it held
/// the lock, or an acquire was under way.
fn busy_intervals(
    history: &History,
    holds: &[Hold],
    run_end: Duration,
) -> BTreeMap<usize, Vec<(Duration, Duration)>> {
    let mut busy: BTreeMap<usize, Vec<(Duration, Duration)>> = BTreeMap::new();
    for hold in holds {
        busy.entry(hold.client)
            .or_default()
            .push((hold.start, hold.end));
    }
    let mut acquiring: BTreeMap<usize, Duration> = BTreeMap::new();
    for entry in &history.entries {
        let Process::Client(client) = entry.process else {
            continue;
        };
        match &entry.op {
            Op::AcquireInvoke => {
                if let Some(start) = acquiring.insert(client, entry.at) {
                    busy.entry(client).or_default().push((start, entry.at));
                }
            }
            Op::AcquireOk { .. } | Op::AcquireFail { .. } => {
                if let Some(start) = acquiring.remove(&client) {
                    busy.entry(client).or_default().push((start, entry.at));
                }
            }
            _ => {}
        }
    }
    for (client, start) in acquiring {
        busy.entry(client).or_default().push((start, run_end));
    }
    busy
}

/// Per client, when it could not have reached the key's node: a fault on
/// it or on a Redis node was under way, and for `grace` after it ended
/// (the adapter needs a command timeout to notice a broken connection).
fn cut_off(
    history: &History,
    grace: Duration,
    run_end: Duration,
) -> BTreeMap<String, Vec<(Duration, Duration)>> {
    // Faults of one kind on one target may overlap (a repeating fault):
    // each end closes the earliest open start.
    let mut open: BTreeMap<(String, String), Vec<Duration>> = BTreeMap::new();
    let mut faults: Vec<(String, Duration, Duration)> = Vec::new();
    for entry in &history.entries {
        match &entry.op {
            Op::Fault {
                kind,
                target,
                phase: Phase::Start,
            } => {
                open.entry((kind.clone(), target.clone()))
                    .or_default()
                    .push(entry.at);
                // Faults without an end are instants (failover, clock jump)
                // or last for good (crash): count them from here.
                faults.push((target.clone(), entry.at, entry.at));
            }
            Op::Fault {
                kind,
                target,
                phase: Phase::End,
            } => {
                if let Some(starts) = open.get_mut(&(kind.clone(), target.clone()))
                    && !starts.is_empty()
                {
                    let start = starts.remove(0);
                    faults.push((target.clone(), start, entry.at));
                }
            }
            Op::Failover { new_primary, .. } => {
                faults.push((format!("redis:{new_primary}"), entry.at, entry.at));
            }
            _ => {}
        }
    }
    // A crash, or a fault still under way at the end: for good.
    for ((_, target), starts) in open {
        for start in starts {
            faults.push((target.clone(), start, run_end));
        }
    }
    let mut out: BTreeMap<String, Vec<(Duration, Duration)>> = BTreeMap::new();
    for (target, start, end) in faults {
        out.entry(target).or_default().push((start, end + grace));
    }
    out
}

/// A1: a key on the authoritative node that belongs to a client which
/// neither holds the lock nor is acquiring it, for longer than a command
/// timeout plus a round trip, is an orphan: nobody can take the lock
/// until it expires. Time while the client or a Redis node was under a
/// fault (and a command timeout after) does not count: then the client
/// could not have removed it.
pub(super) fn orphans(
    scenario: &Scenario,
    history: &History,
    holds: &[Hold],
    verdict: &mut Verdict,
) {
    let timeout = lock_options(&scenario.lock).effective_command_timeout();
    let bound = timeout + BASE_LATENCY * 2 + TICK_SLACK;
    let run_end = scenario.duration;
    let busy = busy_intervals(history, holds, run_end);
    let cut = cut_off(history, timeout + BASE_LATENCY * 2, run_end);
    let redis_faults: Vec<(Duration, Duration)> = cut
        .iter()
        .filter(|(target, _)| target.starts_with("redis"))
        .flat_map(|(_, intervals)| intervals.iter().copied())
        .collect();
    let timeline = oracle_timeline(history);
    for (position, &(start, owner, index)) in timeline.iter().enumerate() {
        let Some(token) = owner else { continue };
        let Some(client) = client_of_token(token) else {
            continue;
        };
        let end = timeline.get(position + 1).map_or(run_end, |next| next.0);
        let mut excused: Vec<(Duration, Duration)> = busy.get(&client).cloned().unwrap_or_default();
        excused.extend(redis_faults.iter().copied());
        if let Some(intervals) = cut.get(&format!("client:{client}")) {
            excused.extend(intervals.iter().copied());
        }
        let excused = merged(excused);
        if let Some((from, _)) = uncovered(start, end, &excused)
            .into_iter()
            .find(|(from, to)| to.saturating_sub(*from) > bound)
        {
            verdict.violations.push(Violation {
                property: Property::NoOrphans,
                at: from + bound,
                message: format!(
                    "the key of client-{client} ({}) sat on the authoritative node from {from:?} past {:?}, while the client neither held the lock nor was acquiring it (bound: a command timeout of {timeout:?} plus a round trip)",
                    short(token),
                    from + bound
                ),
                evidence: vec![index],
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{checker::holds, history::Entry};

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

    fn oracle(at: u64, owner: Option<&str>) -> Entry {
        entry(
            at,
            Process::Controller,
            Op::Oracle {
                primary: 0,
                owner: owner.map(str::to_owned),
                pttl_ms: None,
            },
        )
    }

    fn scenario() -> Scenario {
        let mut scenario = crate::scenario::parse_scenario(
            "orphans.toml",
            "name = \"o\"\ndescription = \"\"\nduration = \"3s\"\nexpect = \"safe\"\n[lock]\nttl = \"1s\"\n",
        )
        .expect("a valid scenario");
        scenario.clients.count = 2;
        scenario
    }

    fn found(history: &History) -> Verdict {
        let scenario = scenario();
        let mut verdict = Verdict::default();
        orphans(
            &scenario,
            history,
            &holds(history, scenario.duration),
            &mut verdict,
        );
        verdict
    }

    const LOST: &str = "1234abcd:client-1:sim";

    #[test]
    fn a_key_nobody_wants_for_longer_than_a_command_timeout_is_an_orphan() {
        // client-1's acquire gave up at 100 ms (its reply was lost), but its
        // key stays until it expires at 1 s: nobody can take the lock.
        let history = History {
            entries: vec![
                entry(0, Process::Client(1), Op::AcquireInvoke),
                oracle(10, Some(LOST)),
                entry(
                    100,
                    Process::Client(1),
                    Op::AcquireFail {
                        error: "timed out".into(),
                    },
                ),
                oracle(1_000, None),
            ],
        };
        let verdict = found(&history);
        assert_eq!(
            verdict.violated().into_iter().collect::<Vec<_>>(),
            [Property::NoOrphans]
        );
        assert!(verdict.violations[0].message.contains("client-1"));
    }

    #[test]
    fn a_prompt_undo_or_a_fault_in_the_way_is_not_an_orphan() {
        // Removed within a command timeout of giving up.
        let prompt = History {
            entries: vec![
                entry(0, Process::Client(1), Op::AcquireInvoke),
                oracle(10, Some(LOST)),
                entry(
                    100,
                    Process::Client(1),
                    Op::AcquireFail {
                        error: "timed out".into(),
                    },
                ),
                oracle(150, None),
            ],
        };
        assert!(found(&prompt).violations.is_empty());
        // The client was cut off the whole time, and the key expired
        // within a command timeout of the partition's end.
        let fault = |at, phase| {
            entry(
                at,
                Process::Controller,
                Op::Fault {
                    kind: "partition".into(),
                    target: "client:1".into(),
                    phase,
                },
            )
        };
        let cut_off = History {
            entries: vec![
                entry(0, Process::Client(1), Op::AcquireInvoke),
                oracle(10, Some(LOST)),
                fault(20, Phase::Start),
                entry(
                    100,
                    Process::Client(1),
                    Op::AcquireFail {
                        error: "timed out".into(),
                    },
                ),
                fault(900, Phase::End),
                oracle(1_000, None),
            ],
        };
        assert!(found(&cut_off).violations.is_empty());
    }
}
