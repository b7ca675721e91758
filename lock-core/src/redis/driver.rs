//! The driver: one future per [`Locker`](crate::Locker) that moves every
//! lock's commands to Redis and the replies, timeouts and wake-ups back.
//!
//! It owns no timing rule. Each lock is a [`LockMachine`] (or, over several
//! nodes, a [`RedlockMachine`]); after every input the driver drains it (the
//! machine's drain rule): commands go out on their node's multiplexed
//! connection, events go to the guards and waiters, and the machine's next
//! timeout goes into the timer index.
//!
//! Everything runs inside this one future, the redis-rs connection task
//! included, so a caller that stops polling it (a simulated process pause)
//! stops the watchdog too. The one exception is redis-rs's pub/sub reader,
//! which only buffers wake-up hints and never touches a lock.

use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
    pin::Pin,
    sync::Arc,
    task::Poll,
    time::{Duration, Instant},
};

use futures_util::{StreamExt, stream::FuturesUnordered};
use redis::{
    RedisConnectionInfo,
    aio::{MultiplexedConnection, PubSubSink},
};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::Instrument;

use super::{
    AcquireError, ConnectError, Connector, Observed, ReleaseError, connector::Environment,
    locker::Granted, wire,
};
use crate::{
    AcquireFailure, CommandId, Event, Failure, LockMachine, LockOptions, LostReason, RedlockError,
    RedlockMachine, ReleaseOutcome, Reply, scripts::KeyNames,
};

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What a guard sees of its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Held { valid_until: Instant },
    Lost(LostReason),
    Released,
}

/// Messages from lockers and guards to the driver.
pub(crate) enum Request {
    Acquire {
        key: String,
        opts: Box<LockOptions>,
        token: String,
        jitter_seed: u64,
        reply: oneshot::Sender<Result<Granted, AcquireError>>,
    },
    Release {
        id: u64,
        reply: Option<oneshot::Sender<Result<(), ReleaseError>>>,
    },
}

/// A lock's machine: one node, or a quorum over every node.
enum Machine {
    Single(LockMachine),
    Quorum(RedlockMachine),
}

impl Machine {
    fn acquire(&mut self, now: Instant) {
        // A fresh machine is idle, so acquire cannot be refused.
        let _ = match self {
            Self::Single(m) => m.acquire(now),
            Self::Quorum(m) => m.acquire(now),
        };
    }

    fn release(&mut self, now: Instant) {
        match self {
            Self::Single(m) => m.release(now),
            Self::Quorum(m) => m.release(now),
        }
    }

    fn handle_wakeup(&mut self, now: Instant) {
        match self {
            Self::Single(m) => m.handle_wakeup(now),
            Self::Quorum(m) => m.handle_wakeup(now),
        }
    }

    fn handle_reply(&mut self, now: Instant, node: usize, id: CommandId, reply: Reply) {
        match self {
            Self::Single(m) => m.handle_reply(now, id, reply),
            Self::Quorum(m) => m.handle_reply(now, node, id, reply),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        match self {
            Self::Single(m) => m.handle_timeout(now),
            Self::Quorum(m) => m.handle_timeout(now),
        }
    }

    fn poll_command(&mut self) -> Option<(usize, CommandId, crate::Command)> {
        match self {
            Self::Single(m) => m.poll_command().map(|(id, c)| (0, id, c)),
            Self::Quorum(m) => m.poll_command(),
        }
    }

    fn poll_event(&mut self) -> Option<Event> {
        match self {
            Self::Single(m) => m.poll_event(),
            Self::Quorum(m) => m.poll_event(),
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Self::Single(m) => m.poll_timeout(),
            Self::Quorum(m) => m.poll_timeout(),
        }
    }

    fn token(&self) -> &str {
        match self {
            Self::Single(m) => m.token(),
            Self::Quorum(m) => m.token(),
        }
    }

    fn keys(&self) -> &KeyNames {
        match self {
            Self::Single(m) => m.keys(),
            Self::Quorum(m) => m.keys(),
        }
    }

    fn is_acquiring(&self) -> bool {
        match self {
            Self::Single(m) => matches!(m.state(), crate::State::Acquiring(_)),
            Self::Quorum(m) => m.is_acquiring(),
        }
    }

    fn is_released(&self) -> bool {
        match self {
            Self::Single(m) => m.state().is_released(),
            Self::Quorum(m) => m.is_released(),
        }
    }
}

struct Lock {
    machine: Machine,
    key: String,
    wait: Duration,
    command_timeout: Duration,
    span: tracing::Span,
    acquire_reply: Option<oneshot::Sender<Result<Granted, AcquireError>>>,
    release_reply: Option<oneshot::Sender<Result<(), ReleaseError>>>,
    status: watch::Sender<Status>,
    lost: Option<LostReason>,
    /// The loss already known when the user asked to release.
    lost_before_release: Option<LostReason>,
    armed: Option<Instant>,
    subscribed: bool,
}

/// One completed Redis call: which lock, which node, which command, what
/// came back, and on which connection generation of that node it ran.
type Completion = (u64, usize, CommandId, Reply, u64);

struct Connection {
    conn: MultiplexedConnection,
    /// redis-rs's connection task, polled here rather than spawned.
    task: BoxFuture<()>,
    generation: u64,
}

/// Where a Redis server is and how to greet it.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) connector: Arc<dyn Connector>,
    pub(crate) redis: RedisConnectionInfo,
}

/// One Redis node's connection and its reconnect state.
struct Node {
    endpoint: Endpoint,
    connection: Option<Connection>,
    generation: u64,
    connecting: Option<BoxFuture<Result<Connection, ConnectError>>>,
    reconnect_at: Option<Instant>,
    reconnect_failures: u32,
}

/// Something that happened to a node's connection.
enum NodeChange {
    Closed(usize),
    Connected(usize, Result<Connection, ConnectError>),
}

/// Whether locks are single-node or Redlock quorums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Single,
    Redlock,
}

struct Driver {
    env: Environment,
    mode: Mode,
    connect_timeout: Duration,
    requests: mpsc::UnboundedReceiver<Request>,
    /// Used to hand guards a sender without keeping the channel open.
    weak_requests: mpsc::WeakUnboundedSender<Request>,
    locks: BTreeMap<u64, Lock>,
    next_lock: u64,
    timers: BTreeSet<(Instant, u64)>,
    nodes: Vec<Node>,
    in_flight: FuturesUnordered<BoxFuture<Completion>>,
    pubsub: PubSub,
    closing: bool,
}

/// Opens the first connections, then returns the driver's run loop.
///
/// A single node must connect. Redlock needs a majority of its nodes; the
/// rest are retried in the background like any broken connection.
pub(crate) async fn start(
    env: Environment,
    mode: Mode,
    endpoints: Vec<Endpoint>,
    connect_timeout: Duration,
    requests: mpsc::UnboundedReceiver<Request>,
    weak_requests: mpsc::WeakUnboundedSender<Request>,
) -> Result<impl Future<Output = ()> + Send + 'static, ConnectError> {
    let Some(first) = endpoints.first().cloned() else {
        return Err(ConnectError::NoNodes);
    };
    let opened = futures_util::future::join_all(
        endpoints
            .iter()
            .map(|endpoint| open(endpoint.clone(), connect_timeout, 0)),
    )
    .await;
    let now = env.clock.now();
    let total = endpoints.len();
    let needed = total / 2 + 1;
    let mut first_error = None;
    let mut nodes = Vec::with_capacity(total);
    for (endpoint, opened) in endpoints.into_iter().zip(opened) {
        let (connection, reconnect_at) = match opened {
            Ok(connection) => (Some(connection), None),
            Err(error) => {
                first_error.get_or_insert(error);
                (None, Some(now))
            }
        };
        nodes.push(Node {
            endpoint,
            connection,
            generation: 0,
            connecting: None,
            reconnect_at,
            reconnect_failures: 0,
        });
    }
    let connected = nodes.iter().filter(|n| n.connection.is_some()).count();
    if let Some(error) = first_error
        && connected < needed
    {
        return Err(match mode {
            Mode::Single => error,
            Mode::Redlock => ConnectError::NoQuorum {
                connected,
                needed,
                first: Box::new(error),
            },
        });
    }
    let pubsub = PubSub::new(first, connect_timeout);
    let driver = Driver {
        env,
        mode,
        connect_timeout,
        requests,
        weak_requests,
        locks: BTreeMap::new(),
        next_lock: 0,
        timers: BTreeSet::new(),
        nodes,
        in_flight: FuturesUnordered::new(),
        pubsub,
        closing: false,
    };
    Ok(driver.run())
}

/// Opens one connection: connect and handshake, both under `timeout` (the
/// handshake is not covered by redis-rs's response timeout).
async fn open(
    endpoint: Endpoint,
    timeout: Duration,
    generation: u64,
) -> Result<Connection, ConnectError> {
    let redis = endpoint.redis;
    let connect = async {
        let stream = endpoint.connector.connect().await?;
        // Each command carries its own timeout (the lock's command timeout),
        // so redis-rs's 500 ms default must not cut in first.
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        let (conn, task) = MultiplexedConnection::new_with_config(&redis, stream, config)
            .await
            .map_err(ConnectError::Handshake)?;
        Ok(Connection {
            conn,
            task: Box::pin(task),
            generation,
        })
    };
    tokio::time::timeout(timeout, connect)
        .await
        .map_err(|_| ConnectError::Timeout(timeout))?
}

impl Driver {
    async fn run(mut self) {
        loop {
            let now = self.env.clock.now();
            self.maybe_reconnect(now);
            let deadline = self.next_deadline();
            let sleep = tokio::time::sleep(deadline.map_or(Duration::from_secs(3600), |at| {
                at.saturating_duration_since(now)
            }));
            // `biased`: a fixed polling order keeps simulated runs reproducible.
            tokio::select! {
                biased;
                request = self.requests.recv(), if !self.closing => match request {
                    Some(request) => self.on_request(request),
                    None => self.closing = true,
                },
                Some(completion) = self.in_flight.next(), if !self.in_flight.is_empty() => {
                    self.on_completion(completion);
                }
                change = node_change(&mut self.nodes) => match change {
                    NodeChange::Closed(node) => {
                        tracing::debug!(node, "redis connection closed");
                        self.break_connection(node, None);
                    }
                    NodeChange::Connected(node, connected) => self.on_connected(node, connected),
                },
                channel = self.pubsub.next_wakeup() => self.on_wakeup(&channel),
                () = sleep => {}
            }
            self.fire_timers();
            if self.closing && self.locks.is_empty() {
                break;
            }
        }
        tracing::debug!("locker driver stopped");
    }

    fn next_deadline(&self) -> Option<Instant> {
        let timer = self.timers.first().map(|(at, _)| *at);
        let reconnect = self.nodes.iter().filter_map(|n| n.reconnect_at).min();
        [timer, reconnect].into_iter().flatten().min()
    }

    fn on_request(&mut self, request: Request) {
        match request {
            Request::Acquire {
                key,
                opts,
                token,
                jitter_seed,
                reply,
            } => {
                let machine = match self.mode {
                    Mode::Single => {
                        LockMachine::new(&opts, &key, token, jitter_seed).map(Machine::Single)
                    }
                    Mode::Redlock => {
                        RedlockMachine::new(&opts, &key, token, self.nodes.len(), jitter_seed)
                            .map(Machine::Quorum)
                            .map_err(|error| match error {
                                RedlockError::Options(error) => error,
                                // `start` refuses an empty node list, so
                                // only the options can be wrong here.
                                RedlockError::NoNodes => unreachable!("a driver has nodes"),
                            })
                    }
                };
                let machine = match machine {
                    Ok(machine) => machine,
                    Err(error) => {
                        let _ = reply.send(Err(AcquireError::Options(error)));
                        return;
                    }
                };
                let id = self.next_lock;
                self.next_lock += 1;
                let short_token: String = machine.token().chars().take(8).collect();
                let span = tracing::info_span!("lock", key = %key, token = %short_token);
                span.in_scope(|| tracing::debug!(token = machine.token(), "acquiring"));
                let (status, _) = watch::channel(Status::Released);
                self.locks.insert(
                    id,
                    Lock {
                        machine,
                        key,
                        wait: opts.effective_wait(),
                        command_timeout: opts.effective_command_timeout(),
                        span,
                        acquire_reply: Some(reply),
                        release_reply: None,
                        status,
                        lost: None,
                        lost_before_release: None,
                        armed: None,
                        subscribed: false,
                    },
                );
                let now = self.env.clock.now();
                if let Some(lock) = self.locks.get_mut(&id) {
                    lock.machine.acquire(now);
                }
                self.drain(id);
            }
            Request::Release { id, reply } => {
                let now = self.env.clock.now();
                let Some(lock) = self.locks.get_mut(&id) else {
                    if let Some(reply) = reply {
                        let _ = reply.send(Err(ReleaseError::Unconfirmed));
                    }
                    return;
                };
                lock.lost_before_release = lock.lost;
                lock.release_reply = reply;
                lock.machine.release(now);
                self.drain(id);
            }
        }
    }

    fn on_completion(&mut self, (id, node, command, reply, generation): Completion) {
        if let Reply::Failed(failure) = reply
            && matches!(
                failure,
                Failure::Timeout | Failure::Connection | Failure::ReadOnly | Failure::Protocol
            )
        {
            // A timed-out command may have wedged the stream (a partition
            // drops segments and nothing retransmits), and READONLY means
            // the primary moved: either way, start over on a new connection.
            self.break_connection(node, Some(generation));
        }
        let now = self.env.clock.now();
        if let Some(lock) = self.locks.get_mut(&id) {
            lock.machine.handle_reply(now, node, command, reply);
            self.drain(id);
        }
    }

    fn on_connected(&mut self, node: usize, connected: Result<Connection, ConnectError>) {
        let now = self.env.clock.now();
        let Some(state) = self.nodes.get_mut(node) else {
            return;
        };
        state.connecting = None;
        match connected {
            Ok(connection) => {
                tracing::debug!(
                    node,
                    generation = connection.generation,
                    "reconnected to redis"
                );
                state.reconnect_failures = 0;
                state.connection = Some(connection);
            }
            Err(error) => {
                tracing::debug!(node, %error, "reconnect failed");
                state.reconnect_failures += 1;
                state.reconnect_at = Some(now + reconnect_backoff(state.reconnect_failures));
            }
        }
    }

    fn on_wakeup(&mut self, channel: &str) {
        let now = self.env.clock.now();
        let waiting: Vec<u64> = self
            .locks
            .iter()
            .filter(|(_, lock)| lock.subscribed && lock.machine.keys().channel == channel)
            .map(|(id, _)| *id)
            .collect();
        for id in waiting {
            if let Some(lock) = self.locks.get_mut(&id) {
                lock.machine.handle_wakeup(now);
                self.drain(id);
            }
        }
    }

    /// Drops `node`'s current connection if it is `generation` (or
    /// unconditionally for `None`) and schedules a reconnect.
    fn break_connection(&mut self, node: usize, generation: Option<u64>) {
        let now = self.env.clock.now();
        let Some(state) = self.nodes.get_mut(node) else {
            return;
        };
        let current = state.connection.as_ref().map(|c| c.generation);
        if current.is_some() && generation.is_some() && current != generation {
            return;
        }
        if state.connection.take().is_some() && state.reconnect_at.is_none() {
            state.reconnect_at = Some(now);
        }
    }

    fn maybe_reconnect(&mut self, now: Instant) {
        if self.closing && self.locks.is_empty() {
            return;
        }
        for state in &mut self.nodes {
            if state.connection.is_some() || state.connecting.is_some() {
                continue;
            }
            if state.reconnect_at.is_some_and(|at| at > now) {
                continue;
            }
            state.reconnect_at = None;
            state.generation += 1;
            state.connecting = Some(Box::pin(open(
                state.endpoint.clone(),
                self.connect_timeout,
                state.generation,
            )));
        }
    }

    fn fire_timers(&mut self) {
        let now = self.env.clock.now();
        while let Some(&(at, id)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            if let Some(lock) = self.locks.get_mut(&id) {
                lock.armed = None;
                lock.machine.handle_timeout(now);
                self.drain(id);
            }
        }
    }

    /// The drain rule: send every command, deliver every event, re-arm the timer.
    fn drain(&mut self, id: u64) {
        let Some(lock) = self.locks.get_mut(&id) else {
            return;
        };
        if lock
            .acquire_reply
            .as_ref()
            .is_some_and(|reply| reply.is_closed())
            && lock.machine.is_acquiring()
        {
            // The caller stopped waiting (its acquire future was dropped):
            // stop trying, and undo an attempt that may have landed.
            lock.acquire_reply = None;
            lock.machine.release(self.env.clock.now());
        }
        let mut commands = Vec::new();
        while let Some(command) = lock.machine.poll_command() {
            commands.push(command);
        }
        let mut events = Vec::new();
        while let Some(event) = lock.machine.poll_event() {
            events.push(event);
        }
        let timeout = lock.machine.poll_timeout();
        if lock.armed != timeout {
            if let Some(old) = lock.armed {
                self.timers.remove(&(old, id));
            }
            if let Some(new) = timeout {
                self.timers.insert((new, id));
            }
            lock.armed = timeout;
        }
        for (node, command_id, command) in commands {
            self.issue(id, node, command_id, command);
        }
        for event in events {
            self.dispatch(id, event);
        }
        let finished = self
            .locks
            .get(&id)
            .is_some_and(|lock| lock.machine.is_released());
        if finished && let Some(lock) = self.locks.remove(&id) {
            if let Some(old) = lock.armed {
                self.timers.remove(&(old, id));
            }
            if lock.subscribed {
                self.pubsub.unsubscribe(&lock.machine.keys().channel);
            }
        }
    }

    /// Sends one command on `node`'s current connection; with none, it
    /// fails at once as a connection failure and the machine decides what
    /// follows.
    fn issue(&mut self, id: u64, node: usize, command_id: CommandId, command: crate::Command) {
        let Some(lock) = self.locks.get(&id) else {
            return;
        };
        let span = lock.span.clone();
        let timeout = lock.command_timeout;
        let Some(connection) = self.nodes.get(node).and_then(|n| n.connection.as_ref()) else {
            self.in_flight.push(Box::pin(async move {
                (id, node, command_id, Reply::Failed(Failure::Connection), 0)
            }));
            return;
        };
        let mut conn = connection.conn.clone();
        let generation = connection.generation;
        let keys = lock.machine.keys().clone();
        let token = lock.machine.token().to_owned();
        self.in_flight.push(Box::pin(
            async move {
                tracing::trace!(?command, "send");
                let reply = match tokio::time::timeout(
                    timeout,
                    wire::execute(&mut conn, &keys, &token, &command),
                )
                .await
                {
                    Ok(reply) => reply,
                    Err(_) => Reply::Failed(Failure::Timeout),
                };
                tracing::trace!(?reply, "reply");
                (id, node, command_id, reply, generation)
            }
            .instrument(span),
        ));
    }

    fn dispatch(&mut self, id: u64, event: Event) {
        let Some(lock) = self.locks.get_mut(&id) else {
            return;
        };
        let _entered = lock.span.clone().entered();
        if let Some(observer) = &self.env.observer {
            observer(&Observed {
                key: &lock.key,
                token: lock.machine.token(),
                event: &event,
                at: self.env.clock.now(),
            });
        }
        match event {
            Event::Acquired { fence, valid_until } => {
                tracing::debug!(fence, "acquired");
                lock.status.send_replace(Status::Held { valid_until });
                if lock.subscribed {
                    lock.subscribed = false;
                    self.pubsub.unsubscribe(&lock.machine.keys().channel);
                }
                let Some(reply) = lock.acquire_reply.take() else {
                    return;
                };
                let Some(requests) = self.weak_requests.upgrade() else {
                    // No locker or guard is left to hand the lock to.
                    lock.machine.release(self.env.clock.now());
                    self.drain(id);
                    return;
                };
                let granted = Granted {
                    id,
                    key: lock.key.clone(),
                    token: lock.machine.token().to_owned(),
                    fence,
                    status: lock.status.subscribe(),
                    requests,
                    span: lock.span.clone(),
                };
                // If the acquire was cancelled, the grant comes back and its
                // Drop asks this driver to release the lock.
                let _ = reply.send(Ok(granted));
            }
            Event::Renewed { valid_until } => {
                tracing::trace!("renewed");
                lock.status.send_replace(Status::Held { valid_until });
            }
            Event::Contended { .. } => {
                // A Redlock retries on its backoff only (see
                // `RedlockMachine::handle_wakeup`): no subscription.
                if !lock.subscribed && matches!(lock.machine, Machine::Single(_)) {
                    lock.subscribed = true;
                    self.pubsub.subscribe(&lock.machine.keys().channel);
                }
            }
            Event::AcquireFailed(failure) => {
                tracing::debug!(%failure, "acquire failed");
                let error = match failure {
                    AcquireFailure::TimedOut { last_failure: None } => {
                        AcquireError::Timeout { waited: lock.wait }
                    }
                    AcquireFailure::TimedOut {
                        last_failure: Some(failure),
                    } => AcquireError::Unavailable(failure),
                    AcquireFailure::Failed(Failure::WrongType) => AcquireError::WrongType,
                    AcquireFailure::Failed(failure) => AcquireError::Unavailable(failure),
                    AcquireFailure::NotReplicated { acked, wanted } => {
                        AcquireError::NotReplicated { acked, wanted }
                    }
                    // Only a cancelled acquire (its future dropped) gets
                    // here, and nobody is listening then.
                    AcquireFailure::Cancelled => AcquireError::DriverStopped,
                };
                if let Some(reply) = lock.acquire_reply.take() {
                    let _ = reply.send(Err(error));
                }
            }
            Event::Lost { reason } => {
                tracing::warn!(%reason, "lock lost");
                lock.lost = Some(reason);
                lock.status.send_replace(Status::Lost(reason));
            }
            Event::Released { outcome } => {
                tracing::debug!(?outcome, "released");
                let result = match (lock.lost_before_release, outcome) {
                    (Some(reason), _) => Err(ReleaseError::AlreadyLost(reason)),
                    (None, ReleaseOutcome::Deleted) => Ok(()),
                    (None, ReleaseOutcome::NotOwner) => Err(ReleaseError::AlreadyLost(
                        lock.lost.unwrap_or(LostReason::NotOwner),
                    )),
                    (None, ReleaseOutcome::Unknown) => Err(ReleaseError::Unconfirmed),
                };
                if lock.lost.is_none() {
                    lock.status.send_replace(Status::Released);
                }
                if let Some(reply) = lock.release_reply.take() {
                    let _ = reply.send(result);
                }
            }
        }
    }
}

/// Polls every node's connection task (it ends when the socket closes) and
/// connection attempt, in node order; resolves with the first change.
async fn node_change(nodes: &mut [Node]) -> NodeChange {
    std::future::poll_fn(|cx| {
        for (index, node) in nodes.iter_mut().enumerate() {
            if let Some(connection) = &mut node.connection
                && connection.task.as_mut().poll(cx).is_ready()
            {
                return Poll::Ready(NodeChange::Closed(index));
            }
            if let Some(connecting) = &mut node.connecting
                && let Poll::Ready(result) = connecting.as_mut().poll(cx)
            {
                return Poll::Ready(NodeChange::Connected(index, result));
            }
        }
        Poll::Pending
    })
    .await
}

fn reconnect_backoff(failures: u32) -> Duration {
    Duration::from_millis(50)
        .saturating_mul(1 << failures.min(5))
        .min(Duration::from_secs(1))
}

/// The pub/sub connection that carries release announcements. Opened on the
/// first subscription; reopened (and resubscribed) after it breaks.
///
/// In Redlock mode it listens on the first node only: wake-ups are an
/// optimisation, and waiters still retry on their backoff timers.
struct PubSub {
    endpoint: Endpoint,
    timeout: Duration,
    /// Channel name → number of waiting locks.
    channels: BTreeMap<String, usize>,
    sink: Option<PubSubSink>,
    stream: Option<redis::aio::PubSubStream>,
    opening: Option<BoxFuture<Option<redis::aio::PubSub>>>,
    /// Subscribe/unsubscribe calls in progress.
    pending: FuturesUnordered<BoxFuture<bool>>,
}

impl PubSub {
    fn new(endpoint: Endpoint, timeout: Duration) -> Self {
        Self {
            endpoint,
            timeout,
            channels: BTreeMap::new(),
            sink: None,
            stream: None,
            opening: None,
            pending: FuturesUnordered::new(),
        }
    }

    fn subscribe(&mut self, channel: &str) {
        let count = self.channels.entry(channel.to_owned()).or_insert(0);
        *count += 1;
        if *count > 1 {
            return;
        }
        match &self.sink {
            Some(sink) => {
                let mut sink = sink.clone();
                let channel = channel.to_owned();
                self.pending.push(Box::pin(
                    async move { sink.subscribe(channel).await.is_ok() },
                ));
            }
            None => self.open(),
        }
    }

    fn unsubscribe(&mut self, channel: &str) {
        let Some(count) = self.channels.get_mut(channel) else {
            return;
        };
        *count -= 1;
        if *count > 0 {
            return;
        }
        self.channels.remove(channel);
        if let Some(sink) = &self.sink {
            let mut sink = sink.clone();
            let channel = channel.to_owned();
            self.pending.push(Box::pin(
                async move { sink.unsubscribe(channel).await.is_ok() },
            ));
        }
    }

    fn open(&mut self) {
        self.open_after(Duration::ZERO);
    }

    /// Opens the connection after `delay`; the delay lives inside the stored
    /// future, so the caller's select dropping `next_wakeup` loses nothing.
    fn open_after(&mut self, delay: Duration) {
        if self.opening.is_some() {
            return;
        }
        let (endpoint, timeout) = (self.endpoint.clone(), self.timeout);
        let channels: Vec<String> = self.channels.keys().cloned().collect();
        self.opening = Some(Box::pin(async move {
            tokio::time::sleep(delay).await;
            let open = async {
                let stream = endpoint.connector.connect().await.ok()?;
                let mut pubsub = redis::aio::PubSub::new(&endpoint.redis, stream)
                    .await
                    .ok()?;
                for channel in channels {
                    pubsub.subscribe(channel).await.ok()?;
                }
                Some(pubsub)
            };
            tokio::time::timeout(timeout, open).await.ok().flatten()
        }));
    }

    /// Resolves with the next channel a release was announced on.
    async fn next_wakeup(&mut self) -> String {
        loop {
            tokio::select! {
                biased;
                opened = async {
                    match &mut self.opening {
                        Some(future) => future.as_mut().await,
                        None => std::future::pending().await,
                    }
                } => {
                    self.opening = None;
                    match opened {
                        Some(pubsub) => {
                            let (sink, stream) = pubsub.split();
                            self.sink = Some(sink);
                            self.stream = Some(stream);
                        }
                        None => {
                            // Wake-ups are an optimisation: waiters still
                            // retry on their backoff timers. Try again later.
                            if !self.channels.is_empty() {
                                self.open_after(Duration::from_millis(200));
                            }
                        }
                    }
                }
                Some(ok) = self.pending.next(), if !self.pending.is_empty() => {
                    if !ok {
                        self.reset();
                    }
                }
                message = async {
                    match &mut self.stream {
                        Some(stream) => stream.next().await,
                        None => std::future::pending().await,
                    }
                } => match message {
                    Some(message) => return message.get_channel_name().to_owned(),
                    None => self.reset(),
                },
            }
        }
    }

    fn reset(&mut self) {
        self.sink = None;
        self.stream = None;
        self.pending = FuturesUnordered::new();
        if !self.channels.is_empty() {
            self.open();
        }
    }
}
