//! The adapter's errors, one enum per operation.

use std::time::Duration;

use crate::{Failure, LostReason, OptionsError};

/// Why [`Locker::connect`](crate::Locker::connect) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL did not parse or names an unsupported transport.
    #[error("invalid redis url: {0}")]
    Url(String),
    /// The TCP connection failed.
    #[error("cannot connect to redis: {0}")]
    Io(#[source] std::io::Error),
    /// TLS failed: its certificates or key, the server's name, or the
    /// handshake.
    #[cfg(feature = "tls")]
    #[error("tls: {0}")]
    Tls(#[from] super::TlsError),
    /// The sentinels named no primary that confirmed it is one.
    #[error("sentinel: {0}")]
    Sentinel(#[from] super::sentinel::SentinelError),
    /// The cluster's slot map could not be read from any seed node.
    #[error("cluster: {0}")]
    Cluster(String),
    /// The connection opened but the handshake failed.
    #[error("redis handshake failed: {0}")]
    Handshake(#[source] redis::RedisError),
    /// Nothing answered within the connect timeout.
    #[error("connecting to redis timed out after {0:?}")]
    Timeout(Duration),
    /// A Redlock was asked for with no node.
    #[error("redlock needs at least one redis node")]
    NoNodes,
    /// Fewer than a majority of the Redlock nodes could be reached.
    #[error("reached {connected} redis nodes, redlock needs {needed}: {first}")]
    NoQuorum {
        /// Nodes that connected.
        connected: usize,
        /// The majority.
        needed: usize,
        /// Why the first unreachable node failed.
        first: Box<Self>,
    },
}

impl From<std::io::Error> for ConnectError {
    fn from(error: std::io::Error) -> Self {
        // A TLS connector reports through the Connector trait's io::Error;
        // take its typed error back out.
        #[cfg(feature = "tls")]
        let error = match super::tls::take_tls_error(error) {
            Ok(tls) => return Self::Tls(tls),
            Err(error) => error,
        };
        // So does the Sentinel connector.
        match super::follow::take_sentinel_error(error) {
            Ok(sentinel) => Self::Sentinel(sentinel),
            Err(error) => Self::Io(error),
        }
    }
}

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
