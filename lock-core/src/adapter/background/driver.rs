//! The locker's driver: the one future that does the background work —
//! keeping each node's connection open (and reopening it when a caller
//! finds it broken), the pub/sub subscriptions that wake waiters, and the
//! watchdog.
//!
//! It is not on the hot path: acquire and release run in the caller's task
//! (see `lock::run`). `LockerBuilder::connect`
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
    cluster_upkeep::ClusterUpkeep, follow::SentinelWatch, pubsub::Subscriber, watchdog::Watchdog,
};
use crate::adapter::{
    connect::{
        first::First,
        node::Endpoint,
        upkeep::{NodeUpkeep, Tasks},
    },
    lock::{session::Session, timer::DeadlineTimer},
};

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

/// The future that does a [`Locker`](crate::Locker)'s background work:
/// poll it to completion (`tokio::spawn` it) or no lock makes progress. It
/// finishes once the locker and all its guards are gone.
#[must_use = "the driver does nothing unless polled"]
pub struct Driver {
    session: Arc<Session>,
    alive: Weak<Alive>,
    tasks: Tasks,
    connect_timeout: Duration,
    nodes: Vec<NodeUpkeep>,
    reconnect: DeadlineTimer,
    subscriber: Option<Subscriber>,
    sentinel: Option<SentinelWatch>,
    cluster: Option<ClusterUpkeep>,
    watchdog: Watchdog,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver").finish_non_exhaustive()
    }
}

impl Driver {
    /// A driver for `session`, whose nodes are `endpoints` with their
    /// `first` connections (one entry per node): an open one is installed,
    /// an attempt still out goes on here, and a failed one is retried at
    /// once.
    pub(crate) fn new(
        session: Arc<Session>,
        alive: &Arc<Alive>,
        endpoints: Vec<Endpoint>,
        first: Vec<First>,
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
            .zip(first)
            .enumerate()
            .map(|(index, (endpoint, first))| match first {
                First::Opened(opened) => {
                    let (live, upkeep) = NodeUpkeep::opened(endpoint, opened, tasks);
                    session.nodes[index].install(live);
                    upkeep
                }
                First::Opening(opening) => NodeUpkeep::opening(endpoint, opening),
                First::Failed => NodeUpkeep::reconnecting(endpoint, now),
            })
            .collect();
        Self {
            session,
            alive: Arc::downgrade(alive),
            tasks,
            connect_timeout,
            nodes,
            reconnect: DeadlineTimer::new(),
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

    fn poll_nodes(&mut self, cx: &mut Context<'_>, now: Instant) {
        let mut next_reconnect: Option<Instant> = None;
        for (index, node) in self.nodes.iter_mut().enumerate() {
            let slot = &self.session.nodes[index];
            let outcome = node.poll(cx, slot, now, self.connect_timeout, self.tasks);
            if outcome.reconnected {
                self.session.metrics.reconnected();
            }
            if outcome.opened {
                self.session.watchdog.hurry_clean_ups(index, now);
            }
            if let Some(at) = outcome.reconnect_at {
                next_reconnect = Some(next_reconnect.map_or(at, |next| next.min(at)));
            }
        }
        self.reconnect.poll_at(cx, next_reconnect, now);
    }
}

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.session.register_driver(cx.waker());
        // One reading of the injected clock for the whole pass: every
        // part decides and arms its timer from it.
        let now = this.session.clock.now();
        this.poll_nodes(cx, now);
        if let Some(subscriber) = &mut this.subscriber {
            subscriber.poll(cx, &this.session);
        }
        if let Some(sentinel) = &mut this.sentinel {
            sentinel.poll(cx, &this.session, now);
        }
        if let Some(cluster) = &mut this.cluster {
            let (reconnects, opened) = cluster.poll(cx, now);
            for _ in 0..reconnects {
                this.session.metrics.reconnected();
            }
            if opened {
                // A cluster lock's machine has one node, whichever shard.
                this.session.watchdog.hurry_clean_ups(0, now);
            }
        }
        let shutting_down = this.alive.strong_count() == 0;
        if shutting_down {
            this.session.watchdog.abandon_clean_ups();
        }
        this.watchdog.poll(cx, &this.session, now);
        if shutting_down {
            // What the pass just answered may have turned to clean-up too.
            this.session.watchdog.abandon_clean_ups();
        }
        if shutting_down && this.session.watchdog.is_idle() && !this.watchdog.is_busy() {
            tracing::debug!("locker driver stopped");
            return Poll::Ready(());
        }
        Poll::Pending
    }
}
