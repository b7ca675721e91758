//! Which of the controller's proxies a partition or latency of a *server*
//! acts on, and how: the simulator cuts (or slows) every link the server's
//! host has (`world/faults.rs`: `partition` between it and every other
//! host), so a real run must hold the same traffic. On loopback that is:
//!
//! - the clients' links to the node (its own port and its announced one);
//! - its replication proxy, which it announces: what its replicas (and a
//!   Sentinel's) connections into it carry;
//! - its own connection into its primary's replication proxy, told apart
//!   from the others' by the source address the node binds
//!   (`bind-source-addr`);
//! - its cluster bus proxy, and its own connections into the other nodes'
//!   bus proxies (by source address again).
//!
//! A partition holds both directions of each; a one-way partition only
//! what the server sends (its replies, its stream, its acknowledgements and
//! bus messages), as turmoil drops only the messages *from* the cut host;
//! latency delays both directions. The plan is a pure function of the
//! deployment's shape, so a test can read it without starting anything.
//!
//! Under Sentinel the sentinels reach each node through its replication
//! proxy too, and a partition leaves their links alone (the deployment
//! spares their addresses, `LinkMode::spared`; [`apply`] honours it): the
//! simulator's sentinels watch no node, so its partition of a node cuts
//! nothing of theirs that matters, while real ones would fail a primary
//! they cannot reach over by themselves, a second later.

use std::{collections::BTreeSet, net::IpAddr, time::Duration};

use super::proxy::LinkMode;
use crate::config::FaultKind;

/// A proxy (or a group of them) a server fault acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Proxy {
    /// Every client's links to node `n`.
    Clients(usize),
    /// Node `n`'s replication proxy (the address it announces).
    Replication(usize),
    /// Node `n`'s cluster bus proxy.
    Bus(usize),
}

/// Which connections through a proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Scope {
    /// All of them.
    Every,
    /// Those from this source address (one node's own connections).
    From(IpAddr),
}

/// One step of a server fault: on `proxy`'s connections in `scope`, hold
/// (or delay) what the dialling side sends (`up`) and what comes back
/// (`down`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Act {
    pub proxy: Proxy,
    pub scope: Scope,
    pub up: bool,
    pub down: bool,
}

/// What the plan needs to know of one node of the deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NodeShape {
    /// It has a replication proxy (a topology that can fail over, or a
    /// cluster).
    pub replication: bool,
    /// It has a cluster bus proxy.
    pub bus: bool,
    /// The loopback address its own outgoing connections come from.
    pub source: Option<IpAddr>,
}

/// The acts of a fault of `kind` (a partition, one way or both, or
/// latency) on node `node` of `nodes`, in a fixed order.
pub(super) fn server_acts(nodes: &[NodeShape], node: usize, kind: FaultKind) -> Vec<Act> {
    // The cut node's own sends: what it answers on connections dialled
    // into it (`down`), and what it sends on the connections it dials
    // (`up`). A one-way partition holds only those.
    let both = !matches!(kind, FaultKind::PartitionOneway);
    let into = |proxy| Act {
        proxy,
        scope: Scope::Every,
        up: both,
        down: true,
    };
    let Some(own) = nodes.get(node) else {
        return Vec::new();
    };
    let mut acts = vec![into(Proxy::Clients(node))];
    if own.replication {
        acts.push(into(Proxy::Replication(node)));
    }
    if own.bus {
        acts.push(into(Proxy::Bus(node)));
    }
    if let Some(source) = own.source {
        for (other, shape) in nodes.iter().enumerate() {
            if other == node {
                continue;
            }
            let out = |proxy| Act {
                proxy,
                scope: Scope::From(source),
                up: true,
                down: both,
            };
            if shape.replication {
                acts.push(out(Proxy::Replication(other)));
            }
            if shape.bus {
                acts.push(out(Proxy::Bus(other)));
            }
        }
    }
    acts
}

/// The acts that make node `node`'s death silent, as a host that dies is
/// in the simulator (cut off, then crashed: `world/faults.rs`): a
/// both-ways partition of its clients' links and its replication, held
/// for good. Its replicas then stop hearing its stream at the kill, as a
/// simulated replica's queue is dropped at the death, instead of reading
/// what the replication proxy had already taken from the dying node (a
/// median 5 ms of stream, measured between the kill and a promotion).
/// The cluster bus is left as it is: a dead node answers no ping either
/// way, and the bus's failure detection was measured as it is
/// (`scenarios/README.md`, "When a real cluster goes down").
pub(super) fn death_acts(nodes: &[NodeShape], node: usize) -> Vec<Act> {
    server_acts(nodes, node, FaultKind::Partition)
        .into_iter()
        .filter(|act| !matches!(act.proxy, Proxy::Bus(_)))
        .collect()
}

/// What a partition (`kind`: both ways, or one way) of a client
/// (`client`) or of the storage node does to one of the links it acts on,
/// as it begins (`begin`) or ends: both ways holds both directions; one
/// way holds a client's requests (its sends) or the storage node's
/// replies. Its end ends only the holds its begin took: another fault may
/// still hold the link.
pub(super) fn hold_link(mode: &mut LinkMode, kind: FaultKind, client: bool, begin: bool) {
    let one_way = kind == FaultKind::PartitionOneway;
    if !one_way || client {
        mode.hold_up.set(begin);
    }
    if !one_way || !client {
        mode.hold_down.set(begin);
    }
}

/// What act `act` of a server fault does to one of its proxies' `mode`
/// as the fault begins (`begin`) or ends: a partition sets (or clears)
/// its holds; latency (`delay`, as it begins) slows only the connections
/// from the addresses the link has carried (`seen`), as turmoil slows
/// only the links that exist, and its end clears every one it may have
/// slowed. Spared addresses are neither held nor slowed by an act on
/// every connection.
pub(super) fn apply(
    mode: &mut LinkMode,
    act: Act,
    latency: bool,
    begin: bool,
    delay: Duration,
    seen: &BTreeSet<IpAddr>,
) {
    match (act.scope, latency) {
        (Scope::Every, false) => {
            if act.up {
                mode.hold_up.set(begin);
            }
            if act.down {
                mode.hold_down.set(begin);
            }
        }
        (Scope::From(peer), false) => {
            let rule = mode.peers.entry(peer).or_default();
            if act.up {
                rule.hold_up.set(begin);
            }
            if act.down {
                rule.hold_down.set(begin);
            }
        }
        (scope, true) => {
            let peers: Vec<IpAddr> = match (scope, begin) {
                (Scope::Every, true) => seen
                    .iter()
                    .filter(|peer| !mode.spared.contains(peer))
                    .copied()
                    .collect(),
                (Scope::From(peer), true) => {
                    seen.contains(&peer).then_some(peer).into_iter().collect()
                }
                (Scope::Every, false) => mode
                    .peers
                    .keys()
                    .filter(|peer| !mode.spared.contains(peer))
                    .copied()
                    .collect(),
                (Scope::From(peer), false) => vec![peer],
            };
            let delay = if begin { delay } else { Duration::ZERO };
            for peer in peers {
                mode.peers.entry(peer).or_default().delay = delay;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn source(index: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 20 + index))
    }

    /// A primary with two replicas, as the deployment starts one.
    fn primary_replica() -> Vec<NodeShape> {
        (0..3)
            .map(|index| NodeShape {
                replication: true,
                bus: false,
                source: Some(source(index)),
            })
            .collect()
    }

    #[test]
    fn a_death_holds_the_dead_nodes_stream_to_its_replicas_and_leaves_the_bus() {
        let acts = death_acts(&primary_replica(), 0);
        let every = |proxy| Act {
            proxy,
            scope: Scope::Every,
            up: true,
            down: true,
        };
        assert!(acts.contains(&every(Proxy::Clients(0))));
        assert!(
            acts.contains(&every(Proxy::Replication(0))),
            "the stream into its replicas must stop at the death: {acts:?}"
        );
        assert!(
            death_acts(&cluster(), 1)
                .iter()
                .all(|act| !matches!(act.proxy, Proxy::Bus(_)))
        );
    }

    /// Three cluster primaries without replicas.
    fn cluster() -> Vec<NodeShape> {
        (0..3)
            .map(|index| NodeShape {
                replication: false,
                bus: true,
                source: Some(source(index)),
            })
            .collect()
    }

    fn act(proxy: Proxy, scope: Scope, up: bool, down: bool) -> Act {
        Act {
            proxy,
            scope,
            up,
            down,
        }
    }

    #[test]
    fn a_partitioned_replica_loses_its_clients_its_stream_and_whoever_dials_it() {
        let acts = server_acts(&primary_replica(), 1, FaultKind::Partition);
        assert_eq!(
            acts,
            vec![
                act(Proxy::Clients(1), Scope::Every, true, true),
                act(Proxy::Replication(1), Scope::Every, true, true),
                // Its own link into the primary's proxy (and into the
                // other replica's, should it be promoted meanwhile).
                act(Proxy::Replication(0), Scope::From(source(1)), true, true),
                act(Proxy::Replication(2), Scope::From(source(1)), true, true),
            ]
        );
        // Latency slows the same connections, both ways.
        assert_eq!(server_acts(&primary_replica(), 1, FaultKind::Latency), acts);
    }

    #[test]
    fn a_one_way_partition_holds_only_what_the_server_sends() {
        let acts = server_acts(&primary_replica(), 0, FaultKind::PartitionOneway);
        assert_eq!(
            acts,
            vec![
                // Its replies, and its stream to the replicas dialling it.
                act(Proxy::Clients(0), Scope::Every, false, true),
                act(Proxy::Replication(0), Scope::Every, false, true),
                // What it sends on the links it dials itself.
                act(Proxy::Replication(1), Scope::From(source(0)), true, false),
                act(Proxy::Replication(2), Scope::From(source(0)), true, false),
            ]
        );
    }

    #[test]
    fn a_partitioned_cluster_node_is_cut_off_its_clients_and_the_bus() {
        let acts = server_acts(&cluster(), 1, FaultKind::Partition);
        assert_eq!(
            acts,
            vec![
                act(Proxy::Clients(1), Scope::Every, true, true),
                act(Proxy::Bus(1), Scope::Every, true, true),
                act(Proxy::Bus(0), Scope::From(source(1)), true, true),
                act(Proxy::Bus(2), Scope::From(source(1)), true, true),
            ]
        );
    }

    /// A replication proxy's mode under Sentinel: the sentinels' two
    /// addresses spared, as the deployment starts it.
    fn sentinel_link(sentinels: &[IpAddr]) -> LinkMode {
        LinkMode {
            spared: sentinels.iter().copied().collect(),
            ..LinkMode::default()
        }
    }

    /// Applies every act of `kind` on node `node` to the mode of the
    /// proxy `proxy`, as the controller does.
    fn apply_all(
        mode: &mut LinkMode,
        proxy: Proxy,
        node: usize,
        kind: FaultKind,
        begin: bool,
        seen: &BTreeSet<IpAddr>,
    ) {
        let latency = kind == FaultKind::Latency;
        for act in server_acts(&primary_replica(), node, kind) {
            if act.proxy == proxy {
                apply(mode, act, latency, begin, Duration::from_millis(300), seen);
            }
        }
    }

    #[test]
    fn a_partition_under_sentinel_leaves_the_sentinels_links_to_the_node_alone() {
        let sentinel = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 200));
        let replica = source(1);
        for kind in [FaultKind::Partition, FaultKind::PartitionOneway] {
            // The primary cut off: its replicas' links into it are held,
            // the sentinels' are not.
            let mut mode = sentinel_link(&[sentinel]);
            apply_all(
                &mut mode,
                Proxy::Replication(0),
                0,
                kind,
                true,
                &BTreeSet::new(),
            );
            assert!(mode.holds(false, Some(replica)), "{kind:?}");
            assert!(!mode.holds(false, Some(sentinel)), "{kind:?}");
            assert!(!mode.holds(true, Some(sentinel)), "{kind:?}");
            // A sentinel made deaf meanwhile is held by its own rule.
            mode.peers.entry(sentinel).or_default().hold_down.begin();
            assert!(mode.holds(false, Some(sentinel)), "{kind:?}");
            mode.peers.entry(sentinel).or_default().hold_down.end();
            apply_all(
                &mut mode,
                Proxy::Replication(0),
                0,
                kind,
                false,
                &BTreeSet::new(),
            );
            assert!(!mode.holds(false, Some(replica)), "{kind:?}");
        }
        // Latency slows the replicas' links, not the sentinels'.
        let seen: BTreeSet<IpAddr> = [replica, source(2), sentinel].into();
        let mut mode = sentinel_link(&[sentinel]);
        apply_all(
            &mut mode,
            Proxy::Replication(0),
            0,
            FaultKind::Latency,
            true,
            &seen,
        );
        assert_eq!(mode.delay_of(Some(replica)), Duration::from_millis(300));
        assert_eq!(mode.delay_of(Some(sentinel)), Duration::ZERO);
        apply_all(
            &mut mode,
            Proxy::Replication(0),
            0,
            FaultKind::Latency,
            false,
            &seen,
        );
        assert_eq!(mode.delay_of(Some(replica)), Duration::ZERO);
        // A replica cut off: its own link into the primary is held, the
        // sentinels' and the other replica's are not.
        let mut mode = sentinel_link(&[sentinel]);
        apply_all(
            &mut mode,
            Proxy::Replication(0),
            1,
            FaultKind::Partition,
            true,
            &seen,
        );
        assert!(mode.holds(true, Some(replica)));
        assert!(!mode.holds(true, Some(source(2))));
        assert!(!mode.holds(true, Some(sentinel)));
    }

    #[test]
    fn a_single_node_has_only_its_clients_links() {
        let single = [NodeShape {
            replication: false,
            bus: false,
            source: None,
        }];
        assert_eq!(
            server_acts(&single, 0, FaultKind::Partition),
            vec![act(Proxy::Clients(0), Scope::Every, true, true)]
        );
        assert!(server_acts(&single, 3, FaultKind::Partition).is_empty());
    }

    /// Applies to `mode`, the link of `proxy`, the acts of node 0's
    /// silent death.
    fn die(mode: &mut LinkMode, proxy: Proxy) {
        for act in death_acts(&primary_replica(), 0) {
            if act.proxy == proxy {
                apply(mode, act, false, true, Duration::ZERO, &BTreeSet::new());
            }
        }
    }

    /// A `kind` fault of node `node` begins (or ends) on `proxy`'s links,
    /// none of which has carried a connection yet.
    fn fault(mode: &mut LinkMode, proxy: Proxy, node: usize, kind: FaultKind, begin: bool) {
        apply_all(mode, proxy, node, kind, begin, &BTreeSet::new());
    }

    /// Whether both directions of a connection from `peer` are held.
    fn cut_both(mode: &LinkMode, peer: Option<IpAddr>) -> bool {
        mode.holds(true, peer) && mode.holds(false, peer)
    }

    #[test]
    fn a_client_partition_ending_inside_its_nodes_partition_leaves_the_link_held() {
        // `mix-failover-no-wait` seed 274: the client's partition begins,
        // then node 0's; the client's ends first.
        let mut mode = LinkMode::default();
        hold_link(&mut mode, FaultKind::Partition, true, true);
        fault(&mut mode, Proxy::Clients(0), 0, FaultKind::Partition, true);
        hold_link(&mut mode, FaultKind::Partition, true, false);
        assert!(cut_both(&mode, None), "healed inside the node's partition");
        fault(&mut mode, Proxy::Clients(0), 0, FaultKind::Partition, false);
        assert!(!mode.holds(true, None) && !mode.holds(false, None));
        // The other order: the node's ends first.
        hold_link(&mut mode, FaultKind::Partition, true, true);
        fault(&mut mode, Proxy::Clients(0), 0, FaultKind::Partition, true);
        fault(&mut mode, Proxy::Clients(0), 0, FaultKind::Partition, false);
        assert!(
            cut_both(&mode, None),
            "healed inside the client's partition"
        );
        hold_link(&mut mode, FaultKind::Partition, true, false);
        assert_eq!(mode, LinkMode::default());
    }

    #[test]
    fn a_partition_ending_after_its_nodes_death_leaves_it_held_for_good() {
        let replica = Some(source(1));
        let own = Some(source(0));
        // Its clients' links, its replicas' links into it, and its own
        // link into a replica's proxy (a demoted node's, by source).
        for (proxy, peer) in [
            (Proxy::Clients(0), None),
            (Proxy::Replication(0), replica),
            (Proxy::Replication(1), own),
        ] {
            for kind in [FaultKind::Partition, FaultKind::PartitionOneway] {
                let mut mode = LinkMode::default();
                fault(&mut mode, proxy, 0, kind, true);
                die(&mut mode, proxy);
                fault(&mut mode, proxy, 0, kind, false);
                assert!(cut_both(&mode, peer), "{proxy:?} {kind:?}");
                // A client's partition of a dead node's link too.
                hold_link(&mut mode, FaultKind::Partition, true, true);
                hold_link(&mut mode, FaultKind::Partition, true, false);
                assert!(cut_both(&mode, peer), "{proxy:?} {kind:?}");
            }
        }
    }

    #[test]
    fn one_way_and_two_way_partitions_of_one_link_compose() {
        // A client's one-way partition (its requests) inside its node's
        // two-way one: ending it leaves both directions held.
        let mut mode = LinkMode::default();
        fault(&mut mode, Proxy::Clients(0), 0, FaultKind::Partition, true);
        hold_link(&mut mode, FaultKind::PartitionOneway, true, true);
        hold_link(&mut mode, FaultKind::PartitionOneway, true, false);
        assert!(cut_both(&mode, None));
        // The node's two-way partition ends inside the client's one-way
        // one: the requests stay held, the replies flow.
        hold_link(&mut mode, FaultKind::PartitionOneway, true, true);
        fault(&mut mode, Proxy::Clients(0), 0, FaultKind::Partition, false);
        assert!(mode.holds(true, None) && !mode.holds(false, None));
        hold_link(&mut mode, FaultKind::PartitionOneway, true, false);
        assert_eq!(mode, LinkMode::default());
        // The node's one-way partition (its replies) inside a client's
        // two-way one, and the other way round.
        hold_link(&mut mode, FaultKind::Partition, true, true);
        fault(
            &mut mode,
            Proxy::Clients(0),
            0,
            FaultKind::PartitionOneway,
            true,
        );
        fault(
            &mut mode,
            Proxy::Clients(0),
            0,
            FaultKind::PartitionOneway,
            false,
        );
        assert!(cut_both(&mode, None));
        fault(
            &mut mode,
            Proxy::Clients(0),
            0,
            FaultKind::PartitionOneway,
            true,
        );
        hold_link(&mut mode, FaultKind::Partition, true, false);
        assert!(!mode.holds(true, None) && mode.holds(false, None));
        // The same on a replica's rule (by source) on the node's proxy:
        // node 1's one-way partition inside node 0's two-way one.
        let mut mode = LinkMode::default();
        fault(
            &mut mode,
            Proxy::Replication(0),
            0,
            FaultKind::Partition,
            true,
        );
        fault(
            &mut mode,
            Proxy::Replication(0),
            1,
            FaultKind::PartitionOneway,
            true,
        );
        fault(
            &mut mode,
            Proxy::Replication(0),
            1,
            FaultKind::PartitionOneway,
            false,
        );
        assert!(cut_both(&mode, Some(source(1))));
    }
}
