//! The Redis Cluster faults: a shard failover and a slot migration, and
//! where the lock key's authoritative copy lives (the oracle's node).

use std::{collections::BTreeSet, time::Duration};

use lock_core::internal::cluster::slot_of;

use super::{Action, Migration, World};
use crate::{
    client::redis_host,
    config::{DurationRange, FaultTarget},
    history::Op,
};

/// The period of a Redis node's cluster cron (`clusterCron`, at `hz 10`),
/// which sends the pings that detect a failure and dials the bus links.
const CLUSTER_CRON: Duration = Duration::from_millis(100);

impl World<'_> {
    /// The lock key's slot.
    fn lock_slot(&self) -> u16 {
        slot_of(&self.lock_key)
    }

    /// The node whose copy of the lock key decides: the primary that owns
    /// its slot, or, while that slot migrates, the target once the key
    /// moved there. Outside a cluster, the primary of record.
    pub(super) fn authority(&self, now: Duration) -> usize {
        let owner = self.discovery.primary();
        let Some(cluster) = &self.cluster else {
            return owner;
        };
        match cluster.migrating_to(owner, self.lock_slot()) {
            Some(to) if self.nodes[to].has_key(self.lock_key.as_bytes(), now) => to,
            _ => owner,
        }
    }

    /// Points `redis:primary` (and the oracle) at the lock slot's owner.
    pub(super) fn follow_lock_slot(&self) {
        if let Some(cluster) = &self.cluster {
            self.discovery.set_primary(cluster.owner(self.lock_slot()));
        }
    }

    /// Fails over the shard of node `target`: its most up-to-date live
    /// replica (ties: the lowest index) becomes the primary and takes over
    /// its slots, the other replicas follow it. The old primary is demoted
    /// at once, or, with a `stale_window`, deposed: it keeps serving, and
    /// believing it owns its slots, until fault `index` ends.
    pub(super) fn shard_failover(
        &mut self,
        index: usize,
        target: FaultTarget,
        stale_window: Option<Duration>,
    ) {
        let (Some(cluster), FaultTarget::Redis(node)) = (self.cluster.clone(), target) else {
            return;
        };
        let now = self.now();
        let shard = cluster.shard_of(node);
        let old = cluster.primary_of(shard);
        let members = cluster.members(shard);
        let Some(new) = self.failover_winner(old, members.iter().copied()) else {
            self.record(Op::NoFailover { primary: old });
            return;
        };
        let old_owner = self.lock_owner_on(old, now);
        self.nodes[new].promote();
        for &other in &members {
            if other != new && other != old && !self.nodes[other].is_deposed() {
                self.nodes[other].replicate_from(redis_host(new));
            }
        }
        cluster.fail_over(old, new, stale_window.is_some());
        if stale_window.is_some() {
            self.nodes[old].depose();
            self.deposed.insert(index, old);
        } else {
            self.nodes[old].demote_keeping_clients(redis_host(new));
        }
        self.follow_lock_slot();
        self.record_failover(old, new, old_owner, now);
    }

    /// The end of a shard failover's stale window: the deposed primary
    /// rejoins as a replica of its shard's primary of this moment.
    pub(super) fn end_shard_failover(&mut self, index: usize) {
        let (Some(cluster), Some(old)) = (self.cluster.clone(), self.deposed.remove(&index)) else {
            return;
        };
        if !self.nodes[old].is_deposed() {
            return;
        }
        let primary = cluster.primary_of(cluster.shard_of(old));
        cluster.end_stale(old);
        self.nodes[old].demote_keeping_clients(redis_host(primary));
    }

    /// Where the lock key's slot would move now: `(slot, source, target)`,
    /// the source its owner, the target the primary of another shard
    /// (drawn). `None` outside a cluster or with one shard.
    pub(super) fn pick_migration(&mut self) -> Option<(u16, usize, usize)> {
        let cluster = self.cluster.clone()?;
        let slot = self.lock_slot();
        let from = cluster.owner(slot);
        let source_shard = cluster.shard_of(from);
        let others: Vec<usize> = (0..cluster.shard_count())
            .filter(|&shard| shard != source_shard)
            .collect();
        if others.is_empty() {
            return None;
        }
        let pick = self.cluster_rng.between(0, others.len() as u64 - 1) as usize;
        Some((slot, from, cluster.primary_of(others[pick])))
    }

    /// Starts moving the lock key's slot from its owner to the primary of
    /// another shard (drawn): `IMPORTING` on the target, `MIGRATING` on
    /// the source, and one step per key the slot holds now, spread evenly
    /// until the fault ends at `until`, when the slot changes hands.
    pub(super) fn begin_migration(&mut self, index: usize, until: Duration) {
        let (Some(cluster), Some((slot, from, to))) = (self.cluster.clone(), self.pick_migration())
        else {
            return;
        };
        let now = self.now();
        cluster.begin_migration(slot, from, to);
        self.migrations.insert(index, Migration { slot, from, to });
        let keys = self.nodes[from].keys_in_slot(slot, now) as u32;
        let span = until.saturating_sub(now);
        for step in 1..=keys {
            self.planned
                .push((now + span * step / (keys + 1), Action::Step(index)));
        }
    }

    /// A step of fault `index`: a migration moves one key, if its source
    /// and target are up (`MIGRATE` needs both) and the source is still a
    /// primary; a node still unreachable when the cluster fails it is
    /// marked failed, and a node back again has its failure cleared; a
    /// Sentinel failover re-points its other replicas.
    pub(super) fn step(&mut self, index: usize) {
        self.oracle_unchanged = None;
        if let Some((old, new)) = self.reconfigs.remove(&index) {
            self.reconfigure_replicas(old, new);
        }
        if let Some(migration) = self.migrations.get(&index).copied() {
            self.migrate_key(migration);
        }
        self.finish_cut_over(index);
        let now = self.now();
        if let (Some(cluster), Some((node, failed))) =
            (&self.cluster, self.unreachable.get_mut(&index))
        {
            *failed = Some(now);
            cluster.set_failed(*node, true);
        }
        if let (Some(cluster), Some(node)) = (&self.cluster, self.recovering.remove(&index)) {
            cluster.set_failed(node, self.still_failed(node));
        }
    }

    /// Fault `index` makes node `node` unreachable (down or cut off): no
    /// failover promotes it meanwhile, and in a cluster the others mark it
    /// failed when they agree it is ([`Self::failure_delay`]).
    pub(super) fn node_unreachable(&mut self, index: usize, node: usize) {
        self.unreachable.insert(index, (node, None));
        if let Some(timeout) = self.topology.node_timeout() {
            let delay = self.failure_delay(timeout);
            self.planned.push((self.now() + delay, Action::Step(index)));
        }
    }

    /// How long after a primary becomes unreachable a real cluster fails
    /// it (Redis 7.0, `clusterCron` and the gossip it sends). Each other
    /// primary suspects it (`PFAIL`) once the ping it sent it after the cut
    /// has gone unanswered for the node timeout; that ping leaves at the
    /// first cron tick after its last pong is half a node timeout old, so
    /// up to half a node timeout and a tick after the cut. The cluster fails
    /// it (`FAIL`) once a majority of primaries suspect it: a primary counts
    /// itself, and hears the others' suspicion in their next ping or pong,
    /// sent as often. Measured on real runs of `cluster-down` (500 ms):
    /// the lock's node served 0.32–0.81 s into the cut and answered
    /// `CLUSTERDOWN` 0.65–1.35 s into it.
    fn failure_delay(&mut self, timeout: Duration) -> Duration {
        let half = DurationRange {
            min: Duration::ZERO,
            max: timeout / 2 + CLUSTER_CRON,
        };
        let shards = self.cluster.as_ref().map_or(1, |c| c.shard_count());
        // Besides the observer, a majority needs this many of the other
        // primaries (the unreachable one aside) to suspect it too.
        let needed = (shards / 2 + 1).saturating_sub(1);
        let own = self.detection_rng.duration(half);
        let mut others: Vec<Duration> = (0..shards.saturating_sub(2))
            .map(|_| self.detection_rng.duration(half) + self.detection_rng.duration(half))
            .collect();
        others.sort_unstable();
        let heard = match needed {
            0 => Duration::ZERO,
            n => others.get(n - 1).copied().unwrap_or(Duration::ZERO),
        };
        timeout + own.max(heard)
    }

    /// Whether some fault still keeps `node` unreachable past its failure.
    fn still_failed(&self, node: usize) -> bool {
        self.unreachable
            .values()
            .any(|&(other, failed)| other == node && failed.is_some())
    }

    /// The nodes some fault keeps unreachable now.
    pub(super) fn unreachable_nodes(&self) -> BTreeSet<usize> {
        self.unreachable.values().map(|&(node, _)| node).collect()
    }

    /// Fault `index` is over: its node is reachable again. If the cluster
    /// had failed it, the others clear the failure only when a ping of
    /// theirs reaches it again, over a bus link dialled after the heal
    /// (while it was away each link was dropped and dialled again every
    /// node timeout and a tick or two), and only once the failure is older
    /// than twice the node timeout (`CLUSTER_FAIL_UNDO_TIME_MULT`, for a
    /// primary that kept its slots); unless another fault still keeps it
    /// away. Measured: the lock's node served again 0.26–0.84 s after the
    /// heal (first success seen by a client).
    pub(super) fn node_reachable(&mut self, index: usize) {
        let Some((node, failed)) = self.unreachable.remove(&index) else {
            return;
        };
        let (Some(cluster), Some(timeout)) = (&self.cluster, self.topology.node_timeout()) else {
            return;
        };
        let Some(failed_at) = failed else {
            cluster.set_failed(node, self.still_failed(node));
            return;
        };
        let reconnect = self.detection_rng.duration(DurationRange {
            min: Duration::ZERO,
            max: timeout + CLUSTER_CRON * 2,
        });
        let cleared = (self.now() + reconnect).max(failed_at + timeout * 2);
        self.recovering.insert(index, node);
        self.planned.push((cleared, Action::Step(index)));
    }

    fn migrate_key(&mut self, migration: Migration) -> bool {
        let Migration { slot, from, to } = migration;
        let up = [from, to].map(|n| self.sim.is_host_running(redis_host(n).as_str()));
        if up.contains(&false) || self.nodes[from].role() != crate::server::Role::Primary {
            return false;
        }
        let now = self.now();
        match self.nodes[from].migrate_one(slot, &self.nodes[to], now) {
            Some(key) => {
                self.record(Op::Migrated {
                    key: String::from_utf8_lossy(&key).into_owned(),
                    from,
                    to,
                });
                true
            }
            None => false,
        }
    }

    /// Ends migration `index`: moves what is left, then `CLUSTER SETSLOT …
    /// NODE` on every node gives the slot to the target's shard (its
    /// primary of this moment).
    pub(super) fn finish_migration(&mut self, index: usize) {
        let (Some(cluster), Some(migration)) =
            (self.cluster.clone(), self.migrations.remove(&index))
        else {
            return;
        };
        while self.migrate_key(migration) {}
        let owner = cluster.primary_of(cluster.shard_of(migration.to));
        cluster.finish_migration(migration.slot, owner);
        self.follow_lock_slot();
    }
}
