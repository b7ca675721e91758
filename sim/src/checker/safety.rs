//! The safety properties, S1 to S6: what must never happen, whatever the
//! faults.

use std::{collections::BTreeMap, time::Duration};

use super::{
    hold::{Hold, HoldEnd},
    timeline::{grant_times, oracle_timeline, short, stale_writes, stopped_intervals},
};
use crate::{
    config::{FencingMode, Property},
    history::{History, Op, Process},
    outcome::{Verdict, Violation},
};

/// S1: no two clients believe they hold at the same true instant.
pub(super) fn lease_exclusion(holds: &[Hold], verdict: &mut Verdict) {
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

/// S2: whenever a client believes it holds the lock, the authoritative
/// primary holds the key with that client's token.
pub(super) fn server_oracle(
    history: &History,
    holds: &[Hold],
    slack: Duration,
    complete: bool,
    verdict: &mut Verdict,
) {
    let timeline = oracle_timeline(history);
    if timeline.is_empty() {
        return;
    }
    for hold in holds {
        // The owner in force at each instant of the hold: the last sample
        // at or before its start, then every change inside. Samples are
        // per tick, so a tick of slack at each edge absorbs the sampling.
        let (start, end) = (hold.start + slack, hold.end.saturating_sub(slack));
        if end <= start {
            continue;
        }
        // The sample before the hold stands for its start only when every
        // change was sampled (the simulator); a real oracle polls and may
        // miss a short-lived owner, so only samples inside count there.
        let before = timeline
            .iter()
            .rev()
            .find(|(at, _, _)| *at <= start)
            .filter(|_| complete);
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
pub(super) fn tokens(fencing: FencingMode, holds: &[Hold], verdict: &mut Verdict) {
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

/// S4: the storage never accepts a write from a holder older than one whose
/// write it already accepted (fencing must make it refuse such writes).
pub(super) fn fenced_writes(history: &History, holds: &[Hold], verdict: &mut Verdict) {
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
/// on the caller's own key. A release counts if the authoritative view
/// showed that owner since the grant; a renewal, if it showed that owner
/// within `window` (a command timeout) before its reply: the renewal ran
/// then, and a reply later than that is not counted by the client. This
/// reads the simulator's oracle, told of every change; real runs read the
/// journal instead (`super::journal`).
pub(super) fn owner_only(
    history: &History,
    holds: &[Hold],
    window: Duration,
    verdict: &mut Verdict,
) {
    let timeline = oracle_timeline(history);
    if timeline.is_empty() {
        return;
    }
    let by_token: BTreeMap<&str, &Hold> = holds.iter().map(|h| (h.token.as_str(), h)).collect();
    for (index, entry) in history.entries.iter().enumerate() {
        let (token, since, what) = match &entry.op {
            Op::ReleaseOk { token, outcome } if outcome == "Deleted" => (
                token,
                by_token
                    .get(token.as_str())
                    .map_or(Duration::ZERO, |h| h.start),
                "a release",
            ),
            Op::Renewed { token, .. } => (token, entry.at.saturating_sub(window), "a renewal"),
            _ => continue,
        };
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
                    "{what} by {} acted on a key the authoritative view did not show as theirs",
                    short(token)
                ),
                evidence: vec![index],
            });
        }
    }
}

/// The renewal failures that say the hold is over at once: the key is gone
/// or someone else's (`NotOwner`, `WRONGTYPE`), or the node was demoted by
/// a failover (`READONLY`). lock-core reports each with `Lost` right away.
const LOSS_REPLIES: [&str; 3] = ["NotOwner", "Failed(ReadOnly)", "Failed(WrongType)"];

/// S6: Lost is delivered no later than the holder's deadline (unless the
/// client was frozen or crashed then and could not run at all), and at
/// once when a renewal's answer says the hold is over ([`LOSS_REPLIES`]):
/// a holder that keeps believing past such an answer (say, one that takes
/// a demoted primary's `READONLY` for a passing error) works on while a
/// waiter may be granted elsewhere.
pub(super) fn timely_loss(
    history: &History,
    holds: &[Hold],
    slack: Duration,
    verdict: &mut Verdict,
) {
    told_at_once(history, slack, verdict);
    let stopped = stopped_intervals(history);
    for hold in holds {
        if hold.ended_by != HoldEnd::Deadline {
            continue;
        }
        let target = format!("client:{}", hold.client);
        let was_stopped = stopped.get(&target).is_some_and(|intervals| {
            intervals
                .iter()
                .any(|(from, to)| *from <= hold.deadline + slack && hold.deadline < *to)
        });
        if was_stopped {
            continue;
        }
        let lost_at = hold.lost_entry.map(|index| history.entries[index].at);
        // A clock change after the client set its expiry timer moves the
        // deadline but not the timer (tokio's clock does not drift here):
        // either instant is on time.
        let due = hold.deadline.max(hold.timer_deadline);
        let late = lost_at.is_none_or(|at| at > due + slack);
        // A hold still open at the end of the run has no Lost to deliver yet.
        if late && hold.deadline + slack < history.entries.last().map_or(Duration::ZERO, |e| e.at) {
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

/// S6's second half: a renewal answer in [`LOSS_REPLIES`] is followed by
/// `Lost` for that hold within the same tick.
fn told_at_once(history: &History, slack: Duration, verdict: &mut Verdict) {
    for (index, entry) in history.entries.iter().enumerate() {
        let (Process::Client(client), Op::RenewFailed { token, reason }) =
            (entry.process, &entry.op)
        else {
            continue;
        };
        if !LOSS_REPLIES.contains(&reason.as_str()) {
            continue;
        }
        let lost = history.entries[index..]
            .iter()
            .find(|later| matches!(&later.op, Op::Lost { token: lost, .. } if lost == token));
        if lost.is_some_and(|lost| lost.at <= entry.at + slack) {
            continue;
        }
        verdict.violations.push(Violation {
            property: Property::TimelyLoss,
            at: entry.at,
            message: format!(
                "client-{client}'s renewal was answered {reason} at {:?}, which ends the hold, but Lost came {}",
                entry.at,
                lost.map_or_else(|| "never".to_owned(), |lost| format!("at {:?}", lost.at))
            ),
            evidence: vec![index],
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::{
        hold::TICK_SLACK,
        planted::{entry, ms},
        timeline::holds,
    };
    use super::*;
    use crate::history::{Entry, Phase};

    fn granted(at: u64, client: usize, token: &str, fence: u64, until: u64) -> Entry {
        entry(
            at,
            Process::Client(client),
            Op::AcquireOk {
                token: token.into(),
                fence,
                valid_until: ms(until),
                shared: false,
            },
        )
    }

    /// client-0 learns at `at` that it lost hold "a".
    fn lost(at: u64) -> Entry {
        entry(
            at,
            Process::Client(0),
            Op::Lost {
                token: "a".into(),
                reason: "lost".into(),
                valid_until: ms(at),
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
        let late = History {
            entries: vec![
                granted(0, 0, "a", 1, 1000),
                lost(1500),
                granted(2000, 1, "x", 2, 2100),
            ],
        };
        let holds_late = holds(&late, ms(3000));
        let mut verdict = Verdict::default();
        timely_loss(&late, &holds_late, TICK_SLACK, &mut verdict);
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
        timely_loss(&frozen, &holds(&frozen, ms(3000)), TICK_SLACK, &mut verdict);
        assert!(verdict.violations.is_empty());
    }

    #[test]
    fn a_renewal_that_finds_the_node_demoted_must_end_the_hold_at_once() {
        let renew_failed = |at, reason: &str| {
            entry(
                at,
                Process::Client(0),
                Op::RenewFailed {
                    token: "a".into(),
                    reason: reason.into(),
                },
            )
        };
        let prompt = History {
            entries: vec![
                granted(0, 0, "a", 1, 1000),
                renew_failed(300, "Failed(ReadOnly)"),
                lost(300),
            ],
        };
        let mut verdict = Verdict::default();
        timely_loss(&prompt, &holds(&prompt, ms(3000)), TICK_SLACK, &mut verdict);
        assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
        // READONLY taken for a passing error: retried, Lost only later.
        let late = History {
            entries: vec![
                granted(0, 0, "a", 1, 1000),
                renew_failed(300, "Failed(ReadOnly)"),
                renew_failed(320, "NotOwner"),
                lost(320),
            ],
        };
        let mut verdict = Verdict::default();
        timely_loss(&late, &holds(&late, ms(3000)), TICK_SLACK, &mut verdict);
        assert_eq!(verdict.violations.len(), 1, "{:?}", verdict.violations);
        assert!(verdict.violations[0].message.contains("Failed(ReadOnly)"));
        // A timeout says nothing about the key: no loss is due.
        let timeout = History {
            entries: vec![
                granted(0, 0, "a", 1, 1000),
                renew_failed(300, "Failed(Timeout)"),
            ],
        };
        let mut verdict = Verdict::default();
        timely_loss(
            &timeout,
            &holds(&timeout, ms(900)),
            TICK_SLACK,
            &mut verdict,
        );
        assert!(verdict.violations.is_empty());
    }
}
