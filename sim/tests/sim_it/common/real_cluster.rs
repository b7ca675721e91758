//! A real Redis Cluster for differential tests: three primaries with one
//! replica each, `redis-server` processes on free loopback ports, created
//! with `redis-cli --cluster create`. Nodes are numbered as the simulator
//! numbers them (shard `s`: primary `2s`, replica `2s + 1`, shards in slot
//! order) and announce the simulator's host names (`redis-N`, with
//! `cluster-preferred-endpoint-type hostname`), so that redirections name
//! the same nodes on both sides. Every process is killed on drop.
#![allow(dead_code, unreachable_pub)]

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use redis::Value;

/// How long the cluster may take to settle after a change.
const SETTLE: Duration = Duration::from_secs(30);

/// One node process.
struct Process {
    port: u16,
    child: Child,
}

/// A running cluster.
pub struct RealCluster {
    /// By simulator index.
    nodes: Vec<Process>,
    /// Node ids, by simulator index.
    ids: Vec<String>,
    dir: PathBuf,
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.child.kill();
            let _ = node.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `n` distinct free ports. The listeners stay open until all are chosen,
/// so no two of them can be the same port (a node's bus port taken as
/// another node's client port made a node fail to start).
fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a free port"))
        .collect();
    listeners
        .iter()
        .map(|listener| listener.local_addr().expect("a bound address").port())
        .collect()
}

fn binary(variable: &str, name: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| name.to_owned())
}

/// Polls `check` every 10 ms until it gives a value, for up to `SETTLE`.
pub fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + SETTLE;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn query_port(port: u16, args: &[&str]) -> redis::RedisResult<Value> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let mut conn = client.get_connection()?;
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command.query(&mut conn)
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    }
}

/// One entry of `CLUSTER SLOTS`: first and last slot, the primary's port,
/// its replicas' ports.
type SlotRange = (u16, u16, u16, Vec<u16>);

/// `CLUSTER SLOTS`, sorted, as node `port` sees it.
fn slot_ranges(port: u16) -> Option<Vec<SlotRange>> {
    let Ok(Value::Array(ranges)) = query_port(port, &["CLUSTER", "SLOTS"]) else {
        return None;
    };
    let mut out = Vec::new();
    for range in ranges {
        let Value::Array(items) = range else {
            return None;
        };
        let number = |value: &Value| match value {
            Value::Int(n) => u16::try_from(*n).ok(),
            _ => None,
        };
        let node_port = |value: &Value| match value {
            Value::Array(fields) => fields.get(1).and_then(number),
            _ => None,
        };
        let first = number(items.first()?)?;
        let last = number(items.get(1)?)?;
        let primary = node_port(items.get(2)?)?;
        let replicas = items[3..].iter().map(node_port).collect::<Option<_>>()?;
        out.push((first, last, primary, replicas));
    }
    out.sort_unstable();
    Some(out)
}

/// Starts a node process on `port` (its bus on `bus_port`), its files in a
/// directory of its own under `dir`.
fn spawn_node(server: &str, port: u16, bus_port: u16, dir: &Path) -> Process {
    let node_dir = dir.join(port.to_string());
    std::fs::create_dir_all(&node_dir).expect("a scratch dir");
    let child = Command::new(server)
        .args([
            "--port",
            &port.to_string(),
            "--cluster-port",
            &bus_port.to_string(),
            "--bind",
            "127.0.0.1",
            "--cluster-enabled",
            "yes",
            "--cluster-node-timeout",
            "2000",
            "--save",
            "",
            "--appendonly",
            "no",
            "--repl-diskless-sync-delay",
            "0",
            "--repl-ping-replica-period",
            "1",
            "--cluster-preferred-endpoint-type",
            "hostname",
        ])
        .arg("--dir")
        .arg(&node_dir)
        .arg("--logfile")
        .arg(node_dir.join("redis.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| {
            panic!(
                "the cluster differential test needs a real redis-server ({error}): \
                 `apt-get install redis-server` (scripts/test.sh does), or set REDIS_SERVER_BIN"
            )
        });
    Process { port, child }
}

impl RealCluster {
    /// Starts three primaries with a replica each and waits until every
    /// node agrees on the layout and announces its host name.
    pub fn start() -> Self {
        let server = binary("REDIS_SERVER_BIN", "redis-server");
        // A client port and a bus port per node, all distinct.
        let ports = free_ports(12);
        // On a tmpfs when there is one: a node's `nodes.conf` fsync on a
        // disk can wait seconds under the machine's own writes.
        let root = sim::chaos::tmpfs().unwrap_or_else(std::env::temp_dir);
        let dir = root.join(format!("sim-real-cluster-{}", ports[0]));
        // A run killed before its drop may have left this directory, with a
        // nodes.conf that would make a node join an old cluster.
        let _ = std::fs::remove_dir_all(&dir);
        let nodes = ports
            .chunks(2)
            .map(|pair| spawn_node(&server, pair[0], pair[1], &dir))
            .collect();
        let mut cluster = Self {
            nodes,
            ids: Vec::new(),
            dir,
        };
        cluster.wait_answering();
        cluster.create();
        cluster.number_as_the_simulator_does();
        cluster.announce_host_names();
        cluster.wait_settled();
        cluster
    }

    /// Waits until every node answers `PING`; panics with the node's log
    /// if one never does.
    fn wait_answering(&self) {
        for node in &self.nodes {
            let deadline = Instant::now() + SETTLE;
            while query_port(node.port, &["PING"]).is_err() {
                if Instant::now() >= deadline {
                    let log = std::fs::read_to_string(
                        self.dir.join(node.port.to_string()).join("redis.log"),
                    )
                    .unwrap_or_default();
                    panic!(
                        "the node on port {} never answered; its log:\n{log}",
                        node.port
                    );
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    /// `redis-cli --cluster create` over every node, one replica a shard.
    fn create(&self) {
        let mut create: Vec<String> = vec!["--cluster".into(), "create".into()];
        create.extend(self.nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
        create.extend(["--cluster-replicas", "1", "--cluster-yes"].map(str::to_owned));
        let status = Command::new(binary("REDIS_CLI_BIN", "redis-cli"))
            .args(&create)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-cli runs");
        assert!(status.success(), "redis-cli --cluster create failed");
    }

    /// Numbers the nodes (and their ids) as the simulator does: shards in
    /// slot order, each primary followed by its replica.
    fn number_as_the_simulator_does(&mut self) {
        let first = self.nodes[0].port;
        let layout = wait_for("every node is listed", || {
            slot_ranges(first).filter(|ranges| {
                ranges.len() == 3 && ranges.iter().all(|(_, _, _, replicas)| replicas.len() == 1)
            })
        });
        let order: Vec<u16> = layout
            .iter()
            .flat_map(|(_, _, primary, replicas)| [*primary, replicas[0]])
            .collect();
        self.nodes
            .sort_by_key(|node| order.iter().position(|&port| port == node.port));
        self.ids = (0..6)
            .map(|index| {
                text(&self.query(index, &["CLUSTER", "MYID"]).expect("MYID")).expect("an id")
            })
            .collect();
    }

    /// Makes node `N` announce `redis-N`, as the simulator's hosts are named.
    fn announce_host_names(&self) {
        for index in 0..6 {
            let name = format!("redis-{index}");
            self.query(
                index,
                &["CONFIG", "SET", "cluster-announce-hostname", &name],
            )
            .expect("CONFIG SET");
        }
    }

    /// The client port of node `index`.
    pub fn port(&self, index: usize) -> u16 {
        self.nodes[index].port
    }

    /// Runs one command on node `index` (no redirection is followed).
    pub fn query(&self, index: usize, args: &[&str]) -> redis::RedisResult<Value> {
        query_port(self.port(index), args)
    }

    /// Waits until every node reports `cluster_state:ok`, sees the same
    /// slot table with every node's host name and health online, and every
    /// replica is in sync.
    pub fn wait_settled(&self) {
        wait_for("the cluster settles", || {
            let mut first = None;
            for index in 0..self.nodes.len() {
                let info = text(&self.query(index, &["CLUSTER", "INFO"]).ok()?)?;
                if !info.contains("cluster_state:ok") {
                    return None;
                }
                let ranges = slot_ranges(self.port(index))?;
                if first.get_or_insert_with(|| ranges.clone()) != &ranges {
                    return None;
                }
                let shards = format!("{:?}", self.query(index, &["CLUSTER", "SHARDS"]).ok()?);
                let named =
                    (0..self.nodes.len()).all(|other| shards.contains(&format!("redis-{other}")));
                if !named || shards.contains("loading") || shards.contains("fail") {
                    return None;
                }
                let role = format!("{:?}", self.query(index, &["ROLE"]).ok()?);
                if role.contains("slave") && !role.contains("connected") {
                    return None;
                }
            }
            Some(())
        });
    }

    /// Opens the migration of `slot` from node `from` to node `to`
    /// (`IMPORTING` on the target, then `MIGRATING` on the source).
    pub fn begin_migration(&self, slot: u16, from: usize, to: usize) {
        let slot = slot.to_string();
        let from_id = self.ids[from].clone();
        let to_id = self.ids[to].clone();
        self.query(to, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id])
            .expect("IMPORTING");
        self.query(from, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id])
            .expect("MIGRATING");
    }

    /// `MIGRATE` of `key` from node `from` to node `to`.
    pub fn migrate(&self, key: &str, from: usize, to: usize) {
        let port = self.port(to).to_string();
        self.query(from, &["MIGRATE", "127.0.0.1", &port, key, "0", "5000"])
            .expect("MIGRATE");
    }

    /// Gives `slot` to node `to` on every primary (`CLUSTER SETSLOT …
    /// NODE`, the target first), and waits until every node agrees.
    pub fn finish_migration(&self, slot: u16, to: usize) {
        let slot_text = slot.to_string();
        let to_id = self.ids[to].clone();
        let mut primaries: Vec<usize> = (0..self.nodes.len())
            .filter(|&index| {
                format!("{:?}", self.query(index, &["ROLE"]).expect("ROLE")).contains("master")
            })
            .collect();
        primaries.sort_by_key(|&index| index != to);
        for index in primaries {
            self.query(index, &["CLUSTER", "SETSLOT", &slot_text, "NODE", &to_id])
                .expect("SETSLOT NODE");
        }
        let to_port = self.port(to);
        wait_for("every node agrees on the slot's owner", || {
            (0..self.nodes.len())
                .all(|index| {
                    slot_ranges(self.port(index)).is_some_and(|ranges| {
                        ranges.iter().any(|&(first, last, primary, _)| {
                            (first..=last).contains(&slot) && primary == to_port
                        })
                    })
                })
                .then_some(())
        });
        self.wait_settled();
    }

    /// `CLUSTER FAILOVER` on replica `replica` (the graceful one: it
    /// catches up first), and waits until every node agrees.
    pub fn fail_over(&self, replica: usize) {
        self.query(replica, &["CLUSTER", "FAILOVER"])
            .expect("CLUSTER FAILOVER");
        let port = self.port(replica);
        wait_for("the replica is primary everywhere", || {
            (0..self.nodes.len())
                .all(|index| {
                    slot_ranges(self.port(index))
                        .is_some_and(|ranges| ranges.iter().any(|range| range.2 == port))
                })
                .then_some(())
        });
        self.wait_settled();
    }
}
