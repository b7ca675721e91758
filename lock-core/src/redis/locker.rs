//! The public face of the adapter: [`Locker`], [`LockerBuilder`], [`LockGuard`].

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::{Duration, Instant},
};

use redis::{IntoConnectionInfo, RedisConnectionInfo};
use tokio::sync::{mpsc, oneshot, watch};

use super::{
    AcquireError, Clock, ConnectError, Connector, Entropy, OsEntropy, ReleaseError, TcpConnector,
    TokioClock,
    connector::{Environment, owner_token},
    driver::{self, Endpoint, Mode, Request, Status},
};
use crate::{LockOptions, LostReason};

/// A handle to one Redis connection (or, for Redlock, one per node) that
/// serves any number of locks.
///
/// Cheap to clone; every clone shares the same driver task. The driver
/// stops once every `Locker` clone and every [`LockGuard`] are dropped and
/// their releases are done.
#[derive(Clone)]
pub struct Locker {
    requests: mpsc::UnboundedSender<Request>,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
}

impl fmt::Debug for Locker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Locker").finish_non_exhaustive()
    }
}

impl Locker {
    /// Connects to the Redis at `url` (`redis://[user:pass@]host:port/db`) and
    /// spawns the driver on the current tokio runtime.
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        let (locker, driver) = LockerBuilder::from_url(url)?.connect().await?;
        tokio::spawn(driver);
        Ok(locker)
    }

    /// Connects to N independent Redis primaries and spawns the driver; every
    /// lock of this locker is then a Redlock quorum over them.
    ///
    /// A lock is granted once a majority (`N/2 + 1`) grants it with validity
    /// left (counted from before the first request), renewed while a
    /// majority renews it, lost when fewer than a majority remain valid, and
    /// released on every node. Connecting succeeds once a majority answers;
    /// the other nodes are retried in the background. Read
    /// [`redlock`](crate::redlock) for what its fence guarantees (less than
    /// a single node's).
    pub async fn connect_redlock(urls: &[&str]) -> Result<Self, ConnectError> {
        let (locker, driver) = LockerBuilder::redlock(urls)?.connect().await?;
        tokio::spawn(driver);
        Ok(locker)
    }

    /// Connects with the address and credentials of an existing client, and
    /// spawns the driver; async because it opens the connection at once.
    pub async fn from_client(client: redis::Client) -> Result<Self, ConnectError> {
        let (locker, driver) = LockerBuilder::from_connection_info(client.get_connection_info())?
            .connect()
            .await?;
        tokio::spawn(driver);
        Ok(locker)
    }

    /// Acquires `key`, waiting up to the options' `wait` while another owner
    /// holds it; fails with [`AcquireError::Timeout`] after that.
    pub async fn acquire(&self, key: &str, opts: &LockOptions) -> Result<LockGuard, AcquireError> {
        opts.validate()?;
        let (reply, granted) = oneshot::channel();
        let token = owner_token(self.entropy.as_ref());
        self.requests
            .send(Request::Acquire {
                key: key.to_owned(),
                opts: Box::new(opts.clone()),
                token,
                jitter_seed: self.entropy.next_u64(),
                reply,
            })
            .map_err(|_| AcquireError::DriverStopped)?;
        let granted = granted.await.map_err(|_| AcquireError::DriverStopped)??;
        Ok(LockGuard {
            inner: Some(granted),
            clock: Arc::clone(&self.clock),
        })
    }

    /// Makes one attempt at `key`: `Ok(None)` if another owner holds it.
    pub async fn try_acquire(
        &self,
        key: &str,
        opts: &LockOptions,
    ) -> Result<Option<LockGuard>, AcquireError> {
        match self.acquire(key, &opts.clone().wait(Duration::ZERO)).await {
            Ok(guard) => Ok(Some(guard)),
            Err(AcquireError::Timeout { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// Builds a [`Locker`] and the driver future that does its work.
///
/// The driver is returned rather than spawned (like redis-rs's
/// `MultiplexedConnection::new` or hyper's `handshake`) so the caller decides
/// where it runs; a simulator wraps it to pause a whole client. The
/// [`Connector`], [`Clock`] and [`Entropy`] setters are advanced injection
/// points; production needs none of them.
pub struct LockerBuilder {
    mode: Mode,
    endpoints: Vec<Endpoint>,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    connect_timeout: Duration,
    observer: Option<super::Observer>,
}

impl fmt::Debug for LockerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockerBuilder")
            .field("mode", &self.mode)
            .field("nodes", &self.endpoints.len())
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

impl LockerBuilder {
    /// A builder for the Redis at `url` over TCP.
    pub fn from_url(url: &str) -> Result<Self, ConnectError> {
        let info = url
            .into_connection_info()
            .map_err(|error| ConnectError::Url(error.to_string()))?;
        Self::from_connection_info(&info)
    }

    /// A builder for a Redlock over the independent primaries at `urls`
    /// (see [`Locker::connect_redlock`]).
    pub fn redlock(urls: &[&str]) -> Result<Self, ConnectError> {
        if urls.is_empty() {
            return Err(ConnectError::NoNodes);
        }
        let endpoints = urls
            .iter()
            .map(|url| {
                let info = url
                    .into_connection_info()
                    .map_err(|error| ConnectError::Url(format!("{url}: {error}")))?;
                endpoint(&info)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::new(Mode::Redlock, endpoints))
    }

    fn from_connection_info(info: &redis::ConnectionInfo) -> Result<Self, ConnectError> {
        Ok(Self::new(Mode::Single, vec![endpoint(info)?]))
    }

    /// A builder whose streams come from `connector` (advanced).
    pub fn with_connector(connector: impl Connector) -> Self {
        Self::new(
            Mode::Single,
            vec![Endpoint {
                connector: Arc::new(connector),
                redis: RedisConnectionInfo::default(),
            }],
        )
    }

    /// A Redlock builder with one node per connector, in order (advanced).
    /// An empty list fails at [`connect`](Self::connect).
    pub fn redlock_with_connectors<C: Connector>(connectors: impl IntoIterator<Item = C>) -> Self {
        let endpoints = connectors
            .into_iter()
            .map(|connector| Endpoint {
                connector: Arc::new(connector),
                redis: RedisConnectionInfo::default(),
            })
            .collect();
        Self::new(Mode::Redlock, endpoints)
    }

    fn new(mode: Mode, endpoints: Vec<Endpoint>) -> Self {
        Self {
            mode,
            endpoints,
            clock: Arc::new(TokioClock),
            entropy: Arc::new(OsEntropy),
            connect_timeout: Duration::from_secs(5),
            observer: None,
        }
    }

    /// Calls `observer` with every event of every lock (acquired, renewed,
    /// contended, lost, released), on the driver, as it happens.
    pub fn observer(
        mut self,
        observer: impl Fn(&super::Observed<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// Reads time from `clock` instead of tokio's clock (advanced).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Draws tokens and jitter from `entropy` instead of the OS (advanced).
    pub fn entropy(mut self, entropy: impl Entropy) -> Self {
        self.entropy = Arc::new(entropy);
        self
    }

    /// Sets the database, credentials and protocol settings of the
    /// handshake, on every node.
    pub fn redis_settings(mut self, settings: RedisConnectionInfo) -> Self {
        for endpoint in &mut self.endpoints {
            endpoint.redis = settings.clone();
        }
        self
    }

    /// Bounds each connection attempt, handshake included (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Opens the first connection (for Redlock, one per node, of which a
    /// majority must succeed) and returns the locker with its driver, which
    /// must be polled (spawned) for any lock to make progress.
    pub async fn connect(self) -> Result<(Locker, Driver), ConnectError> {
        let env = Environment {
            clock: Arc::clone(&self.clock),
            observer: self.observer,
        };
        let (requests, receiver) = mpsc::unbounded_channel();
        let driver = driver::start(
            env,
            self.mode,
            self.endpoints,
            self.connect_timeout,
            receiver,
            requests.downgrade(),
        )
        .await?;
        let locker = Locker {
            requests,
            clock: self.clock,
            entropy: self.entropy,
        };
        Ok((locker, Driver(Box::pin(driver))))
    }
}

fn endpoint(info: &redis::ConnectionInfo) -> Result<Endpoint, ConnectError> {
    let redis::ConnectionAddr::Tcp(host, port) = info.addr() else {
        return Err(ConnectError::Url(format!(
            "only plain TCP addresses are supported, not {}",
            info.addr()
        )));
    };
    Ok(Endpoint {
        connector: Arc::new(TcpConnector::new(host.clone(), *port)),
        redis: info.redis_settings().clone(),
    })
}

/// The future that drives every lock of a [`Locker`]: poll it to completion
/// (`tokio::spawn` it) or nothing happens. It finishes once the locker and
/// all its guards are gone.
#[must_use = "the driver does nothing unless polled"]
pub struct Driver(Pin<Box<dyn Future<Output = ()> + Send>>);

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver").finish_non_exhaustive()
    }
}

impl Future for Driver {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

/// What the driver hands over when a lock is granted.
pub(crate) struct Granted {
    pub(crate) id: u64,
    pub(crate) key: String,
    pub(crate) token: String,
    pub(crate) fence: u64,
    pub(crate) status: watch::Receiver<Status>,
    pub(crate) requests: mpsc::UnboundedSender<Request>,
    pub(crate) span: tracing::Span,
}

impl Drop for Granted {
    fn drop(&mut self) {
        // Dropping a grant nobody took (a cancelled acquire) or a guard
        // releases the lock in the background. `release` disarms this.
        if self.id != u64::MAX {
            let _ = self.requests.send(Request::Release {
                id: self.id,
                reply: None,
            });
        }
    }
}

/// A held lock. Dropping it releases the lock in the background.
pub struct LockGuard {
    inner: Option<Granted>,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("key", &self.key())
            .field("fence", &self.fence())
            .field("valid_until", &self.valid_until())
            .finish_non_exhaustive()
    }
}

impl LockGuard {
    fn granted(&self) -> &Granted {
        // `inner` is only taken by `release(self)`, which consumes the guard.
        self.inner
            .as_ref()
            .expect("a live guard always holds its grant")
    }

    /// The fencing token: attach it to every write the lock protects, and
    /// have the resource refuse tokens lower than the highest it has seen.
    ///
    /// Under Redlock it is the highest of the majority's per-node tokens,
    /// which is not globally ordered: see [`redlock`](crate::redlock).
    pub fn fence(&self) -> u64 {
        self.granted().fence
    }

    /// The key as given to `acquire` (without namespace or hash tag).
    pub fn key(&self) -> &str {
        &self.granted().key
    }

    /// The owner token stored in Redis (`GET` it to see who holds a lock).
    pub fn token(&self) -> &str {
        &self.granted().token
    }

    /// The instant (on the locker's clock) from which the lock is no longer
    /// held unless renewed; `None` once lost.
    pub fn valid_until(&self) -> Option<Instant> {
        match *self.granted().status.borrow() {
            Status::Held { valid_until } => Some(valid_until),
            Status::Lost(_) | Status::Released => None,
        }
    }

    /// Returns true while the lock is held: false once lost, and false from
    /// `valid_until` on even if the driver has not said so yet.
    pub fn is_held(&self) -> bool {
        self.valid_until()
            .is_some_and(|valid_until| self.clock.now() < valid_until)
    }

    /// Resolves when the lock is lost, with the reason; pending while held.
    ///
    /// Stop the protected work when it resolves: someone else may get the
    /// lock from that instant on.
    pub async fn lost(&self) -> LostReason {
        let mut status = self.granted().status.clone();
        loop {
            let valid_until = match *status.borrow_and_update() {
                Status::Lost(reason) => return reason,
                Status::Released => return LostReason::NotOwner,
                Status::Held { valid_until } => valid_until,
            };
            if status.changed().await.is_err() {
                // The driver is gone, so nothing renews the lock any more:
                // it is lost at its deadline (timing rule 3).
                let remaining = valid_until.saturating_duration_since(self.clock.now());
                tokio::time::sleep(remaining).await;
                return LostReason::Expired;
            }
        }
    }

    /// Releases the lock (owner-checked) and waits for Redis to confirm.
    ///
    /// Errors if the lock had already been lost; the release is still sent
    /// and never touches another owner's key.
    pub async fn release(mut self) -> Result<(), ReleaseError> {
        let Some(mut granted) = self.inner.take() else {
            return Err(ReleaseError::DriverStopped);
        };
        let id = std::mem::replace(&mut granted.id, u64::MAX);
        let (reply, done) = oneshot::channel();
        granted
            .requests
            .send(Request::Release {
                id,
                reply: Some(reply),
            })
            .map_err(|_| ReleaseError::DriverStopped)?;
        done.await.map_err(|_| ReleaseError::DriverStopped)?
    }

    /// The tracing span of this lock (key and a token prefix).
    pub fn span(&self) -> &tracing::Span {
        &self.granted().span
    }
}
