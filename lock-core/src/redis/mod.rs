//! The tokio + redis-rs adapter: [`Locker`] drives
//! [`LockMachine`](crate::LockMachine)s over multiplexed connections and
//! hands out [`LockGuard`]s.
//!
//! Where each job lives:
//! - `drive`: the hot path. `acquire` and `release` run the lock's machine
//!   in the caller's task, one round trip per command.
//! - `watchdog`: renewals (batched per node), expiry on time, and whatever
//!   callers leave behind.
//! - `driver`: the background future: connections and reconnection, the
//!   pub/sub wake-ups (`pubsub`) and the watchdog.
//! - `wire` and `call`: encoding commands, sending them, decoding replies;
//!   `batch`: group commit of operations sent at the same moment.
//! - `cell`, `session`, `node`, `machines`: the state they share.
//! - `dial`, `tls`, `connector`: where streams come from.
//! - `check`: the deployment check; `metrics`: the series recorded with
//!   the `metrics` feature.
//! - [`cluster`], [`sentinel`], `reply`: slots and shard maps, primary
//!   discovery, and reading admin replies; `follow`: following the primary
//!   a Sentinel names; `route`: slot routing in a Redis Cluster.

mod batch;
mod call;
mod cell;
mod check;
pub mod cluster;
mod connector;
mod dial;
mod drive;
mod driver;
mod error;
mod follow;
#[cfg(test)]
mod fuzz;
mod guard;
mod locker;
mod machines;
mod metrics;
mod node;
mod pubsub;
mod reply;
mod route;
pub mod sentinel;
mod session;
#[cfg(feature = "tls")]
mod tls;
mod watchdog;
mod wire;

pub use check::{
    CheckError, CheckOptions, DeploymentReport, Finding, FindingKind, LockerReport, NodeReport,
    Reading, Severity, UnknownKind, check_deployment,
};
pub use connector::{
    Clock, ConnectFuture, Connector, Entropy, Observed, Observer, OsEntropy, RedisStream,
    TcpConnector, TokioClock,
};
pub use dial::{Dialer, NodeAddress, TcpDialer};
pub use error::{AcquireError, ConnectError, ReleaseError};
pub use guard::LockGuard;
pub use locker::{Driver, Locker, LockerBuilder};
#[cfg(feature = "tls")]
pub use tls::{TlsConnector, TlsDialer, TlsError, TlsMaterial, TlsOptions, TlsUpgrader};
