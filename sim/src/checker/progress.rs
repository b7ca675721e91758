//! Progress: liveness (L1), orphaned keys (A1), and the "sometimes" facts
//! that prove a fault actually bit.

use std::{collections::BTreeMap, time::Duration};

use super::{
    hold::{Hold, TICK_SLACK},
    timeline::{fault_spans, grant_times, oracle_timeline, short, stale_writes, stopped_intervals},
};
use crate::{
    client::lock_options,
    config::{Property, Scenario},
    history::{History, Op, Phase, Process},
    net::BASE_LATENCY,
    outcome::{ConcreteFault, Verdict, Violation},
};

/// Whether progress can be asked of the run at all: faults that never heal
/// (a crashed Redis) leave it undefined, and so does a run left with fewer
/// replicas than the lock's `WAIT` needs (a failover without a stale
/// window kills the old primary for good), since the lock then refuses
/// every grant rather than count one a failover would lose.
fn progress_defined(scenario: &Scenario, schedule: &[ConcreteFault], history: &History) -> bool {
    use crate::config::{FaultKind, FaultTarget};
    let permanent = schedule.iter().any(|fault| {
        fault.kind == FaultKind::Crash
            && matches!(fault.target, FaultTarget::Redis(_) | FaultTarget::Primary)
    });
    // The failovers begin in schedule order; each that promoted a replica
    // records `Failover` right after its start.
    let mut failovers = schedule
        .iter()
        .filter(|fault| fault.kind == FaultKind::Failover);
    let mut killed = 0;
    for (position, entry) in history.entries.iter().enumerate() {
        if let Op::Fault {
            kind,
            phase: Phase::Start,
            ..
        } = &entry.op
            && kind == "failover"
            && let Some(fault) = failovers.next()
            && fault.duration.is_none()
            && history
                .entries
                .get(position + 1)
                .is_some_and(|next| matches!(next.op, Op::Failover { .. }))
        {
            killed += 1;
        }
    }
    let replicas_left = scenario.topology.replicas().saturating_sub(killed);
    !permanent && replicas_left >= scenario.lock.wait_replicas as usize
}

/// L1: once every fault has healed, some client acquires within a bound.
pub(super) fn liveness(
    scenario: &Scenario,
    schedule: &[ConcreteFault],
    history: &History,
    holds: &[Hold],
    verdict: &mut Verdict,
) {
    use crate::config::{FaultKind, FaultTarget};
    if !progress_defined(scenario, schedule, history) {
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

/// L2: outside faults and the liveness bound after each, no stretch longer
/// than the bound (2 x ttl + 1 s) passes with nobody holding the lock. A
/// slot migration is not a fault here: the lock must stay available while
/// its slot moves (the locker follows `ASK` to the importing node).
pub(super) fn availability(
    scenario: &Scenario,
    schedule: &[ConcreteFault],
    history: &History,
    holds: &[Hold],
    verdict: &mut Verdict,
) {
    use crate::config::FaultKind;
    if !progress_defined(scenario, schedule, history) {
        return;
    }
    let run_end = scenario.duration;
    let bound = scenario.lock.ttl * 2 + Duration::from_secs(1);
    // The start counts as a fault: the clients connect and contend first.
    let mut excused = vec![(Duration::ZERO, bound)];
    for fault in schedule {
        if matches!(
            fault.kind,
            FaultKind::SlotMigration | FaultKind::AtomicSlotMigration
        ) {
            continue;
        }
        let end = match fault.kind {
            FaultKind::Crash => run_end,
            _ => fault.at + fault.duration.unwrap_or_default(),
        };
        excused.push((fault.at, end.saturating_add(bound)));
    }
    excused.extend(holds.iter().map(|hold| (hold.start, hold.end)));
    let covered = merged(excused);
    if let Some((from, to)) = uncovered(Duration::ZERO, run_end, &covered)
        .into_iter()
        .find(|(from, to)| to.saturating_sub(*from) > bound)
    {
        verdict.violations.push(Violation {
            property: Property::Availability,
            at: from + bound,
            message: format!(
                "nobody held the lock from {from:?} to {to:?}, with no fault under way (bound {bound:?})"
            ),
            evidence: Vec::new(),
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
    let gave_up_unanswered = lock_core::AcquireFailure::TimedOut {
        last_failure: Some(lock_core::Failure::Timeout),
    }
    .to_string();
    let grants = grant_times(holds);
    let names = crate::client::key_names();
    let mut register = Vec::new();
    // The node the lock key last moved to by MIGRATE, while no grant or
    // renewal has written it since.
    let mut migrated_to = None;
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
            (_, Op::Migrated { key, to, .. }) if *key == names.lock => migrated_to = Some(*to),
            // A grant or renewal since wrote the key itself.
            (_, Op::AcquireOk { .. } | Op::Renewed { .. }) => migrated_to = None,
            (
                _,
                Op::Failover {
                    old_primary,
                    old_owner: Some(old),
                    new_owner,
                    ..
                },
            ) if new_owner.as_deref() != Some(old.as_str()) => {
                fact("failover-lost-lock-key");
                if migrated_to == Some(*old_primary) {
                    // The key came by MIGRATE: RESTORE replicates like any
                    // write, and no WAIT of the lock covered it.
                    fact("failover-lost-migrated-key");
                }
            }
            (_, Op::AcquireFail { error }) => {
                fact("acquire-gave-up");
                if *error == gave_up_unanswered {
                    // The attempt may have set the key: the undo ran.
                    fact("acquire-gave-up-after-timeout");
                }
            }
            (_, Op::RenewFailed { reason, .. }) if reason == "Failed(ReadOnly)" => {
                fact("renewal-met-readonly");
            }
            (_, Op::Evicted { key, value, .. }) => {
                if **key == *names.fence {
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
    if timed_out_without_fault(scenario, history) {
        fact("timeout-without-fault");
    }
}

/// Whether a renewal timed out while no fault of any kind was under way
/// from its send (a command timeout before its failure) to its failure.
/// Only a stalled process can do that: on a real run, the client or the
/// server went unscheduled (a loaded machine), which delays commands the
/// way a cut does; the simulator never stalls, so there it would be a
/// modelling fault. A real run with this fact measured the machine as well
/// as the lock: its rates of what a cut causes (A1 above all) are not
/// comparable with the simulator's.
fn timed_out_without_fault(scenario: &Scenario, history: &History) -> bool {
    let timeout = lock_options(&scenario.lock).effective_command_timeout();
    let faults: Vec<(Duration, Duration)> = fault_spans(history, |kind, target| {
        Some(((), (kind.to_owned(), target.to_owned())))
    })
    .into_values()
    .flatten()
    .collect();
    history.entries.iter().any(|entry| {
        let Op::RenewFailed { reason, .. } = &entry.op else {
            return false;
        };
        let sent = entry.at.saturating_sub(timeout + TICK_SLACK);
        reason == "Failed(Timeout)"
            && !faults
                .iter()
                .any(|&(start, end)| start <= entry.at && end >= sent)
    })
}

/// The client a token belongs to: tokens end in `:client-N:sim` (the
/// simulator) or `:client-N:chaos` (real runs).
fn client_of_token(token: &str) -> Option<usize> {
    let (rest, _) = token.rsplit_once(':')?;
    let (_, client) = rest.rsplit_once(":client-")?;
    client.parse().ok()
}

/// Sorted, merged intervals.
pub(super) fn merged(mut intervals: Vec<(Duration, Duration)>) -> Vec<(Duration, Duration)> {
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
pub(super) fn uncovered(
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

/// One acquisition of the contended lock by one client: from its
/// `AcquireInvoke` to its grant, give-up or cancellation, and, once
/// granted, to the end of the hold.
struct Acquisition {
    client: usize,
    start: Duration,
    end: Duration,
    token: Option<String>,
}

/// Every acquisition of the history, in order.
fn acquisitions(history: &History, holds: &[Hold], run_end: Duration) -> Vec<Acquisition> {
    let hold_end: BTreeMap<&str, Duration> = holds
        .iter()
        .map(|hold| (hold.token.as_str(), hold.end))
        .collect();
    let cancelled = lock_core::AcquireFailure::Cancelled.to_string();
    let mut open: BTreeMap<usize, Duration> = BTreeMap::new();
    let mut done = Vec::new();
    for entry in &history.entries {
        let Process::Client(client) = entry.process else {
            continue;
        };
        let token = match &entry.op {
            Op::AcquireInvoke => {
                if let Some(start) = open.insert(client, entry.at) {
                    done.push(Acquisition {
                        client,
                        start,
                        end: entry.at,
                        token: None,
                    });
                }
                continue;
            }
            Op::AcquireOk { token, .. } => Some(token.clone()),
            // A cancelled acquire ended at the cancel: its undo reports
            // later, perhaps while the next acquisition is under way.
            Op::AcquireFail { error } if *error == cancelled => continue,
            Op::AcquireFail { .. } | Op::AcquireCancel => None,
            _ => continue,
        };
        if let Some(start) = open.remove(&client) {
            let end = token
                .as_deref()
                .and_then(|token| hold_end.get(token).copied())
                .unwrap_or(entry.at);
            done.push(Acquisition {
                client,
                start,
                end,
                token,
            });
        }
    }
    for (client, start) in open {
        done.push(Acquisition {
            client,
            start,
            end: run_end,
            token: None,
        });
    }
    done
}

/// When the client that set the key holding `token` wanted it: the
/// acquisition it belongs to (granted with that token, or, for a grant
/// it never heard of, the one under way when the key appeared at
/// `first_seen`), through the hold that followed. A later acquisition by
/// the same client wants a key of its own, not this one.
fn interest(
    acquisitions: &[Acquisition],
    client: usize,
    token: &str,
    first_seen: Duration,
) -> Option<(Duration, Duration)> {
    let mine = || acquisitions.iter().filter(|a| a.client == client);
    mine()
        .find(|a| a.token.as_deref() == Some(token))
        .or_else(|| mine().find(|a| a.start <= first_seen && first_seen <= a.end + TICK_SLACK))
        .map(|a| (a.start, a.end))
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

/// A1: a key on the authoritative node that its client no longer wants
/// (the acquisition that set it gave up or was cancelled, or the hold it
/// granted ended), for longer than a command timeout plus a round trip,
/// is an orphan: nobody can take the lock until it expires, the client
/// itself included. Time while the client or a Redis node was under a
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
    let acquisitions = acquisitions(history, holds, run_end);
    let cut = cut_off(history, timeout + BASE_LATENCY * 2, run_end);
    let redis_faults: Vec<(Duration, Duration)> = cut
        .iter()
        .filter(|(target, _)| target.starts_with("redis"))
        .flat_map(|(_, intervals)| intervals.iter().copied())
        .collect();
    let timeline = oracle_timeline(history);
    let mut first_seen: BTreeMap<&str, Duration> = BTreeMap::new();
    for &(at, owner, _) in &timeline {
        if let Some(token) = owner {
            first_seen.entry(token).or_insert(at);
        }
    }
    for (position, &(start, owner, index)) in timeline.iter().enumerate() {
        let Some(token) = owner else { continue };
        let Some(client) = client_of_token(token) else {
            continue;
        };
        let end = timeline.get(position + 1).map_or(run_end, |next| next.0);
        let mut excused: Vec<(Duration, Duration)> =
            interest(&acquisitions, client, token, first_seen[token])
                .into_iter()
                .collect();
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
    use super::super::{
        planted::{entry, ms},
        timeline::holds,
    };
    use super::*;
    use crate::history::Entry;

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
    fn a_token_names_its_client_in_simulated_and_real_runs() {
        assert_eq!(client_of_token(LOST), Some(1));
        // Real runs (`sim chaos`): the uuid, then `client-N:chaos`.
        let real = "7f3e9c1a-0b2d-4e5f-8a6b-1c2d3e4f5a6b:client-12:chaos";
        assert_eq!(client_of_token(real), Some(12));
        // lock-core's default suffix (`pid:host`) names no client.
        assert_eq!(client_of_token("7f3e9c1a:4242:vm"), None);
    }

    #[test]
    fn a_renewal_that_times_out_with_no_fault_under_way_is_a_stall() {
        let renew_failed = |at: u64| {
            entry(
                at,
                Process::Client(0),
                Op::RenewFailed {
                    token: LOST.into(),
                    reason: "Failed(Timeout)".into(),
                },
            )
        };
        let fault = |at: u64, phase: Phase| {
            entry(
                at,
                Process::Controller,
                Op::Fault {
                    kind: "partition".into(),
                    target: "client:0".into(),
                    phase,
                },
            )
        };
        let stalled = History {
            entries: vec![renew_failed(1_500)],
        };
        assert!(timed_out_without_fault(&scenario(), &stalled));
        // A partition while the renewal was out (sent a command timeout,
        // 166 ms with this ttl, before it failed): the cut explains it.
        let cut = History {
            entries: vec![
                fault(1_300, Phase::Start),
                fault(1_400, Phase::End),
                renew_failed(1_500),
            ],
        };
        assert!(!timed_out_without_fault(&scenario(), &cut));
        // One that ended before the renewal was sent does not.
        let healed = History {
            entries: vec![
                fault(700, Phase::Start),
                fault(900, Phase::End),
                renew_failed(1_500),
            ],
        };
        assert!(timed_out_without_fault(&scenario(), &healed));
        // Another reason is no stall.
        let refused = History {
            entries: vec![entry(
                1_500,
                Process::Client(0),
                Op::RenewFailed {
                    token: LOST.into(),
                    reason: "NotOwner".into(),
                },
            )],
        };
        assert!(!timed_out_without_fault(&scenario(), &refused));
    }

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

    #[test]
    fn a_later_acquire_by_the_same_client_does_not_excuse_an_old_key() {
        // client-1 dropped its guard at 200 ms and acquires again at once,
        // blocked by its own old key until it expires at 1 s: the old key
        // is wanted by nobody.
        let history = History {
            entries: vec![
                entry(0, Process::Client(1), Op::AcquireInvoke),
                oracle(2, Some(LOST)),
                entry(
                    3,
                    Process::Client(1),
                    Op::AcquireOk {
                        token: LOST.into(),
                        fence: 1,
                        valid_until: ms(900),
                        shared: false,
                    },
                ),
                entry(
                    200,
                    Process::Client(1),
                    Op::GuardDropped { token: LOST.into() },
                ),
                entry(201, Process::Client(1), Op::AcquireInvoke),
                oracle(1_000, None),
            ],
        };
        let verdict = found(&history);
        assert_eq!(
            verdict.violated().into_iter().collect::<Vec<_>>(),
            [Property::NoOrphans]
        );
    }

    #[test]
    fn a_long_unheld_stretch_outside_faults_breaks_availability() {
        let hold = |at, token: &str, until| {
            entry(
                at,
                Process::Client(0),
                Op::AcquireOk {
                    token: token.into(),
                    fence: 1,
                    valid_until: ms(until),
                    shared: false,
                },
            )
        };
        // ttl 1 s: the bound is 3 s; nobody holds from 3.5 s to 8 s.
        let history = History {
            entries: vec![hold(0, "a", 3_500), hold(8_000, "b", 9_000)],
        };
        let mut scenario = scenario();
        scenario.duration = ms(9_000);
        let unheld = |schedule: &[ConcreteFault]| {
            let mut verdict = Verdict::default();
            availability(
                &scenario,
                schedule,
                &history,
                &holds(&history, scenario.duration),
                &mut verdict,
            );
            verdict.violated().contains(&Property::Availability)
        };
        assert!(unheld(&[]));
        let fault = |kind| ConcreteFault {
            kind,
            at: ms(3_000),
            target: crate::config::FaultTarget::Redis(0),
            duration: Some(ms(3_000)),
            rate: None,
            offset: None,
            delay: None,
        };
        use crate::config::FaultKind;
        assert!(
            !unheld(&[fault(FaultKind::Partition)]),
            "a fault excuses it"
        );
        assert!(
            unheld(&[fault(FaultKind::SlotMigration)]),
            "a slot migration does not"
        );
    }
}
