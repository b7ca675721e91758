//! Why a connection could not be opened.

use std::time::Duration;

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
    Tls(#[from] super::tls::TlsError),
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
        match super::sentinel::take_sentinel_error(error) {
            Ok(sentinel) => Self::Sentinel(sentinel),
            Err(error) => Self::Io(error),
        }
    }
}
