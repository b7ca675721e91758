//! Following a Sentinel-managed primary.
//!
//! [`SentinelConnector`] resolves the primary through the sentinels on
//! every connect (and confirms it with `ROLE`), so a reconnect after a
//! failover reaches the new primary. [`SentinelWatch`], part of the
//! locker's driver, listens for `+switch-master` on one sentinel at a
//! time and drops the connection to the old primary the moment a failover
//! is announced; while no sentinel can be subscribed to, it asks them
//! every second instead.
//!
//! Why it matters: after `SENTINEL FAILOVER` the old primary keeps
//! accepting writes from the clients still connected to it until the
//! sentinels reconfigure it (about ten seconds measured here). A renewal
//! sent there succeeds on a node that no longer decides anything. Moving
//! away at the announcement narrows that window; `wait_replicas` (or the
//! server's `min-replicas-to-write`) closes it, because the demoted
//! primary has lost its replica.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, PoisonError},
    task::{Context, Poll},
    time::{Duration, Instant},
};

use futures_util::Stream;

use crate::adapter::{
    connect::{
        dial::{Dialer, NodeAddress},
        sentinel::{Current, SentinelError, SentinelResolver, SwitchMaster},
    },
    lock::{session::Session, timer::DeadlineTimer},
};

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// How often the watch asks the sentinels while it cannot subscribe.
const RECHECK: Duration = Duration::from_secs(1);

/// The driver's watch on the sentinels.
pub(crate) struct SentinelWatch {
    resolver: SentinelResolver,
    dialer: Arc<dyn Dialer>,
    current: Current,
    /// The sentinel to subscribe to next.
    next: usize,
    opening: Option<BoxFuture<Option<redis::aio::PubSub>>>,
    stream: Option<redis::aio::PubSubStream>,
    /// Kept so the subscription stays open.
    _sink: Option<redis::aio::PubSubSink>,
    checking: Option<BoxFuture<Result<NodeAddress, SentinelError>>>,
    timer: DeadlineTimer,
    /// When to retry subscribing, or ask the sentinels again.
    due: Option<Instant>,
    timeout: Duration,
}

impl SentinelWatch {
    pub(crate) fn new(
        resolver: SentinelResolver,
        dialer: Arc<dyn Dialer>,
        current: Current,
        timeout: Duration,
    ) -> Self {
        Self {
            resolver,
            dialer,
            current,
            next: 0,
            opening: None,
            stream: None,
            _sink: None,
            checking: None,
            timer: DeadlineTimer::new(),
            due: None,
            timeout,
        }
    }

    fn current(&self) -> Option<NodeAddress> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Drops node 0's connection if the primary is now `master`.
    fn follow(&self, session: &Session, master: &NodeAddress) {
        if self.current().as_ref() != Some(master) {
            tracing::info!(%master, "the sentinels moved the primary: reconnecting");
            session.break_node(0);
        }
    }

    pub(crate) fn poll(&mut self, cx: &mut Context<'_>, session: &Session, now: Instant) {
        // Announcements on the subscription.
        let mut announced = Vec::new();
        if let Some(stream) = &mut self.stream {
            loop {
                match Pin::new(&mut *stream).poll_next(cx) {
                    Poll::Ready(Some(message)) => {
                        if let Some(switch) = SwitchMaster::from_message(&message)
                            && switch.master_name == self.resolver.master_name()
                        {
                            announced.push(switch.to);
                        }
                    }
                    Poll::Ready(None) => {
                        // That sentinel went away: try the next one.
                        self.stream = None;
                        self._sink = None;
                        self.due = Some(now);
                        break;
                    }
                    Poll::Pending => break,
                }
            }
        }
        for master in &announced {
            self.follow(session, master);
        }
        if let Some(opening) = &mut self.opening
            && let Poll::Ready(opened) = opening.as_mut().poll(cx)
        {
            self.opening = None;
            match opened {
                Some(pubsub) => {
                    let (sink, stream) = pubsub.split();
                    self._sink = Some(sink);
                    self.stream = Some(stream);
                    self.due = None;
                    // Announcements may have been missed meanwhile.
                    self.start_check();
                    cx.waker().wake_by_ref();
                }
                None => self.due = Some(now + RECHECK),
            }
        }
        if let Some(checking) = &mut self.checking
            && let Poll::Ready(result) = checking.as_mut().poll(cx)
        {
            self.checking = None;
            match result {
                Ok(master) => self.follow(session, &master),
                Err(error) => tracing::debug!(%error, "asking the sentinels failed"),
            }
        }
        if self.stream.is_none() && self.opening.is_none() {
            let due = *self.due.get_or_insert(now);
            if due <= now {
                self.start_subscribing();
                if self.checking.is_none() {
                    self.start_check();
                }
                self.due = Some(now + RECHECK);
                cx.waker().wake_by_ref();
            }
        }
        self.timer.poll_at(cx, self.due, now);
    }

    fn start_subscribing(&mut self) {
        let sentinels = self.resolver.sentinels();
        let Some(address) = sentinels.get(self.next % sentinels.len().max(1)).cloned() else {
            return;
        };
        self.next += 1;
        let dialer = Arc::clone(&self.dialer);
        let timeout = self.timeout;
        let info = self.resolver.sentinel_info().clone();
        self.opening = Some(Box::pin(async move {
            let open = async {
                let stream = dialer.dial(&address.host, address.port).await.ok()?;
                let mut pubsub = redis::aio::PubSub::new(&info, stream).await.ok()?;
                pubsub
                    .subscribe(crate::adapter::connect::sentinel::SWITCH_MASTER_CHANNEL)
                    .await
                    .ok()?;
                Some(pubsub)
            };
            tokio::time::timeout(timeout, open).await.ok().flatten()
        }));
    }

    fn start_check(&mut self) {
        let resolver = self.resolver.clone();
        let dialer = Arc::clone(&self.dialer);
        self.checking = Some(Box::pin(async move {
            resolver
                .resolve(dialer.as_ref())
                .await
                .map(|resolved| resolved.master)
        }));
    }
}
