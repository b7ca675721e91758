//! A Redis Cluster of real processes: N primaries with optional replicas on
//! free loopback ports, created by `redis-cli --cluster create`, with the
//! faults a lock must survive: a `CLUSTER FAILOVER`, a slot migration, a
//! `kill -9` of a primary.
//!
//! Every helper waits until all live nodes agree on the new layout, and
//! prints how long the change took (`--nocapture` shows it): those numbers
//! feed the simulator's model.
#![allow(dead_code, unreachable_pub)]

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use super::process::{Binary, Process, Ready, redis_cli, wait_for};

/// How long a layout change may take before a helper gives up. Generous: a
/// `kill -9` needs about twice the node timeout, on a loaded machine more.
const SETTLE: Duration = Duration::from_secs(30);

/// The node timeout the fixture runs with unless told otherwise: small, so
/// a killed primary is replaced in a few seconds.
pub const NODE_TIMEOUT: Duration = Duration::from_millis(2_000);

/// One cluster node.
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

    /// Its cluster node id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its TLS port, in a cluster started with [`Cluster::start_tls`]
    /// (which keeps the plain port for the fixture's own commands).
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

    /// Like [`Self::try_query`], but panics on an error.
    pub fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        self.process.query(args)
    }

    /// Whether `ROLE` says it is a primary.
    pub fn is_primary(&self) -> bool {
        self.try_query::<redis::Value>(&["ROLE"])
            .is_ok_and(|role| matches!(role, redis::Value::Array(items) if matches!(items.first(), Some(redis::Value::BulkString(role)) if role == b"master")))
    }

    /// Its log.
    pub fn log(&self) -> String {
        self.process.log()
    }
}

/// One shard as a node's `CLUSTER NODES` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardView {
    /// The primary's client port.
    pub primary: u16,
    /// Its slot ranges, inclusive, ascending.
    pub slots: Vec<(u16, u16)>,
    /// Its replicas' client ports, ascending.
    pub replicas: Vec<u16>,
}

/// Certificates for a cluster whose nodes also speak TLS.
pub struct ClusterTls {
    /// The CA every node's certificate chains to.
    pub pki: super::pki::Pki,
    /// What every node presents, to clients and to each other.
    pub node: super::pki::Identity,
    /// A client certificate the nodes accept.
    pub client: super::pki::Identity,
}

/// A running cluster, every process killed on drop.
pub struct Cluster {
    nodes: Vec<ClusterNode>,
    tls: Option<ClusterTls>,
}

impl Cluster {
    /// Starts `primaries` primaries with `replicas` replicas each and waits
    /// until every node agrees on the layout and every replica is in sync.
    pub fn start(primaries: usize, replicas: usize) -> Self {
        Self::start_with(primaries, replicas, NODE_TIMEOUT)
    }

    /// Like [`Self::start`], with another `cluster-node-timeout`.
    pub fn start_with(primaries: usize, replicas: usize, node_timeout: Duration) -> Self {
        Self::create(primaries, replicas, node_timeout, None)
    }

    /// Like [`Self::start`], with TLS on every node besides its plain port:
    /// a TLS port for clients (`tls-auth-clients optional`), and TLS on the
    /// cluster bus and replication links.
    pub fn start_tls(primaries: usize, replicas: usize) -> Self {
        let pki = super::pki::Pki::new("redis-lock cluster ca");
        let tls = ClusterTls {
            node: pki.node(&["127.0.0.1", "localhost"]),
            client: pki.client("redis-lock cluster client"),
            pki,
        };
        Self::create(primaries, replicas, NODE_TIMEOUT, Some(tls))
    }

    /// The certificates of a cluster started with [`Self::start_tls`].
    pub fn tls(&self) -> Option<&ClusterTls> {
        self.tls.as_ref()
    }

    fn create(
        primaries: usize,
        replicas: usize,
        node_timeout: Duration,
        tls: Option<ClusterTls>,
    ) -> Self {
        assert!(
            primaries >= 3,
            "redis-cli creates clusters of 3 primaries or more"
        );
        let started = Instant::now();
        let nodes: Vec<ClusterNode> = (0..primaries * (1 + replicas))
            .map(|_| start_node(node_timeout, tls.as_ref()))
            .collect();
        let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
        args.extend(nodes.iter().map(ClusterNode::address));
        args.extend([
            "--cluster-replicas".into(),
            replicas.to_string(),
            "--cluster-yes".into(),
        ]);
        redis_cli(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let tls_text = if tls.is_some() { " (with tls)" } else { "" };
        let cluster = Self { nodes, tls };
        cluster.wait_settled(primaries);
        eprintln!(
            "cluster: {primaries} primaries + {} replicas{tls_text} ready in {:?}",
            primaries * replicas,
            started.elapsed()
        );
        cluster
    }

    /// Every node, killed ones included, in start order.
    pub fn nodes(&self) -> &[ClusterNode] {
        &self.nodes
    }

    /// The node listening on `port`.
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
    pub fn shards(&self) -> Vec<ShardView> {
        let node = self.live().next().expect("a live node");
        shards_seen_by(node).expect("CLUSTER NODES on a live node")
    }

    /// The slot the server computes for `key` (`CLUSTER KEYSLOT`).
    pub fn slot_of(&self, key: &str) -> u16 {
        let node = self.live().next().expect("a live node");
        node.query(&["CLUSTER", "KEYSLOT", key])
    }

    /// The primary serving `slot`.
    pub fn owner_of_slot(&self, slot: u16) -> &ClusterNode {
        let shard = self
            .shards()
            .into_iter()
            .find(|shard| {
                shard
                    .slots
                    .iter()
                    .any(|&(first, last)| (first..=last).contains(&slot))
            })
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
    pub fn wait_settled(&self, shards: usize) {
        let settled = Instant::now() + SETTLE;
        loop {
            let Err(last) = self.settled(shards) else {
                return;
            };
            assert!(
                Instant::now() < settled,
                "the cluster did not settle within {SETTLE:?}: {last}"
            );
            std::thread::sleep(Duration::from_millis(10));
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
            let view = shards_seen_by(node)?;
            let covered: u32 = view
                .iter()
                .flat_map(|shard| &shard.slots)
                .map(|&(first, last)| u32::from(last - first) + 1)
                .sum();
            if view.len() != shards || covered != 16_384 {
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
        // them, is above zero: wait until every node lists every replica.
        let all: usize = view.iter().map(|shard| 1 + shard.replicas.len()).sum();
        for node in self.live() {
            let listed = ports_in_cluster_slots(node)?;
            if listed != all {
                return Err(format!(
                    "{} lists {listed} of {all} nodes in CLUSTER SLOTS",
                    node.port()
                ));
            }
        }
        Ok(())
    }
}

/// A slot on its way from one primary to another.
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

/// Starts one empty cluster-enabled node; its bus port is chosen freely
/// too (the default, port + 10000, may be taken or out of range), and so is
/// its TLS port when `tls` is given.
fn start_node(node_timeout: Duration, tls: Option<&ClusterTls>) -> ClusterNode {
    let tls_port = std::cell::Cell::new(None);
    let process = Process::start(Binary::Server, Ready::AnswersAsItself, |port, dir| {
        let dir_text = dir.display().to_string();
        let timeout = node_timeout.as_millis().to_string();
        let mut args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--cluster-port",
            &super::free_port().to_string(),
            "--bind",
            "127.0.0.1",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            &format!("{dir_text}/nodes.conf"),
            "--cluster-node-timeout",
            &timeout,
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "no",
            // A primary otherwise waits 5 s for more replicas before a sync.
            "--repl-diskless-sync-delay",
            "0",
            // Replication offsets then move within a second even without
            // writes, which is when nodes start listing replicas.
            "--repl-ping-replica-period",
            "1",
            "--dir",
            &dir_text,
            "--logfile",
            &format!("{dir_text}/log.txt"),
        ]
        .map(str::to_owned)
        .to_vec();
        if let Some(tls) = tls {
            let write = |name: &str, pem: &str| {
                let path = dir.join(name);
                std::fs::write(&path, pem).expect("write a pem file");
                path.display().to_string()
            };
            let chosen = super::free_port();
            tls_port.set(Some(chosen));
            args.extend(
                [
                    "--tls-port",
                    &chosen.to_string(),
                    "--tls-cert-file",
                    &write("node.crt", &tls.node.cert_pem),
                    "--tls-key-file",
                    &write("node.key", &tls.node.key_pem),
                    "--tls-ca-cert-file",
                    &write("ca.crt", &tls.pki.ca_pem),
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
        args
    });
    let id: String = process.query(&["CLUSTER", "MYID"]);
    ClusterNode {
        process,
        id,
        tls_port: tls_port.get(),
    }
}

/// The shards `node` describes in `CLUSTER NODES`: live primaries with
/// slots, their live replicas, ordered by primary port.
fn shards_seen_by(node: &ClusterNode) -> Result<Vec<ShardView>, String> {
    let text: String = node
        .try_query(&["CLUSTER", "NODES"])
        .map_err(|error| error.to_string())?;
    // <id> <ip:port@bus[,host]> <flags> <primary id|-> <ping> <pong> <epoch> <link> <slot>...
    let mut ports = BTreeMap::new();
    let mut shards: BTreeMap<String, ShardView> = BTreeMap::new();
    let mut replicas = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [id, address, flags, primary_id, _, _, _, _, slots @ ..] = fields.as_slice() else {
            return Err(format!("unexpected CLUSTER NODES line {line:?}"));
        };
        let port: u16 = address
            .split(['@', ','])
            .next()
            .and_then(|host_port| host_port.rsplit_once(':'))
            .and_then(|(_, port)| port.parse().ok())
            .ok_or_else(|| format!("no port in {address:?}"))?;
        ports.insert((*id).to_owned(), port);
        if flags.contains("fail") || flags.contains("noaddr") {
            continue;
        }
        if flags.contains("master") {
            let ranges = slots
                .iter()
                // `[slot->-id]` and `[slot-<-id]` mark a migration in progress.
                .filter(|slot| !slot.starts_with('['))
                .map(|slot| {
                    let (first, last) = slot.split_once('-').unwrap_or((slot, slot));
                    Ok((
                        first.parse().map_err(|_| format!("slot {slot:?}"))?,
                        last.parse().map_err(|_| format!("slot {slot:?}"))?,
                    ))
                })
                .collect::<Result<Vec<(u16, u16)>, String>>()?;
            if !ranges.is_empty() {
                shards.insert(
                    (*id).to_owned(),
                    ShardView {
                        primary: port,
                        slots: ranges,
                        replicas: Vec::new(),
                    },
                );
            }
        } else if flags.contains("slave") {
            replicas.push(((*primary_id).to_owned(), port));
        }
    }
    for (primary_id, port) in replicas {
        if let Some(shard) = shards.get_mut(&primary_id) {
            shard.replicas.push(port);
        }
    }
    let mut shards: Vec<ShardView> = shards.into_values().collect();
    for shard in &mut shards {
        shard.slots.sort_unstable();
        shard.replicas.sort_unstable();
    }
    shards.sort_by_key(|shard| shard.primary);
    Ok(shards)
}

/// How many distinct nodes `node`'s `CLUSTER SLOTS` lists.
fn ports_in_cluster_slots(node: &ClusterNode) -> Result<usize, String> {
    let reply: redis::Value = node
        .try_query(&["CLUSTER", "SLOTS"])
        .map_err(|error| error.to_string())?;
    let redis::Value::Array(entries) = reply else {
        return Err(format!("CLUSTER SLOTS gave {reply:?}"));
    };
    let mut ports = std::collections::BTreeSet::new();
    for entry in entries {
        let redis::Value::Array(fields) = entry else {
            return Err("a CLUSTER SLOTS entry is not an array".into());
        };
        for node in fields.iter().skip(2) {
            if let redis::Value::Array(node) = node
                && let Some(redis::Value::Int(port)) = node.get(1)
            {
                ports.insert(*port);
            }
        }
    }
    Ok(ports.len())
}

/// `redis-cli --cluster check`'s view of the shards: the operator's tool,
/// independent of the code under test.
pub fn cli_view(node: &ClusterNode) -> Vec<ShardView> {
    let output = strip_colours(&redis_cli(&["--cluster", "check", &node.address()]));
    // M: <id> <ip:port>
    //    slots:[0-5460],[5462] (5461 slots) master
    // S: <id> <ip:port>
    //    replicates <primary id>
    let mut shards: BTreeMap<String, ShardView> = BTreeMap::new();
    let mut replicas = Vec::new();
    let mut current: Option<(char, String, u16)> = None;
    for line in output.lines() {
        let line = line.trim();
        if let Some(rest) = line
            .strip_prefix("M: ")
            .or_else(|| line.strip_prefix("S: "))
        {
            let mut words = rest.split_whitespace();
            let id = words.next().unwrap_or_default().to_owned();
            let port = words
                .next()
                .and_then(|address| address.rsplit_once(':'))
                .and_then(|(_, port)| port.parse().ok())
                .unwrap_or_else(|| panic!("no address in {line:?}"));
            let kind = line.chars().next().unwrap_or('?');
            if kind == 'M' {
                shards.insert(
                    id.clone(),
                    ShardView {
                        primary: port,
                        slots: Vec::new(),
                        replicas: Vec::new(),
                    },
                );
            }
            current = Some((kind, id, port));
        } else if let (Some(ranges), Some(('M', id, _))) = (line.strip_prefix("slots:"), &current) {
            let ranges = ranges.split_whitespace().next().unwrap_or_default();
            let shard = shards.get_mut(id).expect("inserted with its M: line");
            for range in ranges.split(',').filter(|range| !range.is_empty()) {
                let range = range.trim_matches(['[', ']']);
                let (first, last) = range.split_once('-').unwrap_or((range, range));
                shard.slots.push((
                    first.parse().expect("a slot number"),
                    last.parse().expect("a slot number"),
                ));
            }
        } else if let (Some(primary), Some(('S', _, port))) =
            (line.strip_prefix("replicates "), &current)
        {
            replicas.push((primary.trim().to_owned(), *port));
        }
    }
    for (primary, port) in replicas {
        if let Some(shard) = shards.get_mut(&primary) {
            shard.replicas.push(port);
        }
    }
    let mut shards: Vec<ShardView> = shards
        .into_values()
        .filter(|shard| !shard.slots.is_empty())
        .collect();
    for shard in &mut shards {
        shard.slots.sort_unstable();
        shard.replicas.sort_unstable();
    }
    shards.sort_by_key(|shard| shard.primary);
    shards
}

/// `redis-cli --cluster` colours its output even into a pipe: drop the
/// `ESC [ ... m` sequences.
fn strip_colours(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}
