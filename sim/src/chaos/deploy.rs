//! Starting the deployment a scenario names, from the real binaries, on
//! loopback: `redis-server` nodes (single, primary-replica, Redlock),
//! plus sentinels (`redis-server --sentinel`), or a cluster made as
//! `redis-cli --cluster create` makes one. The binaries, the port walk,
//! the readiness check and the cluster's making are the `servers`
//! crate's, as for every test; the processes are the controller's own
//! (`Processes`: their groups die with it), behind its proxies.

use std::{
    net::{IpAddr, Ipv4Addr},
    path::{Path, PathBuf},
    time::Duration,
};

use redis::aio::MultiplexedConnection;
use servers::{Binaries, Ports, cluster::Member};

use super::{
    ChaosError,
    cut::{NodeShape, Proxy},
    fake_clock::{self, ServerClocks},
    procs::{Output, ProcId, Processes, await_started},
    proxy::Link,
};
use crate::config::{Persistence, Topology};

/// How many sets of ports a node or sentinel from the port walk tries
/// before its run fails.
const PORT_ATTEMPTS: usize = 5;

/// The master name sentinels watch.
pub(super) const MASTER: &str = "lock-primary";

/// One `redis-server`.
#[derive(Debug)]
pub(super) struct Node {
    /// Its client port.
    pub port: u16,
    /// Its cluster bus port (clusters only).
    pub bus: Option<u16>,
    /// Where the other cluster nodes reach its bus (a controller proxy,
    /// announced as its bus port).
    pub bus_link: Option<Link>,
    /// The loopback address its own outgoing connections (replication,
    /// bus) come from (`bind-source-addr`), in a topology with replicas or
    /// a bus: with the proxies above it lets the controller cut it off the
    /// bus or its replication while its clients still reach it, or cut it
    /// off everything.
    pub source: Option<IpAddr>,
    /// Where replicas and sentinels reach it (a controller proxy; the
    /// port it announces), in a topology that can fail over or a cluster.
    pub announce: Option<Link>,
    /// The running process, if up.
    pub proc: Option<ProcId>,
    /// The arguments it starts with (again, after a restart).
    pub args: Vec<String>,
}

impl Node {
    /// The port the other servers (replicas, sentinels) reach it on.
    pub(super) fn reached_at(&self) -> u16 {
        self.announce.as_ref().map_or(self.port, |link| link.port)
    }

    /// The port the other cluster nodes reach its bus on.
    pub(super) fn bus_reached_at(&self) -> u16 {
        self.bus_link
            .as_ref()
            .map_or(self.bus.unwrap_or(0), |link| link.port)
    }

    /// Whether `port` is this node's, directly or announced.
    pub(super) fn answers_on(&self, port: u16) -> bool {
        self.port == port || self.announce.as_ref().is_some_and(|link| link.port == port)
    }
}

/// One `redis-sentinel`.
#[derive(Debug)]
pub(super) struct Sentinel {
    /// Its port, which clients and the controller dial directly.
    pub port: u16,
    /// The loopback address its own connections (to the nodes' proxies
    /// and the other sentinels') come from (`bind-source-addr`).
    pub source: IpAddr,
    /// Where the other sentinels reach it (a controller proxy, announced
    /// as its port), so that the controller can hold what they tell it.
    pub peers: Link,
}

/// What could tell one sentinel of a failover: what the nodes send it
/// (their `INFO`, and the hello messages of their `__sentinel__:hello`
/// channel) and what the other sentinels send it (their hellos, published
/// to it directly).
#[derive(Debug, Clone)]
pub(super) struct Ears {
    /// Every node's replication proxy, through which the sentinel reaches
    /// the node.
    nodes: Vec<Link>,
    /// The sentinel's source address.
    source: IpAddr,
    /// The proxy through which the other sentinels reach it.
    peers: Link,
}

impl Ears {
    /// Holds (`deaf`) or releases all of it. A deaf sentinel still answers
    /// its clients, naming the primary it knew; once released it reads the
    /// held hellos and adopts the failover they announce. The lag is not a
    /// network cut: what was held arrives when it is released, not at a
    /// retransmission after (`heal_at_once`, of this sentinel's rule on
    /// the nodes' proxies alone, so that a partition of a node cut on the
    /// same proxy meanwhile still heals as a network cut), so the sentinel
    /// adopts at its drawn lag, as in the simulator.
    pub(super) fn set(&self, deaf: bool) {
        for link in &self.nodes {
            link.set(|mode| {
                let rule = mode.peers.entry(self.source).or_default();
                rule.heal_at_once = deaf;
                rule.hold_down.set(deaf);
            });
        }
        // Only the other sentinels dial this proxy, and only this holds it.
        self.peers.set(|mode| {
            mode.heal_at_once = deaf;
            mode.hold_up.set(deaf);
        });
    }
}

/// A running deployment.
#[derive(Debug)]
pub(super) struct Deployment {
    /// The nodes, `redis-0` first.
    pub nodes: Vec<Node>,
    /// The sentinels.
    pub sentinels: Vec<Sentinel>,
    /// Which node is primary now (the controller's failovers move it;
    /// Sentinel's are read from the sentinels).
    pub primary: usize,
    /// Where logs go.
    pub dir: PathBuf,
    /// Where the servers keep their data and configs (a tmpfs when there
    /// is one: `super::DataDir`).
    pub data: PathBuf,
    /// The `lazy_aof` library preloaded into every node, when the nodes
    /// persist to an AOF: a restart's `kill -9` then loses what a machine
    /// crash would (`super::lazy_aof`).
    pub preload: Option<PathBuf>,
    /// The nodes' faked clocks, when the schedule has a server clock
    /// fault: every node runs with the `fake_clock` library preloaded and
    /// a clock file of its own (`super::fake_clock`).
    pub clocks: Option<ServerClocks>,
    /// The server binary every node and sentinel runs: the scenario's
    /// flavour's (`super::flavour`).
    pub server: PathBuf,
    /// What that binary said it is: each process is checked to answer as
    /// it from its own `INFO server`.
    pub identity: servers::Identity,
}

/// The arguments of node `index` on `port`, persisting as `persistence`
/// asks (`none`: `appendonly no`; `aof-everysec`, `aof-always`: `appendonly
/// yes` with that `appendfsync`). A restart here is a `kill -9` of the
/// process; with an AOF, the `lazy_aof` library the nodes run with makes it
/// a machine crash (what was written since the last fsync is lost), as the
/// simulator's restart is.
fn node_args(
    dir: &std::path::Path,
    data: &std::path::Path,
    index: usize,
    port: u16,
    persistence: Persistence,
) -> Vec<String> {
    let node_dir = data.join(format!("redis-{index}"));
    let _ = std::fs::create_dir_all(&node_dir);
    let (appendonly, appendfsync) = match persistence {
        Persistence::None => ("no", "everysec"),
        Persistence::AofEverysec => ("yes", "everysec"),
        Persistence::AofAlways => ("yes", "always"),
    };
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        appendonly,
        "--appendfsync",
        appendfsync,
        "--protected-mode",
        "no",
        "--daemonize",
        "no",
        "--dir",
        &node_dir.display().to_string(),
        "--logfile",
        &dir.join(format!("redis-{index}.log")).display().to_string(),
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
        "--busy-reply-threshold",
        "10",
        "--enable-debug-command",
        "local",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// The loopback address node `index` connects out from (`bind-source-addr
/// 127.0.0.20+i`; 127.0.0.0/8 is loopback), so that the proxies can tell
/// its connections from the others'. Adds the argument to `args`.
fn source_address(index: usize, args: &mut Vec<String>) -> IpAddr {
    let source = Ipv4Addr::new(127, 0, 0, 20 + index as u8);
    args.extend(["--bind-source-addr".to_owned(), source.to_string()]);
    IpAddr::V4(source)
}

/// The loopback address sentinel `index` connects out from
/// (`bind-source-addr 127.0.0.200+i`, clear of the nodes' addresses).
fn sentinel_source(index: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 200 + index as u8))
}

/// Node `index`'s cluster bus: a port, and a proxy in front of it that the
/// node announces (`cluster-announce-bus-port`); the node connects out
/// from a loopback address of its own ([`source_address`]), so that the
/// controller can cut it off the bus alone. Adds the cluster arguments to
/// `args`.
async fn bus_port(
    topology: &Topology,
    data: &std::path::Path,
    index: usize,
    seed: u64,
    ports: &mut Ports,
    args: &mut Vec<String>,
) -> Result<(u16, Link), ChaosError> {
    let bus = ports.take()?;
    let link = super::proxy::start(bus, seed)
        .await
        .map_err(|source| ChaosError::Io {
            what: "starting a cluster bus proxy".to_owned(),
            source,
        })?;
    let timeout = topology.node_timeout().unwrap_or(Duration::from_secs(1));
    args.extend(
        [
            "--cluster-announce-ip",
            "127.0.0.1",
            "--cluster-announce-bus-port",
            &link.port.to_string(),
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            &bus.to_string(),
            "--cluster-config-file",
            &data
                .join(format!("nodes-{index}.conf"))
                .display()
                .to_string(),
            "--cluster-node-timeout",
            &timeout.as_millis().to_string(),
        ]
        .iter()
        .map(|s| (*s).to_owned()),
    );
    Ok((bus, link))
}

/// The proxy through which the others (replicas, sentinels) reach node
/// `index` on `port`, which the node announces as its address: replication
/// then runs through it, delayed by a lag drawn per chunk from the file's
/// `replication_lag`, in order, as the simulator draws one per write
/// (loopback alone replicates in microseconds; one fixed lag would keep a
/// release and the grant after it together, where drawn ones let the
/// release arrive alone). Every address a sentinel knows is a proxy one,
/// so it finds no replica "replicating from a different address" to fix
/// behind the proxy's back, and after a failover it points the replicas
/// at the new primary's proxy. Clients dial nodes directly (through their
/// own links). Adds the announce arguments to `args`, and `--replicaof`
/// the first node's proxy (`primary`) when there is one.
///
/// A cluster node announces it as its client port
/// (`cluster-announce-port`, on the bus, to every node): a cluster replica
/// replicates from the port its primary announces, so its replication
/// runs through the proxy as well, lagged alike. `CLUSTER SLOTS`, `MOVED`
/// and `ASK` name that port too: each client's dialer maps it to its own
/// link to the node, and the controller reads `CLUSTER NODES` back to
/// client ports (`migrate::cluster_nodes`).
async fn replication_link(
    topology: &Topology,
    port: u16,
    index: usize,
    seed: u64,
    primary: Option<u16>,
    args: &mut Vec<String>,
) -> Result<Link, ChaosError> {
    let link = super::proxy::start(port, seed.wrapping_add(index as u64))
        .await
        .map_err(|source| ChaosError::Io {
            what: "starting a replication proxy".to_owned(),
            source,
        })?;
    link.set(|mode| mode.drawn_down = topology.replication_lag());
    let announce = link.port.to_string();
    let announced = if matches!(topology, Topology::Cluster { .. }) {
        ["--cluster-announce-port", &announce]
    } else {
        ["--replica-announce-port", &announce]
    };
    args.extend(
        ["--replica-announce-ip", "127.0.0.1"]
            .iter()
            .chain(&announced)
            .map(|s| (*s).to_owned()),
    );
    if let Some(primary) = primary {
        args.extend(
            ["--replicaof", "127.0.0.1", &primary.to_string()]
                .iter()
                .map(|s| (*s).to_owned()),
        );
    }
    Ok(link)
}

impl Deployment {
    /// Starts node `index` with its arguments; waits until it answers as
    /// itself.
    pub(super) async fn start_node(
        &mut self,
        procs: &mut Processes,
        index: usize,
    ) -> Result<(), ChaosError> {
        let node = &self.nodes[index];
        let name = format!("redis-{index}");
        let output = Output::new(&self.dir, &name);
        let libraries: Vec<&Path> = self
            .preload
            .iter()
            .map(PathBuf::as_path)
            .chain(self.clocks.iter().map(|clocks| clocks.library.as_path()))
            .collect();
        let preload = std::env::join_paths(&libraries)
            .map(PathBuf::from)
            .map_err(|_| {
                ChaosError::Internal("a preloaded library's path holds a colon".to_owned())
            })?;
        let mut env: Vec<(&str, &Path)> = Vec::new();
        if !libraries.is_empty() {
            env.push(("LD_PRELOAD", &preload));
        }
        if let Some(file) = self.clocks.as_ref().and_then(|clocks| clocks.file(index)) {
            env.push((fake_clock::FILE_VAR, file));
        }
        let program = program(&self.server)?;
        let (id, _) =
            procs.spawn_with_env(&name, program, &node.args, false, &output.stderr, &env)?;
        let port = node.port;
        self.nodes[index].proc = Some(id);
        let said = await_started(procs, id, port, name.clone(), &output).await?;
        // A clock fault's evidence is the node's `TIME` agreeing with the
        // model, which a node that does not read its file would also show
        // while the offset is small: the file must be mapped.
        if let Some(file) = self.clocks.as_ref().and_then(|clocks| clocks.file(index))
            && !procs
                .pid_of(id)
                .is_some_and(|pid| fake_clock::maps_clock_file(pid, file))
        {
            return Err(ChaosError::Start {
                what: name,
                why: format!(
                    "it does not map its clock file {} (the clock library did not load or \
                     did not find it)",
                    file.display()
                ),
            });
        }
        super::flavour::check_started(&name, self.identity, said)
    }

    /// Starts what `topology` names, its nodes persisting as
    /// `persistence` asks; `seed` seeds its replication lags; with
    /// `fake_clocks`, its nodes' clocks can be shifted
    /// ([`super::fake_clock`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn start(
        server: Binaries,
        topology: &Topology,
        persistence: Persistence,
        fake_clocks: bool,
        seed: u64,
        procs: &mut Processes,
        ports: &mut Ports,
        dir: PathBuf,
        data: PathBuf,
    ) -> Result<Self, ChaosError> {
        let preload = match persistence {
            Persistence::None => None,
            Persistence::AofEverysec | Persistence::AofAlways => {
                Some(super::lazy_aof::install(&dir)?)
            }
        };
        let clocks = if fake_clocks {
            Some(ServerClocks::new(&dir, &data, topology.node_count())?)
        } else {
            None
        };
        let mut deployment = Self {
            nodes: Vec::with_capacity(topology.node_count()),
            sentinels: Vec::new(),
            primary: 0,
            dir,
            data,
            preload,
            clocks,
            server: server.server().to_path_buf(),
            identity: server.identity(),
        };
        let plan = NodePlan {
            topology,
            persistence,
            seed,
        };
        for index in 0..topology.node_count() {
            deployment.add_node(&plan, index, procs, ports).await?;
        }
        if topology.can_fail_over() {
            deployment.wait_replicas_synced(topology.replicas()).await?;
        }
        if let Topology::Sentinel { sentinels, .. } = topology {
            deployment.start_sentinels(procs, ports, *sentinels).await?;
        }
        if let Some((_, replicas)) = topology.cluster_shape() {
            deployment.create_cluster(replicas).await?;
        }
        Ok(deployment)
    }

    /// Plans node `index` (its ports, its proxies, its arguments; the
    /// nodes before it are up) and starts it. When a port was taken before
    /// the node bound it (by a server of another run), plans it again on
    /// the next ports of the walk; a port from `--base-port` that is taken
    /// stops the run, naming it.
    async fn add_node(
        &mut self,
        plan: &NodePlan<'_>,
        index: usize,
        procs: &mut Processes,
        ports: &mut Ports,
    ) -> Result<(), ChaosError> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let node = self.plan_node(plan, index, ports).await?;
            self.nodes.push(node);
            match self.start_node(procs, index).await {
                Err(ChaosError::PortTaken { .. })
                    if ports.may_move() && attempts < PORT_ATTEMPTS =>
                {
                    // Its proxies idle on until the run ends; nobody
                    // learns their ports.
                    self.nodes.pop();
                }
                started => return started,
            }
        }
    }

    /// Node `index`'s ports, proxies and arguments.
    async fn plan_node(
        &self,
        plan: &NodePlan<'_>,
        index: usize,
        ports: &mut Ports,
    ) -> Result<Node, ChaosError> {
        let NodePlan {
            topology,
            persistence,
            seed,
        } = *plan;
        let cluster = matches!(topology, Topology::Cluster { .. });
        let port = ports.take()?;
        let mut args = node_args(&self.dir, &self.data, index, port, persistence);
        let source =
            (cluster || topology.can_fail_over()).then(|| source_address(index, &mut args));
        let (bus, bus_link) = if cluster {
            let (bus, link) = bus_port(topology, &self.data, index, seed, ports, &mut args).await?;
            (Some(bus), Some(link))
        } else {
            (None, None)
        };
        let announce = if cluster || topology.can_fail_over() {
            // A cluster's replicas are attached once the cluster is made.
            let primary = self.nodes.first().and_then(|n: &Node| n.announce.as_ref());
            let primary = primary.filter(|_| !cluster).map(|link| link.port);
            let link = replication_link(topology, port, index, seed, primary, &mut args).await?;
            Some(link)
        } else {
            None
        };
        Ok(Node {
            port,
            bus,
            bus_link,
            source,
            announce,
            proc: None,
            args,
        })
    }

    /// Cuts node `index` off the cluster bus (`cut`), or heals it: what
    /// the others send to its bus and what it sends to theirs is held
    /// (and delivered when healed, as after a partition), while its
    /// clients still reach it.
    pub(super) fn cut_off_bus(&self, index: usize, cut: bool) {
        let (Some(own), Some(source)) =
            (self.nodes[index].bus_link.clone(), self.nodes[index].source)
        else {
            return;
        };
        // The window ends when the old primary hears of the new epoch,
        // `duration` after the takeover: what the bus kept arrives then.
        own.set(|mode| {
            mode.hold_up.set(cut);
            mode.hold_down.set(cut);
            mode.heal_at_once = cut;
        });
        for (other, node) in self.nodes.iter().enumerate() {
            if other == index {
                continue;
            }
            if let Some(link) = &node.bus_link {
                link.set(|mode| {
                    let rule = mode.peers.entry(source).or_default();
                    rule.heal_at_once = cut;
                    rule.hold_up.set(cut);
                    rule.hold_down.set(cut);
                });
            }
        }
    }

    /// The sentinels' ports, in order.
    pub(super) fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels
            .iter()
            .map(|sentinel| sentinel.port)
            .collect()
    }

    /// The switches that hold what could tell sentinel `index` of a
    /// failover ([`Ears`]).
    pub(super) fn ears(&self, index: usize) -> Option<Ears> {
        let sentinel = self.sentinels.get(index)?;
        Some(Ears {
            nodes: self
                .nodes
                .iter()
                .filter_map(|node| node.announce.clone())
                .collect(),
            source: sentinel.source,
            peers: sentinel.peers.clone(),
        })
    }

    /// What the plan of a server fault needs to know of each node.
    pub(super) fn shape(&self) -> Vec<NodeShape> {
        self.nodes
            .iter()
            .map(|node| NodeShape {
                replication: node.announce.is_some(),
                bus: node.bus_link.is_some(),
                source: node.source,
            })
            .collect()
    }

    /// Node `index`'s replication or bus proxy (`proxy` names which).
    pub(super) fn node_proxy(&self, proxy: Proxy) -> Option<&Link> {
        match proxy {
            Proxy::Replication(index) => self.nodes.get(index)?.announce.as_ref(),
            Proxy::Bus(index) => self.nodes.get(index)?.bus_link.as_ref(),
            Proxy::Clients(_) => None,
        }
    }

    /// An admin connection to node `index`.
    pub(super) async fn admin(&self, index: usize) -> Result<MultiplexedConnection, ChaosError> {
        admin(self.nodes[index].port).await
    }

    async fn wait_replicas_synced(&self, replicas: usize) -> Result<(), ChaosError> {
        let mut primary = self.admin(0).await?;
        for _ in 0..200 {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query_async(&mut primary)
                .await
                .unwrap_or_default();
            let online = info.lines().filter(|l| l.contains("state=online")).count();
            if online >= replicas {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(ChaosError::Start {
            what: "replication".to_owned(),
            why: format!("{replicas} replicas did not come online in 10 s"),
        })
    }

    async fn start_sentinels(
        &mut self,
        procs: &mut Processes,
        ports: &mut Ports,
        count: usize,
    ) -> Result<(), ChaosError> {
        for index in 0..count {
            let source = sentinel_source(index);
            // A partition of a node leaves the sentinels' links to it
            // alone: the simulator's sentinels watch no node, and real
            // ones would fail over a primary they could not reach.
            for node in &self.nodes {
                if let Some(link) = &node.announce {
                    link.set(|mode| {
                        mode.spared.insert(source);
                    });
                }
            }
            let mut attempts = 0;
            let sentinel = loop {
                attempts += 1;
                match self.start_sentinel(procs, ports, index, count).await {
                    Err(ChaosError::PortTaken { .. })
                        if ports.may_move() && attempts < PORT_ATTEMPTS => {}
                    started => break started?,
                }
            };
            self.sentinels.push(sentinel);
        }
        // Every sentinel must see the replicas and the others before a
        // failover can elect a leader.
        for port in self.sentinel_ports() {
            let mut conn = admin(port).await?;
            for attempt in 0.. {
                let replicas: Vec<redis::Value> = redis::cmd("SENTINEL")
                    .arg("REPLICAS")
                    .arg(MASTER)
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_default();
                let peers: Vec<redis::Value> = redis::cmd("SENTINEL")
                    .arg("SENTINELS")
                    .arg(MASTER)
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_default();
                if replicas.len() + 1 >= self.nodes.len() && peers.len() + 1 >= count {
                    break;
                }
                if attempt > 300 {
                    return Err(ChaosError::Start {
                        what: "sentinels".to_owned(),
                        why: "they did not discover the replicas and each other in 15 s".to_owned(),
                    });
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Ok(())
    }

    /// Starts sentinel `index` of `count` on a port from `ports`, with the
    /// proxy through which the others reach it.
    async fn start_sentinel(
        &self,
        procs: &mut Processes,
        ports: &mut Ports,
        index: usize,
        count: usize,
    ) -> Result<Sentinel, ChaosError> {
        let port = ports.take()?;
        let peers = super::proxy::start(port, 0)
            .await
            .map_err(|source| ChaosError::Io {
                what: "starting a sentinel's proxy".to_owned(),
                source,
            })?;
        let source = sentinel_source(index);
        let name = format!("sentinel-{index}");
        let config = self.data.join(format!("{name}.conf"));
        let text = format!(
            "port {port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\nlogfile \"{log}\"\n\
             dir \"{dir}\"\nbind-source-addr {source}\n\
             sentinel announce-ip 127.0.0.1\nsentinel announce-port {announce}\n\
             sentinel monitor {MASTER} 127.0.0.1 {primary} {quorum}\n\
             sentinel down-after-milliseconds {MASTER} 1000\n\
             sentinel failover-timeout {MASTER} 3000\n\
             sentinel parallel-syncs {MASTER} 1\n",
            log = self.dir.join(format!("{name}.log")).display(),
            dir = self.data.display(),
            primary = self.nodes[0].reached_at(),
            announce = peers.port,
            quorum = count / 2 + 1,
        );
        std::fs::write(&config, text).map_err(|source| ChaosError::Io {
            what: config.display().to_string(),
            source,
        })?;
        let output = Output::new(&self.dir, &name);
        let args = [config.display().to_string(), "--sentinel".to_owned()];
        let program = program(&self.server)?;
        let (id, _) = procs.spawn(&name, program, &args, false, &output.stderr)?;
        let said = await_started(procs, id, port, name.clone(), &output).await?;
        super::flavour::check_started(&name, self.identity, said)?;
        Ok(Sentinel {
            port,
            source,
            peers,
        })
    }

    /// Makes the nodes one cluster as `redis-cli --cluster create` would
    /// (`servers::cluster::create`: shard `s` is node `s × (1 +
    /// replicas)`, its replicas follow it), each node met at the bus port
    /// it announces (its proxy), then waits for every node to see the
    /// cluster ok and its replication up. The making blocks on each
    /// node's answer: it runs beside the runtime, whose bus proxies carry
    /// the nodes' meeting.
    async fn create_cluster(&self, replicas: usize) -> Result<(), ChaosError> {
        let members: Vec<Member> = self
            .nodes
            .iter()
            .map(|node| Member {
                port: node.port,
                bus: node.bus_reached_at(),
            })
            .collect();
        tokio::task::spawn_blocking(move || servers::cluster::create(&members, replicas))
            .await
            .map_err(|error| ChaosError::Internal(format!("making the cluster: {error}")))?
            .map_err(|error| ChaosError::Start {
                what: "the cluster".to_owned(),
                why: error.to_string(),
            })?;
        // Wait for every node to say the cluster is ok and for the
        // replicas to sync.
        for index in 0..self.nodes.len() {
            let mut conn = self.admin(index).await?;
            let mut ok = false;
            for _ in 0..400 {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_default();
                let role: String = redis::cmd("INFO")
                    .arg("replication")
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_default();
                let synced = !role.contains("role:slave") || role.contains("master_link_status:up");
                if info.contains("cluster_state:ok") && synced {
                    ok = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if !ok {
                return Err(ChaosError::Start {
                    what: format!("redis-{index}"),
                    why: "the cluster did not reach cluster_state:ok in 20 s".to_owned(),
                });
            }
        }
        Ok(())
    }
}

/// The server binary, as the program `Processes` starts.
fn program(server: &Path) -> Result<&str, ChaosError> {
    server
        .to_str()
        .ok_or_else(|| ChaosError::Internal(format!("{} is not UTF-8", server.display())))
}

/// What the plan of every node of a deployment shares.
#[derive(Debug, Clone, Copy)]
struct NodePlan<'a> {
    topology: &'a Topology,
    persistence: Persistence,
    seed: u64,
}

fn start_error(what: &str, error: &redis::RedisError) -> ChaosError {
    ChaosError::Start {
        what: what.to_owned(),
        why: error.to_string(),
    }
}

/// An admin connection to the server on `port`.
pub(super) async fn admin(port: u16) -> Result<MultiplexedConnection, ChaosError> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .map_err(|e| start_error("a redis URL", &e))?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(2)));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| ChaosError::Start {
            what: format!("a connection to port {port}"),
            why: e.to_string(),
        })
}
