//! Material errors, and handshakes against an in-process rustls server that
//! answers `PING` like Redis, so every classification is checked without a
//! redis-server (tests/it/tls.rs does that against the real one).

use std::{path::Path, sync::Arc};

use rustls::{ServerConfig, server::WebPkiClientVerifier};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};

use super::*;
use crate::adapter::connect::error::ConnectError;

#[path = "../../../../tests/support/pki.rs"]
mod pki;

use pki::{Identity, Pki};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certificates(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .expect("rcgen writes valid pem")
}

/// A TLS server on loopback that answers one line with `+PONG`, requiring a
/// client certificate signed by `client_ca` if one is given.
async fn pong_server(identity: &Identity, client_ca: Option<&Pki>) -> u16 {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the defaults");
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for certificate in certificates(&ca.ca_pem) {
                roots.add(certificate).expect("a valid ca");
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider())
                .build()
                .expect("a client verifier");
            builder.with_client_cert_verifier(verifier)
        }
    };
    let key = PrivateKeyDer::from_pem_slice(identity.key_pem.as_bytes()).expect("a key");
    let config = builder
        .with_single_cert(certificates(&identity.cert_pem), key)
        .expect("a server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("an address").port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut line = [0u8; 6];
                if tls.read_exact(&mut line).await.is_ok() && &line == b"PING\r\n" {
                    let _ = tls.write_all(b"+PONG\r\n").await;
                    let _ = tls.flush().await;
                }
            });
        }
    });
    port
}

async fn dial(port: u16, options: &TlsOptions) -> Result<Box<dyn RedisStream>, TlsError> {
    let upgrader = TlsUpgrader::new(options)?;
    let stream = TcpDialer
        .dial("127.0.0.1", port)
        .await
        .expect("the listener accepts");
    upgrader.upgrade(stream, "127.0.0.1").await
}

#[tokio::test]
async fn a_trusted_server_is_reached_and_answers() {
    let pki = Pki::new("test ca");
    let port = pong_server(&pki.server(&["127.0.0.1"]), None).await;
    let options = TlsOptions::new().ca_pem(pki.ca_pem.clone());
    dial(port, &options).await.expect("a trusted server");
}

#[tokio::test]
async fn an_unknown_issuer_is_a_server_certificate_error() {
    let pki = Pki::new("test ca");
    let port = pong_server(&pki.server(&["127.0.0.1"]), None).await;
    let other = Pki::new("another ca");
    let error = dial(port, &TlsOptions::new().ca_pem(other.ca_pem.clone()))
        .await
        .err()
        .expect("an untrusted server is refused");
    assert!(
        matches!(&error, TlsError::ServerCertificate { reason, .. } if reason == "UnknownIssuer"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_certificate_for_another_name_is_a_name_mismatch() {
    let pki = Pki::new("test ca");
    let port = pong_server(&pki.server(&["redis.example"]), None).await;
    let options = TlsOptions::new().ca_pem(pki.ca_pem.clone());
    let error = dial(port, &options).await.err().expect("the name differs");
    assert!(
        matches!(&error, TlsError::NameMismatch { name, .. } if name == "127.0.0.1"),
        "{error:?}"
    );
    // The override checks the name the certificate does carry.
    let options = options.server_name("redis.example");
    dial(port, &options).await.expect("the overriding name");
}

#[tokio::test]
async fn a_server_requiring_a_client_certificate_refuses_a_client_without_one() {
    let pki = Pki::new("test ca");
    let port = pong_server(&pki.server(&["127.0.0.1"]), Some(&pki)).await;
    let options = TlsOptions::new().ca_pem(pki.ca_pem.clone());
    let error = dial(port, &options).await.err().expect("no client cert");
    assert!(
        matches!(&error, TlsError::ClientCertificateRefused { alert, .. } if alert == "CertificateRequired"),
        "{error:?}"
    );
    let client = pki.client("lock-client");
    let options = options.client_cert_pem(client.cert_pem, client.key_pem);
    dial(port, &options).await.expect("mutual tls");
}

#[test]
fn text_without_pem_is_not_pem() {
    let error = TlsUpgrader::new(&TlsOptions::new().ca_pem("not a certificate"))
        .expect_err("garbage is refused");
    assert!(
        matches!(
            error,
            TlsError::NotPem {
                material: TlsMaterial::CaCertificate,
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn a_damaged_pem_section_is_not_pem() {
    let pem = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
    let error =
        TlsUpgrader::new(&TlsOptions::new().ca_pem(pem)).expect_err("bad base64 is refused");
    assert!(matches!(error, TlsError::NotPem { .. }), "{error:?}");
}

#[test]
fn a_key_file_without_a_key_is_missing_its_key() {
    let pki = Pki::new("test ca");
    let client = pki.client("lock-client");
    let options = TlsOptions::new()
        .ca_pem(pki.ca_pem.clone())
        .client_cert_pem(client.cert_pem.clone(), client.cert_pem);
    let error = TlsUpgrader::new(&options).expect_err("no key");
    assert!(
        matches!(
            error,
            TlsError::Missing {
                material: TlsMaterial::ClientKey
            }
        ),
        "{error:?}"
    );
    assert_eq!(error.to_string(), "the client key holds no private key");
}

#[test]
fn a_ca_file_with_only_a_key_is_missing_its_certificate() {
    let pki = Pki::new("test ca");
    let key = pki.client("lock-client").key_pem;
    let error = TlsUpgrader::new(&TlsOptions::new().ca_pem(key)).expect_err("no certificate");
    assert_eq!(error.to_string(), "the ca certificate holds no certificate");
}

#[test]
fn a_key_of_another_certificate_is_rejected() {
    let pki = Pki::new("test ca");
    let (one, two) = (pki.client("one"), pki.client("two"));
    let options = TlsOptions::new()
        .ca_pem(pki.ca_pem.clone())
        .client_cert_pem(one.cert_pem, two.key_pem);
    let error = TlsUpgrader::new(&options).expect_err("mismatched key");
    assert!(
        matches!(
            error,
            TlsError::Rejected {
                material: TlsMaterial::ClientKey,
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn an_unreadable_file_names_its_path() {
    let path = Path::new("/nonexistent/redis-lock/ca.pem");
    let error = TlsUpgrader::new(&TlsOptions::new().ca_pem_file(path)).expect_err("no such file");
    assert!(
        matches!(&error, TlsError::Unreadable { path: p, .. } if p == path),
        "{error:?}"
    );
    assert!(error.to_string().contains("/nonexistent/redis-lock/ca.pem"));
}

#[test]
fn an_invalid_server_name_is_refused_up_front() {
    let error =
        TlsUpgrader::new(&TlsOptions::new().server_name("not a name!")).expect_err("invalid name");
    assert!(matches!(error, TlsError::InvalidName { .. }), "{error:?}");
}

#[test]
fn connect_error_takes_the_tls_error_out_of_io() {
    let carried = io::Error::other(TlsError::InvalidName { name: "x y".into() });
    assert!(matches!(
        ConnectError::from(carried),
        ConnectError::Tls(TlsError::InvalidName { .. })
    ));
    let plain = io::Error::new(io::ErrorKind::ConnectionRefused, "refused");
    assert!(matches!(ConnectError::from(plain), ConnectError::Io(_)));
}
