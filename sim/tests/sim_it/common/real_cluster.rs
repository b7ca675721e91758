//! A real Redis Cluster for differential tests: three primaries with one
//! replica each, the `servers` crate's, which numbers the nodes as the
//! simulator does (shard `s`: primary `2s`, replica `2s + 1`, shards in
//! slot order). The nodes announce the simulator's host names (`redis-N`,
//! with `cluster-preferred-endpoint-type hostname`), so that redirections
//! name the same nodes on both sides. Every process is killed on drop.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use redis::Value;
use servers::{Binaries, Cluster, cluster::ClusterSetup, query_port};

/// How long the cluster may take to settle after a change.
const SETTLE: Duration = Duration::from_secs(30);

/// A running cluster.
pub struct RealCluster {
    cluster: Cluster,
}

/// Polls `check` every 10 ms until it gives a value, for up to `SETTLE`.
pub fn wait_for<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    servers::wait_for(what, SETTLE, check)
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
    let Ok(Value::Array(ranges)) = query_port::<Value>(port, &["CLUSTER", "SLOTS"]) else {
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

impl RealCluster {
    /// Starts three primaries with a replica each and waits until every
    /// node agrees on the layout and announces its host name.
    pub fn start() -> Self {
        let binaries = Binaries::for_tests().unwrap_or_else(|error| {
            panic!("the cluster differential test needs a real redis-server: {error}")
        });
        let setup = ClusterSetup {
            args: ["--cluster-preferred-endpoint-type", "hostname"]
                .map(str::to_owned)
                .to_vec(),
            ..ClusterSetup::new(3, 1)
        };
        let cluster = Cluster::start(&binaries, &setup).unwrap_or_else(|error| panic!("{error}"));
        let cluster = Self { cluster };
        cluster.announce_host_names();
        cluster.wait_settled();
        cluster
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
        self.cluster.nodes()[index].port()
    }

    fn id(&self, index: usize) -> &str {
        self.cluster.nodes()[index].id()
    }

    fn len(&self) -> usize {
        self.cluster.nodes().len()
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
            for index in 0..self.len() {
                let info = text(&self.query(index, &["CLUSTER", "INFO"]).ok()?)?;
                if !info.contains("cluster_state:ok") {
                    return None;
                }
                let ranges = slot_ranges(self.port(index))?;
                if first.get_or_insert_with(|| ranges.clone()) != &ranges {
                    return None;
                }
                let shards = format!("{:?}", self.query(index, &["CLUSTER", "SHARDS"]).ok()?);
                let named = (0..self.len()).all(|other| shards.contains(&format!("redis-{other}")));
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
        self.query(
            to,
            &["CLUSTER", "SETSLOT", &slot, "IMPORTING", self.id(from)],
        )
        .expect("IMPORTING");
        self.query(
            from,
            &["CLUSTER", "SETSLOT", &slot, "MIGRATING", self.id(to)],
        )
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
        let to_id = self.id(to).to_owned();
        let mut primaries: Vec<usize> = (0..self.len())
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
            (0..self.len())
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
            (0..self.len())
                .all(|index| {
                    slot_ranges(self.port(index))
                        .is_some_and(|ranges| ranges.iter().any(|range| range.2 == port))
                })
                .then_some(())
        });
        self.wait_settled();
    }
}
