//! The locker's driver: the one future that does the background work —
//! keeping each node's connection open (and reopening it when a caller
//! finds it broken), the pub/sub subscriptions that wake waiters, and the
//! watchdog.
//!
//! It is not on the hot path: acquire and release run in the caller's task
//! (see `drive`). [`LockerBuilder::connect`](crate::LockerBuilder::connect)
//! returns it with redis-rs's connection tasks inside, so that whoever
//! polls it (a simulator's freeze wrapper) stops everything the locker does
//! by not polling it; [`Locker::connect`](crate::Locker::connect) spawns it
//! and the connection tasks on the current runtime.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Weak},
    task::{Context, Poll},
    time::{Duration, Instant},
};

use super::{
    ConnectError,
    follow::SentinelWatch,
    node::{Endpoint, NodeSlot, Opened, open},
    pubsub::Subscriber,
    route::ClusterUpkeep,
    session::Session,
    watchdog::Watchdog,
};

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Held by every [`Locker`](crate::Locker) and guard; the driver stops
/// once none is left and its work is done.
pub(crate) struct Alive {
    session: Arc<Session>,
}

impl Alive {
    pub(crate) fn new(session: Arc<Session>) -> Self {
        Self { session }
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        self.session.wake_driver();
    }
}

/// Where redis-rs's connection tasks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tasks {
    /// Inside the driver future.
    Inline,
    /// Spawned on the current tokio runtime.
    Spawned,
}

enum ConnTask {
    Inline(BoxFuture<()>),
    Spawned(tokio::task::JoinHandle<()>),
}

impl ConnTask {
    fn new(task: BoxFuture<()>, tasks: Tasks) -> Self {
        match tasks {
            Tasks::Inline => Self::Inline(task),
            Tasks::Spawned => Self::Spawned(tokio::spawn(task)),
        }
    }

    /// Ready when the socket closed.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            Self::Inline(task) => task.as_mut().poll(cx),
            Self::Spawned(handle) => Pin::new(handle).poll(cx).map(|_| ()),
        }
    }
}

impl Drop for ConnTask {
    fn drop(&mut self) {
        // Dropping the task closes the socket: calls still waiting on it
        // fail as connection failures.
        if let Self::Spawned(handle) = self {
            handle.abort();
        }
    }
}

/// One node's connection upkeep.
pub(crate) struct NodeUpkeep {
    endpoint: Endpoint,
    task: Option<ConnTask>,
    /// The generation of `task`.
    generation: u64,
    connecting: Option<BoxFuture<Result<Opened, ConnectError>>>,
    reconnect_at: Option<Instant>,
    failures: u32,
    /// A connection was open once: the next one opened is a reconnect.
    was_open: bool,
}

pub(crate) struct DriverTask {
    session: Arc<Session>,
    alive: Weak<Alive>,
    tasks: Tasks,
    connect_timeout: Duration,
    nodes: Vec<NodeUpkeep>,
    reconnect: Pin<Box<tokio::time::Sleep>>,
    reconnect_armed: Option<Instant>,
    subscriber: Option<Subscriber>,
    sentinel: Option<SentinelWatch>,
    cluster: Option<ClusterUpkeep>,
    watchdog: Watchdog,
}

impl DriverTask {
    /// A driver for `session`, whose nodes are `endpoints` with the first
    /// connections `opened` (one entry per node; `None` for a node that
    /// did not answer at connect, which is retried at once).
    pub(crate) fn new(
        session: Arc<Session>,
        alive: &Arc<Alive>,
        endpoints: Vec<Endpoint>,
        opened: Vec<Option<Opened>>,
        tasks: Tasks,
        connect_timeout: Duration,
    ) -> Self {
        let now = session.clock.now();
        let subscriber = (!session.redlock)
            .then(|| endpoints.first().cloned())
            .flatten()
            .map(|endpoint| Subscriber::new(endpoint, connect_timeout));
        let nodes = endpoints
            .into_iter()
            .zip(opened)
            .enumerate()
            .map(|(index, (endpoint, opened))| match opened {
                Some(opened) => {
                    let generation = opened.live.generation;
                    session.nodes[index].install(opened.live);
                    NodeUpkeep {
                        endpoint,
                        task: Some(ConnTask::new(opened.task, tasks)),
                        generation,
                        connecting: None,
                        reconnect_at: None,
                        failures: 0,
                        was_open: true,
                    }
                }
                None => NodeUpkeep {
                    endpoint,
                    task: None,
                    generation: 0,
                    connecting: None,
                    reconnect_at: Some(now),
                    failures: 0,
                    was_open: false,
                },
            })
            .collect();
        Self {
            session,
            alive: Arc::downgrade(alive),
            tasks,
            connect_timeout,
            nodes,
            reconnect: Box::pin(tokio::time::sleep(Duration::ZERO)),
            reconnect_armed: None,
            subscriber,
            sentinel: None,
            cluster: None,
            watchdog: Watchdog::new(),
        }
    }

    /// Keeps the connections and slot table of a Redis Cluster.
    pub(crate) fn with_cluster(mut self, upkeep: ClusterUpkeep) -> Self {
        self.cluster = Some(upkeep);
        self
    }

    /// Wakes waiters through `subscriber` (when the nodes cannot name one).
    pub(crate) fn with_subscriber(mut self, subscriber: Subscriber) -> Self {
        self.subscriber = Some(subscriber);
        self
    }

    /// Follows the sentinels' announcements (Sentinel mode).
    pub(crate) fn with_sentinel_watch(mut self, watch: Option<SentinelWatch>) -> Self {
        self.sentinel = watch;
        self
    }

    fn poll_nodes(&mut self, cx: &mut Context<'_>) {
        let now = self.session.clock.now();
        let mut next_reconnect: Option<Instant> = None;
        for (index, node) in self.nodes.iter_mut().enumerate() {
            let slot = &self.session.nodes[index];
            let outcome = node.poll(cx, slot, now, self.connect_timeout, self.tasks);
            if outcome.reconnected {
                self.session.metrics.reconnected();
            }
            if let Some(at) = outcome.reconnect_at {
                next_reconnect = Some(next_reconnect.map_or(at, |next| next.min(at)));
            }
        }
        if next_reconnect != self.reconnect_armed {
            if let Some(at) = next_reconnect {
                let wait = at.saturating_duration_since(now);
                self.reconnect
                    .as_mut()
                    .reset(tokio::time::Instant::now() + wait);
            }
            self.reconnect_armed = next_reconnect;
        }
        if self.reconnect_armed.is_some() && self.reconnect.as_mut().poll(cx).is_ready() {
            self.reconnect_armed = None;
            cx.waker().wake_by_ref();
        }
    }
}

/// What one round of upkeep did.
#[derive(Debug, Default)]
pub(crate) struct UpkeepOutcome {
    /// When the next connection attempt is due, if one is waiting.
    pub(crate) reconnect_at: Option<Instant>,
    /// A connection was installed, or an attempt failed.
    pub(crate) changed: bool,
    /// The connection installed replaces one that was open before.
    pub(crate) reconnected: bool,
}

impl NodeUpkeep {
    /// Upkeep for `endpoint`, connecting at once.
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            task: None,
            generation: 0,
            connecting: None,
            reconnect_at: None,
            failures: 0,
            was_open: false,
        }
    }

    /// Attempts to connect that failed in a row.
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    /// Keeps `slot`'s connection open: notices a closed socket or a
    /// connection a caller broke, reconnects with backoff, and installs
    /// what opens.
    pub(crate) fn poll(
        &mut self,
        cx: &mut Context<'_>,
        slot: &NodeSlot,
        now: Instant,
        timeout: Duration,
        tasks: Tasks,
    ) -> UpkeepOutcome {
        let mut outcome = UpkeepOutcome::default();
        if let Some(task) = &mut self.task
            && task.poll(cx).is_ready()
        {
            tracing::debug!(generation = self.generation, "redis connection closed");
            self.task = None;
            slot.break_generation(self.generation);
        }
        if self.task.is_some() && slot.generation() != Some(self.generation) {
            // A caller found the connection broken: close it.
            self.task = None;
        }
        if self.task.is_none() && self.connecting.is_none() {
            let at = *self.reconnect_at.get_or_insert(now);
            if at <= now {
                self.reconnect_at = None;
                self.generation += 1;
                self.connecting = Some(Box::pin(open(
                    self.endpoint.clone(),
                    timeout,
                    self.generation,
                )));
            } else {
                outcome.reconnect_at = Some(at);
            }
        }
        if let Some(connecting) = &mut self.connecting
            && let Poll::Ready(result) = connecting.as_mut().poll(cx)
        {
            self.connecting = None;
            outcome.changed = true;
            match result {
                Ok(opened) => {
                    tracing::debug!(generation = self.generation, "connected");
                    outcome.reconnected = std::mem::replace(&mut self.was_open, true);
                    self.failures = 0;
                    self.task = Some(ConnTask::new(opened.task, tasks));
                    slot.install(opened.live);
                    // The new connection may need polling at once.
                    cx.waker().wake_by_ref();
                }
                Err(error) => {
                    tracing::debug!(%error, "connecting failed");
                    self.failures += 1;
                    let at = now + reconnect_backoff(self.failures);
                    self.reconnect_at = Some(at);
                    outcome.reconnect_at = Some(at);
                }
            }
        }
        outcome
    }
}

impl Future for DriverTask {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.session.register_driver(cx.waker());
        this.poll_nodes(cx);
        if let Some(subscriber) = &mut this.subscriber {
            subscriber.poll(cx, &this.session);
        }
        if let Some(sentinel) = &mut this.sentinel {
            sentinel.poll(cx, &this.session);
        }
        if let Some(cluster) = &mut this.cluster {
            for _ in 0..cluster.poll(cx, this.session.clock.now()) {
                this.session.metrics.reconnected();
            }
        }
        this.watchdog.poll(cx, &this.session);
        if this.alive.strong_count() == 0
            && this.session.watchdog.is_idle()
            && !this.watchdog.is_busy()
        {
            tracing::debug!("locker driver stopped");
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

fn reconnect_backoff(failures: u32) -> Duration {
    Duration::from_millis(50)
        .saturating_mul(1 << failures.min(5))
        .min(Duration::from_secs(1))
}
