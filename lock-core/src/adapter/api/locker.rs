//! The public face of the adapter: [`Locker`] and [`LockerBuilder`].

use std::{fmt, sync::Arc, time::Duration};

use redis::{IntoConnectionInfo, RedisConnectionInfo};

use super::guard::{LockGuard, ReadGuard};
use crate::adapter::{
    background::{
        cluster_upkeep::ClusterUpkeep,
        driver::{Alive, Driver},
        follow::SentinelWatch,
        pubsub::Subscriber,
    },
    check::{CheckOptions, LockerReport, check_nodes},
    connect::{
        connector::{Clock, Connector, Entropy, OsEntropy, TokioClock, owner_token},
        dial::{Dialer, NodeAddress},
        endpoint,
        error::ConnectError,
        first::open_majority,
        node::{CheckTarget, Endpoint},
        sentinel::{Current, SentinelConnector, SentinelResolver},
        upkeep::Tasks,
    },
    lock::{cell::LockCell, error::AcquireError, machines::AnyMachine, run::run, session::Session},
    wire::route::{self, AnyNodeConnector, ClusterRouter},
};
use crate::{LockKind, LockOptions, machine::resolve_kind, scripts::KeyNames};

/// A handle to one Redis server (or, for Redlock, several) that serves any
/// number of locks.
///
/// Cheap to clone; every clone shares the same connections. Acquire and
/// release run in the calling task, over a clone of the node's multiplexed
/// connection; the locker's driver renews held locks and keeps the
/// connections open. The driver stops once every `Locker` clone and every
/// [`LockGuard`] are dropped and their releases are done.
#[derive(Clone)]
pub struct Locker {
    session: Arc<Session>,
    alive: Arc<Alive>,
}

impl fmt::Debug for Locker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Locker")
            .field("nodes", &self.session.nodes.len())
            .field("redlock", &self.session.redlock)
            .finish_non_exhaustive()
    }
}

impl Locker {
    /// Connects to the Redis at `url` (`redis://[user:pass@]host:port/db`) and
    /// spawns the driver on the current tokio runtime.
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        LockerBuilder::from_url(url)?.spawn().await
    }

    /// Connects to N independent Redis primaries and spawns the driver; every
    /// lock of this locker is then a Redlock quorum over them.
    ///
    /// A lock is granted once a majority (`N/2 + 1`) grants it with validity
    /// left (counted from before the first request), renewed while a
    /// majority renews it, lost when fewer than a majority remain valid, and
    /// released on every node. `acquire` returns once a majority granted and
    /// `release` once a majority deleted the key: neither waits for the
    /// slowest node, whose answer the driver takes in the background (a late
    /// grant joins the lock).
    ///
    /// Connecting opens every node at once and returns once every node has
    /// answered the handshake, or once a majority has and 250 ms have
    /// passed since: a node that is down or silent does not hold it up
    /// for the connect timeout. The other attempts go on in the driver,
    /// and a node that answers later takes part in every grant from then
    /// on (one that refuses is retried with a backoff). Connecting fails
    /// once every attempt has ended (each within the connect timeout, 5 s
    /// by default) with fewer than a majority open
    /// ([`ConnectError::NoQuorum`]). Read
    /// [`RedlockMachine`](crate::RedlockMachine) for what its fence
    /// guarantees (less than a single node's).
    pub async fn connect_redlock(urls: &[&str]) -> Result<Self, ConnectError> {
        LockerBuilder::redlock(urls)?.spawn().await
    }

    /// Connects to the primary that the sentinels at `sentinel_urls` name for
    /// `master_name`, and spawns the driver.
    ///
    /// Every connect resolves the primary again and confirms it with
    /// `ROLE`; a `+switch-master` announcement moves the locker to the new
    /// primary at once. Without `wait_replicas`, a failover can still lose
    /// a lock (see the safety table in `docs/safety.md`).
    ///
    /// The sentinels are asked in order; one that has not answered within
    /// 250 ms gets the next asked beside it, so a silent sentinel does not
    /// hold up connecting while another names the primary.
    pub async fn connect_sentinel(
        sentinel_urls: &[&str],
        master_name: &str,
    ) -> Result<Self, ConnectError> {
        LockerBuilder::sentinel(sentinel_urls, master_name)?
            .spawn()
            .await
    }

    /// Connects to the Redis Cluster that the seed nodes at `seed_urls`
    /// belong to, and spawns the driver.
    ///
    /// Each lock's commands go to the primary of its slot (the lock key and
    /// its channel share one hash tag, and the namespace keeps a fence
    /// floor and counter in every slot), following
    /// `MOVED`, `ASK` and `TRYAGAIN` within the lock's deadlines. `WAIT`
    /// goes to the lock's own shard. Without `wait_replicas`, a shard
    /// failover can lose a lock (see the safety table in `docs/safety.md`).
    ///
    /// The slot table is read from the first seed that answers, asked in
    /// order; a seed that has not answered within 250 ms gets the next
    /// asked beside it, so a silent seed does not hold up connecting.
    pub async fn connect_cluster(seed_urls: &[&str]) -> Result<Self, ConnectError> {
        LockerBuilder::cluster(seed_urls)?.spawn().await
    }

    /// Connects with the address and credentials of an existing client, and
    /// spawns the driver; async because it opens the connection at once.
    pub async fn from_client(client: redis::Client) -> Result<Self, ConnectError> {
        LockerBuilder::from_connection_info(client.get_connection_info())?
            .spawn()
            .await
    }

    /// Acquires `key`, waiting up to the options' `wait` while another owner
    /// holds it; fails with [`AcquireError::Timeout`] after that.
    ///
    /// With [`LockOptions::fair`], waiters are granted in arrival order
    /// (every client of the lock must use fair mode); a Redlock locker
    /// refuses it with [`AcquireError::NotOnRedlock`].
    pub async fn acquire(&self, key: &str, opts: &LockOptions) -> Result<LockGuard, AcquireError> {
        self.acquire_as(key, opts, LockKind::Plain).await
    }

    /// Acquires a read hold of the read-write lock `key`: many readers hold
    /// it at once, each with a lease (and renewal, and lost signal) of its
    /// own, while no writer does. Writers are preferred: while a writer
    /// waits, no new reader is granted. Waits like [`acquire`](Self::acquire).
    /// A read hold has no fence (readers change nothing to fence).
    /// Refused on a Redlock locker ([`AcquireError::NotOnRedlock`]) and in
    /// fair mode ([`AcquireError::Options`]).
    pub async fn acquire_read(
        &self,
        key: &str,
        opts: &LockOptions,
    ) -> Result<ReadGuard, AcquireError> {
        let guard = self.acquire_as(key, opts, LockKind::Read).await?;
        Ok(ReadGuard::new(guard))
    }

    /// Acquires the write hold of the read-write lock `key`: alone (no
    /// reader, no other writer), with a fence. A refused writer claims the
    /// lock's intent, which keeps new readers out until it is granted; it
    /// renews the intent while it waits (at least every third of
    /// [`LockOptions::waiter_ttl`]), so a writer that dies while waiting
    /// holds readers back by at most that ttl. Refused on a Redlock locker
    /// ([`AcquireError::NotOnRedlock`]) and in fair mode.
    pub async fn acquire_write(
        &self,
        key: &str,
        opts: &LockOptions,
    ) -> Result<LockGuard, AcquireError> {
        self.acquire_as(
            key,
            opts,
            LockKind::Write {
                intent_ttl: opts.effective_waiter_ttl(),
            },
        )
        .await
    }

    /// Acquires one of the `permits` leases of the counting semaphore
    /// `key`: at most `permits` holders at once, each with a lease,
    /// renewal, lost signal and fence of its own; released by its owner
    /// only. Every client of one semaphore must pass the same `permits`.
    /// Refused on a Redlock locker ([`AcquireError::NotOnRedlock`]), in
    /// fair mode, and for zero permits ([`AcquireError::Options`]).
    pub async fn acquire_permit(
        &self,
        key: &str,
        permits: u32,
        opts: &LockOptions,
    ) -> Result<LockGuard, AcquireError> {
        self.acquire_as(key, opts, LockKind::Permit { permits })
            .await
    }

    /// Acquires `key` as a lock of `kind` (resolved with the options: fair
    /// mode, the waiter ttl).
    async fn acquire_as(
        &self,
        key: &str,
        opts: &LockOptions,
        kind: LockKind,
    ) -> Result<LockGuard, AcquireError> {
        let session = &self.session;
        session.metrics.acquire_called();
        let kind = resolve_kind(opts, kind).inspect_err(|_| session.metrics.invalid_options())?;
        if session.redlock && kind != LockKind::Plain {
            // The family keeps a queue or a set of leases on one node; a
            // quorum of independent copies of them has no safe meaning.
            return Err(AcquireError::NotOnRedlock { kind: kind.name() });
        }
        let token = owner_token(session.entropy.as_ref());
        let machine = if session.cluster.is_some() || kind != LockKind::Plain {
            let mut names = KeyNames::in_namespace(&opts.namespace, key, kind).for_waiter(&token);
            if session.cluster.is_some() {
                // In a cluster the fence key must live in the lock's slot:
                // one floor (or counter) per namespace and slot. Only the
                // one this lock's grants use is looked up.
                let namespace = opts.key_namespace();
                match (kind, opts.fencing_mode()) {
                    (LockKind::Plain, crate::Fencing::None) => {}
                    (LockKind::Plain, crate::Fencing::Counter) => {
                        names.counter = route::counter_key(namespace, &names.lock).into();
                    }
                    // The time-mixed fence, which every family kind issues.
                    _ => names.fence = route::floor_key(namespace, &names.lock).into(),
                }
            }
            AnyMachine::single_with_names(opts, names, token, session.entropy.next_u64())
        } else {
            AnyMachine::new(
                session.redlock,
                opts,
                key,
                token,
                session.nodes.len(),
                session.entropy.next_u64(),
            )
        }
        .inspect_err(|_| session.metrics.invalid_options())?;
        let id = session.next_lock_id();
        let span = tracing::debug_span!("lock", key = %key, id);
        let now = session.clock.now();
        let cell = Arc::new(LockCell::new(id, key.to_owned(), machine, opts, span, now));
        let (outgoing, deadline) = {
            let mut state = cell.lock();
            // A fresh machine is idle, so acquire cannot be refused.
            let _ = state.machine.acquire(now);
            let mut outgoing = Vec::new();
            let deadline = cell.drain(&mut state, session, now, &mut outgoing);
            (outgoing, deadline)
        };
        run(session, &cell, now, outgoing, deadline, |state| {
            state.acquire_result.is_some()
        })
        .await;
        let mut state = cell.lock();
        let result = state.acquire_result.take();
        if !state.machine.is_released() {
            // Held (or, after a failure, still undoing a Redlock round):
            // the watchdog drives it from here.
            let deadline = state.machine.poll_timeout();
            if session.watchdog.watch(&cell, &mut state, deadline) {
                session.wake_driver();
            }
        }
        drop(state);
        match result {
            Some(Ok(fence)) => Ok(LockGuard::new(
                cell,
                Arc::clone(session),
                Arc::clone(&self.alive),
                fence,
            )),
            Some(Err(error)) => Err(error),
            // `run` returns only once the acquire has a result.
            None => Err(AcquireError::DriverStopped),
        }
    }

    /// Runs the deployment check ([`check_deployment`](crate::check_deployment))
    /// on every node this locker's locks use: its one node, every Redlock
    /// node, the primary the sentinels name now, or every primary that owns
    /// cluster slots now. Pass `CheckOptions::for_lock(&opts)` with the
    /// options your locks use.
    ///
    /// Each node is checked over a short-lived connection of its own,
    /// opened through the locker's connector; the locks' connections are
    /// not used. Only reads. A node that cannot be reached gets an error
    /// in its entry, and the others are still checked.
    pub async fn check_deployment(&self, opts: &CheckOptions) -> LockerReport {
        check_nodes(&self.session, opts, self.session.connect_timeout).await
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

/// Builds a [`Locker`], and optionally hands back the driver future that
/// does its background work.
///
/// [`spawn`](Self::spawn) is what most programs want. [`connect`](Self::connect)
/// returns the driver instead (like redis-rs's `MultiplexedConnection::new` or
/// hyper's `handshake`), with redis-rs's connection tasks inside it, so the
/// caller decides where it runs; a simulator wraps it to pause a whole
/// client. The [`Connector`], [`Clock`] and [`Entropy`] setters are advanced
/// injection points; production needs none of them.
pub struct LockerBuilder {
    redlock: bool,
    endpoints: Vec<Endpoint>,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    connect_timeout: Duration,
    observer: Option<crate::adapter::connect::connector::Observer>,
    /// The URLs behind `endpoints`, so `tls` can rebuild their connectors;
    /// empty when the caller gave connectors.
    urls: Vec<redis::ConnectionInfo>,
    /// The sentinels that name the primary, in Sentinel mode.
    sentinel: Option<SentinelSetup>,
    /// The seed nodes, in Redis Cluster mode.
    cluster: Option<ClusterSetup>,
}

/// How a cluster-mode locker finds the cluster.
struct ClusterSetup {
    seeds: Vec<NodeAddress>,
    settings: RedisConnectionInfo,
    dialer: Arc<dyn Dialer>,
    tls: bool,
    /// Built from URLs (so `tls` may replace the dialer).
    from_urls: bool,
}

/// How a Sentinel-mode locker finds its primary.
struct SentinelSetup {
    sentinels: Vec<NodeAddress>,
    master_name: String,
    settings: RedisConnectionInfo,
    dialer: Arc<dyn Dialer>,
    /// Built from URLs (so `tls` may replace the dialer).
    from_urls: bool,
}

impl fmt::Debug for LockerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockerBuilder")
            .field("redlock", &self.redlock)
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
        let mut builder = Self::new(true, endpoints);
        builder.urls = urls
            .iter()
            .filter_map(|url| url.into_connection_info().ok())
            .collect();
        Ok(builder)
    }

    fn from_connection_info(info: &redis::ConnectionInfo) -> Result<Self, ConnectError> {
        let mut builder = Self::new(false, vec![endpoint(info)?]);
        builder.urls = vec![info.clone()];
        Ok(builder)
    }

    /// A builder for the primary that the sentinels at `sentinel_urls`
    /// (`redis://host:port`, or `rediss://` for TLS) name for
    /// `master_name` (see [`Locker::connect_sentinel`]). The sentinels'
    /// credentials come from their URLs; the primary's from
    /// [`redis_settings`](Self::redis_settings).
    pub fn sentinel(sentinel_urls: &[&str], master_name: &str) -> Result<Self, ConnectError> {
        let (sentinels, settings, tls) = addresses(sentinel_urls)?;
        let dialer = url_dialer(tls)?;
        let mut builder = Self::sentinel_with_dialer_arc(dialer, sentinels, master_name);
        if let Some(sentinel) = &mut builder.sentinel {
            sentinel.settings = settings;
            sentinel.from_urls = true;
        }
        Ok(builder)
    }

    #[doc(hidden)]
    /// A Sentinel builder whose streams come from `dialer`, asking the
    /// sentinels at `sentinels` for `master_name` (advanced: a simulator's
    /// network, or a custom transport).
    pub fn sentinel_with_dialer(
        dialer: impl Dialer,
        sentinels: Vec<NodeAddress>,
        master_name: &str,
    ) -> Self {
        Self::sentinel_with_dialer_arc(Arc::new(dialer), sentinels, master_name)
    }

    fn sentinel_with_dialer_arc(
        dialer: Arc<dyn Dialer>,
        sentinels: Vec<NodeAddress>,
        master_name: &str,
    ) -> Self {
        // Replaced in `open` by the connector that asks the sentinels.
        let placeholder = Endpoint {
            connector: Arc::new(crate::adapter::connect::connector::TcpConnector::new(
                "0.0.0.0", 0,
            )),
            redis: RedisConnectionInfo::default(),
        };
        let mut builder = Self::new(false, vec![placeholder]);
        builder.sentinel = Some(SentinelSetup {
            sentinels,
            master_name: master_name.to_owned(),
            settings: RedisConnectionInfo::default(),
            dialer,
            from_urls: false,
        });
        builder
    }

    /// A builder for the Redis Cluster that the seed nodes at `seed_urls`
    /// (`redis://host:port`, or `rediss://` for TLS) belong to (see
    /// [`Locker::connect_cluster`]). The data nodes' credentials come from
    /// the first URL.
    pub fn cluster(seed_urls: &[&str]) -> Result<Self, ConnectError> {
        let (seeds, settings, tls) = addresses(seed_urls)?;
        let dialer = url_dialer(tls)?;
        let mut builder = Self::cluster_with_dialer(dialer, seeds);
        if let Some(cluster) = &mut builder.cluster {
            cluster.settings = settings;
            cluster.tls = tls;
            cluster.from_urls = true;
        }
        Ok(builder)
    }

    #[doc(hidden)]
    /// A cluster builder whose streams come from `dialer`, starting from
    /// the seed nodes at `seeds` (advanced: a simulator's network, or a
    /// custom transport).
    pub fn cluster_with_dialer(dialer: impl Dialer, seeds: Vec<NodeAddress>) -> Self {
        let mut builder = Self::new(false, Vec::new());
        builder.cluster = Some(ClusterSetup {
            seeds,
            settings: RedisConnectionInfo::default(),
            dialer: Arc::new(dialer),
            tls: false,
            from_urls: false,
        });
        builder
    }

    #[doc(hidden)]
    /// A builder whose streams come from `connector` (advanced).
    pub fn with_connector(connector: impl Connector) -> Self {
        Self::new(
            false,
            vec![Endpoint {
                connector: Arc::new(connector),
                redis: RedisConnectionInfo::default(),
            }],
        )
    }

    #[doc(hidden)]
    /// A Redlock builder with one node per connector, in order (advanced).
    /// An empty list fails at [`spawn`](Self::spawn).
    pub fn redlock_with_connectors<C: Connector>(connectors: impl IntoIterator<Item = C>) -> Self {
        let endpoints = connectors
            .into_iter()
            .map(|connector| Endpoint {
                connector: Arc::new(connector),
                redis: RedisConnectionInfo::default(),
            })
            .collect();
        Self::new(true, endpoints)
    }

    fn new(redlock: bool, endpoints: Vec<Endpoint>) -> Self {
        Self {
            redlock,
            endpoints,
            clock: Arc::new(TokioClock),
            entropy: Arc::new(OsEntropy),
            connect_timeout: Duration::from_secs(5),
            observer: None,
            urls: Vec::new(),
            sentinel: None,
            cluster: None,
        }
    }

    /// Connects over TLS with `options` to every node given by URL
    /// (`redis://` ones too); fails if their certificates or key do not load.
    /// A builder made from connectors is refused: wrap them in TLS instead.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, options: crate::TlsOptions) -> Result<Self, ConnectError> {
        if let Some(sentinel) = &mut self.sentinel {
            if !sentinel.from_urls {
                return Err(ConnectError::Url(
                    "tls options apply to sentinels given by url; wrap a custom dialer in \
                     TlsDialer instead"
                        .into(),
                ));
            }
            let upgrader = crate::adapter::connect::tls::TlsUpgrader::new(&options)?;
            sentinel.dialer = Arc::new(crate::adapter::connect::tls::TlsDialer::new(
                crate::adapter::connect::dial::TcpDialer,
                upgrader,
            ));
            return Ok(self);
        }
        if let Some(cluster) = &mut self.cluster {
            if !cluster.from_urls {
                return Err(ConnectError::Url(
                    "tls options apply to seed nodes given by url; wrap a custom dialer in \
                     TlsDialer instead"
                        .into(),
                ));
            }
            let upgrader = crate::adapter::connect::tls::TlsUpgrader::new(&options)?;
            cluster.dialer = Arc::new(crate::adapter::connect::tls::TlsDialer::new(
                crate::adapter::connect::dial::TcpDialer,
                upgrader,
            ));
            cluster.tls = true;
            return Ok(self);
        }
        if self.urls.len() != self.endpoints.len() {
            return Err(ConnectError::Url(
                "tls options apply to nodes given by url; wrap a custom connector in \
                 TlsDialer instead"
                    .into(),
            ));
        }
        for (endpoint, info) in self.endpoints.iter_mut().zip(&self.urls) {
            endpoint.connector = endpoint::tls_connector_for(info, Some(&options))?;
        }
        Ok(self)
    }

    /// Calls `observer` with every event of every lock (acquired, renewed,
    /// renewal failed, contended, lost, released), as it happens, on
    /// whichever task drove the lock's machine.
    pub fn observer(
        mut self,
        observer: impl Fn(&crate::adapter::connect::connector::Observed<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    #[doc(hidden)]
    /// Reads time from `clock` instead of tokio's clock (advanced).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    #[doc(hidden)]
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
        if let Some(cluster) = &mut self.cluster {
            cluster.settings = settings.clone();
        }
        self
    }

    /// Bounds each connection's opening, handshake included (default 5 s).
    /// Within it, an attempt not open after 250 ms gets a fresh one beside
    /// it (up to four), so a dial made while the network was cut does not
    /// wait for TCP's SYN retransmission; the first to open wins.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    #[doc(hidden)]
    /// Opens the first connection (for Redlock, one per node at once,
    /// returning once a majority has opened and the others have had 250 ms
    /// more: the driver finishes their attempts) and returns the locker
    /// with its driver, which
    /// must be polled for any lock to make progress: it carries redis-rs's
    /// connection tasks, the attempts still out, the watchdog and the
    /// wake-ups.
    pub async fn connect(self) -> Result<(Locker, Driver), ConnectError> {
        self.open(Tasks::Inline).await
    }

    /// Opens the first connection(s) like [`connect`](Self::connect), then
    /// spawns the driver and redis-rs's connection tasks on the current
    /// tokio runtime.
    pub async fn spawn(self) -> Result<Locker, ConnectError> {
        let (locker, task) = self.open(Tasks::Spawned).await?;
        tokio::spawn(task);
        Ok(locker)
    }

    async fn open(mut self, tasks: Tasks) -> Result<(Locker, Driver), ConnectError> {
        if let Some(cluster) = self.cluster.take() {
            return self.open_cluster(cluster, tasks).await;
        }
        if self.endpoints.is_empty() {
            return Err(ConnectError::NoNodes);
        }
        let mut check_targets = self.check_targets();
        let watch = match self.sentinel.take() {
            Some(setup) => {
                let primary_settings = self.endpoints[0].redis.clone();
                let resolver = SentinelResolver::new(setup.sentinels, setup.master_name.clone())
                    .sentinel_settings(setup.settings)
                    .master_settings(primary_settings.clone())
                    .timeout(self.connect_timeout);
                // The check resolves the primary for itself, so that it
                // never changes the address the driver's watch follows.
                let resolved: Current = Arc::default();
                check_targets = vec![CheckTarget {
                    name: format!("the primary of {}", setup.master_name),
                    endpoint: Endpoint {
                        connector: Arc::new(SentinelConnector {
                            resolver: resolver.clone(),
                            dialer: Arc::clone(&setup.dialer),
                            current: Arc::clone(&resolved),
                        }),
                        redis: primary_settings,
                    },
                    resolved: Some(resolved),
                }];
                let current: Current = Arc::default();
                self.endpoints[0].connector = Arc::new(SentinelConnector {
                    resolver: resolver.clone(),
                    dialer: Arc::clone(&setup.dialer),
                    current: Arc::clone(&current),
                });
                Some(SentinelWatch::new(
                    resolver,
                    setup.dialer,
                    current,
                    self.connect_timeout,
                ))
            }
            None => None,
        };
        let total = self.endpoints.len();
        // Returns once a majority has opened (for one node, once it has):
        // the attempts still out go on in the driver.
        let first = open_majority(&self.endpoints, self.connect_timeout)
            .await
            .map_err(|missed| {
                if self.redlock {
                    ConnectError::NoQuorum {
                        connected: missed.connected,
                        needed: missed.needed,
                        first: Box::new(missed.first),
                    }
                } else {
                    missed.first
                }
            })?;
        let mut session =
            Session::new(self.redlock, total, self.clock, self.entropy, self.observer);
        session.check_targets = check_targets;
        session.connect_timeout = self.connect_timeout;
        let session = Arc::new(session);
        let alive = Arc::new(Alive::new(Arc::clone(&session)));
        let task = Driver::new(
            Arc::clone(&session),
            &alive,
            self.endpoints,
            first,
            tasks,
            self.connect_timeout,
        )
        .with_sentinel_watch(watch);
        Ok((Locker { session, alive }, task))
    }
}

impl LockerBuilder {
    /// The nodes the deployment check reaches: one per endpoint, named by
    /// its URL's address where there is one.
    fn check_targets(&self) -> Vec<CheckTarget> {
        let from_urls = self.urls.len() == self.endpoints.len();
        self.endpoints
            .iter()
            .enumerate()
            .map(|(index, endpoint)| CheckTarget {
                name: match self.urls.get(index) {
                    Some(info) if from_urls => info.addr().to_string(),
                    _ => format!("node {index}"),
                },
                endpoint: endpoint.clone(),
                resolved: None,
            })
            .collect()
    }

    /// Reads the slot table from the seeds; the driver then keeps one
    /// connection per primary.
    async fn open_cluster(
        self,
        setup: ClusterSetup,
        tasks: Tasks,
    ) -> Result<(Locker, Driver), ConnectError> {
        if setup.seeds.is_empty() {
            return Err(ConnectError::NoNodes);
        }
        let router = Arc::new(ClusterRouter::new(
            Arc::clone(&setup.dialer),
            setup.settings.clone(),
            setup.seeds.clone(),
            setup.tls,
        ));
        let map = route::fetch_map(
            setup.dialer.as_ref(),
            &setup.settings,
            &setup.seeds,
            setup.tls,
            self.connect_timeout,
        )
        .await?;
        router.install(&map);
        let mut session = Session::new(false, 0, self.clock, self.entropy, self.observer);
        session.cluster = Some(Arc::clone(&router));
        session.connect_timeout = self.connect_timeout;
        let session = Arc::new(session);
        let alive = Arc::new(Alive::new(Arc::clone(&session)));
        let now = session.clock.now();
        let subscriber = Subscriber::new(
            Endpoint {
                connector: Arc::new(AnyNodeConnector {
                    router: Arc::clone(&router),
                }),
                redis: setup.settings,
            },
            self.connect_timeout,
        );
        let task = Driver::new(
            Arc::clone(&session),
            &alive,
            Vec::new(),
            Vec::new(),
            tasks,
            self.connect_timeout,
        )
        .with_subscriber(subscriber)
        .with_cluster(ClusterUpkeep::new(router, self.connect_timeout, tasks, now));
        Ok((Locker { session, alive }, task))
    }
}

/// The addresses, the first URL's connection settings, and whether the
/// URLs ask for TLS (`rediss://`).
fn addresses(urls: &[&str]) -> Result<(Vec<NodeAddress>, RedisConnectionInfo, bool), ConnectError> {
    if urls.is_empty() {
        return Err(ConnectError::NoNodes);
    }
    let mut addresses = Vec::with_capacity(urls.len());
    let mut settings = None;
    let mut tls = false;
    for url in urls {
        let info = url
            .into_connection_info()
            .map_err(|error| ConnectError::Url(format!("{url}: {error}")))?;
        let address = match info.addr() {
            redis::ConnectionAddr::Tcp(host, port) => NodeAddress::new(host.clone(), *port),
            redis::ConnectionAddr::TcpTls { host, port, .. } => {
                tls = true;
                NodeAddress::new(host.clone(), *port)
            }
            other => return Err(endpoint::unsupported(other)),
        };
        settings.get_or_insert_with(|| info.redis_settings().clone());
        addresses.push(address);
    }
    Ok((addresses, settings.unwrap_or_default(), tls))
}

/// Plain TCP, or TLS with the system's trusted roots.
fn url_dialer(tls: bool) -> Result<Arc<dyn Dialer>, ConnectError> {
    if !tls {
        return Ok(Arc::new(crate::adapter::connect::dial::TcpDialer));
    }
    #[cfg(feature = "tls")]
    {
        let upgrader = crate::adapter::connect::tls::TlsUpgrader::new(
            &crate::adapter::connect::tls::TlsOptions::new(),
        )?;
        Ok(Arc::new(crate::adapter::connect::tls::TlsDialer::new(
            crate::adapter::connect::dial::TcpDialer,
            upgrader,
        )))
    }
    #[cfg(not(feature = "tls"))]
    Err(ConnectError::Url(
        "rediss:// needs lock-core's `tls` feature".into(),
    ))
}

fn endpoint(info: &redis::ConnectionInfo) -> Result<Endpoint, ConnectError> {
    Ok(Endpoint {
        connector: endpoint::connector_for(info)?,
        redis: info.redis_settings().clone(),
    })
}
