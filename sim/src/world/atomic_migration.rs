//! Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`), as the
//! `atomic-slot-migration` fault runs it on the lock key's slot.
//!
//! # What Valkey does (`src/cluster_migrateslots.c`)
//!
//! The source forks a snapshot of the slot, sent to the target as an AOF
//! rewrite, then streams every write of the slot it replicates
//! (`clusterFeedSlotExportJobs`); meanwhile it alone owns and serves the
//! slot, and the target hides the keys it loads. Once the target has the
//! snapshot it asks the source to pause: the source pauses client writes
//! (`pauseActions(PAUSE_DURING_SLOT_MIGRATION, …)`, when what it has yet
//! to stream is small) and sends `PAUSED` down the stream; the target,
//! caught up once it reads it, asks for the failover, the source grants
//! it, and the target takes the slot at once (`performSlotImportJobFailover`:
//! a new epoch without consensus, broadcast). The source learns the new
//! owner, ends its pause, and the writes that waited meet `MOVED`. No
//! `ASK` or `TRYAGAIN`, ever.
//!
//! When the keys arrive, measured on Valkey 9.1.2 (2026-11-29, three
//! nodes on loopback, the target and its replica polled every 0.5 ms):
//! the target's job reaches `receiving-snapshot` within 2 ms of the
//! command, but its replication offset then stays put for 44-56 ms (the
//! source's child making the snapshot); the snapshot and the stream then
//! arrive together, and the target claims the slot 1-6 ms later. So the
//! simulator delivers the snapshot at the end of the fault's `duration`
//! (the time before the keys arrive), as the slot is then, which
//! includes every write since the command that the stream would bring:
//! the target's replicas get the keys a replication lag after that, at
//! the cut-over, not a lag after the command.
//!
//! Nothing in the cut-over waits for the target's replicas: the import
//! stream reaches them as the target's own replication stream does,
//! asynchronously, and the target claims the slot as soon as the source
//! grants it. A failover of the target's shard inside its replication lag
//! after the cut-over promotes a replica without the last writes of the
//! slot, as after `MIGRATE` (fact `failover-lost-migrated-key`).
//!
//! A migration whose source or target goes away, or stops being a primary,
//! fails: the source keeps the slot, the target's shard drops what it
//! loaded.

use std::time::Duration;

use super::{AtomicMigration, Migration, World};
use crate::{client::redis_host, history::Op, net::BASE_LATENCY, server::Role};

/// How long the source's writes wait at the cut-over: four one-way
/// messages between source and target (`PAUSED`, `REQUEST-FAILOVER`,
/// `FAILOVER-GRANTED`, and the target's pong with its new epoch), each at
/// most the base latency.
const CUTOVER_PAUSE: Duration = BASE_LATENCY.saturating_mul(4);

impl World<'_> {
    /// Starts atomic migration `index` of the lock key's slot to the
    /// primary of another shard (drawn as a key-by-key migration draws
    /// it): the source makes the slot's snapshot, which reaches the
    /// target at [`Self::cut_over`]. Nothing starts if either node is
    /// down or the source is no primary (Valkey cannot connect the two).
    pub(super) fn begin_atomic_migration(&mut self, index: usize) {
        let Some((slot, from, to)) = self.pick_migration() else {
            return;
        };
        let migration = Migration { slot, from, to };
        if !self.both_serve(migration) {
            return;
        }
        self.atomic_migrations.insert(
            index,
            AtomicMigration {
                migration,
                cutting_over: false,
            },
        );
    }

    /// The end of migration `index`'s snapshot: the target loads the
    /// slot as it is now (the snapshot and the writes streamed since the
    /// command, which arrive together), the source streams it the slot's
    /// writes from now on and pauses them for the cut-over, which ends
    /// [`CUTOVER_PAUSE`] from now (a step); or the migration fails, if a
    /// node went away meanwhile.
    pub(super) fn cut_over(&mut self, index: usize) {
        let (Some(cluster), Some(atomic)) =
            (self.cluster.clone(), self.atomic_migrations.get_mut(&index))
        else {
            return;
        };
        atomic.cutting_over = true;
        let migration = atomic.migration;
        if !self.both_serve(migration) {
            self.fail_atomic_migration(index);
            return;
        }
        let Migration { slot, from, to } = migration;
        let now = self.now();
        self.nodes[from].copy_slot(slot, &self.nodes[to], now);
        cluster.begin_export(slot, from, to);
        self.nodes[from].pause_writes();
        self.planned
            .push((self.now() + CUTOVER_PAUSE, super::Action::Step(index)));
    }

    /// A step of fault `index`: if it is an atomic migration cutting over,
    /// the target takes the slot on every node, the source drops the
    /// slot's keys and ends its pause.
    pub(super) fn finish_cut_over(&mut self, index: usize) {
        let (Some(cluster), Some(atomic)) = (
            self.cluster.clone(),
            self.atomic_migrations.get(&index).copied(),
        ) else {
            return;
        };
        if !atomic.cutting_over {
            return;
        }
        let migration = atomic.migration;
        if !self.both_serve(migration) {
            self.fail_atomic_migration(index);
            return;
        }
        self.atomic_migrations.remove(&index);
        let Migration { slot, from, to } = migration;
        cluster.end_export(slot, from);
        cluster.finish_migration(slot, to);
        let now = self.now();
        // The source drops the keys of a slot it lost (Valkey's dirty
        // slots), replicating each deletion.
        for key in self.nodes[from].drop_slot(slot, now) {
            self.record(Op::Migrated {
                key: String::from_utf8_lossy(&key).into_owned(),
                from,
                to,
            });
        }
        self.follow_lock_slot();
        self.nodes[from].resume_writes();
    }

    /// Fails every atomic migration under way that `node` is an end of:
    /// it went away (a crash, a restart, a partition), which breaks
    /// Valkey's migration link.
    pub(super) fn break_atomic_migrations(&mut self, node: usize) {
        let broken: Vec<usize> = self
            .atomic_migrations
            .iter()
            .filter(|(_, atomic)| [atomic.migration.from, atomic.migration.to].contains(&node))
            .map(|(&index, _)| index)
            .collect();
        for index in broken {
            self.fail_atomic_migration(index);
        }
    }

    /// Migration `index` fails: the source stops streaming and resumes
    /// its writes, keeping the slot; the target's shard (its primary of
    /// this moment) drops the keys it loaded.
    fn fail_atomic_migration(&mut self, index: usize) {
        let (Some(cluster), Some(atomic)) =
            (self.cluster.clone(), self.atomic_migrations.remove(&index))
        else {
            return;
        };
        let Migration { slot, from, to } = atomic.migration;
        cluster.end_export(slot, from);
        let primary = cluster.primary_of(cluster.shard_of(to));
        let now = self.now();
        self.nodes[primary].drop_slot(slot, now);
        self.nodes[from].resume_writes();
    }

    /// Whether both ends of `migration` are up and still primaries (not
    /// demoted, nor deposed by a failover of their shard).
    fn both_serve(&mut self, migration: Migration) -> bool {
        [migration.from, migration.to].into_iter().all(|node| {
            self.sim.is_host_running(redis_host(node).as_str())
                && self.nodes[node].role() == Role::Primary
                && !self.nodes[node].is_deposed()
        })
    }
}
