//! The driver's part of a Redis Cluster: connections to every known node,
//! and the slot table read again when asked and every few seconds.

use std::{
    collections::BTreeMap,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::{Duration, Instant},
};

use crate::adapter::{
    connect::{
        dial::NodeAddress,
        error::ConnectError,
        slots::SlotMap,
        upkeep::{NodeUpkeep, Tasks},
    },
    lock::timer::DeadlineTimer,
    wire::route::{
        ClusterNode, ClusterRouter, REFRESH_AT_MOST_EVERY, REFRESH_EVERY, fetch_map, read_map,
    },
};

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The driver's part: connections to every known node, and the table.
pub(crate) struct ClusterUpkeep {
    router: Arc<ClusterRouter>,
    nodes: BTreeMap<NodeAddress, NodeUpkeep>,
    refreshing: Option<BoxFuture<Result<SlotMap, ConnectError>>>,
    last_refresh: Option<Instant>,
    timer: DeadlineTimer,
    timeout: Duration,
    tasks: Tasks,
}

impl ClusterUpkeep {
    pub(crate) fn new(
        router: Arc<ClusterRouter>,
        timeout: Duration,
        tasks: Tasks,
        now: Instant,
    ) -> Self {
        Self {
            router,
            nodes: BTreeMap::new(),
            refreshing: None,
            last_refresh: Some(now),
            timer: DeadlineTimer::new(),
            timeout,
            tasks,
        }
    }

    /// Keeps a connection to every node of the table and the table fresh;
    /// returns how many connections were reopened, and whether any
    /// connection was opened.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>, now: Instant) -> (u32, bool) {
        self.router.driver.register(cx.waker());
        let nodes: Vec<Arc<ClusterNode>> = self.router.table().nodes.values().cloned().collect();
        let mut next: Option<Instant> = None;
        let mut changed = false;
        let mut failures = Vec::new();
        let mut reconnects = 0;
        let mut opened = false;
        for node in &nodes {
            let upkeep = self
                .nodes
                .entry(node.address.clone())
                .or_insert_with(|| NodeUpkeep::new(node.endpoint.clone()));
            let outcome = upkeep.poll(cx, &node.slot, now, self.timeout, self.tasks);
            reconnects += u32::from(outcome.reconnected);
            opened |= outcome.opened;
            if let Some(at) = outcome.reconnect_at {
                next = Some(next.map_or(at, |next| next.min(at)));
            }
            if outcome.changed {
                changed = true;
                failures.push((node.address.clone(), upkeep.failures()));
                if upkeep.failures() > 0 {
                    // A node we cannot reach may have failed over.
                    self.router.table().refresh_wanted = true;
                }
            }
        }
        if !failures.is_empty() {
            let mut table = self.router.table();
            for (address, count) in failures {
                table.failures.insert(address, count);
            }
        }
        // The slot table.
        if let Some(refreshing) = &mut self.refreshing
            && let Poll::Ready(result) = refreshing.as_mut().poll(cx)
        {
            self.refreshing = None;
            self.last_refresh = Some(now);
            match result {
                Ok(map) => {
                    self.router.install(&map);
                    changed = true;
                    cx.waker().wake_by_ref();
                }
                Err(error) => tracing::debug!(%error, "reading the slot table failed"),
            }
        }
        if self.refreshing.is_none() {
            let wanted = std::mem::take(&mut self.router.table().refresh_wanted);
            let earliest = self.last_refresh.map(|at| at + REFRESH_AT_MOST_EVERY);
            let periodic = self.last_refresh.map(|at| at + REFRESH_EVERY);
            if (wanted && earliest.is_none_or(|at| at <= now))
                || periodic.is_some_and(|at| at <= now)
            {
                self.start_refresh();
            } else {
                if wanted {
                    // Keep the wish until the earliest allowed refresh.
                    self.router.table().refresh_wanted = true;
                }
                let due = if wanted { earliest } else { periodic };
                if let Some(at) = due {
                    next = Some(next.map_or(at, |next| next.min(at)));
                }
            }
        }
        if changed {
            self.router.changed.notify_waiters();
        }
        self.timer.poll_at(cx, next, now);
        (reconnects, opened)
    }

    fn start_refresh(&mut self) {
        let router = Arc::clone(&self.router);
        let timeout = self.timeout;
        self.refreshing = Some(Box::pin(async move {
            let (live, candidates) = router.any_node();
            if let Some(live) = live {
                let mut conn = live.conn;
                let origin = candidates
                    .first()
                    .map(|address| address.host.clone())
                    .unwrap_or_default();
                let read = tokio::time::timeout(timeout, read_map(&mut conn, &origin, router.tls));
                if let Ok(Ok(map)) = read.await
                    && !map.shards().is_empty()
                {
                    return Ok(map);
                }
            }
            fetch_map(
                router.dialer.as_ref(),
                &router.redis,
                &candidates,
                router.tls,
                timeout,
            )
            .await
        }));
    }
}
