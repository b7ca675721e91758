//! The deployment check: reads a Redis server's configuration and state and
//! reports what in it can break the lock.
//!
//! Most broken Redis locks are broken by the server's configuration, not by
//! the client: an eviction policy that drops a held key, a restart that
//! forgets it, a failover to a replica that never had it. The check reads
//! what it can — `CONFIG GET` (`maxmemory-policy`, `maxmemory`,
//! `appendonly`, `appendfsync`, `save`, `min-replicas-to-write`,
//! `min-replicas-max-lag`, `replica-read-only`), `INFO` (`server`, `memory`,
//! `persistence`, `replication`), `ROLE`, and `TIME` against the local wall
//! clock — and reports one [`Finding`] per problem, each pointing to the
//! row of the README's safety table it belongs to and saying what to
//! change. It only reads: it never writes a key or changes a setting.
//!
//! Where the server refuses a command (managed services rename or disable
//! `CONFIG`: `ERR unknown command 'CONFIG'`; an ACL answers `NOPERM`), the
//! check falls back to `INFO` where `INFO` says the same thing, and
//! otherwise reports a `*-unreadable` finding with the refusal instead of
//! guessing.
//!
//! The rule: **what was not read is not passed.** A `*-unreadable` finding
//! (severity [`Severity::Unknown`]) makes [`DeploymentReport::is_safe`]
//! false, as an unsafe one does, and the `redis-lock-check` command fails
//! on it unless told to accept it. A server that refuses the connection's
//! authentication (`NOAUTH`, `WRONGPASS`) would refuse every read: that is
//! [`CheckError::Authentication`], not a report.
//!
//! Replicas are counted from `INFO replication`, which lists every replica
//! attached whatever its state, not from `ROLE`, which lists only those
//! online: a replica in its initial sync, or looping through full resyncs,
//! is attached, a failover may promote it, and it has none of the locks.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use lock_core::{CheckOptions, LockOptions, check_deployment};
//!
//! let client = redis::Client::open("redis://127.0.0.1:6379/")?;
//! let mut conn = client.get_multiplexed_async_connection().await?;
//! let opts = LockOptions::new(Duration::from_secs(30));
//! let report = check_deployment(&mut conn, &CheckOptions::for_lock(&opts)).await?;
//! print!("{report}");
//! if !report.is_safe() {
//!     eprintln!("this Redis can lose or double-grant locks");
//! }
//! # Ok(())
//! # }
//! ```

mod nodes;
mod read;
mod replication;
mod report;
mod rules;

use std::{fmt, sync::Arc, time::Duration, time::SystemTime};

use redis::aio::ConnectionLike;

pub(crate) use nodes::{CheckTarget, check_nodes};
pub use nodes::{LockerReport, NodeReport};
pub use report::{DeploymentReport, Finding, FindingKind, Reading, Severity, UnknownKind};

use crate::{LockOptions, redis::ConnectError};

/// Replicas acknowledge every second: two missed acknowledgements make one
/// lag.
const DEFAULT_MAX_REPLICA_LAG: Duration = Duration::from_secs(2);

/// What the check needs to know about the locks the server will hold.
#[derive(Clone)]
pub struct CheckOptions {
    pub(crate) ttl: Duration,
    pub(crate) wait_replicas: u32,
    pub(crate) max_clock_offset: Duration,
    pub(crate) max_replica_lag: Duration,
    wall_clock: Arc<dyn Fn() -> SystemTime + Send + Sync>,
}

impl fmt::Debug for CheckOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckOptions")
            .field("ttl", &self.ttl)
            .field("wait_replicas", &self.wait_replicas)
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

    /// Options matching `opts`: its ttl, its `wait_replicas` count, and its
    /// drift margin as the largest clock offset allowed.
    pub fn for_lock(opts: &LockOptions) -> Self {
        Self {
            ttl: opts.ttl(),
            wait_replicas: opts.replicas().map_or(0, |(replicas, _)| replicas),
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

/// Why [`check_deployment`] could not produce a report.
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

/// Reads the server behind `conn` and reports what in its configuration can
/// break locks taken with `opts`.
///
/// Only reads (`CONFIG GET`, `INFO`, `ROLE`, `TIME`), one command at a time,
/// on the connection given: run it on a connection to the node the locks
/// use (for Redlock, once per node), or let
/// [`Locker::check_deployment`](crate::Locker::check_deployment) find them.
/// A command the server refuses becomes a finding; only a transport failure
/// or a refused authentication is an error. The connection's own response
/// timeout bounds each command.
pub async fn check_deployment<C: ConnectionLike + Send>(
    conn: &mut C,
    opts: &CheckOptions,
) -> Result<DeploymentReport, CheckError> {
    let server = read::server(conn, opts.wall_clock.as_ref()).await?;
    Ok(DeploymentReport {
        findings: rules::findings(&server, opts),
        readings: rules::readings(&server),
    })
}
