//! F4 (fair mode): a waiter that dies or pauses in the queue delays the
//! next grant by at most its waiter ttl.
//!
//! The checker judges every wait of a client that stayed live throughout
//! (no pause, crash or partition of its own, nor a command timeout after
//! one, nor a command of its own sent into a cut and retransmitted after
//! the heal, below): from the instant `ready` at which the server could have granted
//! it — its place was in the queue, the lock was free, and every waiter
//! ahead of it had been granted, gone, or lapsed — it must be granted
//! within one retry (`retry_slack`), or still be waiting (given up,
//! cancelled, or the run's end) no later than that.
//!
//! # The bound, from the lock's timing rules
//!
//! With ω the largest one-way delay (`BASE_LATENCY`), a tick `TICK_SLACK`,
//! the waiter ttl `W`, the lease ttl and its drift margin `drift`
//! (ttl × drift_factor + 2 ms):
//!
//! - **Its own place.** The waiter's first refusal (`Waiting`) arrives after
//!   the server queued it, so from that instant it is in the queue.
//! - **The lock frees** (an upper bound, from each earlier hold): a release
//!   reaches the server one ω after the client invoked it (a tick for the
//!   guard's background send); a hold that ended at its deadline or by
//!   `Lost` had its key set by a send at `deadline − ttl + drift`, so it
//!   expires on the server by `deadline + drift + ω`. A holder that was
//!   itself absent around its hold may have had a renewal in flight that
//!   the history never shows answered: its key lives until
//!   `deadline + ttl + ω` at most. A grant the client learnt only after a
//!   pause counts from its send (`valid_until − ttl + drift`).
//! - **A dead waiter ahead** (a client that started acquiring before this
//!   one was queued, and paused, crashed or was cut off while its acquire
//!   was pending or being undone): its last place renewal reached the
//!   server by `died + ω`, so its place lapses by
//!   `died + ω + W + W × drift_factor + 2 ms` (the server's clock may run
//!   slow by the drift factor; Redis's expiry has a millisecond's grain).
//!   Unless its own acquire was in flight to a free lock when it died: the
//!   server may then have granted it, unseen, and its lease lasts until
//!   `died + ω + ttl + drift`. The checker allows that longer term only when
//!   no hold surely covered `[died − ω, died + ω]` (a hold's belief lies
//!   within its lease on the server, S2).
//! - **A waiter cut off** (a partition from `died` to `healed`) is not gone
//!   from the server at `died + ω`: what it sent into the cut (a place
//!   renewal, an acquire retry) is retransmitted and reaches the server at
//!   the connection's first retransmission after the heal. Retransmissions
//!   leave 200 ms (Linux's minimum RTO), 600 ms, 1.4 s, … after the first
//!   send, each gap twice the last, so the first one after the heal comes
//!   less than `healed − sent + 200 ms` after it: the waiter's last contact
//!   is by `healed + (healed − died) + 200 ms + 2ω` (a segment in flight
//!   when the cut began was sent up to ω before it), and the terms above
//!   count from there instead of from `died + ω`.
//! - **Another waiter's undo** (an acquire given up or cancelled while
//!   live) is gone from the server one ω after it resolved.
//! - **The retry** (`retry_slack`): a waiter the release did not wake (the
//!   release woke the dead head) retries on its timer, at most `W / 3`
//!   after its last refusal arrived (timing rule 6 with the waiter ttl).
//!   The last refusal before `ready` left the server by `ready` and arrived
//!   one ω later; the retry is sent a third of the ttl and a tick after
//!   that, and its grant arrives two ω later, recorded within a tick:
//!   `W / 3 + 3ω + 2 ticks`.
//!
//! F4 is a property of the queue under client faults: a run with a fault
//! of any other kind (a server down, failed over, slowed or its clock
//! moved; a one-way partition, which lets a waiter's renewals in while it
//! hears nothing) is not judged here; the lock's availability through
//! those is L1 and L2's.

use std::{collections::BTreeMap, time::Duration};

use super::{
    family::absences,
    hold::{Hold, HoldEnd, TICK_SLACK},
    timeline::fault_spans,
};
use crate::{
    config::{Property, Scenario},
    history::{History, Op, Process},
    net::BASE_LATENCY,
    outcome::{Verdict, Violation},
};

/// The fault kinds F4 judges a run under: the client faults that make a
/// waiter absent.
const CLIENT_FAULTS: [&str; 3] = ["pause", "crash", "partition"];

/// The first retransmission of a segment a partition took leaves this long
/// after its send (Linux's minimum RTO; the simulated network's TCP, as
/// turmoil's `tcp_retransmit` models it, and the chaos mode's real one).
const RTO_MIN: Duration = Duration::from_millis(200);

/// The timing terms of the bound (the module's doc derives them).
#[derive(Debug, Clone, Copy)]
pub struct Terms {
    /// The largest one-way delay.
    pub one_way: Duration,
    /// A tick of the simulation's clock, with room for a second.
    pub tick: Duration,
    /// The lease ttl.
    pub ttl: Duration,
    /// The lease's drift margin (ttl × drift_factor + 2 ms).
    pub drift: Duration,
    /// The waiter ttl.
    pub waiter_ttl: Duration,
    /// The waiter ttl's drift margin (waiter ttl × drift_factor + 2 ms).
    pub waiter_drift: Duration,
    /// How long after an absence a client may still be without its
    /// commands' answers (a command timeout, and the order slack).
    pub after_absence: Duration,
}

impl Terms {
    /// The terms of `scenario`'s lock.
    pub fn of(scenario: &Scenario) -> Self {
        let opts = crate::client::lock_options(&scenario.lock);
        let waiter_ttl = opts.effective_waiter_ttl();
        Self {
            one_way: BASE_LATENCY,
            tick: TICK_SLACK,
            ttl: scenario.lock.ttl,
            drift: opts.drift(),
            waiter_ttl,
            waiter_drift: waiter_ttl.mul_f64(scenario.lock.drift_factor.max(0.0))
                + Duration::from_millis(2),
            after_absence: opts.effective_command_timeout() + super::family::ORDER_SLACK,
        }
    }

    /// How long after the instant it could be granted a live waiter is.
    pub fn retry_slack(&self) -> Duration {
        self.waiter_ttl / 3 + self.one_way * 3 + self.tick * 2
    }
}

/// One acquire of one client, as the history shows it.
#[derive(Debug, Clone)]
struct Pending {
    client: usize,
    invoked: Duration,
    /// The first refusal (the client was queued by then).
    queued: Option<Duration>,
    /// When it was granted, given up, cancelled, or the run ended.
    resolved: Duration,
    /// History index of the grant, if granted.
    granted: Option<usize>,
}

/// F4: every judged wait was granted within its bound (the module's doc).
pub(super) fn dead_waiters(
    scenario: &Scenario,
    history: &History,
    holds: &[Hold],
    verdict: &mut Verdict,
) {
    if !judged(history) {
        return;
    }
    let terms = Terms::of(scenario);
    let absent = absences(history);
    let cuts = cuts(history);
    let pendings = pendings(history, scenario.duration);
    let absent_of = |client: usize| absent.get(&client).map_or(&[][..], Vec::as_slice);
    for wait in &pendings {
        let Some(queued) = wait.queued else {
            continue;
        };
        let context = Ready {
            terms: &terms,
            history,
            holds,
            pendings: &pendings,
            absent: &absent,
            cuts: &cuts,
        };
        // Live throughout: no absence of its own overlaps the wait, nor
        // reaches the server during it (what a partition took arrives at
        // a retransmission after the heal: an earlier attempt's acquire
        // or place may then stand in this wait's way).
        let clean = !absent_of(wait.client).iter().any(|&(from, to)| {
            let reached = to.max(context.last_contact(wait.client, from));
            from <= wait.resolved && reached.saturating_add(terms.after_absence) >= wait.invoked
        });
        if !clean {
            continue;
        }
        let ready = context.at(wait, queued);
        let due = ready.at + terms.retry_slack();
        if wait.resolved <= due {
            if ready.dead_waiter_last {
                verdict.facts.insert("dead-waiter-passed".to_owned());
            }
            continue;
        }
        let outcome = if wait.granted.is_some() {
            "was granted"
        } else {
            "was still waiting"
        };
        verdict.violations.push(Violation {
            property: Property::DeadWaiter,
            at: due,
            message: format!(
                "client-{} {outcome} at {:?}, though it was live and queued since {queued:?} and could have been granted from {:?} ({}): more than a retry ({:?}) later",
                wait.client,
                wait.resolved,
                ready.at,
                ready.why,
                terms.retry_slack()
            ),
            evidence: wait.granted.into_iter().collect(),
        });
    }
}

/// Each client's partitions, as [`absences`] spans them.
fn cuts(history: &History) -> BTreeMap<usize, Vec<(Duration, Duration)>> {
    fault_spans(history, |kind, target| {
        if kind != "partition" {
            return None;
        }
        let client = target.strip_prefix("client:")?.parse::<usize>().ok()?;
        Some((client, (client, kind.to_owned())))
    })
}

/// Whether F4 judges this run: every fault in it is a client's pause,
/// crash or partition.
fn judged(history: &History) -> bool {
    history.entries.iter().all(|entry| match &entry.op {
        Op::Fault { kind, target, .. } => {
            CLIENT_FAULTS.contains(&kind.as_str()) && target.starts_with("client:")
        }
        _ => true,
    })
}

/// Every acquire of the history, in the order they were invoked.
fn pendings(history: &History, run_end: Duration) -> Vec<Pending> {
    let mut open: BTreeMap<usize, Pending> = BTreeMap::new();
    let mut done = Vec::new();
    for (index, entry) in history.entries.iter().enumerate() {
        let Process::Client(client) = entry.process else {
            continue;
        };
        match &entry.op {
            Op::AcquireInvoke => {
                open.insert(
                    client,
                    Pending {
                        client,
                        invoked: entry.at,
                        queued: None,
                        resolved: run_end,
                        granted: None,
                    },
                );
            }
            Op::Waiting => {
                if let Some(pending) = open.get_mut(&client) {
                    pending.queued.get_or_insert(entry.at);
                }
            }
            Op::AcquireOk { .. } | Op::AcquireFail { .. } | Op::AcquireCancel => {
                if let Some(mut pending) = open.remove(&client) {
                    pending.resolved = entry.at;
                    if matches!(entry.op, Op::AcquireOk { .. }) {
                        pending.granted = Some(index);
                    }
                    done.push(pending);
                }
            }
            _ => {}
        }
    }
    done.extend(open.into_values());
    done.sort_by_key(|p| (p.invoked, p.client));
    done
}

/// The instant a wait could have been granted, and what set it.
struct ReadyAt {
    at: Duration,
    why: String,
    /// A dead waiter ahead set it.
    dead_waiter_last: bool,
}

/// What the instant a wait could be granted depends on.
struct Ready<'a> {
    terms: &'a Terms,
    history: &'a History,
    holds: &'a [Hold],
    pendings: &'a [Pending],
    absent: &'a BTreeMap<usize, Vec<(Duration, Duration)>>,
    /// Each client's partitions (a subset of `absent`'s spans).
    cuts: &'a BTreeMap<usize, Vec<(Duration, Duration)>>,
}

impl Ready<'_> {
    /// The latest of: `queued`, every earlier hold's end on the server,
    /// every dead waiter ahead's lapse, every other acquire's undo.
    fn at(&self, wait: &Pending, queued: Duration) -> ReadyAt {
        let mut ready = ReadyAt {
            at: queued,
            why: format!("queued at {queued:?}"),
            dead_waiter_last: false,
        };
        let mut raise = |at: Duration, why: String, dead: bool| {
            if at > ready.at {
                ready = ReadyAt {
                    at,
                    why,
                    dead_waiter_last: dead,
                };
            }
        };
        let end = wait.resolved;
        for hold in self.holds {
            if Some(hold.entry) == wait.granted || self.sent_at(hold) >= end {
                continue;
            }
            raise(
                self.freed_by(hold),
                format!("client-{}'s hold freed on the server", hold.client),
                false,
            );
        }
        for other in self.pendings {
            if other.client == wait.client || other.invoked >= end {
                continue;
            }
            if other.granted.is_none() && other.resolved < end {
                raise(
                    other.resolved + self.terms.one_way + self.terms.tick,
                    format!("client-{}'s acquire undone", other.client),
                    false,
                );
            }
            // Ahead of this wait: it started acquiring before this one
            // was queued.
            if other.invoked >= queued {
                continue;
            }
            // Dying after a grant makes it a holder (its hold counts above).
            let last = match other.granted {
                Some(_) => other.resolved,
                None => other.resolved + self.terms.one_way + self.terms.tick,
            };
            let deaths = self.absent.get(&other.client).into_iter().flatten();
            for &(died, _) in deaths {
                if died < other.invoked || died >= last || died >= end {
                    continue;
                }
                let reached = self.last_contact(other.client, died);
                let (lapse, why) = self.lapse(other.client, died, reached);
                raise(lapse, why, true);
            }
        }
        ready
    }

    /// The latest instant anything `client` sent before or during its
    /// absence that began at `died` can reach the server: one delay after
    /// it, or, for a partition, the retransmission after the heal (the
    /// module's doc).
    fn last_contact(&self, client: usize, died: Duration) -> Duration {
        let t = self.terms;
        let cut = self
            .cuts
            .get(&client)
            .and_then(|spans| spans.iter().find(|&&(from, _)| from == died));
        match cut {
            // A cut that never heals delivers nothing sent into it.
            Some(&(from, healed)) if healed != Duration::MAX => {
                healed + (healed - from) + RTO_MIN + t.one_way * 2
            }
            _ => died + t.one_way,
        }
    }

    /// When a waiter that died at `died`, and whose last command reached
    /// the server by `reached`, stopped holding anyone up.
    fn lapse(&self, client: usize, died: Duration, reached: Duration) -> (Duration, String) {
        let t = self.terms;
        let refused = self.holds.iter().any(|hold| {
            hold.client != client
                && matches!(
                    hold.ended_by,
                    HoldEnd::Release | HoldEnd::Deadline | HoldEnd::EndOfRun
                )
                && hold.start + t.one_way + t.tick <= died
                && hold.end >= reached + t.tick
        });
        if refused {
            (
                reached + t.waiter_ttl + t.waiter_drift + t.tick,
                format!("client-{client}, dead in the queue from {died:?}, lapsed"),
            )
        } else {
            (
                reached + t.ttl + t.drift + t.tick,
                format!(
                    "client-{client}, dead from {died:?} with an acquire maybe granted unseen, its lease ended"
                ),
            )
        }
    }

    /// When `hold`'s grant was sent (before the history's grant when the
    /// client learnt it late).
    fn sent_at(&self, hold: &Hold) -> Duration {
        match &self.history.entries[hold.entry].op {
            Op::AcquireOk { valid_until, .. } => hold
                .start
                .min((*valid_until + self.terms.drift).saturating_sub(self.terms.ttl)),
            _ => hold.start,
        }
    }

    /// The latest instant `hold`'s key can have lived on the server.
    fn freed_by(&self, hold: &Hold) -> Duration {
        let t = self.terms;
        let from = self.sent_at(hold);
        let to = hold.end.max(hold.start) + t.after_absence;
        let holder_absent = self
            .absent
            .get(&hold.client)
            .is_some_and(|spans| spans.iter().any(|&(a, b)| a <= to && b >= from));
        if holder_absent {
            hold.deadline.max(hold.end) + t.ttl + t.one_way + t.tick
        } else if hold.ended_by == HoldEnd::Release {
            hold.end + t.one_way + t.tick
        } else {
            hold.deadline.max(hold.end) + t.drift + t.one_way + t.tick
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Entry, Phase};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn terms() -> Terms {
        Terms {
            one_way: ms(2),
            tick: ms(2),
            ttl: ms(1_000),
            drift: ms(12),
            waiter_ttl: ms(333),
            waiter_drift: ms(5),
            after_absence: ms(172),
        }
    }

    fn hold(client: usize, start: u64, end: u64) -> Hold {
        Hold {
            client,
            token: format!("t{client}"),
            fence: 1,
            start: ms(start),
            end: ms(end),
            ended_by: HoldEnd::Release,
            deadline: ms(end + 500),
            timer_deadline: ms(end + 500),
            entry: 0,
            lost_entry: None,
            shared: false,
        }
    }

    fn fault(kind: &str, target: &str) -> Entry {
        Entry {
            at: ms(100),
            local: ms(100),
            process: Process::Controller,
            op: Op::Fault {
                kind: kind.into(),
                target: target.into(),
                phase: Phase::Start,
            },
        }
    }

    type Spans = BTreeMap<usize, Vec<(Duration, Duration)>>;

    /// A `Ready` over `holds` with no other acquire.
    fn ready<'a>(
        terms: &'a Terms,
        history: &'a History,
        holds: &'a [Hold],
        absent: &'a Spans,
        cuts: &'a Spans,
    ) -> Ready<'a> {
        Ready {
            terms,
            history,
            holds,
            pendings: &[],
            absent,
            cuts,
        }
    }

    #[test]
    fn a_waiter_dead_inside_anothers_hold_lapses_by_its_waiter_ttl_else_by_a_lease() {
        let (terms, history, absent) = (terms(), History::default(), BTreeMap::new());
        let holds = [hold(0, 0, 1_000)];
        let cuts = BTreeMap::new();
        let ready = ready(&terms, &history, &holds, &absent, &cuts);
        let lapse = |client, died| {
            ready
                .lapse(client, died, ready.last_contact(client, died))
                .0
        };
        // Refused for sure: its place lapses a waiter ttl (and the terms)
        // after it died.
        assert_eq!(lapse(1, ms(500)), ms(500 + 2 + 333 + 5 + 2));
        // Within a one-way delay and a tick of the release: its acquire may
        // have found the lock free and been granted unseen.
        assert_eq!(lapse(1, ms(997)), ms(997 + 2 + 1_000 + 12 + 2));
        // A hold of its own does not refuse it.
        assert_eq!(lapse(0, ms(500)), ms(500 + 2 + 1_000 + 12 + 2));
    }

    #[test]
    fn a_waiter_cut_off_reaches_the_server_until_a_retransmission_after_the_heal() {
        let (terms, history, absent) = (terms(), History::default(), BTreeMap::new());
        let holds = [hold(0, 0, 2_000)];
        // Client 1 cut off from 300 to 500 ms: what it sent into the cut
        // arrives by 500 + 200 + 200 + 2 × 2 ms.
        let cuts = BTreeMap::from([(1, vec![(ms(300), ms(500))])]);
        let ready = ready(&terms, &history, &holds, &absent, &cuts);
        assert_eq!(ready.last_contact(1, ms(300)), ms(904));
        assert_eq!(
            ready.last_contact(2, ms(300)),
            ms(302),
            "a pause: one delay"
        );
        // Refused (the hold covers the retransmission): its place lapses
        // a waiter ttl after that.
        let reached = ready.last_contact(1, ms(300));
        assert_eq!(ready.lapse(1, ms(300), reached).0, ms(904 + 333 + 5 + 2));
        // A cut that never heals delivers nothing sent into it.
        let open = BTreeMap::from([(1, vec![(ms(300), Duration::MAX)])]);
        let ready = Ready {
            cuts: &open,
            ..ready
        };
        assert_eq!(ready.last_contact(1, ms(300)), ms(302));
    }

    #[test]
    fn only_runs_under_client_pauses_crashes_and_partitions_are_judged() {
        let run = |entries: Vec<Entry>| judged(&History { entries });
        assert!(run(vec![]));
        assert!(run(vec![
            fault("pause", "client:1"),
            fault("crash", "client:0"),
            fault("partition", "client:2"),
        ]));
        assert!(!run(vec![
            fault("pause", "client:1"),
            fault("restart", "redis:0")
        ]));
        assert!(!run(vec![fault("partition-oneway", "client:1")]));
        assert!(!run(vec![fault("partition", "redis:0")]));
    }
}
