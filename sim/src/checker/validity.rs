//! Whether a run proves anything: a run whose clients were never granted
//! the lock, whose faults did not happen, or whose oracle was blind while
//! the lock was held shows no violation because it tested nothing. Such a
//! run is `inconclusive`, never safe.
//!
//! A run is valid when it has:
//! - at least the file's `min_grants` grants (default 1);
//! - a start in the history for each fault the schedule put inside the
//!   run, and for each failover a completed one ([`Op::Failover`]) or the
//!   record that it found no replica to promote ([`Op::NoFailover`]): one
//!   asked for and never seen to happen proves nothing. A fault is inside
//!   the run when it is due at least `slack` (a tick; on real processes
//!   their timing error) before its end, and a failover Sentinel must
//!   detect when it is due [`SENTINEL_DETECTION`] before that. A fault on
//!   a host the schedule already crashed for good, or took down (a
//!   restart) until past the run's end, needs no start: it proves nothing
//!   either way, and a dead host shows no evidence (a pause of a dead
//!   process never shows it stopped), though the simulator records it;
//! - on real processes, an oracle that saw the lock key for at least
//!   [`MIN_COVERAGE`] of the time some client held the lock (its blind
//!   spells are in the history as [`Op::OracleBlind`]), and a controller
//!   that never stalled longer than the file's `max_stall` ([`Op::Stall`]:
//!   while it stalls, faults and samples wait, a fault no schedule drew).

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use super::Hold;
use crate::{
    config::{FaultKind, FaultTarget, Property, Scenario, Topology},
    history::{History, Op, Phase},
    outcome::ConcreteFault,
    scenario::names::fault_kind,
};

/// The least share of the hold time a real run's oracle must have seen.
pub const MIN_COVERAGE: f64 = 0.90;

/// How long before the run's end a Sentinel failover without a stale
/// window must be due to be demanded: its old primary dies, and the
/// sentinels elect a new one once they find it down. Real sentinels are
/// given `down-after-milliseconds 1000` (`chaos::deploy`), then agree and
/// vote; the archive `docs/agreement/2026-11-29-all` shows 2.2–2.3 s from
/// the kill to the new primary answering as one. The simulator's failover
/// is at once; the rule is the same in both modes.
pub const SENTINEL_DETECTION: Duration = Duration::from_secs(3);

/// Why the run of `scenario` that drew `schedule` and wrote `history`
/// proves nothing; empty when it is valid. `slack`: how long a fault may
/// take to begin (a tick; on real processes their timing error). `real`:
/// recorded on real processes (the oracle's coverage is checked).
pub fn findings(
    scenario: &Scenario,
    schedule: &[ConcreteFault],
    history: &History,
    holds: &[Hold],
    slack: Duration,
    real: bool,
) -> Vec<String> {
    let mut findings = Vec::new();
    let demanded: Vec<&ConcreteFault> = schedule
        .iter()
        .filter(|fault| inside(scenario, fault, slack) && !host_gone(scenario, schedule, fault))
        .collect();
    grants(scenario, history, &mut findings);
    faults_began(&demanded, history, &mut findings);
    failovers_completed(scenario, &demanded, slack, history, &mut findings);
    if real && let Some(finding) = coverage(history, holds, scenario.duration) {
        findings.push(finding);
    }
    if real && let Some(finding) = stall(scenario, history) {
        findings.push(finding);
    }
    findings
}

/// Why a run proves nothing about the property its file names, which its
/// checker could not check all through (S5 on real processes, outside
/// the replication journal's span: fact `owner-only-unchecked`). A file
/// that names another property, or none, loses nothing by it.
pub fn named_property_unchecked(scenario: &Scenario, facts: &BTreeSet<String>) -> Option<String> {
    (scenario.property == Some(Property::OwnerOnly) && facts.contains("owner-only-unchecked")).then(
        || {
            "S5, the property this file names, went unchecked for some release or renewal \
             (outside the replication journal's span: a failover, a restart, or a topology it \
             does not follow)"
                .to_owned()
        },
    )
}

/// Whether `fault` is due inside the run: at least `slack` before its end
/// (a fault drawn for the run's last tick begins after the run ended; a
/// real partition is in place once `iptables-restore` returned).
fn inside(scenario: &Scenario, fault: &ConcreteFault, slack: Duration) -> bool {
    fault.at + slack <= scenario.duration
}

/// Whether `fault`'s host is down when it is due, for good or until past
/// the run's end, by an earlier fault of `schedule`: a crash, or a
/// restart whose down time outlasts the run. Only a named host
/// (`client:N`, `redis:N`) is matched: which node `redis:primary` names is
/// known only when the fault fires.
fn host_gone(scenario: &Scenario, schedule: &[ConcreteFault], fault: &ConcreteFault) -> bool {
    if !matches!(fault.target, FaultTarget::Client(_) | FaultTarget::Redis(_)) {
        return false;
    }
    schedule.iter().any(|earlier| {
        earlier.target == fault.target
            && earlier.at < fault.at
            && match earlier.kind {
                FaultKind::Crash => true,
                FaultKind::Restart => earlier
                    .duration
                    .is_some_and(|down| earlier.at + down >= scenario.duration),
                _ => false,
            }
    })
}

/// Whether `fault` is a failover whose detection is Sentinel's: the old
/// primary is killed, and the sentinels must notice
/// ([`SENTINEL_DETECTION`]).
fn detected_by_sentinel(scenario: &Scenario, fault: &ConcreteFault) -> bool {
    fault.kind == FaultKind::Failover
        && fault.duration.is_none()
        && matches!(scenario.topology, Topology::Sentinel { .. })
}

fn grants(scenario: &Scenario, history: &History, findings: &mut Vec<String>) {
    let grants = history
        .entries
        .iter()
        .filter(|entry| matches!(entry.op, Op::AcquireOk { .. }))
        .count() as u64;
    if grants < scenario.min_grants {
        findings.push(format!(
            "{grants} grants, fewer than the {} the file asks for (min_grants)",
            scenario.min_grants
        ));
    }
}

/// Each kind's `demanded` faults against the starts the history records
/// of it.
fn faults_began(demanded: &[&ConcreteFault], history: &History, findings: &mut Vec<String>) {
    let mut scheduled: BTreeMap<&str, usize> = BTreeMap::new();
    for fault in demanded {
        *scheduled.entry(fault_kind(fault.kind).name).or_default() += 1;
    }
    let mut began: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in &history.entries {
        if let Op::Fault {
            kind,
            phase: Phase::Start,
            ..
        } = &entry.op
        {
            *began.entry(kind.as_str()).or_default() += 1;
        }
    }
    for (kind, count) in scheduled {
        let seen = began.get(kind).copied().unwrap_or(0);
        if seen < count {
            findings.push(format!(
                "{count} {kind} faults scheduled inside the run, {seen} began"
            ));
        }
    }
}

/// The `demanded` failovers against the completed ones; one Sentinel must
/// detect is demanded only when due [`SENTINEL_DETECTION`] before the end.
fn failovers_completed(
    scenario: &Scenario,
    demanded: &[&ConcreteFault],
    slack: Duration,
    history: &History,
    findings: &mut Vec<String>,
) {
    let scheduled = demanded
        .iter()
        .filter(|f| {
            matches!(f.kind, FaultKind::Failover | FaultKind::ShardFailover)
                && (!detected_by_sentinel(scenario, f)
                    || f.at + SENTINEL_DETECTION + slack <= scenario.duration)
        })
        .count();
    let completed = history
        .entries
        .iter()
        .filter(|entry| matches!(entry.op, Op::Failover { .. } | Op::NoFailover { .. }))
        .count();
    if completed < scheduled {
        findings.push(format!(
            "{scheduled} failovers scheduled inside the run, {completed} completed"
        ));
    }
}

/// The controller's longest stall, as a finding when it is longer than
/// the file allows.
fn stall(scenario: &Scenario, history: &History) -> Option<String> {
    let (at, lasted) = history
        .entries
        .iter()
        .filter_map(|entry| match entry.op {
            Op::Stall { lasted } => Some((entry.at, lasted)),
            _ => None,
        })
        .max_by_key(|(_, lasted)| *lasted)?;
    (lasted > scenario.max_stall).then(|| {
        format!(
            "the controller stalled for {} ms at {:.3} s (max_stall {} ms)",
            lasted.as_millis(),
            at.as_secs_f64(),
            scenario.max_stall.as_millis()
        )
    })
}

/// The oracle's blind spells (start to end, or to the run's end), as
/// intervals of true time.
fn blind_spells(history: &History, run_end: Duration) -> Vec<(Duration, Duration)> {
    let mut spells = Vec::new();
    let mut since = None;
    for entry in &history.entries {
        match entry.op {
            Op::OracleBlind {
                phase: Phase::Start,
            } => {
                since.get_or_insert(entry.at);
            }
            Op::OracleBlind { phase: Phase::End } => {
                if let Some(start) = since.take() {
                    spells.push((start, entry.at));
                }
            }
            _ => {}
        }
    }
    if let Some(start) = since {
        spells.push((start, run_end.max(start)));
    }
    spells
}

/// The union of `intervals`, merged and in order.
fn union(mut intervals: Vec<(Duration, Duration)>) -> Vec<(Duration, Duration)> {
    intervals.sort();
    let mut merged: Vec<(Duration, Duration)> = Vec::new();
    for (start, end) in intervals {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// The share of the time some client held the lock that the oracle saw,
/// as a finding when it is below [`MIN_COVERAGE`].
fn coverage(history: &History, holds: &[Hold], run_end: Duration) -> Option<String> {
    let held = union(holds.iter().map(|h| (h.start, h.end)).collect());
    let held_total: Duration = held.iter().map(|(start, end)| *end - *start).sum();
    if held_total.is_zero() {
        return None;
    }
    let blind = union(blind_spells(history, run_end));
    let mut unseen = Duration::ZERO;
    for (held_start, held_end) in &held {
        for (blind_start, blind_end) in &blind {
            let start = (*held_start).max(*blind_start);
            let end = (*held_end).min(*blind_end);
            if start < end {
                unseen += end - start;
            }
        }
    }
    let seen = 1.0 - unseen.as_secs_f64() / held_total.as_secs_f64();
    (seen < MIN_COVERAGE).then(|| {
        format!(
            "the oracle saw the lock key for {:.1} % of the {:.2} s the lock was held \
             (at least {:.0} % needed)",
            seen * 100.0,
            held_total.as_secs_f64(),
            MIN_COVERAGE * 100.0
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::{
        TICK_SLACK,
        planted::{entry, ms},
    };
    use super::*;
    use crate::history::{Entry, Process};

    fn scenario(extra: &str) -> Scenario {
        lasting("2s", extra)
    }

    fn lasting(duration: &str, extra: &str) -> Scenario {
        let text = format!(
            "name = \"v\"\ndescription = \"d\"\nduration = \"{duration}\"\nexpect = \"safe\"\n{extra}\n\
             [lock]\nttl = \"1s\"\n"
        );
        crate::scenario::parse_scenario("v.toml", &text).expect("a valid scenario")
    }

    fn grant(at: u64, client: usize, token: &str) -> Entry {
        entry(
            at,
            Process::Client(client),
            Op::AcquireOk {
                token: token.to_owned(),
                fence: 1,
                valid_until: ms(at + 1000),
                shared: false,
            },
        )
    }

    fn release(at: u64, client: usize, token: &str) -> Entry {
        entry(
            at,
            Process::Client(client),
            Op::ReleaseInvoke {
                token: token.to_owned(),
            },
        )
    }

    fn blind(at: u64, phase: Phase) -> Entry {
        entry(at, Process::Controller, Op::OracleBlind { phase })
    }

    fn judge(scenario: &Scenario, entries: Vec<Entry>, real: bool) -> Vec<String> {
        judge_with(scenario, entries, TICK_SLACK, real)
    }

    fn judge_with(
        scenario: &Scenario,
        entries: Vec<Entry>,
        slack: Duration,
        real: bool,
    ) -> Vec<String> {
        let history = History { entries };
        let holds = super::super::holds(&history, scenario.duration);
        let schedule = crate::schedule::draw_schedule(scenario, 0);
        findings(scenario, &schedule, &history, &holds, slack, real)
    }

    fn began(at: u64, kind: &str, target: &str) -> Entry {
        entry(
            at,
            Process::Controller,
            Op::Fault {
                kind: kind.to_owned(),
                target: target.to_owned(),
                phase: Phase::Start,
            },
        )
    }

    #[test]
    fn a_fault_on_a_host_already_gone_for_the_run_needs_no_start() {
        // Client 0 crashes at 0.5 s: its pause at 1 s needs no evidence
        // (a dead process never shows stopped); client 1's does.
        let file = scenario(
            "[[fault]]\nkind = \"crash\"\nat = \"500ms\"\ntarget = \"client:0\"\n\
             [[fault]]\nkind = \"pause\"\nat = \"1s\"\ntarget = \"client:0\"\nduration = \"100ms\"\n\
             [[fault]]\nkind = \"pause\"\nat = \"1s\"\ntarget = \"client:1\"\nduration = \"100ms\"\n",
        );
        let crash = began(500, "crash", "client:0");
        let found = judge(&file, vec![grant(10, 1, "a"), crash.clone()], true);
        assert_eq!(found, ["1 pause faults scheduled inside the run, 0 began"]);
        let pause = began(1000, "pause", "client:1");
        assert!(judge(&file, vec![grant(10, 1, "a"), crash, pause], true).is_empty());
        // A node restarted until past the run's end is gone for the rest
        // of it; one back before the end is not.
        let restart = |down: &str| {
            scenario(&format!(
                "[topology]\nkind = \"redlock\"\nnodes = 3\n\
                 [[fault]]\nkind = \"restart\"\nat = \"500ms\"\ntarget = \"redis:0\"\nduration = \"{down}\"\n\
                 [[fault]]\nkind = \"clock-jump\"\nat = \"1s\"\ntarget = \"redis:0\"\noffset = \"200ms\"\n"
            ))
        };
        let down = began(500, "restart", "redis:0");
        assert!(judge(&restart("2s"), vec![grant(10, 1, "a"), down.clone()], true).is_empty());
        assert_eq!(
            judge(&restart("1s"), vec![grant(10, 1, "a"), down], true),
            ["1 clock-jump faults scheduled inside the run, 0 began"]
        );
    }

    #[test]
    fn a_file_that_names_s5_proves_nothing_where_s5_went_unchecked() {
        let unchecked: BTreeSet<String> = ["owner-only-unchecked".to_owned()].into();
        let checked: BTreeSet<String> = ["owner-only-checked".to_owned()].into();
        let names_s5 = scenario("property = \"owner-only\"");
        assert!(named_property_unchecked(&names_s5, &unchecked).is_some());
        assert!(named_property_unchecked(&names_s5, &checked).is_none());
        assert!(named_property_unchecked(&scenario(""), &unchecked).is_none());
    }

    #[test]
    fn a_sentinel_failover_is_demanded_only_when_due_in_time_to_be_detected() {
        let file = |at: &str| {
            lasting(
                "6s",
                &format!(
                    "[topology]\nkind = \"sentinel\"\nreplicas = 2\nsentinels = 3\n\
                 [[fault]]\nkind = \"failover\"\nat = \"{at}\"\ntarget = \"redis:primary\"\n"
                ),
            )
        };
        let start = |at| began(at, "failover", "redis:0");
        // Due 2.15 s before the end: Sentinel may not have found the
        // primary down yet (down-after 1 s, then the vote).
        assert!(judge(&file("3850ms"), vec![grant(10, 0, "a"), start(3850)], true).is_empty());
        assert_eq!(
            judge(&file("2500ms"), vec![grant(10, 0, "a"), start(2500)], true),
            ["1 failovers scheduled inside the run, 0 completed"]
        );
    }

    #[test]
    fn a_fault_due_within_the_slack_of_the_end_is_not_demanded() {
        let file = scenario(
            "[[fault]]\nkind = \"partition\"\nat = \"1990ms\"\ntarget = \"client:0\"\nduration = \"1s\"\n",
        );
        let real = judge_with(
            &file,
            vec![grant(10, 1, "a")],
            Duration::from_millis(25),
            true,
        );
        assert!(real.is_empty(), "{real:?}");
        assert_eq!(
            judge(&file, vec![grant(10, 1, "a")], false),
            ["1 partition faults scheduled inside the run, 0 began"]
        );
    }

    #[test]
    fn a_run_without_enough_grants_proves_nothing() {
        let plain = scenario("");
        assert_eq!(
            judge(&plain, vec![], false),
            ["0 grants, fewer than the 1 the file asks for (min_grants)"]
        );
        assert!(judge(&plain, vec![grant(10, 0, "a")], false).is_empty());
        let three = scenario("min_grants = 3");
        let two = vec![grant(10, 0, "a"), release(20, 0, "a"), grant(30, 1, "b")];
        assert_eq!(judge(&three, two, false).len(), 1);
    }

    #[test]
    fn a_scheduled_fault_needs_its_start_and_a_failover_its_completion() {
        let file = scenario(
            "[topology]\nkind = \"primary-replica\"\nreplicas = 1\n\
             [[fault]]\nkind = \"failover\"\nat = \"500ms\"\ntarget = \"redis:primary\"\n",
        );
        let start = entry(
            500,
            Process::Controller,
            Op::Fault {
                kind: "failover".to_owned(),
                target: "redis:0".to_owned(),
                phase: Phase::Start,
            },
        );
        let done = entry(
            520,
            Process::Controller,
            Op::Failover {
                old_primary: 0,
                new_primary: 1,
                old_owner: None,
                new_owner: None,
            },
        );
        let found = judge(&file, vec![grant(10, 0, "a")], false);
        assert_eq!(
            found,
            [
                "1 failover faults scheduled inside the run, 0 began",
                "1 failovers scheduled inside the run, 0 completed"
            ]
        );
        let found = judge(&file, vec![grant(10, 0, "a"), start.clone()], false);
        assert_eq!(found, ["1 failovers scheduled inside the run, 0 completed"]);
        assert!(judge(&file, vec![grant(10, 0, "a"), start, done], false).is_empty());
    }

    #[test]
    fn a_real_oracle_blind_for_a_tenth_of_the_hold_time_or_a_stalled_controller_proves_nothing() {
        let plain = scenario("");
        // Held 0.01-1.01 s; blind for 50 ms of it: 95 % seen.
        let mostly = vec![
            grant(10, 0, "a"),
            blind(100, Phase::Start),
            blind(150, Phase::End),
            release(1010, 0, "a"),
        ];
        assert!(judge(&plain, mostly.clone(), true).is_empty());
        // Blind from 0.9 s to the run's end (no end recorded): 89 % seen.
        let blind_to_end = vec![
            grant(10, 0, "a"),
            blind(900, Phase::Start),
            release(1010, 0, "a"),
        ];
        let found = judge(&plain, blind_to_end.clone(), true);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("89.0 %"), "{found:?}");
        // The simulator's oracle is told of every change: not checked.
        assert!(judge(&plain, blind_to_end, false).is_empty());
        // A stall longer than max_stall (default 500 ms) proves nothing.
        let stalled = |lasted: u64| {
            let stall = entry(300, Process::Controller, Op::Stall { lasted: ms(lasted) });
            judge(&plain, vec![grant(10, 0, "a"), stall], true)
        };
        assert!(stalled(400).is_empty());
        assert_eq!(
            stalled(700),
            ["the controller stalled for 700 ms at 0.300 s (max_stall 500 ms)"]
        );
        // Blind while nobody held the lock costs nothing.
        let idle = vec![
            grant(10, 0, "a"),
            release(500, 0, "a"),
            blind(600, Phase::Start),
        ];
        assert!(judge(&plain, idle, true).is_empty());
    }
}
