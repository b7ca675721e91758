//! The connector for a URL: which transport (TCP or TLS) a parsed
//! `redis://` or `rediss://` address gets.

use std::sync::Arc;

#[cfg(not(feature = "tls"))]
use super::connector::TcpConnector;
use super::{connector::Connector, error::ConnectError};
#[cfg(feature = "tls")]
use super::{
    connector::TcpConnector,
    tls::{TlsConnector, TlsOptions},
};

/// The connector for a parsed URL: plain TCP for `redis://`, TLS with the
/// system's trusted roots for `rediss://` (with the `tls` feature).
///
/// Fails on transports the adapter does not speak (unix sockets), and on
/// `rediss://…#insecure` (certificate checks cannot be turned off).
pub(crate) fn connector_for(
    info: &redis::ConnectionInfo,
) -> Result<Arc<dyn Connector>, ConnectError> {
    #[cfg(feature = "tls")]
    {
        tls_connector_for(info, None)
    }
    #[cfg(not(feature = "tls"))]
    match info.addr() {
        redis::ConnectionAddr::Tcp(host, port) => {
            Ok(Arc::new(TcpConnector::new(host.clone(), *port)))
        }
        other => Err(unsupported(other)),
    }
}

/// The error for an address that is neither TCP nor TLS over TCP.
pub(crate) fn unsupported(addr: &redis::ConnectionAddr) -> ConnectError {
    ConnectError::Url(format!(
        "only tcp (redis://) and tls (rediss://) addresses are supported, not {addr}"
    ))
}

#[cfg(feature = "tls")]
/// The connector for a parsed URL: TCP for `redis://` unless `tls` options
/// are given, TLS for `rediss://` (system roots unless `tls` says otherwise)
/// and for `redis://` with `tls` options.
pub(crate) fn tls_connector_for(
    info: &redis::ConnectionInfo,
    tls: Option<&TlsOptions>,
) -> Result<Arc<dyn Connector>, ConnectError> {
    let (host, port) = match info.addr() {
        redis::ConnectionAddr::Tcp(host, port) if tls.is_none() => {
            return Ok(Arc::new(TcpConnector::new(host.clone(), *port)));
        }
        redis::ConnectionAddr::Tcp(host, port) => (host, *port),
        redis::ConnectionAddr::TcpTls {
            host,
            port,
            insecure,
            tls_params,
        } => {
            if *insecure {
                return Err(ConnectError::Url(format!(
                    "rediss://{host}:{port}/#insecure is not supported: trust the server's ca \
                     with TlsOptions::ca_pem instead"
                )));
            }
            if tls_params.is_some() {
                return Err(ConnectError::Url(
                    "redis-rs tls parameters are not supported: pass TlsOptions instead".into(),
                ));
            }
            (host, *port)
        }
        other => return Err(unsupported(other)),
    };
    let default = TlsOptions::default();
    let options = tls.unwrap_or(&default);
    Ok(Arc::new(TlsConnector::new(host.clone(), port, options)?))
}

#[cfg(test)]
mod tests {
    use redis::IntoConnectionInfo;

    use super::*;

    fn connector(url: &str) -> Result<Arc<dyn Connector>, ConnectError> {
        let info = url.into_connection_info().expect("a valid url");
        connector_for(&info)
    }

    #[test]
    fn plain_urls_get_a_tcp_connector() {
        assert!(connector("redis://127.0.0.1:6379/0").is_ok());
    }

    #[test]
    fn unix_sockets_are_refused_with_the_reason() {
        let Err(ConnectError::Url(message)) = connector("unix:///tmp/redis.sock") else {
            panic!("a unix socket must be refused");
        };
        assert!(message.contains("/tmp/redis.sock"), "{message}");
    }

    #[cfg(feature = "tls")]
    #[test]
    fn insecure_tls_is_refused() {
        let Err(ConnectError::Url(message)) = connector("rediss://example.com:6380/#insecure")
        else {
            panic!("#insecure must be refused");
        };
        assert!(message.contains("#insecure"), "{message}");
    }
}
