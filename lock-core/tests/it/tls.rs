//! TLS against a real TLS-only `redis-server`: mutual TLS through `Locker`,
//! and refusals that say which side's certificate was wrong.

#![cfg(feature = "tls")]

use crate::support;

use std::time::Duration;

use lock_core::{ConnectError, LockOptions, Locker, LockerBuilder, TlsError, TlsOptions};
use support::{
    pki::Pki,
    tls::{ClientAuth, TlsRedis},
};

async fn connect(url: &str, options: TlsOptions) -> Result<Locker, ConnectError> {
    let (locker, driver) = LockerBuilder::from_url(url)?
        .tls(options)?
        .connect_timeout(Duration::from_secs(3))
        .connect()
        .await?;
    tokio::spawn(driver);
    Ok(locker)
}

#[tokio::test]
async fn mutual_tls_acquires_and_releases() {
    let server = TlsRedis::start(ClientAuth::Required);
    let one = connect(&server.url(), server.mutual_tls())
        .await
        .expect("mutual tls connects");
    let two = connect(&server.url(), server.mutual_tls())
        .await
        .expect("a second client connects");
    let opts = LockOptions::new(Duration::from_secs(10));
    let guard = one.acquire("tls:orders", &opts).await.expect("granted");
    assert!(guard.is_held());
    assert!(
        two.try_acquire("tls:orders", &opts)
            .await
            .expect("the server answers")
            .is_none(),
        "the lock is taken on the server both reach"
    );
    guard.release().await.expect("released over tls");
    let again = two
        .try_acquire("tls:orders", &opts)
        .await
        .expect("the server answers")
        .expect("free after the release");
    again.release().await.expect("released");
}

#[tokio::test]
async fn a_client_without_the_ca_is_refused_with_a_certificate_error() {
    let server = TlsRedis::start(ClientAuth::Optional);
    let stranger = Pki::new("some other ca");
    let error = connect(
        &server.url(),
        TlsOptions::new().ca_pem(stranger.ca_pem.clone()),
    )
    .await
    .expect_err("an untrusted server certificate");
    assert!(
        matches!(
            &error,
            ConnectError::Tls(TlsError::ServerCertificate { reason, .. }) if reason == "UnknownIssuer"
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn system_roots_do_not_trust_a_private_ca() {
    let server = TlsRedis::start(ClientAuth::Optional);
    // `rediss://` alone trusts the system's roots, which know nothing of
    // the test's CA.
    let error = Locker::connect(&server.url())
        .await
        .expect_err("a private ca is not a system root");
    assert!(
        matches!(
            &error,
            ConnectError::Tls(TlsError::ServerCertificate { reason, .. }) if reason == "UnknownIssuer"
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_client_without_a_certificate_is_refused_when_one_is_required() {
    let server = TlsRedis::start(ClientAuth::Required);
    let error = connect(
        &server.url(),
        TlsOptions::new().ca_pem(server.ca_pem().to_owned()),
    )
    .await
    .expect_err("no client certificate");
    assert!(
        matches!(
            &error,
            ConnectError::Tls(TlsError::ClientCertificateRefused { .. })
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_certificate_for_another_name_is_refused() {
    let server = TlsRedis::start(ClientAuth::Optional);
    let options = TlsOptions::new()
        .ca_pem(server.ca_pem().to_owned())
        .server_name("cache.example");
    let error = connect(&server.url(), options)
        .await
        .expect_err("the certificate names 127.0.0.1, not cache.example");
    assert!(
        matches!(&error, ConnectError::Tls(TlsError::NameMismatch { name, .. }) if name == "cache.example"),
        "{error:?}"
    );
}
