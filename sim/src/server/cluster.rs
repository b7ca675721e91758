//! Redis Cluster: the slot table the simulated nodes share, and the
//! redirections a node answers with when a command's keys are not its own.
//!
//! # How a real cluster routes (Redis 7.0, `getNodeByQuery`)
//!
//! The 16384 slots are split among the shards; a key's slot is CRC16 of
//! its hash tag (lock-core's
//! [`slot_of`](lock_core::internal::cluster::slot_of)). Every node knows
//! which node owns each slot, and answers a command whose keys it does not
//! own with `MOVED <slot> <host>:<port>`: a replica too (it answers `MOVED`
//! to its primary, not `READONLY`), and so does a primary demoted by a
//! failover.
//! A command whose keys fall in two slots gets `CROSSSLOT`.
//!
//! While a slot migrates, the source is `MIGRATING` it and the target
//! `IMPORTING` it, and keys move one `MIGRATE` at a time. The source serves
//! a command if it has every key; if it has none it answers `ASK <slot>
//! <target>`, and if it has some but not all, `TRYAGAIN` (the keys are
//! split). The target serves a command only right after `ASKING` on the
//! same connection (the flag lasts one command), and even then answers
//! `TRYAGAIN` to a multi-key command missing some of its keys; without
//! `ASKING` it answers `MOVED` to the source. `CLUSTER SETSLOT … NODE`
//! ends the migration: the target owns the slot.
//!
//! Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`) has no such
//! phase: the source keeps owning and serving the slot while the target
//! loads a snapshot of it and then the stream of its writes, the source
//! pauses writes for the cut-over, the target claims the slot with a new
//! epoch, and every node then answers `MOVED` to it (the world drives
//! it: `world/atomic_migration.rs`).
//!
//! # What this model keeps
//!
//! A primary unreachable (down, or cut off by a partition) is marked failed
//! when a majority of primaries agree it is, as Redis's failure detection
//! gets there: a ping unanswered past `cluster-node-timeout`, then gossip
//! (the world decides the instant: `world/cluster.rs`,
//! `failure_delay`). While a failed node still owns slots, the cluster
//! state is FAIL and every node answers `CLUSTERDOWN` to a command with
//! keys (`cluster-require-full-coverage yes`, Redis's default), the cut-off
//! node too (it cannot reach the majority). A failover that hands its slots
//! to a replica, or the node's return (once a ping gets through after the
//! heal, and not before the failure is twice the node timeout old), brings
//! the cluster back up.
//!
//! One agreed slot table (`owners`), which the world changes at once on
//! every node, with one exception: a primary that a failover replaced but
//! left up (its stale window) still believes it owns its old slots, as a
//! primary cut off in a minority does until it is demoted. Migration
//! states are per node. Nodes announce host names (as
//! `cluster-announce-hostname` with `cluster-preferred-endpoint-type
//! hostname` does), so `MOVED redis-3:6379` is dialled by name. `PUBLISH`
//! reaches subscribers on every node (the cluster bus relays it), partitions
//! between nodes notwithstanding.
//!
//! This file holds the table the world changes and the nodes read, and
//! knows no node: what a node answers from its view of the table is in
//! [`cmd::cluster`](super::cmd::cluster), the bus in [`bus`](super::bus).

use std::{
    cell::{Ref, RefCell},
    collections::{BTreeMap, BTreeSet},
    rc::Rc,
};

use lock_core::internal::cluster::SLOTS;

use super::frame::parse_i64;
use crate::net::redis_host;

/// The error of a command whose keys are in two slots.
pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// What every node answers to a command with keys while a slot has no
/// reachable owner (`cluster-require-full-coverage yes`, the default).
pub const CLUSTERDOWN: &str = "CLUSTERDOWN The cluster is down";

/// The error of a multi-key command whose keys a migration split.
pub const TRYAGAIN: &str = "TRYAGAIN Multiple keys request during rehashing of slot";

/// The cluster's shared state: who owns which slot, who migrates what.
#[derive(Debug)]
pub struct ClusterState {
    /// Node → its shard.
    shard_of: Vec<usize>,
    /// Shard → its nodes, in index order.
    members: Vec<Vec<usize>>,
    /// Shard → its primary of record.
    primaries: Vec<usize>,
    /// Slot → the node that owns it.
    owners: Vec<usize>,
    /// A deposed primary → the node that replaced it: until its demotion
    /// it still believes it owns what that node owns now.
    stale: BTreeMap<usize, usize>,
    /// (node, slot) → the node it is migrating the slot to.
    migrating: BTreeMap<(usize, u16), usize>,
    /// (node, slot) → the node it is importing the slot from.
    importing: BTreeMap<(usize, u16), usize>,
    /// (node, slot) → the node an atomic migration streams the slot to
    /// (Valkey 9's `CLUSTER MIGRATESLOTS`): the node keeps owning and
    /// serving the slot, and forwards every write of it there.
    exporting: BTreeMap<(usize, u16), usize>,
    /// Nodes the others marked failed (the world decides when: a ping
    /// unanswered past the node timeout, then a majority's agreement).
    failed: BTreeSet<usize>,
}

/// The world's and the nodes' shared handle on the cluster.
#[derive(Debug, Clone)]
pub struct ClusterHandle(Rc<RefCell<ClusterState>>);

/// The slot ranges `redis-cli --cluster create` gives `shards` primaries:
/// 16384 / shards each, rounded as it rounds them (3 shards: 0-5460,
/// 5461-10922, 10923-16383). The rule the real clusters of the tests and
/// of `sim chaos` are made by (`servers::cluster::slot_ranges`), so that
/// both sides split the slots alike.
pub fn initial_ranges(shards: usize) -> Vec<(u16, u16)> {
    servers::cluster::slot_ranges(shards)
}

/// The cluster node id of node `index`: 40 hex digits, fixed per name.
pub fn node_id(index: usize) -> String {
    sha1_smol::Sha1::from(redis_host(index))
        .digest()
        .to_string()
}

impl ClusterHandle {
    /// A cluster of `shards` shards of `1 + replicas` nodes each: shard `s`
    /// is nodes `s × (1 + replicas)` (its primary) to the replicas after it.
    pub fn new(shards: usize, replicas: usize) -> Self {
        let size = 1 + replicas;
        let members: Vec<Vec<usize>> = (0..shards)
            .map(|shard| (shard * size..(shard + 1) * size).collect())
            .collect();
        let primaries: Vec<usize> = members.iter().map(|nodes| nodes[0]).collect();
        let mut owners = vec![0; usize::from(SLOTS)];
        for (shard, (first, last)) in initial_ranges(shards).into_iter().enumerate() {
            for slot in first..=last {
                owners[usize::from(slot)] = primaries[shard];
            }
        }
        Self(Rc::new(RefCell::new(ClusterState {
            shard_of: (0..shards * size).map(|node| node / size).collect(),
            members,
            primaries,
            owners,
            stale: BTreeMap::new(),
            migrating: BTreeMap::new(),
            importing: BTreeMap::new(),
            exporting: BTreeMap::new(),
            failed: BTreeSet::new(),
        })))
    }

    /// The node that owns `slot`, as the cluster agrees.
    pub fn owner(&self, slot: u16) -> usize {
        self.0.borrow().owners[usize::from(slot)]
    }

    /// The shard node `node` belongs to.
    pub fn shard_of(&self, node: usize) -> usize {
        self.0.borrow().shard_of[node]
    }

    /// The nodes of `shard`.
    pub fn members(&self, shard: usize) -> Vec<usize> {
        self.0.borrow().members[shard].clone()
    }

    /// How many shards there are.
    pub fn shard_count(&self) -> usize {
        self.0.borrow().members.len()
    }

    /// The primary of record of `shard`.
    pub fn primary_of(&self, shard: usize) -> usize {
        self.0.borrow().primaries[shard]
    }

    /// A failover: `new` takes over every slot of `old`, its shard's
    /// primary until now. With `stale`, `old` keeps believing it owns them
    /// until [`end_stale`](Self::end_stale).
    pub fn fail_over(&self, old: usize, new: usize, stale: bool) {
        let mut state = self.0.borrow_mut();
        let shard = state.shard_of[new];
        state.primaries[shard] = new;
        for owner in &mut state.owners {
            if *owner == old {
                *owner = new;
            }
        }
        // A node that replaced a deposed one passes its place on.
        for replaced_by in state.stale.values_mut() {
            if *replaced_by == old {
                *replaced_by = new;
            }
        }
        if stale {
            state.stale.insert(old, new);
        } else {
            state.stale.remove(&old);
        }
    }

    /// A deposed primary learns the cluster's table (its demotion).
    pub fn end_stale(&self, node: usize) {
        self.0.borrow_mut().stale.remove(&node);
    }

    /// Opens a migration of `slot` from `from` to `to` (`CLUSTER SETSLOT
    /// … IMPORTING` on the target, `… MIGRATING` on the source).
    pub fn begin_migration(&self, slot: u16, from: usize, to: usize) {
        let mut state = self.0.borrow_mut();
        state.importing.insert((to, slot), from);
        state.migrating.insert((from, slot), to);
    }

    /// Closes every migration of `slot` and gives it to `to` on every node
    /// (`CLUSTER SETSLOT … NODE`).
    pub fn finish_migration(&self, slot: u16, to: usize) {
        let mut state = self.0.borrow_mut();
        state.owners[usize::from(slot)] = to;
        state.migrating.retain(|(_, s), _| *s != slot);
        state.importing.retain(|(_, s), _| *s != slot);
    }

    /// Starts streaming `slot`'s writes on `from` to `to` (an atomic
    /// migration, after the target loaded the slot's snapshot).
    pub fn begin_export(&self, slot: u16, from: usize, to: usize) {
        self.0.borrow_mut().exporting.insert((from, slot), to);
    }

    /// Stops streaming `slot`'s writes on `from` (the cut-over, or the
    /// migration failed).
    pub fn end_export(&self, slot: u16, from: usize) {
        self.0.borrow_mut().exporting.remove(&(from, slot));
    }

    /// Marks `node` failed (the others agreed it is unreachable) or
    /// reachable again.
    pub fn set_failed(&self, node: usize, failed: bool) {
        let mut state = self.0.borrow_mut();
        if failed {
            state.failed.insert(node);
        } else {
            state.failed.remove(&node);
        }
    }

    /// Whether the cluster is down: a failed node still owns a slot (a
    /// failover that gives its slots to a replica brings it back up).
    pub fn is_down(&self) -> bool {
        self.0.borrow().is_down()
    }

    /// Where `slot` is migrating to, if `node` is migrating it.
    pub fn migrating_to(&self, node: usize, slot: u16) -> Option<usize> {
        self.0.borrow().migrating.get(&(node, slot)).copied()
    }

    /// How many nodes the cluster has.
    pub(super) fn node_count(&self) -> usize {
        self.0.borrow().shard_of.len()
    }

    /// The table, for a node to answer from its view of it
    /// ([`cluster_reply`](super::cluster_reply)).
    pub(super) fn state(&self) -> Ref<'_, ClusterState> {
        self.0.borrow()
    }
}

impl ClusterState {
    /// Whether a failed node still owns a slot.
    pub(super) fn is_down(&self) -> bool {
        !self.failed.is_empty() && self.owners.iter().any(|owner| self.failed.contains(owner))
    }

    /// Who owns `slot` in `node`'s view.
    pub(super) fn view_owner(&self, node: usize, slot: u16) -> usize {
        let owner = self.owners[usize::from(slot)];
        if self.stale.get(&node) == Some(&owner) {
            node
        } else {
            owner
        }
    }

    /// The primary of `shard` in `node`'s view.
    pub(super) fn view_primary(&self, node: usize, shard: usize) -> usize {
        let primary = self.primaries[shard];
        if self.stale.get(&node) == Some(&primary) {
            node
        } else {
            primary
        }
    }

    /// The shard node `node` belongs to.
    pub(super) fn shard_of(&self, node: usize) -> usize {
        self.shard_of[node]
    }

    /// Shard → its nodes, in index order.
    pub(super) fn shards(&self) -> &[Vec<usize>] {
        &self.members
    }

    /// How many shards there are.
    pub(super) fn shard_count(&self) -> usize {
        self.members.len()
    }

    /// Where `slot` is migrating to, if `node` is migrating it.
    pub(super) fn migrating_to(&self, node: usize, slot: u16) -> Option<usize> {
        self.migrating.get(&(node, slot)).copied()
    }

    /// Whether `node` is importing `slot`.
    pub(super) fn is_importing(&self, node: usize, slot: u16) -> bool {
        self.importing.contains_key(&(node, slot))
    }

    /// The slots `node` streams to another node, each with that node.
    pub(super) fn exports_of(&self, node: usize) -> Vec<(u16, usize)> {
        self.exporting
            .range((node, 0)..=(node, u16::MAX))
            .map(|(&(_, slot), &to)| (slot, to))
            .collect()
    }
}

/// The keys of a command, by Redis's key specifications; none for a
/// command that takes none, or whose arity is wrong (Redis reports that
/// before any redirection).
pub fn command_keys(args: &[Vec<u8>]) -> Vec<&[u8]> {
    let Some(name) = args.first().map(|name| name.to_ascii_uppercase()) else {
        return Vec::new();
    };
    let count = args.len();
    match name.as_slice() {
        b"GET" | b"PTTL" | b"TTL" | b"INCR" | b"ZCARD" if count == 2 => vec![&args[1]],
        b"SET" | b"LPUSH" | b"PEXPIRE" | b"EXPIRE" | b"PEXPIREAT" | b"EXPIREAT" | b"ZSCORE"
        | b"ZREM"
            if count >= 3 =>
        {
            vec![&args[1]]
        }
        b"ZADD" | b"ZRANGE" | b"ZRANGEBYSCORE" | b"ZREMRANGEBYSCORE" if count >= 4 => {
            vec![&args[1]]
        }
        b"DEL" | b"EXISTS" | b"MGET" if count >= 2 => args[1..].iter().map(Vec::as_slice).collect(),
        b"EVAL" | b"EVALSHA" if count >= 3 => {
            // A bad key count names no keys: the script command reports it.
            match parse_i64(&args[2]).and_then(|n| usize::try_from(n).ok()) {
                Some(keys) if keys <= count - 3 => {
                    args[3..3 + keys].iter().map(Vec::as_slice).collect()
                }
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_split_as_redis_cli_splits_them() {
        assert_eq!(
            initial_ranges(3),
            vec![(0, 5460), (5461, 10922), (10923, 16383)]
        );
        assert_eq!(initial_ranges(1), vec![(0, 16383)]);
        for shards in 1..=9 {
            let ranges = initial_ranges(shards);
            assert_eq!(ranges[0].0, 0);
            assert_eq!(ranges[shards - 1].1, SLOTS - 1);
            for pair in ranges.windows(2) {
                assert_eq!(pair[0].1 + 1, pair[1].0);
            }
        }
    }

    #[test]
    fn keys_follow_the_key_specifications() {
        let args = |words: &[&str]| -> Vec<Vec<u8>> {
            words.iter().map(|w| w.as_bytes().to_vec()).collect()
        };
        let keys = |words: &[&str]| -> Vec<Vec<u8>> {
            command_keys(&args(words))
                .into_iter()
                .map(<[u8]>::to_vec)
                .collect()
        };
        assert_eq!(keys(&["GET", "k"]), args(&["k"]));
        assert!(keys(&["GET"]).is_empty(), "wrong arity: no keys");
        assert_eq!(
            keys(&["EVALSHA", "x", "2", "a", "b", "c"]),
            args(&["a", "b"])
        );
        assert!(keys(&["EVALSHA", "x", "5", "a"]).is_empty());
        assert!(keys(&["PING"]).is_empty());
        assert_eq!(keys(&["DEL", "a", "b"]), args(&["a", "b"]));
    }
}
