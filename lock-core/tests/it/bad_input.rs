//! Bad input gets a typed error and leaves the locker usable.

#![cfg(feature = "redis")]

use crate::support;

use std::time::Duration;

use lock_core::{AcquireError, ConnectError, LockOptions, Locker, LockerBuilder, OptionsError};

#[tokio::test]
async fn invalid_options_are_a_typed_error() {
    let server = support::RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let bad = LockOptions::new(Duration::from_secs(1)).renew_every(Duration::from_secs(2));
    assert!(matches!(
        locker.acquire("opts", &bad).await,
        Err(AcquireError::Options(OptionsError::RenewEvery { .. }))
    ));
    let bad = LockOptions::new(Duration::ZERO);
    assert_eq!(
        locker.try_acquire("opts", &bad).await.err(),
        Some(AcquireError::Options(OptionsError::ZeroTtl))
    );
    let fine = LockOptions::new(Duration::from_secs(1));
    locker.acquire("opts", &fine).await.expect("still usable");
}

#[tokio::test]
async fn wrong_type_key_is_a_typed_error() {
    let server = support::RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    server.cmd(&["LPUSH", "{lock:listy}", "x"]);
    let opts = LockOptions::new(Duration::from_secs(1));
    assert_eq!(
        locker.try_acquire("listy", &opts).await.err(),
        Some(AcquireError::WrongType)
    );
    assert_eq!(
        locker.acquire("listy", &opts).await.err(),
        Some(AcquireError::WrongType)
    );
    locker.acquire("other", &opts).await.expect("still usable");
}

#[tokio::test]
async fn refused_connection_is_a_connect_error() {
    let (_refusing, port) = support::refusing_port();
    let error = Locker::connect(&format!("redis://127.0.0.1:{port}/"))
        .await
        .expect_err("nothing listens there");
    assert!(matches!(error, ConnectError::Io(_)), "{error:?}");
}

#[tokio::test]
async fn silent_server_times_out_within_the_connect_timeout() {
    // Accepts TCP connections but never answers the handshake.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let _accepting = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let timeout = Duration::from_millis(300);
    let started = tokio::time::Instant::now();
    let error = LockerBuilder::from_url(&format!("redis://127.0.0.1:{port}/"))
        .expect("valid url")
        .connect_timeout(timeout)
        .connect()
        .await
        .expect_err("the handshake never completes");
    assert!(matches!(error, ConnectError::Timeout(_)), "{error:?}");
    assert!(started.elapsed() < timeout + Duration::from_secs(1));
}

#[test]
fn malformed_url_is_a_connect_error() {
    for url in [
        "not a url",
        "http://example.invalid/",
        "redis+unix:///tmp/x.sock",
    ] {
        assert!(
            matches!(LockerBuilder::from_url(url), Err(ConnectError::Url(_))),
            "{url}"
        );
    }
}

#[tokio::test]
async fn flushed_scripts_are_reloaded_on_noscript() {
    let server = support::RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let opts = LockOptions::new(Duration::from_secs(1));
    locker
        .acquire("a", &opts)
        .await
        .expect("first")
        .release()
        .await
        .expect("release");
    server.cmd(&["SCRIPT", "FLUSH"]);
    let guard = locker
        .acquire("b", &opts)
        .await
        .expect("NOSCRIPT is handled by reloading");
    guard.release().await.expect("release after reload");
}

#[test]
fn the_public_types_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: &T) {}
    send_sync::<Locker>();
    send_sync::<lock_core::LockGuard>();
    send_sync::<AcquireError>();
    let opts = LockOptions::new(Duration::from_secs(1));
    // The futures are Send, so they run inside tokio::spawn on any runtime.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    runtime.block_on(async {
        let server = support::RedisServer::start();
        let locker = Locker::connect(&server.url()).await.expect("connect");
        let acquire = locker.acquire("send", &opts);
        send(&acquire);
        let guard = tokio::spawn({
            let locker = locker.clone();
            let opts = opts.clone();
            async move { locker.acquire("spawned", &opts).await }
        })
        .await
        .expect("task")
        .expect("acquire in a spawned task");
        send(&guard.lost());
        let release = guard.release();
        send(&release);
        release.await.expect("release");
        drop(acquire);
    });
}
