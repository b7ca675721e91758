//! The lock operations' errors, one enum per operation.

use std::time::Duration;

use crate::{AofCounts, Failure, LostReason, OptionsError};

/// Why an acquire did not produce a [`LockGuard`](crate::LockGuard).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AcquireError {
    /// The options break a timing rule.
    #[error("invalid lock options: {0}")]
    Options(#[from] OptionsError),
    /// Another owner held the lock for the whole wait.
    #[error("lock still held by another owner after waiting {waited:?}")]
    Timeout {
        /// How long the acquire waited.
        waited: Duration,
    },
    /// Redis could not be used (connection lost, timeout, `READONLY`,
    /// `LOADING`, `BUSY`, ...) until the wait ran out.
    #[error("redis unavailable: {0}")]
    Unavailable(Failure),
    /// The lock key holds a value that is not a string (`WRONGTYPE`).
    #[error("lock key holds a value of the wrong type")]
    WrongType,
    /// Fewer replicas than `wait_replicas` asked for acknowledged the grant;
    /// it was released.
    #[error("only {acked} of {wanted} replicas acknowledged the grant")]
    NotReplicated {
        /// Replicas that acknowledged.
        acked: u32,
        /// Replicas required.
        wanted: u32,
    },
    /// `WAITAOF` counted fewer fsyncs of the grant than `wait_aof` asked
    /// for (both counts are checked); it was released.
    #[error(
        "WAITAOF counted {}/{} local and {}/{} replica fsyncs of the grant",
        acked.local, wanted.local, acked.replicas, wanted.replicas
    )]
    NotDurable {
        /// What `WAITAOF` counted.
        acked: AofCounts,
        /// What `wait_aof` requires.
        wanted: AofCounts,
    },
    /// The options ask for a command the server lacks: `wait_aof` on a
    /// server before Redis 7.2 (its version says so, or it answered
    /// `unknown command`). Nothing was sent.
    #[error("the server lacks WAITAOF (Redis 7.2 or later, or Valkey): drop wait_aof or upgrade")]
    Unsupported,
    /// The lock family (fair mode, a read-write lock, a semaphore) was
    /// asked of a Redlock locker: its queue and leases live on one node
    /// (or one cluster slot), and a quorum of independent copies of them
    /// would not order waiters nor bound holders. Nothing was sent.
    #[error(
        "a {kind} lock is not available on a Redlock locker (use one node, Sentinel or Cluster)"
    )]
    NotOnRedlock {
        /// The kind asked for ([`LockKind::name`](crate::LockKind::name)).
        kind: &'static str,
    },
    /// The locker's driver is no longer running.
    #[error("the locker's driver has stopped")]
    DriverStopped,
}

/// Why [`LockGuard::release`](crate::LockGuard::release) did not cleanly
/// release a held lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReleaseError {
    /// The lock had already been lost; the owner-checked release was still
    /// sent and touched no other owner's key.
    #[error("the lock was already lost: {0}")]
    AlreadyLost(LostReason),
    /// Redis did not answer; the key expires by itself within one ttl.
    #[error("release unconfirmed: the key expires by itself within one ttl")]
    Unconfirmed,
    /// The locker's driver is no longer running.
    #[error("the locker's driver has stopped")]
    DriverStopped,
}
