//! The tokio + redis-rs adapter: [`Locker`] drives
//! [`LockMachine`](crate::LockMachine)s over multiplexed connections and
//! hands out [`LockGuard`]s.
//!
//! The rooms, each importing only from the rooms above it in this list:
//! - `connect`: where streams come from (connectors, dialers, TLS, the
//!   transport a URL picks), one node's connection and its upkeep, and what
//!   discovery reads ([`sentinel`], the [`cluster`] slot map).
//! - `wire`: encoding commands and decoding replies, sending a call, group
//!   commit (`batch`), and routing by slot in a Redis Cluster.
//! - `lock`: one lock's life: its machine and shared state (`cell`),
//!   sending its commands (`dispatch`), the loop that runs it in the
//!   caller's task (`run`), the session every lock of a locker shares, the
//!   watchdog's registry, the release waiters, metrics and errors.
//! - `background`: the driver future and what it runs: the watchdog, the
//!   pub/sub wake-ups, following the Sentinels, the cluster's upkeep.
//! - `check`: the deployment check.
//! - `api`: [`Locker`], [`LockerBuilder`] and [`LockGuard`].
//!
//! `cargo test -p modgraph` checks that no two files import each other,
//! directly or around a circle.

mod api;
mod background;
mod check;
mod connect;
#[cfg(test)]
mod fuzz;
mod lock;
mod wire;

pub use api::guard::{LockGuard, ReadGuard};
pub use api::locker::{Locker, LockerBuilder};
pub use background::driver::Driver;
pub use check::{
    CheckError, CheckOptions, DeploymentReport, Finding, FindingKind, LockerReport, NodeReport,
    Reading, Severity, UnknownKind, check_deployment,
};
pub use connect::connector::{
    Clock, ConnectFuture, Connector, Entropy, Observed, Observer, OsEntropy, RedisStream,
    TcpConnector, TokioClock,
};
pub use connect::dial::{Dialer, NodeAddress, TcpDialer};
pub use connect::error::ConnectError;
#[cfg(feature = "tls")]
pub use connect::tls::{TlsConnector, TlsDialer, TlsError, TlsMaterial, TlsOptions, TlsUpgrader};
pub use connect::{sentinel, slots as cluster};
pub use lock::error::{AcquireError, ReleaseError};
pub(crate) use wire::route::floor_key;
