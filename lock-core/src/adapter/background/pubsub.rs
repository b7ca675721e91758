//! Wake-ups: a release publishes on its lock's channel, and every acquire
//! waiting on that lock retries at once instead of at its backoff timer.
//!
//! [`Waiters`] is shared: an acquire that meets another owner enters its
//! lock's channel and waits on its [`Notify`]; the first waiter of a
//! channel asks the driver to subscribe, the last one to leave to
//! unsubscribe. The driver's [`Subscriber`] owns the pub/sub connection
//! and, for each announcement, wakes that channel's waiters directly.
//!
//! Wake-ups are an optimisation: a waiter that misses one (the connection
//! was down, the release came before the subscription) still retries on
//! its backoff timer. To close the gap between a waiter's contended reply
//! and its subscription, every confirmed subscription wakes its channel's
//! waiters once.
//!
//! A connection to a node that died silently (a crashed host, a cut
//! network: no FIN, no reset) never ends on its own, and a subscription
//! sent into it is never confirmed. After a failover away from such a
//! node, every release is announced on the new primary while the waiters
//! listen on the dead one: they would wait out their backoff for every
//! grant, for as long as the kernel keeps the connection (minutes). So a
//! subscription not confirmed within the connect timeout, or a `PING`
//! (sent every [`PING_EVERY`] while anyone waits) not answered within it,
//! drops the connection, and the next one is opened through the endpoint's
//! connector, which reaches the node that serves now.

use std::{
    collections::BTreeSet,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use futures_util::{Stream, StreamExt, stream::FuturesUnordered};

use crate::adapter::{
    connect::{
        attempts::{ATTEMPT_DELAY, MAX_ATTEMPTS, staggered},
        node::Endpoint,
    },
    lock::shared::Shared,
};

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// How often the connection is checked with a `PING` while anyone waits.
/// A waiter listening on a dead connection misses its wake-ups until the
/// check fails: at most this plus the connect timeout.
pub(crate) const PING_EVERY: Duration = Duration::from_secs(1);

/// The driver's pub/sub connection.
pub(crate) struct Subscriber {
    endpoint: Endpoint,
    timeout: Duration,
    /// Channels the connection is subscribed to (or subscribing).
    subscribed: BTreeSet<String>,
    sink: Option<redis::aio::PubSubSink>,
    stream: Option<redis::aio::PubSubStream>,
    opening: Option<BoxFuture<Option<redis::aio::PubSub>>>,
    /// Subscribe calls in flight: (channel, whether it worked).
    subscribing: FuturesUnordered<BoxFuture<(String, bool)>>,
    /// Unsubscribe calls in flight: whether each worked.
    unsubscribing: FuturesUnordered<BoxFuture<bool>>,
    /// The next check of the connection: it waits [`PING_EVERY`], then
    /// sends a `PING`; whether it was answered in time.
    check: Option<BoxFuture<bool>>,
    /// The subscriptions must be compared with the waiters again (a new
    /// connection, or one being opened).
    needs_sync: bool,
    /// How long to wait before opening the connection again.
    retry_delay: Duration,
    /// A connection was open once: the next one opened is a reconnection.
    was_open: bool,
}

impl Subscriber {
    pub(crate) fn new(endpoint: Endpoint, timeout: Duration) -> Self {
        Self {
            endpoint,
            timeout,
            subscribed: BTreeSet::new(),
            sink: None,
            stream: None,
            opening: None,
            subscribing: FuturesUnordered::new(),
            unsubscribing: FuturesUnordered::new(),
            check: None,
            needs_sync: true,
            retry_delay: Duration::ZERO,
            was_open: false,
        }
    }

    /// Matches the subscriptions to the waiters, and wakes the waiters of
    /// every channel a release was announced on.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>, session: &Shared) {
        loop {
            self.reconcile(session);
            let mut progressed = false;
            if let Some(opening) = &mut self.opening
                && let Poll::Ready(opened) = opening.as_mut().poll(cx)
            {
                self.opening = None;
                progressed = true;
                match opened {
                    Some(pubsub) => {
                        let (sink, stream) = pubsub.split();
                        self.sink = Some(sink);
                        self.stream = Some(stream);
                        self.retry_delay = Duration::ZERO;
                        if self.was_open {
                            session.metrics.pubsub_reconnected();
                        }
                        self.was_open = true;
                        // Subscribe afresh to whatever is waited on now.
                        self.subscribed.clear();
                        self.needs_sync = true;
                    }
                    None => {
                        self.retry_delay = Duration::from_millis(200);
                        self.needs_sync = true;
                    }
                }
            }
            while let Poll::Ready(Some((channel, ok))) = self.subscribing.poll_next_unpin(cx) {
                progressed = true;
                if ok {
                    // Close the gap between the contended reply and the
                    // subscription: a release in between went unheard.
                    session.waiters.wake(&channel);
                } else {
                    self.reset();
                }
            }
            while let Poll::Ready(Some(ok)) = self.unsubscribing.poll_next_unpin(cx) {
                progressed = true;
                if !ok {
                    self.reset();
                }
            }
            progressed |= self.poll_check(cx);
            if let Some(stream) = &mut self.stream {
                loop {
                    match Pin::new(&mut *stream).poll_next(cx) {
                        Poll::Ready(Some(message)) => {
                            progressed = true;
                            session.waiters.wake(message.get_channel_name());
                        }
                        Poll::Ready(None) => {
                            progressed = true;
                            self.reset();
                            break;
                        }
                        Poll::Pending => break,
                    }
                }
            }
            if !progressed {
                return;
            }
        }
    }

    /// Subscribes to channels that gained waiters, unsubscribes from those
    /// that lost them, and opens the connection when someone waits.
    fn reconcile(&mut self, session: &Shared) {
        let wanted: BTreeSet<String> = {
            let mut channels = session.waiters.channels();
            if !channels.dirty && !self.needs_sync {
                return;
            }
            channels.dirty = false;
            channels.waiting.keys().cloned().collect()
        };
        let Some(sink) = &self.sink else {
            if !wanted.is_empty() && self.opening.is_none() {
                self.open_after(self.retry_delay);
            }
            // Compare again once the connection is open.
            self.needs_sync = true;
            return;
        };
        self.needs_sync = false;
        let timeout = self.timeout;
        for channel in wanted.difference(&self.subscribed) {
            let mut sink = sink.clone();
            let channel = channel.clone();
            self.subscribing.push(Box::pin(async move {
                // Unconfirmed in time: the connection is dead (module docs).
                let confirmed = tokio::time::timeout(timeout, sink.subscribe(&channel)).await;
                (channel, matches!(confirmed, Ok(Ok(()))))
            }));
        }
        for channel in self.subscribed.difference(&wanted) {
            let mut sink = sink.clone();
            let channel = channel.clone();
            self.unsubscribing.push(Box::pin(async move {
                let confirmed = tokio::time::timeout(timeout, sink.unsubscribe(&channel)).await;
                matches!(confirmed, Ok(Ok(())))
            }));
        }
        self.subscribed = wanted;
    }

    /// Checks the open connection while anyone waits on it: starts the
    /// next check, and drops the connection when one went unanswered.
    /// Returns whether a check ended.
    fn poll_check(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(sink) = &self.sink else {
            self.check = None;
            return false;
        };
        if self.subscribed.is_empty() {
            // Nobody waits: nothing is missed on a dead connection, and
            // the next subscription is checked by its confirmation.
            self.check = None;
            return false;
        }
        let check = self.check.get_or_insert_with(|| {
            let (mut sink, timeout) = (sink.clone(), self.timeout);
            Box::pin(async move {
                tokio::time::sleep(PING_EVERY).await;
                let answer = tokio::time::timeout(timeout, sink.ping::<redis::Value>()).await;
                matches!(answer, Ok(Ok(_)))
            })
        });
        let Poll::Ready(answered) = check.as_mut().poll(cx) else {
            return false;
        };
        self.check = None;
        if !answered {
            self.reset();
        }
        true
    }

    /// Opens the connection after `delay`.
    fn open_after(&mut self, delay: Duration) {
        let (endpoint, timeout) = (self.endpoint.clone(), self.timeout);
        self.opening = Some(Box::pin(async move {
            tokio::time::sleep(delay).await;
            // Staggered as the locks' connections are: one begun in a cut
            // is overtaken by a fresh attempt once it heals.
            let open = staggered(ATTEMPT_DELAY, MAX_ATTEMPTS, || async {
                let stream = endpoint.connector.connect().await.map_err(drop)?;
                redis::aio::PubSub::new(&endpoint.redis, stream)
                    .await
                    .map_err(drop)
            });
            tokio::time::timeout(timeout, open)
                .await
                .ok()
                .and_then(Result::ok)
        }));
    }

    /// Forgets the connection; the next poll reopens it if anyone waits.
    fn reset(&mut self) {
        self.sink = None;
        self.stream = None;
        self.subscribed.clear();
        self.subscribing = FuturesUnordered::new();
        self.unsubscribing = FuturesUnordered::new();
        self.check = None;
        self.retry_delay = Duration::from_millis(50);
        self.needs_sync = true;
    }
}
