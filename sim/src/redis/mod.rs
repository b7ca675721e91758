//! A simulated Redis node: RESP over turmoil TCP, expiry on the node's own
//! clock, asynchronous primary → replica replication, failover, restart
//! without persistence, and BUSY stretches.
//!
//! The shape follows mini-redis: [`conn`] frames bytes into commands
//! (check-then-parse with the `redis-protocol` crate), [`db`] holds the
//! keyspace, [`scripts`] runs lock-core's scripts, [`replication`] moves
//! writes from a primary to its replicas.
//!
//! Everything the world controls from outside (role, clock, BUSY) and
//! everything the checkers read (the oracle [`NodeHandle::peek`]) lives in a
//! [`NodeHandle`], shared with the host's tasks. turmoil runs every host on
//! one thread, so an `Rc<RefCell<..>>` is enough; no borrow is held across
//! an `.await`.

pub mod conn;
pub mod db;
pub mod replication;
pub mod scripts;

use std::{
    cell::RefCell,
    collections::{BTreeMap, BTreeSet},
    rc::Rc,
    time::Duration,
};

use redis_protocol::resp2::types::OwnedFrame as Frame;
use tokio::sync::mpsc::UnboundedSender;

use crate::{clock::ClockControl, config::DurationRange, rng::Rng};

use db::{Db, Effect, NodeTime};

/// The port every node listens on.
pub const PORT: u16 = 6379;

/// Unix time (ms) at which every node's clock reads local zero: 2026-01-01.
pub const CLOCK_BASE_UNIX_MS: i64 = 1_767_225_600_000;

/// How a node starts.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Its index (`redis-N`).
    pub index: usize,
    /// The primary it replicates, if it starts as a replica.
    pub replica_of: Option<String>,
    /// The delay before a replica applies each write.
    pub replication_lag: Option<DurationRange>,
    /// The seed of its lag draws.
    pub seed: u64,
}

/// A node's role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Accepts writes and streams them to replicas.
    Primary,
    /// Applies its primary's stream; refuses writes.
    Replica {
        /// The primary's host name.
        of: String,
    },
}

/// The node's state.
#[derive(Debug)]
pub struct Node {
    pub(crate) index: usize,
    pub(crate) clock: ClockControl,
    pub(crate) role: Role,
    pub(crate) db: Db,
    pub(crate) scripts: BTreeSet<String>,
    pub(crate) busy_until: Duration,
    /// Primary: writes produced so far. Replica: writes applied.
    pub(crate) offset: u64,
    /// Replica link id → offset it acknowledged.
    pub(crate) acked: BTreeMap<u64, u64>,
    /// Replica link id → where its stream goes.
    pub(crate) streams: BTreeMap<u64, UnboundedSender<(u64, Vec<Effect>)>>,
    /// Channel → connection id → push sender.
    pub(crate) subscribers: BTreeMap<Vec<u8>, BTreeMap<u64, UnboundedSender<Frame>>>,
    pub(crate) next_id: u64,
    pub(crate) lag: Option<DurationRange>,
    pub(crate) rng: Rng,
}

/// The world's and the host's shared handle on one node.
#[derive(Debug, Clone)]
pub struct NodeHandle(pub(crate) Rc<RefCell<Node>>);

impl NodeHandle {
    /// A node, not yet serving (the world starts its host with [`serve`]).
    pub fn new(config: NodeConfig) -> Self {
        Self(Rc::new(RefCell::new(Node {
            index: config.index,
            clock: ClockControl::default(),
            role: match config.replica_of {
                Some(of) => Role::Replica { of },
                None => Role::Primary,
            },
            db: Db::default(),
            scripts: BTreeSet::new(),
            busy_until: Duration::ZERO,
            offset: 0,
            acked: BTreeMap::new(),
            streams: BTreeMap::new(),
            subscribers: BTreeMap::new(),
            next_id: 0,
            lag: config.replication_lag,
            rng: Rng::new(config.seed),
        })))
    }

    /// The node's clock, for drift and jump faults.
    pub fn clock(&self) -> ClockControl {
        self.0.borrow().clock.clone()
    }

    /// The node's index.
    pub fn index(&self) -> usize {
        self.0.borrow().index
    }

    /// The node's role now.
    pub fn role(&self) -> Role {
        self.0.borrow().role.clone()
    }

    /// The replication offset: writes produced (primary) or applied (replica).
    pub fn offset(&self) -> u64 {
        self.0.borrow().offset
    }

    /// Makes the node a primary: it stops replicating and accepts writes.
    pub fn promote(&self) {
        self.0.borrow_mut().role = Role::Primary;
    }

    /// Makes the node a replica of `host` (it resyncs from it).
    pub fn replicate_from(&self, host: String) {
        self.0.borrow_mut().role = Role::Replica { of: host };
    }

    /// Answers every command with BUSY until true time `until`.
    pub fn busy_until(&self, until: Duration) {
        let mut node = self.0.borrow_mut();
        node.busy_until = node.busy_until.max(until);
    }

    /// The oracle: the string at `key` and its remaining ttl (ms) on the
    /// node's own clock at true time `now`, if the key is live.
    pub fn peek(&self, key: &str, now: Duration) -> Option<(String, Option<u64>)> {
        let node = self.0.borrow();
        let time = node.time_at(now);
        let value = node.db.get(key.as_bytes(), time).ok().flatten()?;
        let pttl = node.db.pttl(key.as_bytes(), time);
        Some((
            String::from_utf8_lossy(value).into_owned(),
            u64::try_from(pttl).ok(),
        ))
    }

    /// Forgets everything a process restart without persistence loses:
    /// data, scripts, replication links, subscriptions. Role and clock are
    /// configuration and stay.
    fn reset(&self) {
        let mut node = self.0.borrow_mut();
        node.db = Db::default();
        node.scripts.clear();
        node.offset = 0;
        node.acked.clear();
        node.streams.clear();
        node.subscribers.clear();
    }
}

impl Node {
    /// The node's clock reading at true time `now`.
    pub(crate) fn time_at(&self, now: Duration) -> NodeTime {
        let local_ns = self.clock.local_ns(now);
        let ms = CLOCK_BASE_UNIX_MS + (local_ns.div_euclid(1_000_000)) as i64;
        let us = CLOCK_BASE_UNIX_MS * 1000 + (local_ns.div_euclid(1_000)) as i64;
        NodeTime { ms, us }
    }

    /// Records a primary's write and streams it to every replica.
    pub(crate) fn propagate(&mut self, effects: Vec<Effect>) {
        if effects.is_empty() {
            return;
        }
        self.offset += 1;
        let offset = self.offset;
        self.streams
            .retain(|_, stream| stream.send((offset, effects.clone())).is_ok());
    }

    pub(crate) fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

/// Runs the node's host: comes up empty (no persistence), starts its
/// replication loop, and serves connections.
pub async fn serve(node: NodeHandle) -> turmoil::Result {
    node.reset();
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", PORT)).await?;
    tokio::task::spawn_local(replication::run_replica(node.clone()));
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::task::spawn_local(conn::handle(node.clone(), stream));
    }
}
