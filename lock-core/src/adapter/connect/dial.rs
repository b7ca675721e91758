//! Opening streams by address, for topologies whose nodes are learned at
//! run time (a Sentinel's current primary, a cluster's shard owners).
//!
//! A [`Connector`] always reaches "the" server; a [`Dialer`] reaches any
//! `host:port` it is given. Production dials TCP ([`TcpDialer`]), optionally
//! wrapped in TLS (`TlsDialer`, with the `tls` feature); a simulator dials
//! its own network.

use std::{fmt, sync::Arc};

use super::connector::{ConnectFuture, RedisStream};

/// Opens streams to Redis nodes by address. Advanced: most users never
/// implement it.
///
/// Used where the address comes from the servers themselves: a Sentinel
/// naming the primary, a cluster naming a slot's owner or redirecting.
pub trait Dialer: Send + Sync + 'static {
    /// Opens a new stream to `host:port`.
    fn dial<'a>(&'a self, host: &'a str, port: u16) -> ConnectFuture<'a>;
}

/// Dials over TCP with `TCP_NODELAY` set.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpDialer;

impl Dialer for TcpDialer {
    fn dial<'a>(&'a self, host: &'a str, port: u16) -> ConnectFuture<'a> {
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect((host, port)).await?;
            // Without it every small command waits on Nagle's algorithm.
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as Box<dyn RedisStream>)
        })
    }
}

impl<D: Dialer + ?Sized> Dialer for Arc<D> {
    fn dial<'a>(&'a self, host: &'a str, port: u16) -> ConnectFuture<'a> {
        (**self).dial(host, port)
    }
}

/// Where a Redis node accepts clients, as servers name it: in a cluster's
/// slot map and redirections, or a Sentinel's answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeAddress {
    /// An IP address (IPv6 without brackets) or a host name.
    pub host: String,
    /// The client port.
    pub port: u16,
}

impl NodeAddress {
    /// The address `host:port`.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
        }
    }

    /// Parses `host:port`, `[ipv6]:port` or `ipv6:port` (the last colon
    /// splits). An empty host means "the host the reply came from", which
    /// `origin_host` supplies.
    pub fn parse(text: &str, origin_host: &str) -> Option<Self> {
        let (host, port) = text.rsplit_once(':')?;
        let port = port.parse().ok()?;
        let host = host
            .strip_prefix('[')
            .and_then(|host| host.strip_suffix(']'))
            .unwrap_or(host);
        let host = if host.is_empty() { origin_host } else { host };
        Some(Self::new(host, port))
    }
}

impl fmt::Display for NodeAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tcp_dialer_reaches_a_listener_by_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("address").port();
        let (dialed, accepted) = tokio::join!(TcpDialer.dial("127.0.0.1", port), listener.accept());
        assert!(dialed.is_ok() && accepted.is_ok());
    }
}
