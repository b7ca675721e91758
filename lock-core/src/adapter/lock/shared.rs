//! What every clone of a [`Locker`](crate::Locker), every guard and the
//! driver share: the nodes' connections, the injection points, the
//! waiters of each lock channel.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use futures_util::task::AtomicWaker;

use super::{metrics::Metrics, waiters::Waiters};
use crate::adapter::{
    connect::{
        connector::{Clock, Entropy, Observer},
        node::{CheckTarget, NodeSlot},
    },
    wire::{batch::Batcher, route::ClusterRouter},
};

pub(crate) struct Shared {
    /// Locks are Redlock quorums over every node (else node 0 alone).
    pub(crate) redlock: bool,
    pub(crate) nodes: Vec<NodeSlot>,
    /// Each node's open batch (group commit).
    pub(crate) batchers: Vec<Arc<Batcher>>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) entropy: Arc<dyn Entropy>,
    pub(crate) observer: Option<Observer>,
    /// The metrics handles (nothing without the `metrics` feature).
    pub(crate) metrics: Metrics,
    /// Slot routing, in Redis Cluster mode.
    pub(crate) cluster: Option<Arc<ClusterRouter>>,
    pub(crate) waiters: Waiters,
    /// The nodes the deployment check reaches (outside a cluster, whose
    /// primaries come from the slot table).
    pub(crate) check_targets: Vec<CheckTarget>,
    /// Bounds each connection attempt, handshake included.
    pub(crate) connect_timeout: Duration,
    /// Wakes the driver: a connection broke, the watchdog has work, a
    /// channel needs (un)subscribing.
    driver: AtomicWaker,
    next_lock: AtomicU64,
}

impl Shared {
    pub(crate) fn new(
        redlock: bool,
        nodes: usize,
        clock: Arc<dyn Clock>,
        entropy: Arc<dyn Entropy>,
        observer: Option<Observer>,
    ) -> Self {
        Self {
            redlock,
            // Redlock's waiters retry on their backoff and never subscribe:
            // its releases publish nothing.
            nodes: (0..nodes)
                .map(|_| NodeSlot::with_quiet_release(redlock))
                .collect(),
            batchers: (0..nodes).map(|_| Arc::new(Batcher::default())).collect(),
            clock,
            entropy,
            observer,
            metrics: Metrics::new(),
            cluster: None,
            waiters: Waiters::default(),
            check_targets: Vec::new(),
            connect_timeout: Duration::from_secs(5),
            driver: AtomicWaker::new(),
            next_lock: AtomicU64::new(0),
        }
    }

    /// A fresh id for a lock of this locker.
    pub(crate) fn next_lock_id(&self) -> u64 {
        self.next_lock.fetch_add(1, Ordering::Relaxed)
    }

    /// Asks the driver to look at its work again.
    pub(crate) fn wake_driver(&self) {
        self.driver.wake();
    }

    /// Registers the driver's waker.
    pub(crate) fn register_driver(&self, waker: &std::task::Waker) {
        self.driver.register(waker);
    }

    /// Drops `node`'s connection, whatever its generation, and has the
    /// driver open a new one (the primary moved).
    pub(crate) fn break_node(&self, node: usize) {
        if let Some(generation) = self.nodes.get(node).and_then(NodeSlot::generation) {
            self.break_connection(node, generation);
        }
    }

    /// Drops `node`'s connection if it is still `generation`, and has the
    /// driver open a new one.
    pub(crate) fn break_connection(&self, node: usize, generation: u64) {
        if self
            .nodes
            .get(node)
            .is_some_and(|slot| slot.break_generation(generation))
        {
            tracing::debug!(node, generation, "dropping the connection");
            self.wake_driver();
        }
    }
}
