//! A slot migration on a real Redis Cluster, as `redis-cli --cluster
//! reshard` performs one and as the simulator's `slot-migration` fault
//! models it (`world::cluster`): the lock's slot is marked `IMPORTING` on a
//! primary of another shard and `MIGRATING` on its owner, its keys move
//! one `MIGRATE` at a time spread over the fault's duration, and at the
//! end what is left moves and `CLUSTER SETSLOT … NODE` gives the slot to
//! the target (on the target first, then the source, then every other
//! primary, as the Redis Cluster specification orders it). Meanwhile the
//! clients meet `ASK` for keys already gone and `TRYAGAIN` for a script
//! whose keys are split, from real servers.

use std::time::Duration;

use tokio::task::JoinHandle;

use super::{
    ChaosError,
    deploy::{Deployment, admin},
};

/// One node of the cluster as `CLUSTER NODES` lists it.
#[derive(Debug, Clone)]
pub(super) struct ClusterNode {
    /// Its node id.
    pub id: String,
    /// Its client port.
    pub port: u16,
    /// A primary not marked failed.
    pub primary: bool,
    /// A replica's primary's id (`-` for a primary).
    of: String,
    slots: Vec<(u16, u16)>,
}

impl ClusterNode {
    /// Whether it serves `slot`.
    fn owns(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
    }
}

/// Each node's client port, by index, and whether its process runs.
fn node_ports(deployment: &Deployment) -> Vec<(u16, bool)> {
    deployment
        .nodes
        .iter()
        .map(|node| (node.port, node.proc.is_some()))
        .collect()
}

/// Each node's announced port (its replication proxy's, which `CLUSTER
/// NODES` lists) and the client port it leads to.
fn announced_ports(deployment: &Deployment) -> Vec<(u16, u16)> {
    deployment
        .nodes
        .iter()
        .map(|node| (node.reached_at(), node.port))
        .collect()
}

/// The port of the primary that serves `slot`, and its replicas' ports
/// (client ports, not the announced ones).
pub(super) async fn slot_owner(deployment: &Deployment, slot: u16) -> Option<(u16, Vec<u16>)> {
    let nodes = cluster_nodes(&node_ports(deployment), &announced_ports(deployment)).await?;
    let owner = nodes.iter().find(|n| n.primary && n.owns(slot))?;
    let replicas = nodes
        .iter()
        .filter(|n| n.of == owner.id)
        .map(|n| n.port)
        .collect();
    Some((owner.port, replicas))
}

/// A migration under way.
pub(super) struct Migration {
    slot: u16,
    /// The owner's index in the deployment, port and node id.
    from: (usize, u16, String),
    /// The target's.
    to: (usize, u16, String),
    /// The other primaries' ports (told the new owner at the end).
    others: Vec<u16>,
    /// Moves the keys one by one until the end.
    stepper: JoinHandle<()>,
}

/// `CLUSTER NODES` of the first running node (of `ports`: port, running)
/// that answers (a node that answers with something else is skipped),
/// each node's port read back through `announced` (announced port, client
/// port): a node announces its replication proxy as its port
/// (`cluster-announce-port`), and the controller dials nodes directly.
async fn cluster_nodes(
    ports: &[(u16, bool)],
    announced: &[(u16, u16)],
) -> Option<Vec<ClusterNode>> {
    for &(port, running) in ports {
        if !running {
            continue;
        }
        let Ok(mut conn) = admin(port).await else {
            continue;
        };
        let Ok(text) = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async::<String>(&mut conn)
            .await
        else {
            continue;
        };
        let client_port = |port: u16| {
            announced
                .iter()
                .find(|&&(at, _)| at == port)
                .map_or(port, |&(_, real)| real)
        };
        return Some(
            text.lines()
                .filter_map(parse_node)
                .map(|node| ClusterNode {
                    port: client_port(node.port),
                    ..node
                })
                .collect(),
        );
    }
    None
}

/// One line of `CLUSTER NODES`: `id ip:port@bus flags master ping pong
/// epoch state slot…` (importing/migrating entries in brackets skipped).
fn parse_node(line: &str) -> Option<ClusterNode> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let port = fields.get(1)?.split(['@', ':']).nth(1)?.parse().ok()?;
    let flags = fields.get(2)?;
    let slots = fields
        .get(8..)
        .unwrap_or_default()
        .iter()
        .filter(|range| !range.starts_with('['))
        .filter_map(|range| {
            let mut ends = range.split('-').filter_map(|n| n.parse::<u16>().ok());
            let first = ends.next()?;
            Some((first, ends.next().unwrap_or(first)))
        })
        .collect();
    Some(ClusterNode {
        id: (*fields.first()?).to_owned(),
        port,
        primary: flags.contains("master") && !flags.contains("fail"),
        of: (*fields.get(3)?).to_owned(),
        slots,
    })
}

fn setslot(slot: u16, state: &str, id: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("CLUSTER");
    cmd.arg("SETSLOT").arg(slot).arg(state).arg(id);
    cmd
}

fn cluster_error(what: &str, error: &redis::RedisError) -> ChaosError {
    ChaosError::Io {
        what: format!("slot migration: {what}"),
        source: std::io::Error::other(error.to_string()),
    }
}

/// Moves one key of `slot` from `from` to `to`; the key, if one moved.
async fn migrate_one(slot: u16, from: u16, to: u16) -> Option<String> {
    let mut source = admin(from).await.ok()?;
    let keys: Vec<String> = redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(1)
        .query_async(&mut source)
        .await
        .ok()?;
    let key = keys.into_iter().next()?;
    let moved: redis::RedisResult<redis::Value> = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(to)
        .arg("")
        .arg(0)
        .arg(5_000)
        .arg("KEYS")
        .arg(&key)
        .query_async(&mut source)
        .await;
    moved.ok().map(|_| key)
}

/// Starts migrating the slot of `key` from its owner to the primary of
/// another shard (`pick` chooses among them), its keys moving over
/// `duration`; `on_moved` hears each key that moved. `None` when the
/// cluster has no other shard or cannot be read.
pub(super) async fn begin(
    deployment: &Deployment,
    key: &str,
    pick: u64,
    duration: Duration,
    on_moved: impl Fn(String, usize, usize) + Send + 'static,
) -> Result<Option<Migration>, ChaosError> {
    let announced = announced_ports(deployment);
    begin_among(
        &node_ports(deployment),
        &announced,
        key,
        pick,
        duration,
        on_moved,
    )
    .await
}

/// A deployment's node ports: (port, running) by index, and the
/// (announced, real) port pairs ([`cluster_nodes`]).
pub(super) type NodePorts = (Vec<(u16, bool)>, Vec<(u16, u16)>);

/// The node ports of `deployment` (port, running), by index, and what
/// each announces ([`cluster_nodes`]).
pub(super) fn ports_of(deployment: &Deployment) -> NodePorts {
    (node_ports(deployment), announced_ports(deployment))
}

/// Which slot moves, from which node, to which: the slot of `key`, from
/// its owner to the primary of another shard (`pick` chooses among them,
/// as the simulator draws among the other shards).
pub(super) struct Plan {
    pub slot: u16,
    /// The owner's index in the deployment.
    pub from_index: usize,
    pub owner: ClusterNode,
    /// The target's index in the deployment.
    pub to_index: usize,
    pub target: ClusterNode,
    /// The other primaries' ports.
    pub others: Vec<u16>,
}

/// The [`Plan`] for `key` on the cluster whose nodes are `ports` (port,
/// running), by index, announcing `announced` ([`cluster_nodes`]); `None`
/// when the cluster has no other shard or cannot be read.
pub(super) async fn plan(
    ports: &[(u16, bool)],
    announced: &[(u16, u16)],
    key: &str,
    pick: u64,
) -> Option<Plan> {
    let slot = lock_core::internal::cluster::slot_of(key);
    let nodes = cluster_nodes(ports, announced).await?;
    let index_of = |port: u16| ports.iter().position(|&(p, _)| p == port);
    let owner = nodes.iter().find(|n| n.primary && n.owns(slot))?;
    let targets: Vec<&ClusterNode> = nodes
        .iter()
        .filter(|n| n.primary && !n.slots.is_empty() && n.id != owner.id)
        .collect();
    if targets.is_empty() {
        return None;
    }
    let target = targets[(pick % targets.len() as u64) as usize];
    Some(Plan {
        slot,
        from_index: index_of(owner.port)?,
        owner: owner.clone(),
        to_index: index_of(target.port)?,
        target: target.clone(),
        others: nodes
            .iter()
            .filter(|n| n.primary && n.id != owner.id && n.id != target.id)
            .map(|n| n.port)
            .collect(),
    })
}

/// [`begin`] on the cluster whose nodes are `ports` (port, running), by
/// index, announcing `announced` ([`cluster_nodes`]).
async fn begin_among(
    ports: &[(u16, bool)],
    announced: &[(u16, u16)],
    key: &str,
    pick: u64,
    duration: Duration,
    on_moved: impl Fn(String, usize, usize) + Send + 'static,
) -> Result<Option<Migration>, ChaosError> {
    let Some(Plan {
        slot,
        from_index,
        owner,
        to_index,
        target,
        others,
    }) = plan(ports, announced, key, pick).await
    else {
        return Ok(None);
    };
    let mut to_conn = admin(target.port).await?;
    let mut from_conn = admin(owner.port).await?;
    setslot(slot, "IMPORTING", &owner.id)
        .query_async::<()>(&mut to_conn)
        .await
        .map_err(|e| cluster_error("SETSLOT IMPORTING", &e))?;
    setslot(slot, "MIGRATING", &target.id)
        .query_async::<()>(&mut from_conn)
        .await
        .map_err(|e| cluster_error("SETSLOT MIGRATING", &e))?;
    let keys: u32 = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query_async(&mut from_conn)
        .await
        .unwrap_or(0);
    let (from, to) = (owner.port, target.port);
    let start = tokio::time::Instant::now();
    let stepper = tokio::spawn(async move {
        // As the simulator spreads them: key k of n moves at k/(n+1) of
        // the duration.
        for step in 1..=keys {
            tokio::time::sleep_until(start + duration * step / (keys + 1)).await;
            if let Some(key) = migrate_one(slot, from, to).await {
                on_moved(key, from_index, to_index);
            }
        }
    });
    Ok(Some(Migration {
        slot,
        from: (from_index, owner.port, owner.id),
        to: (to_index, target.port, target.id),
        others,
        stepper,
    }))
}

/// Ends `migration`: moves what is left (each key through `on_moved`),
/// then gives the slot to the target on every primary.
pub(super) async fn finish(
    migration: Migration,
    on_moved: impl Fn(String, usize, usize),
) -> Result<(), ChaosError> {
    migration.stepper.abort();
    let (from_index, from, _) = migration.from;
    let (to_index, to, to_id) = migration.to;
    // A key per MIGRATE until none is left (the slot holds a handful).
    for _ in 0..1_000 {
        match migrate_one(migration.slot, from, to).await {
            Some(key) => on_moved(key, from_index, to_index),
            None => break,
        }
    }
    for port in [to, from].into_iter().chain(migration.others) {
        let Ok(mut conn) = admin(port).await else {
            // A node that is down hears of the new owner over the bus.
            continue;
        };
        setslot(migration.slot, "NODE", &to_id)
            .query_async::<()>(&mut conn)
            .await
            .map_err(|e| cluster_error("SETSLOT NODE", &e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Three primaries without replicas (the `servers` crate's cluster, as
    /// `redis-cli --cluster create` makes one), each owning a third of the
    /// slots; killed on drop. Its client ports, by index, and each node
    /// as running.
    async fn test_cluster() -> (servers::Cluster, Vec<u16>, Vec<(u16, bool)>) {
        let cluster = tokio::task::spawn_blocking(|| {
            let binaries = servers::Binaries::on_path().unwrap_or_else(|error| panic!("{error}"));
            servers::Cluster::start(&binaries, &servers::cluster::ClusterSetup::new(3, 0))
                .unwrap_or_else(|error| panic!("{error}"))
        })
        .await
        .expect("the cluster's start");
        let ports: Vec<u16> = cluster.nodes().iter().map(|node| node.port()).collect();
        let running = ports.iter().map(|&port| (port, true)).collect();
        (cluster, ports, running)
    }

    /// `GET key` on `port` as a plain client sends it (no `ASKING`).
    async fn get(port: u16, key: &str) -> redis::RedisResult<Option<String>> {
        let mut conn = admin(port).await.unwrap();
        redis::cmd("GET").arg(key).query_async(&mut conn).await
    }

    #[tokio::test]
    async fn a_migrated_slots_keys_end_on_the_target_and_are_read_there() {
        let (_cluster, ports, running) = test_cluster().await;
        let names = crate::client::key_names();
        let slot = lock_core::internal::cluster::slot_of(&names.lock);
        // The namespace's fence floor of the lock's slot moves with it.
        let floor = lock_core::internal::cluster_fence_floor(crate::client::NAMESPACE, &names.lock);
        let nodes = cluster_nodes(&running, &[]).await.unwrap();
        let owner = nodes.iter().find(|n| n.owns(slot)).unwrap().port;
        let from = ports.iter().position(|&p| p == owner).unwrap();
        let mut conn = admin(owner).await.unwrap();
        for (key, value) in [(&names.lock, "token"), (&floor, "17")] {
            redis::cmd("SET")
                .arg(key)
                .arg(value)
                .query_async::<()>(&mut conn)
                .await
                .unwrap();
        }
        let moved = Arc::new(Mutex::new(Vec::new()));
        let heard = Arc::clone(&moved);
        let record = move |key, from, to| heard.lock().unwrap().push((key, from, to));
        let duration = Duration::from_millis(300);
        let migration = begin_among(&running, &[], &names.lock, 1, duration, record.clone())
            .await
            .unwrap()
            .expect("another shard to move to");
        tokio::time::sleep(duration / 2).await;
        finish(migration, record).await.unwrap();
        let moved = moved.lock().unwrap().clone();
        let to = moved.first().expect("a key moved").2;
        assert_ne!(to, from);
        let mut keys: Vec<&str> = moved.iter().map(|(key, _, _)| key.as_str()).collect();
        keys.sort_unstable();
        let mut expected = [names.lock.as_str(), floor.as_str()];
        expected.sort_unstable();
        assert_eq!(keys, expected);
        assert!(
            moved.iter().all(|&(_, f, t)| (f, t) == (from, to)),
            "{moved:?}"
        );
        // The target serves the slot: a plain GET reads the keys there.
        let target = ports[to];
        assert_eq!(
            get(target, &names.lock).await.unwrap().as_deref(),
            Some("token")
        );
        assert_eq!(get(target, &floor).await.unwrap().as_deref(), Some("17"));
        // The source sends clients there, and so does the third node.
        for port in ports.iter().filter(|&&p| p != target) {
            let error = get(*port, &names.lock).await.unwrap_err();
            assert_eq!(error.code(), Some("MOVED"), "{error}");
            assert!(
                error.to_string().ends_with(&format!(":{target}")),
                "{error}"
            );
        }
    }

    #[test]
    fn a_cluster_nodes_line_gives_its_slots_and_skips_migrations() {
        let line =
            "07c3 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460 6000 [6001->-e7d1]";
        let node = parse_node(line).expect("a node line");
        assert_eq!(node.id, "07c3");
        assert_eq!(node.port, 7001);
        assert!(node.primary);
        assert!(node.owns(6000) && node.owns(0) && !node.owns(5461));
        assert_eq!(node.slots, [(0, 5460), (6000, 6000)]);
        let replica = parse_node("a1b2 127.0.0.1:7004@17004 slave 07c3 0 0 1 connected")
            .expect("a node line");
        assert_eq!(replica.of, "07c3");
        assert!(!replica.primary);
        let failed = parse_node("e7d1 127.0.0.1:7002@17002 master,fail - 0 0 2 connected")
            .expect("a node line");
        assert!(!failed.primary);
        assert!(failed.slots.is_empty());
        assert!(parse_node("garbage").is_none());
    }
}
