//! The lock family's own properties, over the holds the history shows: a
//! read-write lock's writer overlaps no other holder, a semaphore never has
//! more than its permits held at one instant, and a fair lock lets no live
//! waiter be overtaken by one that started waiting after it.
//!
//! Each checker is a pure function of the holds (and, for fairness, the
//! waits), so that the kinds' clients only have to say which hold is which;
//! a hold means what it means for the plain lock (`super::holds`): from the
//! grant until the client's belief ended.

use std::time::Duration;

use super::Hold;

/// How a hold shares the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// A writer (or the plain lock's holder): alone.
    Exclusive,
    /// A reader: with other readers only.
    Shared,
}

/// Two holds that must not overlap, and the instant they both held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// History index of the earlier grant.
    pub first: usize,
    /// History index of the later grant.
    pub second: usize,
    /// When the later one was granted, inside the earlier one.
    pub at: Duration,
}

/// Every pair of holds where one is exclusive and the two overlap in time.
/// `holds` and `shares` are parallel; holds sorted by start (as
/// `super::holds` returns them).
pub fn exclusive_overlaps(holds: &[Hold], shares: &[Share]) -> Vec<Overlap> {
    let mut found = Vec::new();
    for (i, earlier) in holds.iter().enumerate() {
        for (j, later) in holds.iter().enumerate().skip(i + 1) {
            if later.start >= earlier.end {
                // Sorted by start: every hold after this one starts after
                // `earlier` ended too.
                break;
            }
            let exclusive = shares[i] == Share::Exclusive || shares[j] == Share::Exclusive;
            if exclusive && later.client != earlier.client {
                found.push(Overlap {
                    first: earlier.entry,
                    second: later.entry,
                    at: later.start,
                });
            }
        }
    }
    found
}

/// The first instant more than `permits` holds overlap, with the grants
/// (history indexes) in force then.
pub fn over_capacity(holds: &[Hold], permits: usize) -> Option<(Duration, Vec<usize>)> {
    // A sweep over starts and ends; at one instant ends come first, since a
    // hold ending at t and one starting at t do not overlap.
    let mut events: Vec<(Duration, bool, usize)> = holds
        .iter()
        .enumerate()
        .flat_map(|(i, hold)| [(hold.start, true, i), (hold.end, false, i)])
        .collect();
    events.sort_by_key(|&(at, starts, i)| (at, starts, i));
    let mut open: Vec<usize> = Vec::new();
    for (at, starts, i) in events {
        if starts {
            open.push(i);
            if open.len() > permits {
                let mut grants: Vec<usize> = open.iter().map(|&k| holds[k].entry).collect();
                grants.sort_unstable();
                return Some((at, grants));
            }
        } else {
            open.retain(|&k| k != i);
        }
    }
    None
}

/// One client's wait for a fair lock, as the history shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// The waiting client.
    pub client: usize,
    /// When it started waiting (its first refused acquire).
    pub started: Duration,
    /// When the wait ended: granted, given up, or the run's end.
    pub ended: Duration,
    /// History index of the grant that ended it, if one did.
    pub granted: Option<usize>,
    /// Spans in which the client could not act (paused, crashed or cut
    /// off): a waiter is live outside them and keeps its place only then.
    pub absent: Vec<(Duration, Duration)>,
}

impl Wait {
    fn live_at(&self, at: Duration) -> bool {
        self.started <= at
            && at < self.ended
            && !self.absent.iter().any(|&(from, to)| from <= at && at < to)
    }
}

/// A live waiter overtaken: `overtaker` started waiting after `waiter` and
/// was granted while `waiter` was still waiting and live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overtaking {
    /// The client that was overtaken.
    pub waiter: usize,
    /// The client granted in its place.
    pub overtaker: usize,
    /// History index of the overtaking grant.
    pub grant: usize,
    /// When it was granted.
    pub at: Duration,
}

/// Every grant that overtook a live waiter, given each wait and the grant's
/// time (`grant_at` maps a history index to its instant).
///
/// A waiter's place lapses when it stops renewing it for long enough, so a
/// waiter that was absent for `lapse_after` or longer (its waiter ttl less
/// one renewal period) before the grant may have lost its place
/// legitimately, and does not count as overtaken: it joins at the back when
/// it comes back.
pub fn overtakings(
    waits: &[Wait],
    grant_at: impl Fn(usize) -> Duration,
    lapse_after: Duration,
) -> Vec<Overtaking> {
    let mut found = Vec::new();
    for later in waits {
        let Some(grant) = later.granted else {
            continue;
        };
        let at = grant_at(grant);
        for earlier in waits {
            if earlier.client == later.client || earlier.started >= later.started {
                continue;
            }
            let may_have_lapsed = earlier
                .absent
                .iter()
                .any(|&(from, to)| from < at && to.min(at).saturating_sub(from) >= lapse_after);
            if earlier.live_at(at) && !may_have_lapsed {
                found.push(Overtaking {
                    waiter: earlier.client,
                    overtaker: later.client,
                    grant,
                    at,
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::HoldEnd;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn hold(client: usize, entry: usize, start: u64, end: u64) -> Hold {
        Hold {
            client,
            token: format!("t{entry}"),
            fence: entry as u64,
            start: ms(start),
            end: ms(end),
            ended_by: HoldEnd::Release,
            deadline: ms(end),
            timer_deadline: ms(end),
            entry,
            lost_entry: None,
        }
    }

    #[test]
    fn readers_share_but_a_writer_overlaps_nobody() {
        let holds = [
            hold(0, 1, 0, 100),
            hold(1, 2, 50, 150),
            hold(2, 3, 120, 200),
        ];
        let readers = [Share::Shared, Share::Shared, Share::Shared];
        assert_eq!(exclusive_overlaps(&holds, &readers), []);
        let writer_last = [Share::Shared, Share::Shared, Share::Exclusive];
        assert_eq!(
            exclusive_overlaps(&holds, &writer_last),
            [Overlap {
                first: 2,
                second: 3,
                at: ms(120)
            }]
        );
        // Back to back is no overlap.
        let handoff = [hold(0, 1, 0, 100), hold(1, 2, 100, 200)];
        assert_eq!(exclusive_overlaps(&handoff, &[Share::Exclusive; 2]), []);
    }

    #[test]
    fn a_semaphore_over_its_permits_is_found_at_the_first_instant() {
        let holds = [
            hold(0, 1, 0, 100),
            hold(1, 2, 10, 100),
            hold(2, 3, 100, 200),
            hold(3, 4, 150, 300),
        ];
        assert_eq!(over_capacity(&holds, 2), None, "ends come before starts");
        let crowded = [hold(0, 1, 0, 100), hold(1, 2, 10, 100), hold(2, 3, 50, 60)];
        assert_eq!(over_capacity(&crowded, 2), Some((ms(50), vec![1, 2, 3])));
        assert_eq!(over_capacity(&crowded, 3), None);
    }

    fn wait(client: usize, started: u64, ended: u64, granted: Option<usize>) -> Wait {
        Wait {
            client,
            started: ms(started),
            ended: ms(ended),
            granted,
            absent: Vec::new(),
        }
    }

    #[test]
    fn a_later_waiter_granted_first_overtakes_a_live_one() {
        let grants = |entry: usize| ms(entry as u64);
        // Client 1 waited from 10, client 2 from 20; 2 granted at 500 while
        // 1 still waited (until 900).
        let waits = [wait(1, 10, 900, Some(900)), wait(2, 20, 500, Some(500))];
        assert_eq!(
            overtakings(&waits, grants, ms(100)),
            [Overtaking {
                waiter: 1,
                overtaker: 2,
                grant: 500,
                at: ms(500)
            }]
        );
        // In arrival order: nobody overtaken.
        let fair = [wait(1, 10, 500, Some(500)), wait(2, 20, 900, Some(900))];
        assert_eq!(overtakings(&fair, grants, ms(100)), []);
    }

    #[test]
    fn an_absent_waiter_may_lose_its_place() {
        let grants = |entry: usize| ms(entry as u64);
        let mut paused = wait(1, 10, 900, Some(900));
        paused.absent.push((ms(300), ms(700)));
        let waits = [paused.clone(), wait(2, 20, 500, Some(500))];
        assert_eq!(overtakings(&waits, grants, ms(100)), []);
        // A pause too short to lapse its place keeps it.
        paused.absent = vec![(ms(300), ms(350))];
        let waits = [paused, wait(2, 20, 500, Some(500))];
        assert_eq!(overtakings(&waits, grants, ms(100)).len(), 1);
    }
}
