//! The authoritative view of the lock key (the oracle S2 and S5 check
//! beliefs against), sampled by the world whenever it changes.

use std::{collections::BTreeMap, time::Duration};

use super::{TICK, World};
use crate::{
    history::{Op, Process},
    server::NodeHandle,
};

impl World<'_> {
    /// Redlock's authoritative view: the owner whose key a majority of the
    /// live nodes hold, with the time until fewer than a majority hold it
    /// (the majority-th longest pttl); nobody without a majority. A node
    /// that is down still counts with the keys it had, expiring on its own
    /// clock: it grants nobody else meanwhile. A restart empties it when it
    /// comes back.
    fn majority_view(&self, now: Duration) -> Option<(String, Option<u64>)> {
        let quorum = self.nodes.len() / 2 + 1;
        let mut holders: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for node in &self.nodes {
            if let Some((owner, pttl)) = node.peek(&self.lock_key, now) {
                holders
                    .entry(owner)
                    .or_default()
                    .push(pttl.unwrap_or(u64::MAX));
            }
        }
        holders.into_iter().find_map(|(owner, mut pttls)| {
            (pttls.len() >= quorum).then(|| {
                pttls.sort_unstable_by(|a, b| b.cmp(a));
                (
                    owner,
                    pttls.get(quorum - 1).copied().filter(|&p| p != u64::MAX),
                )
            })
        })
    }

    /// The earliest time after `now` at which the oracle may change with no
    /// host running: a lock key expiring on some node's clock (a tick early,
    /// for clock rounding).
    pub(super) fn next_oracle_change(&self, now: Duration) -> Duration {
        self.nodes
            .iter()
            .filter_map(|node| node.expires_at_true(&self.lock_key, now))
            .map(|at| at.saturating_sub(TICK).max(now))
            .min()
            .unwrap_or(Duration::MAX)
    }

    /// Records the authoritative primary's view of the lock key whenever it
    /// changes (owner or primary).
    pub(super) fn sample_oracle(&mut self, now: Duration) {
        // Unchanged while no node did anything, the primary is the same and
        // no key has expired since the last sample.
        let activity: u64 = self.nodes.iter().map(NodeHandle::activity).sum();
        let primary_now = self.authority(now);
        if self.oracle_unchanged.is_some_and(|(seen, primary, until)| {
            seen == activity && primary == primary_now && now < until
        }) {
            return;
        }
        self.oracle_unchanged = Some((activity, primary_now, self.next_oracle_change(now)));
        let (primary, peeked) = if self.redlock {
            (0, self.majority_view(now))
        } else {
            (
                primary_now,
                self.nodes[primary_now].peek(&self.lock_key, now),
            )
        };
        let owner = peeked.as_ref().map(|(owner, _)| owner.clone());
        let current = Some((primary, owner.clone()));
        if current != self.last_oracle {
            self.last_oracle = current;
            self.recorder.record(
                now,
                now,
                Process::Controller,
                Op::Oracle {
                    primary,
                    owner,
                    pttl_ms: peeked.and_then(|(_, pttl)| pttl),
                },
            );
        }
    }
}
