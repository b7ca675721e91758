//! The cluster commands: what a cluster node answers from its own view of
//! the slot table ([`cluster`](crate::server::cluster)): the connection's
//! `ASKING` and `READONLY`, the redirections instead of a command whose
//! keys are not its own, and the `CLUSTER` subcommands a client reads the
//! topology with.

use std::time::Duration;

use lock_core::internal::cluster::{SLOTS, slot_of};
use redis_protocol::resp2::types::OwnedFrame as Frame;

use super::data::is_write;
use crate::{
    net::redis_host,
    server::{
        cluster::{
            CLUSTERDOWN, CROSSSLOT, ClusterHandle, ClusterState, TRYAGAIN, command_keys, node_id,
        },
        conn::Session,
        db::NodeTime,
        frame::{bulk, error, ok},
        node::{Node, NodeHandle, PORT, Role},
    },
};

/// What `node` answers to command `name` (upper case, arguments `args`)
/// at true time `now` before any other family sees it: the connection
/// commands of a cluster (`ASKING`, `READONLY`, `READWRITE`, `CLUSTER`,
/// `SELECT` of another database), a redirection (counted for the
/// reports), or, outside a cluster, the refusal of its commands. `None`:
/// the command runs. `ASKING` holds for the one command after it, whatever
/// that is.
pub(super) fn gate(
    node: &NodeHandle,
    session: &mut Session,
    name: &[u8],
    args: &[Vec<u8>],
    now: Duration,
) -> Option<Frame> {
    let asking = std::mem::take(&mut session.asking);
    let cluster = node.0.borrow().cluster.clone();
    let Some(cluster) = &cluster else {
        return matches!(name, b"CLUSTER" | b"ASKING" | b"READWRITE")
            .then(|| error("ERR This instance has cluster support disabled"));
    };
    match name {
        b"ASKING" => {
            session.asking = true;
            return Some(ok());
        }
        b"READONLY" | b"READWRITE" => {
            session.readonly = name == b"READONLY";
            return Some(ok());
        }
        b"CLUSTER" => return Some(cluster_command(&node.0.borrow(), cluster, args)),
        b"SELECT" if args.len() == 2 && args[1] != b"0" => {
            return Some(error("ERR SELECT is not allowed in cluster mode"));
        }
        _ => {}
    }
    // Redirections come before everything but the arity check (which
    // `command_keys` leaves to the command).
    let mut state = node.0.borrow_mut();
    let time = state.time_at(now);
    let redirect = redirection(&state, cluster, args, asking, session.readonly, time)?;
    if let Frame::Error(text) = &redirect {
        let counts = &mut state.redirects;
        match text.split(' ').next() {
            Some("MOVED") => counts.moved += 1,
            Some("ASK") => counts.ask += 1,
            Some("TRYAGAIN") => counts.try_again += 1,
            Some("CROSSSLOT") => counts.cross_slot += 1,
            Some("CLUSTERDOWN") => counts.cluster_down += 1,
            _ => {}
        }
    }
    Some(redirect)
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
    let state = cluster.state();
    if state.is_down() {
        // A slot has no reachable owner: the majority marked the cluster
        // FAIL, and a node cut off from it did too.
        return Some(error(CLUSTERDOWN));
    }
    let me = node.index;
    let owner = state.view_owner(me, slot);
    let migrating = (owner == me)
        .then(|| state.migrating_to(me, slot))
        .flatten();
    let importing = migrating.is_none() && state.is_importing(me, slot);
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
    let primary = state.view_primary(me, state.shard_of(owner));
    if readonly
        && !is_write(&args[0])
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
    let state = cluster.state();
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
fn offset_of(node: &Node, index: usize) -> i64 {
    if index == node.index {
        return node.offset as i64;
    }
    node.peers[index]
        .upgrade()
        .map_or(0, |other| other.borrow().offset as i64)
}

fn node_entry(node: &Node, index: usize, primary: bool) -> Frame {
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
        Frame::Integer(offset_of(node, index)),
        field("health"),
        field("online"),
    ])
}

/// `CLUSTER SHARDS`: per shard, its slot ranges as a flat list of
/// (first, last) pairs and its nodes, the primary first.
fn shards(node: &Node, state: &ClusterState) -> Frame {
    let ranges = view_ranges(state, node.index);
    let mut shards = Vec::with_capacity(state.shard_count());
    for (shard, members) in state.shards().iter().enumerate() {
        let primary = state.view_primary(node.index, shard);
        let slots = ranges
            .iter()
            .filter(|&&(_, _, owner)| owner == primary)
            .flat_map(|&(first, last, _)| {
                [Frame::Integer(first.into()), Frame::Integer(last.into())]
            })
            .collect();
        let mut nodes = vec![node_entry(node, primary, true)];
        nodes.extend(
            members
                .iter()
                .filter(|&&member| member != primary)
                .map(|&member| node_entry(node, member, false)),
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
            let shard = state.shard_of(owner);
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
                    state.shards()[shard]
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

    use std::time::Duration;

    use lock_core::internal::cluster::{NodeAddress, SlotMap};

    use crate::server::{NodeHandle, frame::to_bytes};

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
