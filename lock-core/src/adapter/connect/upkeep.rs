//! Keeping one node's connection open: reconnecting with a backoff when it
//! closes, and where redis-rs's connection task runs.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::{Duration, Instant},
};

use super::{
    first::Opening,
    node::{Endpoint, Live, NodeSlot, Opened, open},
};

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

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
    connecting: Option<Opening>,
    reconnect_at: Option<Instant>,
    failures: u32,
    /// A connection was open once: the next one opened is a reconnect.
    was_open: bool,
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
    /// A connection was installed.
    pub(crate) opened: bool,
}

impl NodeUpkeep {
    /// The upkeep of a node whose first connection is `opened`; returns
    /// the connection to install in the node's slot.
    pub(crate) fn opened(endpoint: Endpoint, opened: Opened, tasks: Tasks) -> (Live, Self) {
        let generation = opened.live.generation;
        let upkeep = Self {
            endpoint,
            task: Some(ConnTask::new(opened.task, tasks)),
            generation,
            connecting: None,
            reconnect_at: None,
            failures: 0,
            was_open: true,
        };
        (opened.live, upkeep)
    }

    /// The upkeep of a node whose first connection is still `opening`: the
    /// attempt goes on here, and what it opens is installed as this
    /// upkeep's own attempts are (a failure retries with the backoff).
    pub(crate) fn opening(endpoint: Endpoint, opening: Opening) -> Self {
        Self {
            endpoint,
            task: None,
            generation: 0,
            connecting: Some(opening),
            reconnect_at: None,
            failures: 0,
            was_open: false,
        }
    }

    /// The upkeep of a node that did not answer at connect: retried at `now`.
    pub(crate) fn reconnecting(endpoint: Endpoint, now: Instant) -> Self {
        Self {
            endpoint,
            task: None,
            generation: 0,
            connecting: None,
            reconnect_at: Some(now),
            failures: 0,
            was_open: false,
        }
    }

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
                    outcome.opened = true;
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

fn reconnect_backoff(failures: u32) -> Duration {
    Duration::from_millis(50)
        .saturating_mul(1 << failures.min(5))
        .min(Duration::from_secs(1))
}
