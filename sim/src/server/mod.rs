//! The simulated servers: a Redis (or Valkey) node, its sentinels and its
//! cluster bus. (Named `server`, so that in this crate `redis` is the
//! `redis` crate alone.)
//!
//! A node: RESP over turmoil TCP, expiry on the node's own
//! clock, asynchronous primary → replica replication, failover, restart
//! without persistence or with an AOF (fsynced every second or on every
//! write), and BUSY stretches.
//!
//! The shape follows mini-redis: [`frame`] frames bytes into commands
//! (check-then-parse with the `redis-protocol` crate), [`conn`] is the one
//! connection loop (a node's and a sentinel's), [`cmd`] parses and applies
//! each command, one family a file, [`db`] holds the keyspace and its
//! expiry and nothing else, [`scripts`] runs lock-core's Lua in Lua 5.1,
//! [`replication`] moves writes from a primary to its replicas.
//!
//! Everything the world controls from outside (role, clock, BUSY) and
//! everything the checkers read (the oracle [`NodeHandle::peek`]) lives in a
//! [`NodeHandle`], shared with the host's tasks. turmoil runs every host on
//! one thread, so an `Rc<RefCell<..>>` is enough; no borrow is held across
//! an `.await`.
//!
//! Imports run one way. [`node`] holds the node's state and the
//! transitions its siblings share, and imports none of them but the
//! storage it keeps ([`db`], the subscriptions of [`cmd::pubsub`]);
//! [`cluster`] holds the slot table and knows no node; the files that run
//! a node ([`conn`], [`cmd`], [`replication`], [`bus`]) import those.
//! This file only declares the modules, re-exports the node's types, and
//! holds the glue that needs them all: [`serve`], and joining nodes to a
//! cluster ([`ClusterHandle::attach`]).

pub mod bus;
pub mod cluster;
pub mod cmd;
pub mod conn;
pub mod db;
pub mod flavour;
pub mod frame;
pub mod keyspace;
pub mod node;
pub mod replication;
pub mod scripts;
pub mod sentinel;

use std::{rc::Rc, time::Duration};

use crate::net::redis_host;

pub use flavour::Flavour;
pub use node::{
    CLOCK_BASE_UNIX_MS, DeposedAcks, Node, NodeConfig, NodeHandle, PORT, Redirects, Role,
};

use cluster::ClusterHandle;

impl ClusterHandle {
    /// A cluster of `shards` shards of `1 + replicas` nodes, with its
    /// nodes attached (each replica of its shard's primary, without lag),
    /// not yet serving: for tests that build a cluster by hand.
    pub fn with_nodes(shards: usize, replicas: usize) -> (Self, Vec<NodeHandle>) {
        let cluster = Self::new(shards, replicas);
        let nodes: Vec<NodeHandle> = (0..shards * (1 + replicas))
            .map(|index| {
                let primary = cluster.primary_of(cluster.shard_of(index));
                NodeHandle::new(NodeConfig {
                    index,
                    replica_of: (primary != index).then(|| redis_host(primary)),
                    replication_lag: None,
                    seed: 1,
                    flavour: Flavour::default(),
                    persistence: crate::config::Persistence::None,
                })
            })
            .collect();
        cluster.attach(&nodes);
        (cluster, nodes)
    }

    /// Makes `nodes` (all of them, by index) members of this cluster.
    pub fn attach(&self, nodes: &[NodeHandle]) {
        let peers: Vec<_> = nodes.iter().map(|node| Rc::downgrade(&node.0)).collect();
        for node in nodes {
            let mut node = node.0.borrow_mut();
            node.cluster = Some(self.clone());
            node.peers.clone_from(&peers);
        }
    }
}

/// Runs the node's host: comes up with what its persistence kept (empty
/// without), starts its replication loop (and its AOF fsync cron with
/// `aof-everysec`), and serves connections.
pub async fn serve(node: NodeHandle) -> turmoil::Result {
    node.reset();
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", PORT)).await?;
    tokio::task::spawn_local(replication::run_replica(node.clone()));
    tokio::task::spawn_local(expire_cron(node.clone()));
    if node.0.borrow().persistence == crate::config::Persistence::AofEverysec {
        tokio::task::spawn_local(aof_cron(node.clone()));
    }
    if node.0.borrow().cluster.is_some() {
        tokio::task::spawn_local(bus::serve(node.clone()));
    }
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::task::spawn_local(conn::serve(node.clone(), stream));
    }
}

/// Redis's active expiry (`serverCron` at `hz 10`): on the cron's ticks,
/// every 100 ms of simulated time from the node's start, a primary deletes
/// the keys its clock has passed and replicates each deletion as a `DEL`.
/// A replica deletes none itself (it hides an expired key from reads, as
/// the keyspace's lazy expiry does, and waits for its primary's `DEL`),
/// and a busy node's cron waits for the script to end, as Redis's does.
///
/// The `DEL`s matter under a cut: a primary cut off from its replicas
/// still expires the lock keys nobody can renew there, the `DEL`s go into
/// the cut, and TCP delivers everything the primary writes after the heal
/// behind them, at their first retransmission after the heal, up to
/// seconds later. A key granted in that gap is not on a replica promoted
/// meanwhile (`scenarios/README.md`, "Active expiry under a cut").
///
/// It wakes only on the tick that finds a key due (or when the keyspace,
/// the role or the clock changes, to look again), not on every tick: idle
/// skipping jumps the ticks between. Deterministic: the turmoil clock, no
/// randomness.
async fn expire_cron(node: NodeHandle) {
    let start = crate::clock::now();
    let changed = Rc::clone(&node.0.borrow().keyspace_changed);
    // The last tick that ran: each runs once.
    let mut last: Option<Duration> = None;
    loop {
        let now = crate::clock::now();
        let wake = {
            let state = node.0.borrow();
            (state.role == Role::Primary)
                .then(|| state.earliest_expiry(now))
                .flatten()
                .map(|due| {
                    let after = last.map_or(Duration::ZERO, |at| at + Duration::from_nanos(1));
                    cron_tick(start, due.max(state.busy_until).max(after))
                })
        };
        let Some(at) = wake else {
            changed.notified().await;
            continue;
        };
        // Biased: tokio's select would otherwise draw which ready branch
        // goes first from a random number the seed does not govern.
        tokio::select! {
            biased;
            () = tokio::time::sleep(at.saturating_sub(now)) => {}
            () = changed.notified() => continue,
        }
        last = Some(at);
        let now = crate::clock::now();
        let runs = {
            let state = node.0.borrow();
            state.role == Role::Primary && now >= state.busy_until
        };
        if runs {
            node.expire_due(now);
        }
    }
}

/// The expiry cron's period (`hz 10`).
const CRON_PERIOD: Duration = Duration::from_millis(100);

/// The first tick of a cron started at `start` at or after `at`.
fn cron_tick(start: Duration, at: Duration) -> Duration {
    let since = at.saturating_sub(start).as_nanos();
    let period = CRON_PERIOD.as_nanos();
    let ticks = since.div_ceil(period);
    start + Duration::from_nanos(u64::try_from(ticks * period).unwrap_or(u64::MAX))
}

/// `appendfsync everysec`: the server's cron runs every 100 ms (`hz 10`)
/// of simulated time from the node's start; it fsyncs every tenth tick.
/// A `WAITAOF` waiting for the local count is answered at that fsync, or,
/// on a flavour that [acknowledges unsynced writes](Flavour::acks_unsynced_aof),
/// at the next pass of the event loop ([`NodeHandle::loop_pass`]: a tick,
/// or any client's next command), with nothing fsynced. Deterministic: the
/// turmoil clock, no randomness.
async fn aof_cron(node: NodeHandle) {
    for tick in 1_u64.. {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let synced = {
            let mut state = node.0.borrow_mut();
            if !tick.is_multiple_of(10) {
                drop(state);
                node.loop_pass();
                continue;
            }
            state.fsync();
            Rc::clone(&state.aof_synced)
        };
        synced.notify_waiters();
    }
}
