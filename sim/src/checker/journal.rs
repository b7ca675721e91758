//! S5 on real runs, from the journal: the primary's replication stream
//! (`Op::Journal`), which carries every owner the lock key ever had there,
//! in order, where the polled oracle may miss one. Checked only where the
//! journal covers: from its first entry until it ends (`Op::JournalEnd`)
//! or the first failover (it follows one node); an operation outside that
//! is unchecked, and the verdict says so (facts `owner-only-checked`,
//! `owner-only-unchecked`). Operations in the run's last `slack`, whose
//! effects the stream may not have brought before the history was cut,
//! are left out.

use std::{collections::BTreeMap, time::Duration};

use super::{hold::Hold, timeline::short};
use crate::{
    config::Property,
    history::{History, Op, Phase},
    outcome::{Verdict, Violation},
};

/// Every change of the lock key the journal saw, in order, and the span
/// it covers.
struct Journal<'a> {
    changes: Vec<(Duration, Option<&'a str>)>,
    from: Duration,
    until: Duration,
}

impl<'a> Journal<'a> {
    /// The journal of `history`, if it has one; it covers until `run_end`
    /// at the latest.
    fn of(history: &'a History, run_end: Duration) -> Option<Self> {
        let changes: Vec<(Duration, Option<&str>)> = history
            .entries
            .iter()
            .filter_map(|entry| match &entry.op {
                Op::Journal { owner, .. } => Some((entry.at, owner.as_deref())),
                _ => None,
            })
            .collect();
        let from = changes.first()?.0;
        let until = history
            .entries
            .iter()
            .find(|entry| match &entry.op {
                Op::JournalEnd { .. } => true,
                // The journal follows the node that was primary at the
                // start; a failover may move the key elsewhere.
                Op::Fault { kind, phase, .. } => kind == "failover" && *phase == Phase::Start,
                _ => false,
            })
            .map_or(run_end, |entry| entry.at.min(run_end));
        Some(Self {
            changes,
            from,
            until,
        })
    }

    /// Whether the span from `start` to `end` (plus `slack` for the
    /// stream's lag behind a client's reply) lies inside the journal.
    fn covers(&self, start: Duration, end: Duration, slack: Duration) -> bool {
        start >= self.from && end + slack <= self.until
    }

    /// The owner in force at `at`.
    fn owner_at(&self, at: Duration) -> Option<&'a str> {
        self.changes
            .iter()
            .rev()
            .find(|(change, _)| *change <= at)
            .and_then(|(_, owner)| *owner)
    }

    /// Whether the key, while `token`'s, was deleted at or after `since`.
    fn deleted_after(&self, token: &str, since: Duration) -> bool {
        self.changes
            .windows(2)
            .any(|pair| pair[1].0 >= since && pair[1].1.is_none() && pair[0].1 == Some(token))
    }

    /// The owner of the key the first deletion at or after `since` deleted.
    fn first_deleted_after(&self, since: Duration) -> Option<&'a str> {
        self.changes
            .windows(2)
            .find(|pair| pair[1].0 >= since && pair[1].1.is_none())
            .and_then(|pair| pair[0].1)
    }
}

/// S5 from the journal: a release that says it deleted the key deleted
/// the caller's own (the journal shows that owner's key deleted after the
/// release began: a token is one grant's, so its key is deleted at most
/// once); a renewal extended the caller's own (the journal shows that
/// owner within `window`, a command timeout, before the reply). `slack`:
/// how far the stream may lag a client's reply. Returns nothing; records
/// in `verdict` whether S5 was checked.
pub(super) fn owner_only(
    history: &History,
    holds: &[Hold],
    window: Duration,
    slack: Duration,
    run_end: Duration,
    verdict: &mut Verdict,
) {
    let Some(journal) = Journal::of(history, run_end) else {
        verdict.facts.insert("owner-only-unchecked".to_owned());
        return;
    };
    let grants: BTreeMap<&str, Duration> =
        holds.iter().map(|h| (h.token.as_str(), h.start)).collect();
    // When each token's release began (its last `ReleaseInvoke` or
    // `GuardDropped` so far).
    let mut began: BTreeMap<&str, Duration> = BTreeMap::new();
    let (mut checked, mut unchecked) = (0usize, 0usize);
    for (index, entry) in history.entries.iter().enumerate() {
        // The stream may not have brought an operation of the run's last
        // moments before the history was cut: left out, not a gap.
        if entry.at + slack > run_end {
            break;
        }
        match &entry.op {
            Op::ReleaseInvoke { token } | Op::GuardDropped { token } => {
                began.insert(token, entry.at);
            }
            Op::ReleaseOk { token, outcome } if outcome == "Deleted" => {
                let since = began
                    .get(token.as_str())
                    .or_else(|| grants.get(token.as_str()))
                    .copied()
                    .unwrap_or(Duration::ZERO);
                if !journal.covers(since, entry.at, slack) {
                    unchecked += 1;
                    continue;
                }
                checked += 1;
                if journal.deleted_after(token, since) {
                    continue;
                }
                let whose = journal
                    .first_deleted_after(since)
                    .map_or_else(|| "no key".to_owned(), |o| format!("{}'s", short(o)));
                verdict.violations.push(Violation {
                    property: Property::OwnerOnly,
                    at: entry.at,
                    message: format!(
                        "a release by {} said it deleted the key at {:?}, but the primary's replication stream shows no deletion of its key after the release began at {since:?}: the first deletion then took {whose}",
                        short(token),
                        entry.at
                    ),
                    evidence: vec![index],
                });
            }
            Op::Renewed { token, .. } => {
                let from = entry.at.saturating_sub(window);
                if !journal.covers(from, entry.at, slack) {
                    unchecked += 1;
                    continue;
                }
                checked += 1;
                let owned = journal.owner_at(from) == Some(token.as_str())
                    || journal.changes.iter().any(|(at, owner)| {
                        *at > from && *at <= entry.at && *owner == Some(token.as_str())
                    });
                if !owned {
                    verdict.violations.push(Violation {
                        property: Property::OwnerOnly,
                        at: entry.at,
                        message: format!(
                            "a renewal by {} at {:?} extended a key the primary's replication stream did not show as theirs",
                            short(token),
                            entry.at
                        ),
                        evidence: vec![index],
                    });
                }
            }
            _ => {}
        }
    }
    if checked > 0 {
        verdict.facts.insert("owner-only-checked".to_owned());
    }
    if unchecked > 0 {
        verdict.facts.insert("owner-only-unchecked".to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::super::{
        planted::{entry, ms},
        timeline::holds,
    };
    use super::*;
    use crate::history::Process;

    fn journal(at: u64, owner: Option<&str>) -> crate::history::Entry {
        entry(
            at,
            Process::Controller,
            Op::Journal {
                node: 0,
                owner: owner.map(str::to_owned),
            },
        )
    }

    fn client(at: u64, client: usize, op: Op) -> crate::history::Entry {
        entry(at, Process::Client(client), op)
    }

    fn granted(at: u64, client_index: usize, token: &str) -> crate::history::Entry {
        client(
            at,
            client_index,
            Op::AcquireOk {
                token: token.into(),
                fence: 0,
                valid_until: ms(at + 500),
                shared: false,
            },
        )
    }

    /// a is granted at 10; it releases at 900, its release says it
    /// deleted the key, and the stream shows a deletion at 901 of
    /// `deleted_from`'s key: a's own, or b's, granted at 520 after a's key
    /// expired at 510 (a was paused past its ttl).
    fn history(deleted_from: &str) -> History {
        let mut entries = vec![journal(0, None), journal(9, Some("a")), granted(10, 0, "a")];
        if deleted_from == "a" {
            // a's own release deleted its key: no expiry, no b.
            entries.push(client(900, 0, Op::ReleaseInvoke { token: "a".into() }));
            entries.push(journal(901, None));
        } else {
            entries.extend([
                journal(510, None),
                journal(519, Some("b")),
                granted(520, 1, "b"),
                client(900, 0, Op::ReleaseInvoke { token: "a".into() }),
                journal(901, None),
            ]);
        }
        entries.push(client(
            902,
            0,
            Op::ReleaseOk {
                token: "a".into(),
                outcome: "Deleted".into(),
            },
        ));
        History { entries }
    }

    fn check(history: &History) -> Verdict {
        let mut verdict = Verdict::default();
        let holds = holds(history, ms(2000));
        owner_only(history, &holds, ms(100), ms(25), ms(2000), &mut verdict);
        verdict
    }

    #[test]
    fn a_release_that_deleted_another_owners_key_breaks_s5() {
        let own = check(&history("a"));
        assert!(own.violations.is_empty(), "{:?}", own.violations);
        assert!(own.facts.contains("owner-only-checked"));
        let other = check(&history("b"));
        assert_eq!(other.violated().len(), 1, "{:?}", other.violations);
        assert!(
            other.violations[0].message.contains("took b's"),
            "{}",
            other.violations[0].message
        );
    }

    #[test]
    fn outside_the_journal_s5_is_unchecked_and_said_to_be() {
        let mut cut = history("b");
        cut.entries.insert(
            3,
            entry(
                200,
                Process::Controller,
                Op::JournalEnd {
                    why: "the stream ended".into(),
                },
            ),
        );
        let verdict = check(&cut);
        assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
        assert!(verdict.facts.contains("owner-only-unchecked"));
        assert!(!verdict.facts.contains("owner-only-checked"));
        let none = History {
            entries: vec![granted(10, 0, "a")],
        };
        assert!(check(&none).facts.contains("owner-only-unchecked"));
    }
}
