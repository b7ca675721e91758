//! A Redis Cluster of real processes: N primaries with R replicas each on
//! ports from the walk, made by hand as `redis-cli --cluster create`
//! makes one (slot ranges, config epochs, `CLUSTER MEET`, `CLUSTER
//! REPLICATE`), so that no `redis-cli` is needed (a Valkey release may
//! ship none) and nodes are numbered as the simulator numbers them: shard
//! `s` is node `s × (1 + R)`, its replicas follow it, shards in slot
//! order.
//!
//! The fault helpers (a `CLUSTER FAILOVER`, a `kill -9` of a primary, a
//! slot migration) wait until all live nodes agree on the new layout, and
//! print how long the change took (`--nocapture` shows it): those numbers
//! feed the simulator's model.

mod view;

use std::time::{Duration, Instant};

pub use view::{ShardView, cli_view};

use crate::{Binaries, Launch, Process, StartError, query_port, settle, wait_for};

/// How long a layout change may take before a helper gives up. Generous: a
/// `kill -9` needs about twice the node timeout, on a loaded machine more.
const SETTLE: Duration = Duration::from_secs(30);

/// The node timeout a cluster runs with unless told otherwise: small, so
/// a killed primary is replaced in a few seconds.
pub const NODE_TIMEOUT: Duration = Duration::from_millis(2_000);

/// The number of hash slots.
pub const SLOTS: u16 = 16_384;

/// The slot ranges `redis-cli --cluster create` gives `shards` primaries,
/// in order: contiguous, as even as rounding allows.
pub fn slot_ranges(shards: usize) -> Vec<(u16, u16)> {
    let per_shard = f64::from(SLOTS) / shards as f64;
    let mut ranges = Vec::with_capacity(shards);
    let (mut first, mut cursor) = (0_u16, 0.0_f64);
    for shard in 0..shards {
        // Non-negative and below 2^16 before the clamp: a slot number.
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

/// One node of a cluster to [`create`]: the port the creator sends its
/// commands to, and the bus port the other nodes reach it at (its own, or
/// a relay the node announces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// Its client port.
    pub port: u16,
    /// Where the others reach its cluster bus.
    pub bus: u16,
}

/// Makes one cluster of empty cluster-enabled nodes, as `redis-cli
/// --cluster create` does: shard `s`'s primary is `members[s × (1 +
/// replicas)]`, with the slot range [`slot_ranges`] gives it and config
/// epoch `s + 1`; every other primary meets the first; each replica (the
/// members after its primary) meets its primary and replicates it once it
/// has learnt the primary's id. Returns without waiting for the nodes to
/// agree: each caller waits for what it needs.
pub fn create(members: &[Member], replicas: usize) -> Result<(), StartError> {
    let redis = |what: &str| {
        let what = what.to_owned();
        move |error: redis::RedisError| StartError::Setup {
            what,
            why: error.to_string(),
        }
    };
    let primaries: Vec<Member> = members.iter().copied().step_by(1 + replicas).collect();
    for (shard, (primary, (first, last))) in primaries
        .iter()
        .zip(slot_ranges(primaries.len()))
        .enumerate()
    {
        let epoch = (shard + 1).to_string();
        query_port::<()>(primary.port, &["CLUSTER", "SET-CONFIG-EPOCH", &epoch])
            .map_err(redis("CLUSTER SET-CONFIG-EPOCH"))?;
        let (first, last) = (first.to_string(), last.to_string());
        query_port::<()>(primary.port, &["CLUSTER", "ADDSLOTSRANGE", &first, &last])
            .map_err(redis("CLUSTER ADDSLOTSRANGE"))?;
    }
    let meet = |member: &Member, other: &Member| {
        let (port, bus) = (other.port.to_string(), other.bus.to_string());
        query_port::<()>(member.port, &["CLUSTER", "MEET", "127.0.0.1", &port, &bus])
            .map_err(redis("CLUSTER MEET"))
    };
    if let Some((first, others)) = primaries.split_first() {
        for primary in others {
            meet(primary, first)?;
        }
    }
    for shard in members.chunks(1 + replicas) {
        let (primary, replicas) = shard.split_first().expect("chunks are never empty");
        let id: String =
            query_port(primary.port, &["CLUSTER", "MYID"]).map_err(redis("CLUSTER MYID"))?;
        for replica in replicas {
            meet(replica, primary)?;
            // Refused until the replica has heard of the primary's id.
            settle(
                &format!(
                    "the node on port {} replicates {}",
                    replica.port, primary.port
                ),
                SETTLE,
                || {
                    query_port::<()>(replica.port, &["CLUSTER", "REPLICATE", &id])
                        .map_err(|error| error.to_string())
                },
            )?;
        }
    }
    Ok(())
}

/// Certificates for a cluster whose nodes also speak TLS, as PEM.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The CA the nodes trust (clients and each other).
    pub ca: String,
    /// What every node presents, to clients and to each other.
    pub cert: String,
    /// Its key.
    pub key: String,
}

/// How a cluster is set up.
#[derive(Debug, Clone)]
pub struct ClusterSetup {
    /// Primaries (shards).
    pub primaries: usize,
    /// Replicas of each primary.
    pub replicas: usize,
    /// `cluster-node-timeout`.
    pub node_timeout: Duration,
    /// Arguments every node gets after the cluster's own.
    pub args: Vec<String>,
    /// TLS on every node besides its plain port: a TLS port for clients
    /// (`tls-auth-clients optional`), and TLS on the cluster bus and the
    /// replication links.
    pub tls: Option<TlsFiles>,
}

impl ClusterSetup {
    /// `primaries` shards of `1 + replicas` nodes, the default node timeout.
    pub fn new(primaries: usize, replicas: usize) -> Self {
        Self {
            primaries,
            replicas,
            node_timeout: NODE_TIMEOUT,
            args: Vec::new(),
            tls: None,
        }
    }
}

/// One cluster node.
#[derive(Debug)]
pub struct ClusterNode {
    process: Process,
    id: String,
    tls_port: Option<u16>,
}

impl ClusterNode {
    /// Its client port.
    pub fn port(&self) -> u16 {
        self.process.port()
    }

    /// Its cluster bus port.
    pub fn bus_port(&self) -> u16 {
        self.process.ports()[1]
    }

    /// Its cluster node id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its TLS port, in a cluster set up with TLS (which keeps the plain
    /// port for the fixture's own commands).
    pub fn tls_port(&self) -> Option<u16> {
        self.tls_port
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port())
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port())
    }

    /// Whether it was killed.
    pub fn is_killed(&self) -> bool {
        self.process.is_killed()
    }

    /// Runs a command on this node alone (no redirection is followed).
    pub fn try_query<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        self.process.try_query(args)
    }

    /// Like [`Self::try_query`].
    ///
    /// # Panics
    /// On an error, naming the command and the port.
    pub fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        self.process.query(args)
    }

    /// Whether `ROLE` says it is a primary.
    pub fn is_primary(&self) -> bool {
        self.try_query::<redis::Value>(&["ROLE"])
            .is_ok_and(|role| crate::sentinel::is_master(&role))
    }

    /// Its log.
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// Its process.
    pub fn process(&self) -> &Process {
        &self.process
    }
}

/// A running cluster, every process killed on drop.
#[derive(Debug)]
pub struct Cluster {
    nodes: Vec<ClusterNode>,
}

impl Cluster {
    /// Starts the cluster `setup` describes and waits until every node
    /// agrees on the layout and every replica is in sync.
    pub fn start(binaries: &Binaries, setup: &ClusterSetup) -> Result<Self, StartError> {
        let started = Instant::now();
        let nodes = (0..setup.primaries * (1 + setup.replicas))
            .map(|_| start_node(binaries, setup))
            .collect::<Result<Vec<ClusterNode>, StartError>>()?;
        let members: Vec<Member> = nodes
            .iter()
            .map(|node| Member {
                port: node.port(),
                bus: node.bus_port(),
            })
            .collect();
        create(&members, setup.replicas)?;
        let cluster = Self { nodes };
        settle("the new cluster settles", SETTLE, || {
            cluster.settled(setup.primaries)
        })?;
        eprintln!(
            "cluster: {} primaries + {} replicas{} ready in {:?}",
            setup.primaries,
            setup.primaries * setup.replicas,
            if setup.tls.is_some() {
                " (with tls)"
            } else {
                ""
            },
            started.elapsed()
        );
        Ok(cluster)
    }

    /// Every node, killed ones included, in the simulator's order.
    pub fn nodes(&self) -> &[ClusterNode] {
        &self.nodes
    }

    /// The node listening on `port`.
    ///
    /// # Panics
    /// If no node of the cluster does.
    pub fn node(&self, port: u16) -> &ClusterNode {
        self.nodes
            .iter()
            .find(|node| node.port() == port)
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }

    fn live(&self) -> impl Iterator<Item = &ClusterNode> {
        self.nodes.iter().filter(|node| !node.is_killed())
    }

    /// Seed URLs: every live node.
    pub fn seed_urls(&self) -> Vec<String> {
        self.live().map(ClusterNode::url).collect()
    }

    /// The shards as the first live node sees them, by primary port.
    ///
    /// # Panics
    /// If no node is live or it does not answer.
    pub fn shards(&self) -> Vec<ShardView> {
        let node = self.live().next().expect("a live node");
        view::shards_seen_by(node.port()).expect("CLUSTER NODES on a live node")
    }

    /// The slot the server computes for `key` (`CLUSTER KEYSLOT`).
    ///
    /// # Panics
    /// If no node is live or it does not answer.
    pub fn slot_of(&self, key: &str) -> u16 {
        let node = self.live().next().expect("a live node");
        node.query(&["CLUSTER", "KEYSLOT", key])
    }

    /// The primary serving `slot`.
    ///
    /// # Panics
    /// If no shard serves it.
    pub fn owner_of_slot(&self, slot: u16) -> &ClusterNode {
        let shard = self
            .shards()
            .into_iter()
            .find(|shard| shard.serves(slot))
            .unwrap_or_else(|| panic!("no shard serves slot {slot}"));
        self.node(shard.primary)
    }

    /// The primary serving `key`.
    pub fn owner_of_key(&self, key: &str) -> &ClusterNode {
        self.owner_of_slot(self.slot_of(key))
    }

    /// The replicas of the primary on `port`.
    pub fn replicas_of(&self, port: u16) -> Vec<&ClusterNode> {
        self.shards()
            .into_iter()
            .find(|shard| shard.primary == port)
            .map(|shard| shard.replicas.iter().map(|&port| self.node(port)).collect())
            .unwrap_or_default()
    }

    /// A live primary other than the one on `port`.
    ///
    /// # Panics
    /// If there is none.
    pub fn other_primary(&self, port: u16) -> &ClusterNode {
        let shard = self
            .shards()
            .into_iter()
            .find(|shard| shard.primary != port)
            .expect("another shard");
        self.node(shard.primary)
    }

    /// Promotes a replica of the primary on `port` with `CLUSTER FAILOVER`
    /// (the graceful, coordinated one) and waits until every node agrees.
    /// Returns the new primary's port.
    ///
    /// # Panics
    /// If the primary has no replica, or the cluster does not settle.
    pub fn failover(&self, port: u16) -> u16 {
        let replica = *self
            .replicas_of(port)
            .first()
            .unwrap_or_else(|| panic!("the primary on port {port} has no replica"));
        // Counted before the failover, which keeps it: a count read while
        // the nodes still disagree can include the old primary as a shard
        // of its own, and the cluster never settles to that.
        let shards = self.shards().len();
        let started = Instant::now();
        let _: String = replica.query(&["CLUSTER", "FAILOVER"]);
        wait_for("the replica becomes primary", SETTLE, || {
            replica.is_primary().then_some(())
        });
        let promoted = started.elapsed();
        self.wait_settled(shards);
        eprintln!(
            "cluster: CLUSTER FAILOVER promoted {} in {promoted:?}, all nodes agreed after {:?}",
            replica.port(),
            started.elapsed()
        );
        replica.port()
    }

    /// Kills the primary on `port` with SIGKILL and waits until one of its
    /// replicas is elected and every live node agrees. Returns the new
    /// primary's port.
    ///
    /// # Panics
    /// If the primary has no replica, or the cluster does not settle.
    pub fn kill_primary(&mut self, port: u16) -> u16 {
        let replicas: Vec<u16> = self
            .replicas_of(port)
            .iter()
            .map(|node| node.port())
            .collect();
        assert!(
            !replicas.is_empty(),
            "the primary on port {port} has no replica"
        );
        let shards = self.shards().len();
        let started = Instant::now();
        self.nodes
            .iter_mut()
            .find(|node| node.port() == port)
            .expect("the primary is a node")
            .process
            .kill();
        let promoted = wait_for("a replica is elected", SETTLE, || {
            replicas
                .iter()
                .copied()
                .find(|&replica| self.node(replica).is_primary())
        });
        let elected = started.elapsed();
        self.wait_settled(shards);
        eprintln!(
            "cluster: kill -9 of {port}: {promoted} elected after {elected:?}, all live nodes \
             agreed after {:?}",
            started.elapsed()
        );
        promoted
    }

    /// Starts moving `slot` to the primary on `to`: `IMPORTING` on the
    /// target, then `MIGRATING` on the source (the order Redis documents).
    /// Keys move with [`SlotMigration::move_keys`]; `finish` completes it.
    ///
    /// # Panics
    /// If the slot is already on `to`, or a node refuses.
    pub fn begin_migration(&self, slot: u16, to: u16) -> SlotMigration<'_> {
        let source = self.owner_of_slot(slot);
        let target = self.node(to);
        assert_ne!(source.port(), to, "slot {slot} is already on {to}");
        let started = Instant::now();
        let slot_text = slot.to_string();
        let _: String = target.query(&["CLUSTER", "SETSLOT", &slot_text, "IMPORTING", source.id()]);
        let _: String = source.query(&["CLUSTER", "SETSLOT", &slot_text, "MIGRATING", target.id()]);
        SlotMigration {
            cluster: self,
            slot,
            source,
            target,
            started,
        }
    }

    /// Moves `slot` and its keys to the primary on `to`, start to finish.
    pub fn migrate_slot(&self, slot: u16, to: u16) {
        self.begin_migration(slot, to).finish();
    }

    /// Waits until every live node reports `cluster_state:ok`, all of them
    /// describe the same `shards` shards covering all 16384 slots, and
    /// every replica's link to its primary is up.
    ///
    /// # Panics
    /// After 30 s, with what was last seen.
    pub fn wait_settled(&self, shards: usize) {
        if let Err(error) = settle("the cluster settles", SETTLE, || self.settled(shards)) {
            panic!("{error}");
        }
    }

    fn settled(&self, shards: usize) -> Result<(), String> {
        let mut first: Option<Vec<ShardView>> = None;
        for node in self.live() {
            let info: String = node
                .try_query(&["CLUSTER", "INFO"])
                .map_err(|error| error.to_string())?;
            if !info.contains("cluster_state:ok") {
                return Err(format!("{} is not ok:\n{info}", node.port()));
            }
            let view = view::shards_seen_by(node.port())?;
            let covered: u32 = view
                .iter()
                .flat_map(|shard| &shard.slots)
                .map(|&(first, last)| u32::from(last - first) + 1)
                .sum();
            if view.len() != shards || covered != u32::from(SLOTS) {
                return Err(format!("{} sees {view:?}", node.port()));
            }
            match &first {
                None => first = Some(view),
                Some(first) if *first != view => {
                    return Err(format!("{} sees {view:?}, another {first:?}", node.port()));
                }
                Some(_) => {}
            }
        }
        let view = first.ok_or("no live node")?;
        for &replica in view.iter().flat_map(|shard| &shard.replicas) {
            let info: String = self
                .node(replica)
                .try_query(&["INFO", "replication"])
                .map_err(|error| error.to_string())?;
            if !info.contains("master_link_status:up") {
                return Err(format!("replica {replica} is not in sync"));
            }
        }
        // Nodes leave a replica out of CLUSTER SLOTS (and call it `loading`
        // in CLUSTER SHARDS) until its replication offset, as gossip tells
        // them, is above zero, and Valkey 8.1 lists it in a shard of its
        // own until the nodes agree on its shard id: wait until every node
        // lists every replica in both.
        let all: usize = view.iter().map(|shard| 1 + shard.replicas.len()).sum();
        for node in self.live() {
            let listed = view::ports_in_cluster_slots(node.port())?;
            if listed != all {
                return Err(format!(
                    "{} lists {listed} of {all} nodes in CLUSTER SLOTS",
                    node.port()
                ));
            }
            if let Some(listed) = view::ports_in_cluster_shards(node.port())?
                && listed != all
            {
                return Err(format!(
                    "{} lists {listed} of {all} nodes online in CLUSTER SHARDS",
                    node.port()
                ));
            }
        }
        Ok(())
    }
}

/// A slot on its way from one primary to another.
#[derive(Debug)]
pub struct SlotMigration<'a> {
    cluster: &'a Cluster,
    slot: u16,
    source: &'a ClusterNode,
    target: &'a ClusterNode,
    started: Instant,
}

impl SlotMigration<'_> {
    /// The node the slot is leaving.
    pub fn source(&self) -> &ClusterNode {
        self.source
    }

    /// The node the slot is moving to.
    pub fn target(&self) -> &ClusterNode {
        self.target
    }

    /// Moves `keys` (all in the slot) to the target with `MIGRATE`.
    ///
    /// # Panics
    /// If the source refuses.
    pub fn move_keys(&self, keys: &[&str]) {
        if keys.is_empty() {
            return;
        }
        let port = self.target.port().to_string();
        let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
        args.extend_from_slice(keys);
        let _: String = self.source.query(&args);
    }

    /// Moves every key the source still holds in the slot to the target.
    pub fn move_remaining_keys(&self) {
        let slot = self.slot.to_string();
        loop {
            let keys: Vec<String> = self
                .source
                .query(&["CLUSTER", "GETKEYSINSLOT", &slot, "100"]);
            if keys.is_empty() {
                break;
            }
            self.move_keys(&keys.iter().map(String::as_str).collect::<Vec<_>>());
        }
    }

    /// Moves the remaining keys, then assigns the slot to the target: on
    /// the target first, then the source, then every other primary.
    pub fn finish(self) {
        self.move_remaining_keys();
        let slot = self.slot.to_string();
        let assign = |node: &ClusterNode| {
            let _: String = node.query(&["CLUSTER", "SETSLOT", &slot, "NODE", self.target.id()]);
        };
        assign(self.target);
        assign(self.source);
        let shards = self.cluster.shards();
        for shard in &shards {
            if shard.primary != self.target.port() && shard.primary != self.source.port() {
                assign(self.cluster.node(shard.primary));
            }
        }
        self.cluster.wait_settled(shards.len());
        eprintln!(
            "cluster: slot {} moved from {} to {} in {:?}",
            self.slot,
            self.source.port(),
            self.target.port(),
            self.started.elapsed()
        );
    }
}

/// Starts one empty cluster-enabled node on three ports from the walk when
/// it speaks TLS (client, bus, TLS), two otherwise.
fn start_node(binaries: &Binaries, setup: &ClusterSetup) -> Result<ClusterNode, StartError> {
    let mut launch = Launch::server(binaries).ports(if setup.tls.is_some() { 3 } else { 2 });
    if let Some(tls) = &setup.tls {
        launch = launch
            .file("node.crt", tls.cert.clone())
            .file("node.key", tls.key.clone())
            .file("ca.crt", tls.ca.clone());
    }
    let process = launch.start(|ports, dir| {
        let file = |name: &str| dir.join(name).display().to_string();
        let mut args = vec![
            "--cluster-enabled".to_owned(),
            "yes".to_owned(),
            "--cluster-port".to_owned(),
            ports[1].to_string(),
            "--cluster-config-file".to_owned(),
            file("nodes.conf"),
            "--cluster-node-timeout".to_owned(),
            setup.node_timeout.as_millis().to_string(),
            // Replication offsets then move within a second even without
            // writes, which is when nodes start listing replicas.
            "--repl-ping-replica-period".to_owned(),
            "1".to_owned(),
        ];
        if setup.tls.is_some() {
            args.extend([
                "--tls-port".to_owned(),
                ports[2].to_string(),
                "--tls-cert-file".to_owned(),
                file("node.crt"),
                "--tls-key-file".to_owned(),
                file("node.key"),
                "--tls-ca-cert-file".to_owned(),
                file("ca.crt"),
            ]);
            args.extend(
                [
                    "--tls-auth-clients",
                    "optional",
                    "--tls-cluster",
                    "yes",
                    "--tls-replication",
                    "yes",
                ]
                .map(str::to_owned),
            );
        }
        args.extend(setup.args.iter().cloned());
        args
    })?;
    let id: String =
        process
            .try_query(&["CLUSTER", "MYID"])
            .map_err(|error| StartError::Setup {
                what: format!("CLUSTER MYID on port {}", process.port()),
                why: error.to_string(),
            })?;
    let tls_port = setup.tls.as_ref().map(|_| process.ports()[2]);
    Ok(ClusterNode {
        process,
        id,
        tls_port,
    })
}
