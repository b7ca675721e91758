//! What the deployment check is told, and why it can fail.

use std::{
    fmt,
    sync::Arc,
    time::{Duration, SystemTime},
};

use crate::{LockOptions, adapter::connect::error::ConnectError};

/// Replicas acknowledge every second: two missed acknowledgements make one
/// lag.
const DEFAULT_MAX_REPLICA_LAG: Duration = Duration::from_secs(2);

/// What the check needs to know about the locks the server will hold.
#[derive(Clone)]
pub struct CheckOptions {
    pub(crate) ttl: Duration,
    pub(crate) wait_replicas: u32,
    pub(crate) wait_aof_local: u32,
    pub(crate) max_clock_offset: Duration,
    pub(crate) max_replica_lag: Duration,
    pub(crate) wall_clock: Arc<dyn Fn() -> SystemTime + Send + Sync>,
}

impl fmt::Debug for CheckOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckOptions")
            .field("ttl", &self.ttl)
            .field("wait_replicas", &self.wait_replicas)
            .field("wait_aof_local", &self.wait_aof_local)
            .field("max_clock_offset", &self.max_clock_offset)
            .field("max_replica_lag", &self.max_replica_lag)
            .finish_non_exhaustive()
    }
}

impl CheckOptions {
    /// Options for locks of `ttl` that do not `WAIT` for replicas, allowing
    /// the clock offset of the default drift margin (ttl × 0.01 + 2 ms).
    pub fn new(ttl: Duration) -> Self {
        Self::for_lock(&LockOptions::new(ttl))
    }

    /// Options matching `opts`: its ttl, its `wait_replicas` count, its
    /// `wait_aof` local count, and its drift margin as the largest clock
    /// offset allowed.
    pub fn for_lock(opts: &LockOptions) -> Self {
        Self {
            ttl: opts.ttl(),
            wait_replicas: opts.replicas().map_or(0, |(replicas, _)| replicas),
            wait_aof_local: opts.aof().map_or(0, |aof| aof.local),
            max_clock_offset: opts.drift(),
            max_replica_lag: DEFAULT_MAX_REPLICA_LAG,
            wall_clock: Arc::new(SystemTime::now),
        }
    }

    /// Sets how many replica acknowledgements the locks `WAIT` for (0: none).
    pub fn wait_replicas(mut self, replicas: u32) -> Self {
        self.wait_replicas = replicas;
        self
    }

    /// Sets the local fsyncs the locks' `WAITAOF` asks for (0: none, or no
    /// `wait_aof`). With 1, on a server whose `WAITAOF` waits for the fsync
    /// (Redis 8.0 and later), a grant counts only once it is on disk, so
    /// `appendfsync everysec` loses no counted lock (`aof-not-always` is
    /// not reported); Valkey and Redis 7.2 to 7.4 acknowledge before the
    /// fsync, so it is still reported there. A node with `appendonly no`
    /// refuses every grant.
    pub fn wait_aof_local(mut self, local: u32) -> Self {
        self.wait_aof_local = local;
        self
    }

    /// Sets the largest server clock offset that is not reported.
    ///
    /// The default is the lock's drift margin: a forward step of the
    /// server clock larger than that expires keys before their holders'
    /// `valid_until`.
    pub fn max_clock_offset(mut self, offset: Duration) -> Self {
        self.max_clock_offset = offset;
        self
    }

    /// Sets the longest a replica may go without acknowledging the primary
    /// before it counts as lagging (default 2 s).
    ///
    /// Replicas acknowledge every second, and Redis reports the lag in
    /// whole seconds: a lag of 0 or 1 is a replica keeping up.
    pub fn max_replica_lag(mut self, lag: Duration) -> Self {
        self.max_replica_lag = lag;
        self
    }

    /// Reads the local wall clock from `clock` instead of
    /// [`SystemTime::now`] (advanced: for tests and simulators).
    pub fn wall_clock(mut self, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.wall_clock = Arc::new(clock);
        self
    }
}

/// Why [`check_deployment`](crate::adapter::check::check_deployment) could not produce a report.
///
/// A refused command is not an error: it becomes a `*-unreadable` finding.
/// A refused authentication is, since under it every command is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The connection failed or timed out during the check.
    #[error("lost the connection to redis during the check: {0}")]
    Connection(#[source] redis::RedisError),
    /// No connection to the node could be opened for the check
    /// ([`Locker::check_deployment`](crate::Locker::check_deployment)).
    #[error("cannot connect to the node to check it: {0}")]
    Connect(#[source] ConnectError),
    /// The server refused every command for want of authentication
    /// (`NOAUTH`, `WRONGPASS`): nothing could be read.
    #[error("the server refused the connection's authentication ({0}): give the user and password")]
    Authentication(String),
}
