//! Redis Cluster: the slot table the simulated nodes share, and the
//! redirections a node answers with when a command's keys are not its own.
//!
//! # How a real cluster routes (Redis 7.0, `getNodeByQuery`)
//!
//! The 16384 slots are split among the shards; a key's slot is CRC16 of
//! its hash tag (lock-core's [`slot_of`]). Every node knows which node owns
//! each slot, and answers a command whose keys it does not own with
//! `MOVED <slot> <host>:<port>`: a replica too (it answers `MOVED` to its
//! primary, not `READONLY`), and so does a primary demoted by a failover.
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
//! # What this model keeps
//!
//! A primary unreachable (down, or cut off by a partition) for longer than
//! `cluster-node-timeout` is marked failed; while a failed node still owns
//! slots, the cluster state is FAIL and every node answers `CLUSTERDOWN`
//! to a command with keys (`cluster-require-full-coverage yes`, Redis's
//! default), the cut-off node too (it cannot reach the majority). A
//! failover that hands its slots to a replica, or the node's return, brings
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

use std::{
    cell::RefCell,
    collections::{BTreeMap, BTreeSet},
    rc::{Rc, Weak},
};

use lock_core::internal::cluster::{SLOTS, slot_of};
use redis_protocol::resp2::types::OwnedFrame as Frame;

use super::{
    Node, PORT, Role, bus,
    db::{self, NodeTime},
    frame::{bulk, error},
};
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
    /// Nodes the others marked failed: unreachable for longer than the
    /// node timeout.
    failed: BTreeSet<usize>,
    /// Every node (for the replication offsets `CLUSTER SHARDS` reports).
    nodes: Vec<Weak<RefCell<Node>>>,
}

/// The world's and the nodes' shared handle on the cluster.
#[derive(Debug, Clone)]
pub struct ClusterHandle(Rc<RefCell<ClusterState>>);

/// The slot ranges `redis-cli --cluster create` gives `shards` primaries:
/// 16384 / shards each, rounded as it rounds them (3 shards: 0-5460,
/// 5461-10922, 10923-16383).
pub fn initial_ranges(shards: usize) -> Vec<(u16, u16)> {
    let per_shard = f64::from(SLOTS) / shards as f64;
    let mut ranges = Vec::with_capacity(shards);
    let (mut first, mut cursor) = (0_u16, 0.0_f64);
    for shard in 0..shards {
        let mut last = (cursor + per_shard - 1.0).round() as u16;
        if last >= SLOTS || shard == shards - 1 {
            last = SLOTS - 1;
        }
        last = last.max(first);
        ranges.push((first, last));
        first = last + 1;
        cursor += per_shard;
    }
    ranges
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
            failed: BTreeSet::new(),
            nodes: Vec::new(),
        })))
    }

    /// A cluster of `shards` shards of `1 + replicas` nodes, with its
    /// nodes attached (each replica of its shard's primary, without lag),
    /// not yet serving: for tests that build a cluster by hand.
    pub fn with_nodes(shards: usize, replicas: usize) -> (Self, Vec<super::NodeHandle>) {
        let cluster = Self::new(shards, replicas);
        let nodes: Vec<super::NodeHandle> = (0..shards * (1 + replicas))
            .map(|index| {
                let primary = cluster.primary_of(cluster.shard_of(index));
                super::NodeHandle::new(super::NodeConfig {
                    index,
                    replica_of: (primary != index).then(|| redis_host(primary)),
                    replication_lag: None,
                    seed: 1,
                    flavour: super::Flavour::default(),
                    persistence: crate::config::Persistence::None,
                })
            })
            .collect();
        cluster.attach(&nodes);
        (cluster, nodes)
    }

    /// Makes `nodes` (all of them, by index) members of this cluster.
    pub fn attach(&self, nodes: &[super::NodeHandle]) {
        self.0.borrow_mut().nodes = nodes.iter().map(|node| Rc::downgrade(&node.0)).collect();
        for node in nodes {
            node.0.borrow_mut().cluster = Some(self.clone());
        }
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

    /// Marks `node` failed (it stayed unreachable past the node timeout)
    /// or reachable again.
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

    /// `PUBLISH` on node `from`: its own subscribers get the message at
    /// once, every other node's when the cluster bus relays it ([`bus`]);
    /// answers how many of `from`'s own got it (what Redis answers in a
    /// cluster).
    pub(crate) fn publish(&self, from: &Node, channel: &[u8], message: &[u8]) -> usize {
        let local = super::bus::deliver(from, channel, message);
        let nodes = self.0.borrow().shard_of.len();
        bus::relay(from, nodes, channel, message);
        local
    }
}

impl ClusterState {
    fn is_down(&self) -> bool {
        !self.failed.is_empty() && self.owners.iter().any(|owner| self.failed.contains(owner))
    }

    /// Who owns `slot` in `node`'s view.
    fn view_owner(&self, node: usize, slot: u16) -> usize {
        let owner = self.owners[usize::from(slot)];
        if self.stale.get(&node) == Some(&owner) {
            node
        } else {
            owner
        }
    }

    /// The primary of `shard` in `node`'s view.
    fn view_primary(&self, node: usize, shard: usize) -> usize {
        let primary = self.primaries[shard];
        if self.stale.get(&node) == Some(&primary) {
            node
        } else {
            primary
        }
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
            match super::frame::parse_i64(&args[2]).and_then(|n| usize::try_from(n).ok()) {
                Some(keys) if keys <= count - 3 => {
                    args[3..3 + keys].iter().map(Vec::as_slice).collect()
                }
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}

fn redirect(kind: &str, slot: u16, node: usize) -> Frame {
    error(&format!("{kind} {slot} {}:{PORT}", redis_host(node)))
}

/// What node `node` answers instead of running `args`, if it may not run
/// it here: `MOVED`, `ASK`, `TRYAGAIN` or `CROSSSLOT`. `asking`: the
/// connection sent `ASKING` just before; `readonly`: it sent `READONLY`
/// (a replica may then serve reads of its primary's slots).
pub(crate) fn redirection(
    node: &Node,
    cluster: &ClusterHandle,
    args: &[Vec<u8>],
    asking: bool,
    readonly: bool,
    time: NodeTime,
) -> Option<Frame> {
    let keys = command_keys(args);
    let (first, rest) = keys.split_first()?;
    let slot = slot_of(first);
    let mut multiple = false;
    for key in rest {
        if slot_of(key) != slot {
            return Some(error(CROSSSLOT));
        }
        multiple |= key != first;
    }
    let state = cluster.0.borrow();
    if state.is_down() {
        // A slot has no reachable owner: the majority marked the cluster
        // FAIL, and a node cut off from it did too.
        return Some(error(CLUSTERDOWN));
    }
    let me = node.index;
    let owner = state.view_owner(me, slot);
    let migrating = (owner == me)
        .then(|| state.migrating.get(&(me, slot)).copied())
        .flatten();
    let importing = migrating.is_none() && state.importing.contains_key(&(me, slot));
    if migrating.is_some() || importing {
        let missing = keys.iter().filter(|key| !node.db.exists(key, time)).count();
        if let Some(to) = migrating
            && missing > 0
        {
            return Some(if missing < keys.len() {
                error(TRYAGAIN)
            } else {
                redirect("ASK", slot, to)
            });
        }
        if importing && asking {
            return (multiple && missing > 0).then(|| error(TRYAGAIN));
        }
    }
    let primary = state.view_primary(me, state.shard_of[owner]);
    if readonly
        && !db::is_write(&args[0])
        && node.role
            == (Role::Replica {
                of: redis_host(primary),
            })
    {
        return None;
    }
    (owner != me).then(|| redirect("MOVED", slot, owner))
}

/// `CLUSTER SHARDS | SLOTS | KEYSLOT | MYID`, answered from `node`'s view.
pub(crate) fn cluster_command(node: &Node, cluster: &ClusterHandle, args: &[Vec<u8>]) -> Frame {
    let sub = args
        .get(1)
        .map(|sub| sub.to_ascii_uppercase())
        .unwrap_or_default();
    let state = cluster.0.borrow();
    match (sub.as_slice(), args.len()) {
        (b"SHARDS", 2) => shards(node, &state),
        (b"SLOTS", 2) => slots(node, &state),
        (b"KEYSLOT", 3) => Frame::Integer(i64::from(slot_of(&args[2]))),
        (b"MYID", 2) => bulk(node_id(node.index).as_bytes()),
        _ => error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLUSTER HELP.",
            String::from_utf8_lossy(args.get(1).map_or(&b""[..], Vec::as_slice))
        )),
    }
}

/// The slot table in `node`'s view as runs of one owner: `(first, last,
/// owner)`, ascending.
fn view_ranges(state: &ClusterState, node: usize) -> Vec<(u16, u16, usize)> {
    let mut ranges: Vec<(u16, u16, usize)> = Vec::new();
    for slot in 0..SLOTS {
        let owner = state.view_owner(node, slot);
        match ranges.last_mut() {
            Some((_, last, run)) if *run == owner => *last = slot,
            _ => ranges.push((slot, slot, owner)),
        }
    }
    ranges
}

/// The offset a node reports for `index`: its own when it is `node`,
/// else what it last heard (the other node's current offset here).
fn offset_of(node: &Node, state: &ClusterState, index: usize) -> i64 {
    if index == node.index {
        return node.offset as i64;
    }
    state.nodes[index]
        .upgrade()
        .map_or(0, |other| other.borrow().offset as i64)
}

fn node_entry(node: &Node, state: &ClusterState, index: usize, primary: bool) -> Frame {
    let host = redis_host(index);
    let field = |name: &str| bulk(name.as_bytes());
    Frame::Array(vec![
        field("id"),
        bulk(node_id(index).as_bytes()),
        field("port"),
        Frame::Integer(i64::from(PORT)),
        field("ip"),
        bulk(host.as_bytes()),
        field("endpoint"),
        bulk(host.as_bytes()),
        field("hostname"),
        bulk(host.as_bytes()),
        field("role"),
        field(if primary { "master" } else { "replica" }),
        field("replication-offset"),
        Frame::Integer(offset_of(node, state, index)),
        field("health"),
        field("online"),
    ])
}

/// `CLUSTER SHARDS`: per shard, its slot ranges as a flat list of
/// (first, last) pairs and its nodes, the primary first.
fn shards(node: &Node, state: &ClusterState) -> Frame {
    let ranges = view_ranges(state, node.index);
    let mut shards = Vec::with_capacity(state.members.len());
    for (shard, members) in state.members.iter().enumerate() {
        let primary = state.view_primary(node.index, shard);
        let slots = ranges
            .iter()
            .filter(|&&(_, _, owner)| owner == primary)
            .flat_map(|&(first, last, _)| {
                [Frame::Integer(first.into()), Frame::Integer(last.into())]
            })
            .collect();
        let mut nodes = vec![node_entry(node, state, primary, true)];
        nodes.extend(
            members
                .iter()
                .filter(|&&member| member != primary)
                .map(|&member| node_entry(node, state, member, false)),
        );
        shards.push(Frame::Array(vec![
            bulk(b"slots"),
            Frame::Array(slots),
            bulk(b"nodes"),
            Frame::Array(nodes),
        ]));
    }
    Frame::Array(shards)
}

/// `CLUSTER SLOTS`: per slot range, ascending, `[first, last, primary,
/// replicas…]`, each node `[host, port, id, ["ip", ip]]` (with host names
/// preferred, the address moves to the metadata).
fn slots(node: &Node, state: &ClusterState) -> Frame {
    let entry = |index: usize| {
        Frame::Array(vec![
            bulk(redis_host(index).as_bytes()),
            Frame::Integer(i64::from(PORT)),
            bulk(node_id(index).as_bytes()),
            Frame::Array(vec![bulk(b"ip"), bulk(redis_host(index).as_bytes())]),
        ])
    };
    // Runs of one owner, each with the shard whose primary owns it.
    let ranges: Vec<(u16, u16, usize)> = view_ranges(state, node.index)
        .into_iter()
        .filter_map(|(first, last, owner)| {
            let shard = state.shard_of[owner];
            (state.view_primary(node.index, shard) == owner).then_some((first, last, shard))
        })
        .collect();
    Frame::Array(
        ranges
            .into_iter()
            .map(|(first, last, shard)| {
                let primary = state.view_primary(node.index, shard);
                let mut items = vec![
                    Frame::Integer(first.into()),
                    Frame::Integer(last.into()),
                    entry(primary),
                ];
                items.extend(
                    state.members[shard]
                        .iter()
                        .filter(|&&member| member != primary)
                        .map(|&member| entry(member)),
                );
                Frame::Array(items)
            })
            .collect(),
    )
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

    use std::time::Duration;

    use lock_core::internal::cluster::{NodeAddress, SlotMap};

    use crate::redis::{NodeHandle, frame::to_bytes};

    /// Slot 3196, in shard 0 (0-5460) of three.
    const LOCK: &str = "{lock:resource}";
    const FENCE: &str = "{lock:resource}:fence";

    fn cluster() -> (ClusterHandle, Vec<NodeHandle>) {
        ClusterHandle::with_nodes(3, 1)
    }

    fn words(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    fn set(node: &NodeHandle, key: &str) {
        let mut state = node.0.borrow_mut();
        let time = state.time_at(Duration::ZERO);
        state.db.set(key.as_bytes(), b"v", Some(time.ms + 10_000));
    }

    /// What `node` answers instead of running `command`, as text.
    fn answer(node: &NodeHandle, command: &[&str], asking: bool) -> Option<String> {
        let state = node.0.borrow();
        let cluster = state.cluster.clone().expect("a cluster node");
        let time = state.time_at(Duration::ZERO);
        redirection(&state, &cluster, &words(command), asking, false, time).map(|frame| match frame
        {
            Frame::Error(text) => text,
            other => format!("{other:?}"),
        })
    }

    #[test]
    fn a_node_serves_its_slots_and_redirects_the_rest() {
        let (_, nodes) = cluster();
        assert_eq!(slot_of(LOCK), 3196);
        assert_eq!(answer(&nodes[0], &["GET", LOCK], false), None);
        let moved = Some("MOVED 3196 redis-0:6379".to_owned());
        assert_eq!(answer(&nodes[2], &["GET", LOCK], false), moved);
        assert_eq!(answer(&nodes[1], &["GET", LOCK], false), moved, "a replica");
        assert_eq!(
            answer(&nodes[0], &["DEL", LOCK, "other"], false).as_deref(),
            Some(CROSSSLOT)
        );
        assert_eq!(answer(&nodes[2], &["PING"], false), None, "no keys");
        assert_eq!(answer(&nodes[2], &["GET"], false), None, "arity first");
    }

    #[test]
    fn a_migration_answers_ask_and_tryagain() {
        let (cluster, nodes) = cluster();
        set(&nodes[0], LOCK);
        set(&nodes[0], FENCE);
        cluster.begin_migration(3196, 0, 2);
        let script = |keys: &[&'static str]| {
            let mut command = vec!["EVALSHA", "sha", if keys.len() == 2 { "2" } else { "1" }];
            command.extend_from_slice(keys);
            command
        };
        assert_eq!(answer(&nodes[0], &script(&[LOCK, FENCE]), false), None);
        assert_eq!(
            nodes[0].migrate_one(3196, &nodes[2], Duration::ZERO),
            Some(LOCK.into())
        );
        let ask = Some("ASK 3196 redis-2:6379".to_owned());
        assert_eq!(answer(&nodes[0], &["GET", LOCK], false), ask);
        assert_eq!(answer(&nodes[0], &["GET", FENCE], false), None);
        assert_eq!(
            answer(&nodes[0], &script(&[LOCK, FENCE]), false).as_deref(),
            Some(TRYAGAIN)
        );
        let moved = Some("MOVED 3196 redis-0:6379".to_owned());
        assert_eq!(
            answer(&nodes[2], &["GET", LOCK], false),
            moved,
            "without ASKING"
        );
        assert_eq!(answer(&nodes[2], &["GET", LOCK], true), None);
        assert_eq!(answer(&nodes[2], &["GET", "{lock:resource}:x"], true), None);
        assert_eq!(
            answer(&nodes[2], &script(&[LOCK, FENCE]), true).as_deref(),
            Some(TRYAGAIN)
        );
        assert_eq!(
            nodes[0].migrate_one(3196, &nodes[2], Duration::ZERO),
            Some(FENCE.into())
        );
        assert_eq!(answer(&nodes[0], &script(&[LOCK, FENCE]), false), ask);
        assert_eq!(answer(&nodes[2], &script(&[LOCK, FENCE]), true), None);
        cluster.finish_migration(3196, 2);
        let moved = Some("MOVED 3196 redis-2:6379".to_owned());
        assert_eq!(answer(&nodes[0], &["GET", LOCK], false), moved);
        assert_eq!(answer(&nodes[4], &["GET", LOCK], false), moved);
        assert_eq!(answer(&nodes[2], &["GET", LOCK], false), None);
    }

    #[test]
    fn a_deposed_primary_believes_it_owns_its_slots_until_demoted() {
        let (cluster, nodes) = cluster();
        cluster.fail_over(0, 1, true);
        assert_eq!(answer(&nodes[0], &["GET", LOCK], false), None, "stale");
        let moved = Some("MOVED 3196 redis-1:6379".to_owned());
        assert_eq!(answer(&nodes[2], &["GET", LOCK], false), moved);
        assert_eq!(answer(&nodes[1], &["GET", LOCK], false), None);
        cluster.end_stale(0);
        assert_eq!(
            answer(&nodes[0], &["GET", LOCK], false),
            moved,
            "not READONLY"
        );
    }

    #[test]
    fn publish_answers_for_the_node_own_subscribers() {
        // Other nodes hear it over the bus (tests/cluster.rs); the reply
        // counts this node's subscribers, as Redis does in a cluster.
        let (cluster, nodes) = cluster();
        let (push, mut pushes) = tokio::sync::mpsc::unbounded_channel();
        nodes[3]
            .0
            .borrow_mut()
            .subscribers
            .entry(b"channel".to_vec())
            .or_default()
            .insert(1, push);
        assert_eq!(
            cluster.publish(&nodes[0].0.borrow(), b"channel", b"released"),
            0,
            "none on redis-0"
        );
        assert!(pushes.try_recv().is_err(), "not delivered in place");
        assert_eq!(
            cluster.publish(&nodes[3].0.borrow(), b"channel", b"again"),
            1,
            "one on redis-3"
        );
        assert_eq!(
            pushes.try_recv().ok(),
            Some(Frame::Array(vec![
                bulk(b"message"),
                bulk(b"channel"),
                bulk(b"again"),
            ]))
        );
    }

    /// lock-core's own parser reads `node`'s `CLUSTER SHARDS`.
    fn slot_map(node: &NodeHandle) -> SlotMap {
        let state = node.0.borrow();
        let cluster = state.cluster.clone().expect("a cluster node");
        let frame = cluster_command(&state, &cluster, &words(&["CLUSTER", "SHARDS"]));
        let value = redis::parse_redis_value(&to_bytes(&frame)).expect("RESP");
        SlotMap::from_cluster_shards(&value, "origin", false).expect("a slot map")
    }

    #[test]
    fn lock_core_reads_the_shards_as_each_node_sees_them() {
        let (cluster, nodes) = cluster();
        let map = slot_map(&nodes[3]);
        assert!(map.covers_all_slots());
        assert_eq!(map.shards().len(), 3);
        assert_eq!(
            map.primary_of(3196),
            Some(&NodeAddress::new("redis-0", 6379))
        );
        assert_eq!(
            map.primary_of(16383),
            Some(&NodeAddress::new("redis-4", 6379))
        );
        assert_eq!(
            map.shards()[0].replicas[0].address,
            NodeAddress::new("redis-1", 6379)
        );
        cluster.begin_migration(3196, 0, 2);
        cluster.finish_migration(3196, 2);
        cluster.fail_over(4, 5, true);
        let map = slot_map(&nodes[3]);
        assert!(map.covers_all_slots());
        assert_eq!(
            map.primary_of(3196),
            Some(&NodeAddress::new("redis-2", 6379))
        );
        assert_eq!(
            map.primary_of(3195),
            Some(&NodeAddress::new("redis-0", 6379))
        );
        assert_eq!(
            map.primary_of(16383),
            Some(&NodeAddress::new("redis-5", 6379))
        );
        let stale = slot_map(&nodes[4]);
        assert_eq!(
            stale.primary_of(16383),
            Some(&NodeAddress::new("redis-4", 6379))
        );
    }

    #[test]
    fn a_migration_moves_every_key_of_the_slot_and_the_target_replicates_it_later() {
        let (cluster, nodes) = cluster();
        let own = "{lock:resource}:own-0-1}";
        for key in [LOCK, FENCE, own, "{other}"] {
            set(&nodes[0], key);
        }
        // The target's replication stream: RESTORE is a write like any
        // other, streamed to the replica, applied only when it arrives.
        let (link, mut stream) = tokio::sync::mpsc::unbounded_channel();
        nodes[2].0.borrow_mut().streams.insert(1, link);
        cluster.begin_migration(3196, 0, 2);
        let mut moved = Vec::new();
        while let Some(key) = nodes[0].migrate_one(3196, &nodes[2], Duration::ZERO) {
            moved.push(String::from_utf8(key).expect("utf-8"));
        }
        assert_eq!(moved, [LOCK, FENCE, own].map(str::to_owned).to_vec());
        assert_eq!(nodes[0].keys_in_slot(3196, Duration::ZERO), 0);
        assert!(
            nodes[0].has_key(b"{other}", Duration::ZERO),
            "another slot stays"
        );
        assert_eq!(nodes[2].keys_in_slot(3196, Duration::ZERO), 3);
        let streamed: Vec<_> = std::iter::from_fn(|| stream.try_recv().ok()).collect();
        assert_eq!(streamed.len(), 3, "one write per RESTORE: {streamed:?}");
        assert_eq!(
            nodes[3].keys_in_slot(3196, Duration::ZERO),
            0,
            "the target's replica has none of it until it applies the stream"
        );
    }
}
