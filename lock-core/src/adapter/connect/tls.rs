//! TLS for every topology: [`TlsOptions`] say whom to trust and who we are,
//! [`TlsUpgrader`] turns an open stream into a TLS stream for a host name,
//! [`TlsDialer`] wraps any [`Dialer`], and [`TlsConnector`] is the
//! [`Connector`] of one `rediss://` server.
//!
//! rustls with the ring provider does the work. Errors say which part
//! failed: the certificate or key material ([`TlsError::Unreadable`],
//! [`TlsError::NotPem`], [`TlsError::Missing`], [`TlsError::Rejected`]),
//! the name ([`TlsError::InvalidName`], [`TlsError::NameMismatch`]), or the
//! handshake ([`TlsError::ServerCertificate`],
//! [`TlsError::ClientCertificateRefused`], [`TlsError::Handshake`]).

use std::{borrow::Cow, fmt, io, path::PathBuf, sync::Arc};

use rustls::{
    AlertDescription, CertificateError, ClientConfig, RootCertStore,
    pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject},
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{
    connector::{ConnectFuture, Connector, RedisStream},
    dial::{Dialer, TcpDialer},
};

/// Which certificate or key a [`TlsError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsMaterial {
    /// A certificate authority to trust.
    CaCertificate,
    /// The certificate chain this client presents.
    ClientCertificate,
    /// The private key of the client certificate.
    ClientKey,
}

impl TlsMaterial {
    /// What a PEM file of this material must contain.
    fn item(self) -> &'static str {
        match self {
            Self::CaCertificate | Self::ClientCertificate => "certificate",
            Self::ClientKey => "private key",
        }
    }
}

impl fmt::Display for TlsMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::CaCertificate => "ca certificate",
            Self::ClientCertificate => "client certificate",
            Self::ClientKey => "client key",
        })
    }
}

/// Why TLS could not be set up, or why a TLS connection was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A certificate or key file could not be read.
    #[error("cannot read the {material} at {}: {source}", path.display())]
    Unreadable {
        /// Which material.
        material: TlsMaterial,
        /// The file.
        path: PathBuf,
        /// Why reading failed.
        source: io::Error,
    },
    /// The material is not PEM, or its PEM is damaged.
    #[error("the {material} is not valid pem: {detail}")]
    NotPem {
        /// Which material.
        material: TlsMaterial,
        /// What is wrong with it.
        detail: String,
    },
    /// The PEM holds no item of the needed kind (a key file without a key).
    #[error("the {material} holds no {}", .material.item())]
    Missing {
        /// Which material.
        material: TlsMaterial,
    },
    /// rustls refused the material (an unparsable certificate, a key that
    /// does not match the certificate, an unsupported key type).
    #[error("the {material} was rejected: {detail}")]
    Rejected {
        /// Which material.
        material: TlsMaterial,
        /// rustls's reason.
        detail: String,
    },
    /// No CA was given and the system's trusted roots could not be loaded.
    #[error("no trusted root certificates in the system store: {detail}")]
    NoSystemRoots {
        /// What went wrong loading them.
        detail: String,
    },
    /// The name to verify is neither a DNS name nor an IP address.
    #[error("invalid tls server name {name:?}")]
    InvalidName {
        /// The name as given.
        name: String,
    },
    /// The server's certificate is valid but not for the name checked.
    #[error("the certificate of {host} is not valid for the name {name}")]
    NameMismatch {
        /// The host dialed.
        host: String,
        /// The name checked (the host, or the server-name override).
        name: String,
    },
    /// The server's certificate failed verification (`UnknownIssuer`: the
    /// CA that signed it is not trusted; `Expired`, `BadSignature`, ...).
    #[error("the certificate of {host} is not trusted: {reason}")]
    ServerCertificate {
        /// The host dialed.
        host: String,
        /// rustls's reason, such as `UnknownIssuer`.
        reason: String,
    },
    /// The server refused this client's certificate, or its lack of one.
    #[error("{host} refused the client certificate: {alert}")]
    ClientCertificateRefused {
        /// The host dialed.
        host: String,
        /// The TLS alert the server sent, such as `CertificateRequired`.
        alert: String,
    },
    /// The handshake failed for another reason (protocol mismatch, the
    /// connection closed).
    #[error("tls handshake with {host} failed: {source}")]
    Handshake {
        /// The host dialed.
        host: String,
        /// The underlying error.
        source: io::Error,
    },
}

/// PEM from memory or from a file read when the options are built.
#[derive(Clone)]
enum Pem {
    Bytes(Vec<u8>),
    File(PathBuf),
}

impl Pem {
    fn load(&self, material: TlsMaterial) -> Result<Cow<'_, [u8]>, TlsError> {
        let bytes = match self {
            Self::Bytes(bytes) => Cow::Borrowed(bytes.as_slice()),
            Self::File(path) => {
                Cow::Owned(std::fs::read(path).map_err(|source| TlsError::Unreadable {
                    material,
                    path: path.clone(),
                    source,
                })?)
            }
        };
        // The PEM iterators skip text outside sections, so text without any
        // section would read as "no certificate": call it what it is.
        if !bytes.windows(11).any(|window| window == b"-----BEGIN ") {
            return Err(TlsError::NotPem {
                material,
                detail: "no pem section (-----BEGIN ...-----) found".into(),
            });
        }
        Ok(bytes)
    }

    fn certificates(
        &self,
        material: TlsMaterial,
    ) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        let bytes = self.load(material)?;
        let certificates = CertificateDer::pem_slice_iter(&bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| TlsError::NotPem {
                material,
                detail: error.to_string(),
            })?;
        if certificates.is_empty() {
            return Err(TlsError::Missing { material });
        }
        Ok(certificates)
    }

    fn private_key(&self) -> Result<PrivateKeyDer<'static>, TlsError> {
        let material = TlsMaterial::ClientKey;
        let bytes = self.load(material)?;
        PrivateKeyDer::from_pem_slice(&bytes).map_err(|error| match error {
            rustls::pki_types::pem::Error::NoItemsFound => TlsError::Missing { material },
            other => TlsError::NotPem {
                material,
                detail: other.to_string(),
            },
        })
    }
}

impl fmt::Debug for Pem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bytes(bytes) => write!(f, "Pem({} bytes)", bytes.len()),
            Self::File(path) => write!(f, "Pem({})", path.display()),
        }
    }
}

/// Whom to trust and who we are on TLS connections.
///
/// By default: the system's trusted roots, no client certificate, and the
/// server's certificate checked against the host dialed. Files are read when
/// a connector is built from the options, so errors surface before any
/// connection is tried.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    cas: Vec<Pem>,
    client: Option<(Pem, Pem)>,
    server_name: Option<String>,
}

impl TlsOptions {
    /// System roots, no client certificate, the host's own name.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trusts the CA certificates in `pem` instead of the system roots
    /// (call again to trust more).
    #[must_use]
    pub fn ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.cas.push(Pem::Bytes(pem.into()));
        self
    }

    /// Trusts the CA certificates in the PEM file at `path` instead of the
    /// system roots (call again to trust more).
    #[must_use]
    pub fn ca_pem_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.cas.push(Pem::File(path.into()));
        self
    }

    /// Presents this certificate chain (leaf first) and its private key, for
    /// servers that require client certificates (mutual TLS).
    #[must_use]
    pub fn client_cert_pem(
        mut self,
        cert_chain: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> Self {
        self.client = Some((Pem::Bytes(cert_chain.into()), Pem::Bytes(key.into())));
        self
    }

    /// Like [`client_cert_pem`](Self::client_cert_pem), from PEM files.
    #[must_use]
    pub fn client_cert_pem_files(
        mut self,
        cert_chain: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> Self {
        self.client = Some((Pem::File(cert_chain.into()), Pem::File(key.into())));
        self
    }

    /// Checks the server's certificate against `name` (and sends it as SNI)
    /// instead of the host dialed, on every connection.
    #[must_use]
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }
}

/// A built TLS client configuration that upgrades open streams to TLS.
/// Cheap to clone; build one and share it across every node.
#[derive(Clone)]
pub struct TlsUpgrader {
    connector: tokio_rustls::TlsConnector,
    server_name: Option<ServerName<'static>>,
}

impl fmt::Debug for TlsUpgrader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsUpgrader")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl TlsUpgrader {
    /// Loads the options' certificates and keys and builds the
    /// configuration; fails on material that does not load.
    pub fn new(options: &TlsOptions) -> Result<Self, TlsError> {
        let server_name = options
            .server_name
            .as_deref()
            .map(server_name)
            .transpose()?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            // The ring provider supports every default protocol version.
            .expect("ring supports TLS 1.2 and 1.3")
            .with_root_certificates(roots(&options.cas)?);
        let config = match &options.client {
            None => builder.with_no_client_auth(),
            Some((chain, key)) => {
                let chain = chain.certificates(TlsMaterial::ClientCertificate)?;
                builder
                    .with_client_auth_cert(chain, key.private_key()?)
                    .map_err(|error| TlsError::Rejected {
                        material: TlsMaterial::ClientKey,
                        detail: error.to_string(),
                    })?
            }
        };
        Ok(Self {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name,
        })
    }

    /// Runs the TLS handshake on `stream` for `host` (or the server-name
    /// override), then one `PING` round trip, and returns the TLS stream.
    ///
    /// The `PING` is what surfaces a refused client certificate here: under
    /// TLS 1.3 the server says so only after the client's side of the
    /// handshake is done. Any one-line reply (`+PONG`, `-NOAUTH ...`) counts.
    pub async fn upgrade(
        &self,
        stream: Box<dyn RedisStream>,
        host: &str,
    ) -> Result<Box<dyn RedisStream>, TlsError> {
        let name = match &self.server_name {
            Some(name) => name.clone(),
            None => server_name(host)?,
        };
        let shown_name = name.to_str().into_owned();
        let classify = |error| classify(error, host, &shown_name);
        let mut tls = self
            .connector
            .connect(name, stream)
            .await
            .map_err(classify)?;
        tls.write_all(b"PING\r\n").await.map_err(classify)?;
        tls.flush().await.map_err(classify)?;
        let mut line = Vec::with_capacity(32);
        let mut buffer = [0u8; 64];
        while !line.ends_with(b"\r\n") {
            let read = tls.read(&mut buffer).await.map_err(classify)?;
            let broken = match read {
                0 => Some((
                    io::ErrorKind::UnexpectedEof,
                    "closed after the tls handshake",
                )),
                _ if line.len() > 1024 => Some((io::ErrorKind::InvalidData, "no redis reply")),
                _ => None,
            };
            if let Some((kind, what)) = broken {
                return Err(TlsError::Handshake {
                    host: host.to_owned(),
                    source: io::Error::new(kind, what),
                });
            }
            line.extend_from_slice(&buffer[..read]);
        }
        Ok(Box::new(tls))
    }
}

fn server_name(name: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(name.to_owned()).map_err(|_| TlsError::InvalidName {
        name: name.to_owned(),
    })
}

/// The trusted roots: the given CAs, or the system's when none is given.
fn roots(cas: &[Pem]) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    if cas.is_empty() {
        let native = rustls_native_certs::load_native_certs();
        let (added, _unparsable) = roots.add_parsable_certificates(native.certs);
        if added == 0 {
            let detail = native
                .errors
                .first()
                .map_or_else(|| "the store is empty".to_owned(), ToString::to_string);
            return Err(TlsError::NoSystemRoots { detail });
        }
        return Ok(roots);
    }
    let material = TlsMaterial::CaCertificate;
    for ca in cas {
        for certificate in ca.certificates(material)? {
            roots.add(certificate).map_err(|error| TlsError::Rejected {
                material,
                detail: error.to_string(),
            })?;
        }
    }
    Ok(roots)
}

/// Names what a failed handshake or first read says about the parties.
fn classify(error: io::Error, host: &str, name: &str) -> TlsError {
    let host = host.to_owned();
    match error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        )) => TlsError::NameMismatch {
            host,
            name: name.to_owned(),
        },
        Some(rustls::Error::InvalidCertificate(reason)) => TlsError::ServerCertificate {
            host,
            reason: format!("{reason:?}"),
        },
        Some(rustls::Error::AlertReceived(
            alert @ (AlertDescription::CertificateRequired
            | AlertDescription::BadCertificate
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateRevoked
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnknownCA
            | AlertDescription::AccessDenied),
        )) => TlsError::ClientCertificateRefused {
            host,
            alert: format!("{alert:?}"),
        },
        _ => TlsError::Handshake {
            host,
            source: error,
        },
    }
}

/// Wraps a [`Dialer`]: every stream it opens is upgraded to TLS for the
/// host dialed. The dialer for clusters and Sentinels over TLS.
#[derive(Debug, Clone)]
pub struct TlsDialer<D = TcpDialer> {
    inner: D,
    upgrader: TlsUpgrader,
}

impl<D: Dialer> TlsDialer<D> {
    /// Dials with `inner`, then upgrades with `upgrader`.
    pub fn new(inner: D, upgrader: TlsUpgrader) -> Self {
        Self { inner, upgrader }
    }
}

impl<D: Dialer> Dialer for TlsDialer<D> {
    fn dial<'a>(&'a self, host: &'a str, port: u16) -> ConnectFuture<'a> {
        Box::pin(async move {
            let stream = self.inner.dial(host, port).await?;
            // Carried inside the io::Error; `ConnectError` takes it back out.
            self.upgrader
                .upgrade(stream, host)
                .await
                .map_err(io::Error::other)
        })
    }
}

/// Connects to one server over TLS on TCP (`TCP_NODELAY` set).
#[derive(Debug, Clone)]
pub struct TlsConnector {
    host: String,
    port: u16,
    dialer: TlsDialer,
}

impl TlsConnector {
    /// Connects to `host:port` with `options`; fails if their material does
    /// not load.
    pub fn new(host: impl Into<String>, port: u16, options: &TlsOptions) -> Result<Self, TlsError> {
        Ok(Self::with_upgrader(host, port, TlsUpgrader::new(options)?))
    }

    /// Connects to `host:port` with an upgrader built before.
    pub fn with_upgrader(host: impl Into<String>, port: u16, upgrader: TlsUpgrader) -> Self {
        Self {
            host: host.into(),
            port,
            dialer: TlsDialer::new(TcpDialer, upgrader),
        }
    }
}

impl Connector for TlsConnector {
    fn connect(&self) -> ConnectFuture<'_> {
        self.dialer.dial(&self.host, self.port)
    }
}

/// Takes a [`TlsError`] back out of the `io::Error` a [`TlsDialer`] or
/// [`TlsConnector`] carried it in.
pub(crate) fn take_tls_error(error: io::Error) -> Result<TlsError, io::Error> {
    if !error.get_ref().is_some_and(|inner| inner.is::<TlsError>()) {
        return Err(error);
    }
    // Just checked: the payload is a TlsError.
    let inner = error.into_inner().expect("checked above");
    Ok(*inner.downcast::<TlsError>().expect("checked above"))
}

#[cfg(test)]
mod tests;
