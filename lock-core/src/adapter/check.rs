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
//! row of the safety table (`docs/safety.md`) it belongs to and saying
//! what to change. It only reads: it never writes a key or changes a setting.
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
mod options;
mod read;
mod replication;
mod report;
mod rules;

use redis::aio::ConnectionLike;

pub(crate) use nodes::check_nodes;
pub use nodes::{LockerReport, NodeReport};
pub use options::{CheckError, CheckOptions};
pub use report::{DeploymentReport, Finding, FindingKind, Reading, Severity, UnknownKind};

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
