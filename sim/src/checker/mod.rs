//! The checkers: every property, run over every history.
//!
//! They read only the history. A client *believes* it holds a lock from its
//! `AcquireOk` until the first of: its `Lost`, its `ReleaseInvoke` or
//! `GuardDropped`, or its deadline passing (the last `valid_until` it
//! learnt before then). The deadline ends belief even when the client was
//! frozen and could not react: a paused process that wakes checks
//! `is_held()` and finds false.

use std::time::Duration;

pub mod dead_waiter;
pub mod family;
mod hold;
mod journal;
#[cfg(test)]
mod planted;
mod progress;
mod quorum;
mod safety;
mod timeline;
pub mod validity;

pub(crate) use hold::TICK_SLACK;
pub use hold::{Hold, HoldEnd};
pub use timeline::holds;

use crate::{
    config::{Scenario, WorkloadKind},
    history::History,
    outcome::{ConcreteFault, Verdict},
};

/// Runs every checker over `history`.
pub fn check(scenario: &Scenario, schedule: &[ConcreteFault], history: &History) -> Verdict {
    check_with_slack(scenario, schedule, history, TICK_SLACK, true)
}

/// Runs every checker over a history recorded on real processes, whose
/// events and oracle samples carry real timing error: `slack` instead of
/// a tick at the edges of a hold (S2) and at a deadline (S6). Its oracle
/// is polled, not told of every change, so S2 counts only samples inside
/// a hold; S5, which needs every owner the key ever had, reads the
/// journal (the primary's replication stream) instead, where the run has
/// one and while it covers (facts `owner-only-checked`,
/// `owner-only-unchecked`).
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
    } else if one_owner {
        journal::owner_only(
            history,
            &holds,
            command_timeout,
            slack,
            run_end,
            &mut verdict,
        );
    }
    safety::timely_loss(history, &holds, slack, &mut verdict);
    if one_owner {
        family::fairness(scenario, history, &mut verdict);
    }
    if kind == WorkloadKind::Fair {
        dead_waiter::dead_waiters(scenario, history, &holds, &mut verdict);
    }
    progress::liveness(scenario, schedule, history, &holds, &mut verdict);
    if one_owner {
        progress::orphans(scenario, history, &holds, &mut verdict);
    }
    progress::availability(scenario, schedule, history, &holds, &mut verdict);
    quorum::quorum_availability(scenario, schedule, &holds, &mut verdict);
    progress::facts(scenario, history, &holds, &mut verdict);
    verdict.violations.sort_by_key(|v| (v.at, v.property));
    verdict.invalid =
        validity::findings(scenario, schedule, history, &holds, slack, !complete_oracle);
    verdict
        .invalid
        .extend(validity::named_property_unchecked(scenario, &verdict.facts));
    verdict
}

#[cfg(test)]
mod tests {
    //! The family's checkers through [`check`]: planted histories of each
    //! kind fail their own property (and the plain lock's overtaking is a
    //! counted fact, not a failure).

    use std::time::Duration;

    use crate::{
        config::Scenario,
        history::{Op, Process},
    };

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    use crate::{
        config::Property,
        history::{Entry, History},
        scenario::parse_scenario,
    };

    fn scenario(workload: &str) -> Scenario {
        let text = format!(
            "name = \"planted\"\ndescription = \"\"\nduration = \"10s\"\nexpect = \"safe\"\n\
             [lock]\nttl = \"1s\"\n[workload]\n{workload}\n"
        );
        parse_scenario("planted.toml", &text).expect("a valid scenario")
    }

    fn at(time: u64, client: usize, op: Op) -> Entry {
        Entry {
            at: ms(time),
            local: ms(time),
            process: Process::Client(client),
            op,
        }
    }

    fn grant(time: u64, client: usize, token: &str, shared: bool) -> Entry {
        at(
            time,
            client,
            Op::AcquireOk {
                token: token.into(),
                fence: if shared { 0 } else { time * 1_000 },
                valid_until: ms(time + 900),
                shared,
            },
        )
    }

    fn release(time: u64, client: usize, token: &str) -> Entry {
        at(
            time,
            client,
            Op::ReleaseInvoke {
                token: token.into(),
            },
        )
    }

    fn violated(scenario: &Scenario, entries: Vec<Entry>) -> Vec<Property> {
        let history = History { entries };
        let verdict = super::check(scenario, &[], &history);
        // The short histories leave the lock unheld for most of the run:
        // only the safety properties are of interest here.
        verdict
            .violated()
            .into_iter()
            .filter(|p| !matches!(p, Property::Availability | Property::Liveness))
            .collect()
    }

    #[test]
    fn planted_writer_inside_readers_is_a_writer_exclusion_violation() {
        let rw = scenario("kind = \"read-write\"");
        let readers = vec![
            grant(100, 0, "r0", true),
            grant(150, 1, "r1", true),
            release(300, 0, "r0"),
            release(350, 1, "r1"),
        ];
        assert_eq!(violated(&rw, readers.clone()), [], "readers share");
        let mut planted = readers;
        planted.insert(2, grant(200, 2, "w2", false));
        planted.push(release(400, 2, "w2"));
        assert_eq!(violated(&rw, planted), [Property::WriterExclusion]);
    }

    #[test]
    fn planted_third_permit_of_two_is_a_capacity_violation() {
        let semaphore = scenario("kind = \"semaphore\"\npermits = 2");
        let two = vec![
            grant(100, 0, "p0", false),
            grant(150, 1, "p1", false),
            release(300, 0, "p0"),
            grant(310, 2, "p2", false),
            release(350, 1, "p1"),
            release(400, 2, "p2"),
        ];
        assert_eq!(violated(&semaphore, two.clone()), [], "two at a time");
        let mut planted = two;
        // client-2 granted while both permits are held.
        planted.insert(2, grant(200, 2, "p2early", false));
        planted.insert(4, release(305, 2, "p2early"));
        assert_eq!(violated(&semaphore, planted), [Property::Capacity]);
    }

    /// client-0 holds; client-1 starts waiting at 20, client-2 at 60;
    /// client-0 releases at 300 and the next grant goes to `next`.
    fn handoff(next: usize) -> Vec<Entry> {
        let other = 3 - next;
        vec![
            at(0, 0, Op::AcquireInvoke),
            grant(1, 0, "h0", false),
            at(10, 1, Op::AcquireInvoke),
            at(20, 1, Op::Waiting),
            at(50, 2, Op::AcquireInvoke),
            at(60, 2, Op::Waiting),
            release(300, 0, "h0"),
            grant(305, next, "h1", false),
            release(500, next, "h1"),
            grant(505, other, "h2", false),
            release(700, other, "h2"),
        ]
    }

    #[test]
    fn planted_overtaking_fails_fair_mode_and_is_a_counted_fact_for_the_plain_lock() {
        let fair = scenario("kind = \"fair\"");
        assert_eq!(violated(&fair, handoff(1)), [], "arrival order");
        assert_eq!(violated(&fair, handoff(2)), [Property::FairOrder]);
        let plain = scenario("kind = \"mutex\"");
        let verdict = super::check(
            &plain,
            &[],
            &History {
                entries: handoff(2),
            },
        );
        assert!(
            verdict
                .violations
                .iter()
                .all(|v| v.property == Property::Availability),
            "no safety violation: {:?}",
            verdict.violations
        );
        assert!(verdict.facts.contains("waiter-overtaken"));
        assert_eq!(verdict.overtakings, 1);
    }

    /// client-0 holds until 1000; client-1 queues at 12 and pauses for
    /// good at 900 (inside client-0's hold, so its acquire was refused);
    /// client-2 queues behind it at 202 and is granted at `granted`.
    fn dead_head(granted: u64) -> Vec<Entry> {
        use crate::history::Phase;
        let fault = |time: u64, phase: Phase| Entry {
            at: ms(time),
            local: ms(time),
            process: Process::Controller,
            op: Op::Fault {
                kind: "pause".into(),
                target: "client:1".into(),
                phase,
            },
        };
        vec![
            at(0, 0, Op::AcquireInvoke),
            grant(1, 0, "h0", false),
            at(10, 1, Op::AcquireInvoke),
            at(12, 1, Op::Waiting),
            at(200, 2, Op::AcquireInvoke),
            at(202, 2, Op::Waiting),
            // Renewed: its lease runs past its release.
            at(
                600,
                0,
                Op::Renewed {
                    token: "h0".into(),
                    valid_until: ms(1_500),
                },
            ),
            fault(900, Phase::Start),
            release(1000, 0, "h0"),
            grant(granted, 2, "h2", false),
            release(granted + 100, 2, "h2"),
            fault(9_000, Phase::End),
        ]
    }

    #[test]
    fn planted_dead_head_held_past_its_waiter_ttl_is_a_dead_waiter_violation() {
        let fair = scenario("kind = \"fair\"");
        // ttl 1 s: waiter ttl 333 ms. client-1's place lapses by 900 + 2
        // (a one-way delay) + 333 + 5.33 (its drift) + 2 (a tick) = 1242.33
        // ms; a retry later (121 ms), client-2 must have been granted.
        let terms = super::dead_waiter::Terms::of(&fair);
        assert_eq!(terms.retry_slack(), ms(121));
        assert_eq!(violated(&fair, dead_head(1_240)), [], "within its place");
        assert_eq!(violated(&fair, dead_head(1_363)), [], "within a retry");
        // A queue that kept the dead head's place for longer.
        assert_eq!(violated(&fair, dead_head(1_400)), [Property::DeadWaiter]);
        // The plain lock has no queue to hold anyone up: F4 is fair mode's.
        let plain = scenario("kind = \"mutex\"");
        assert_eq!(violated(&plain, dead_head(1_400)), []);
    }
}
