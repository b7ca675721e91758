//! A Redis distributed lock for tokio services: it renews itself, hands out
//! fencing tokens, and tells you it lost the lock before Redis could give it
//! to anyone else.
//!
//! # Using the lock
//!
//! A [`Locker`] holds the connection to Redis and hands out a [`LockGuard`]
//! per lock; the guard's watchdog renews the key until you
//! [`release`](LockGuard::release) it (or drop the guard), and
//! [`lost`](LockGuard::lost) resolves the moment the lock can no longer be
//! trusted. Send the guard's [`fence`](LockGuard::fence) with every write,
//! so that the storage can refuse a write from an older holder.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use lock_core::{AcquireError, LockOptions, Locker};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let locker = Locker::connect("redis://127.0.0.1:6379/").await?;
//! // The key lives 30 s unless renewed; the watchdog renews it every 10 s.
//! let opts = LockOptions::new(Duration::from_secs(30))
//!     .renew_every(Duration::from_secs(10))
//!     .wait(Duration::from_secs(5));
//! let guard = match locker.acquire("orders:42", &opts).await {
//!     Ok(guard) => guard,
//!     Err(AcquireError::Timeout { waited }) => {
//!         println!("someone else held orders:42 for {waited:?}");
//!         return Ok(());
//!     }
//!     Err(error) => return Err(error.into()),
//! };
//! tokio::select! {
//!     reason = guard.lost() => eprintln!("lost the lock ({reason}); abandoning the work"),
//!     () = write_with_fence(guard.fence()) => guard.release().await?,
//! }
//! # Ok(())
//! # }
//! # async fn write_with_fence(_fence: u64) {}
//! ```
//!
//! # The lock family
//!
//! Besides the plain lock, a [`Locker`] offers:
//! - **fair mode** ([`LockOptions::fair`], the same [`Locker::acquire`]):
//!   waiters are granted in arrival order; a dead or paused waiter holds
//!   the queue up by at most its [`waiter_ttl`](LockOptions::waiter_ttl).
//!   Use it when every contender must get its turn.
//! - **a read-write lock** ([`Locker::acquire_read`],
//!   [`Locker::acquire_write`]): many readers ([`ReadGuard`], no fence) or
//!   one writer (a [`LockGuard`] with a fence); waiting writers are
//!   preferred over new readers. Use it when reads are many and may
//!   overlap, and writes must be alone.
//! - **a counting semaphore** ([`Locker::acquire_permit`]): at most N
//!   holders, each with its own lease, renewal, lost signal and fence. Use
//!   it to bound concurrency (connections, jobs) rather than to exclude.
//!
//! Each kind keeps every timing rule of the plain lock (see
//! [`LockMachine`], [`LockMachine::with_kind`]); only the script, the keys
//! and the operation codes differ ([`LockKind`], [`scripts::KeyNames`]).
//! All of a lock's keys share its hash tag, so one node, Sentinel and
//! Cluster all serve them; Redlock refuses them
//! ([`AcquireError::NotOnRedlock`]).
//!
//! # Topologies
//!
//! Each has a one-call constructor on [`Locker`] and a
//! [`LockerBuilder`] constructor for more settings (TLS, credentials,
//! timeouts):
//! - **A single primary** (with or without replicas):
//!   [`Locker::connect`], [`LockerBuilder::from_url`]. With replicas, set
//!   [`LockOptions::wait_replicas`] so that a grant survives a failover.
//! - **Sentinel**, following the primary through failovers:
//!   [`Locker::connect_sentinel`], [`LockerBuilder::sentinel`].
//! - **Redis Cluster**, each lock on the primary of its key's slot:
//!   [`Locker::connect_cluster`], [`LockerBuilder::cluster`].
//! - **Redlock**, one lock over several independent primaries, held while
//!   a majority holds it: [`Locker::connect_redlock`],
//!   [`LockerBuilder::redlock`].
//!
//! Which faults each one survives, and which need fencing at the resource,
//! is the safety table in the repository's `docs/safety.md` ("The safety
//! model and its limits"); every row names the simulator scenario that
//! checks it.
//! [`check_deployment`] and [`Locker::check_deployment`] read a server's
//! settings and report those that break the lock's assumptions.
//!
//! # Features
//!
//! - `redis` (default): the tokio + redis-rs adapter — [`Locker`] and
//!   everything around it. Without it (`default-features = false`) the
//!   crate is the sans-IO machines alone, without tokio or redis.
//! - `tls` (default): `rediss://` URLs and [`TlsOptions`].
//! - `cli`: the `redis-lock-check` binary, the deployment check from the
//!   command line.
//! - `metrics`: counters, a gauge and histograms through the `metrics`
//!   facade (`docs/operations.md`, "Metrics", lists them).
//!
//! # Sans-IO
//!
//! Under the adapter, every timing decision is made by a state machine
//! that performs no I/O and reads no clock: [`LockMachine`] for one node,
//! [`RedlockMachine`] for several, both driven through the [`Machine`]
//! trait. A driver of its own (another runtime, a simulator, a test) hands
//! them replies and the time, and sends the [`Command`]s they produce as
//! operations of the Lua script in [`scripts`].
//!
//! ```
//! use std::time::{Duration, Instant};
//! use lock_core::{Command, Event, LockMachine, LockOptions, Machine, Reply};
//!
//! let opts = LockOptions::new(Duration::from_secs(30));
//! let mut machine = LockMachine::new(&opts, "orders:42", "token-1".into(), 7)?;
//! let t0 = Instant::now();
//! machine.acquire(t0)?;
//! let (id, command) = machine.poll_command().expect("an acquire is sent at once");
//! assert!(matches!(command, Command::Acquire { .. }));
//! machine.handle_reply(t0 + Duration::from_millis(1), id, Reply::Granted { fence: 1, replicas: None, aof: None });
//! assert!(matches!(machine.poll_event(), Some(Event::Acquired { fence: 1, .. })));
//! // Validity counts from the send: 30 s − (30 s × 0.01 + 2 ms).
//! assert_eq!(machine.valid_until(), Some(t0 + Duration::from_millis(29_698)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

#[cfg(feature = "redis")]
mod adapter;
mod command;
mod contract;
mod event;
mod jitter;
mod machine;
mod options;
mod redlock;
pub mod scripts;

// The public interface: each name has this one path.

// Options, shared by the adapter and the machines.
pub use options::{AofCounts, DRIFT_FLOOR, Fencing, LockOptions, OptionsError, WaitAof};

// The adapter: connect, lock, and check the deployment.
#[cfg(feature = "redis")]
pub use crate::adapter::{
    AcquireError, CheckError, CheckOptions, ConnectError, DeploymentReport, Finding, FindingKind,
    LockGuard, Locker, LockerBuilder, LockerReport, NodeReport, Observed, ReadGuard, Reading,
    ReleaseError, Severity, UnknownKind, check_deployment,
};
#[cfg(feature = "tls")]
pub use crate::adapter::{TlsError, TlsMaterial, TlsOptions};

// The sans-IO machines, their inputs and their outputs.
pub use command::{Command, CommandId, Failure, Reply};
pub use contract::{Machine, Phase, UsageError};
pub use event::{AcquireFailure, Event, LostReason, ReleaseOutcome, RenewFailure};
pub use machine::LockMachine;
pub use redlock::{RedlockError, RedlockMachine};
pub use scripts::LockKind;

/// What only this workspace's simulator, benches and tests use: the
/// adapter's injection points (transport, clock, entropy), its driver
/// future, and the topology helpers they share with the simulated servers.
/// Not a stable interface.
#[doc(hidden)]
#[cfg(feature = "redis")]
pub mod internal {
    pub use crate::adapter::{
        Clock, ConnectFuture, Connector, Dialer, Driver, Entropy, NodeAddress, Observer, OsEntropy,
        RedisStream, TcpConnector, TcpDialer, TokioClock, cluster, sentinel,
    };
    #[cfg(feature = "tls")]
    pub use crate::adapter::{TlsConnector, TlsDialer, TlsUpgrader};

    /// The time-mixed fence floor a cluster locker uses for the lock key
    /// `lock_key` under `namespace`: the namespace's floor in that key's slot.
    pub fn cluster_fence_floor(namespace: &str, lock_key: &str) -> String {
        crate::adapter::floor_key(namespace, lock_key)
    }
}

/// The README's examples, compiled and run as doctests (they need a Redis at
/// `REDIS_URL`; `scripts/test.sh` starts one).
#[cfg(all(doctest, feature = "redis"))]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// The examples of the guide's pages under `docs/`, compiled (and those not
/// marked `no_run`, run against `REDIS_URL`) as the README's are: every
/// page is included, so a `rust` block added to any of them is checked.
#[cfg(all(doctest, feature = "redis"))]
pub mod docs_doctests {
    /// `docs/topologies.md`: Sentinel, Cluster, Redlock, TLS.
    #[doc = include_str!("../../docs/topologies.md")]
    pub struct Topologies;
    /// `docs/operations.md`: the deployment check, metrics, keys, errors.
    #[doc = include_str!("../../docs/operations.md")]
    pub struct Operations;
    /// `docs/safety.md`: the safety model and its limits.
    #[doc = include_str!("../../docs/safety.md")]
    pub struct Safety;
    /// `docs/family.md`: the lock family.
    #[doc = include_str!("../../docs/family.md")]
    pub struct Family;
    /// `docs/evidence.md`: chaos runs and performance.
    #[doc = include_str!("../../docs/evidence.md")]
    pub struct Evidence;
    /// `docs/simulation.md`: the simulator's internals.
    #[doc = include_str!("../../docs/simulation.md")]
    pub struct Simulation;
    /// `docs/ci.md`: the scenarios in a CI.
    #[doc = include_str!("../../docs/ci.md")]
    pub struct Ci;
}
