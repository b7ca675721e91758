//! Opening connections when the network eats the first attempt: a
//! connection not open after 250 ms gets a fresh attempt beside it
//! (`adapter/connect/attempts.rs`), so a dial made during a cut does not
//! wait for TCP's SYN retransmission or the connect timeout.

#![cfg(feature = "redis")]

use crate::support;

use std::time::Duration;

use lock_core::{LockOptions, LockerBuilder};

/// Listens on a port of its own: the first connection is accepted and
/// never answered (as a cut would leave it), every later one is piped to
/// `upstream`. Returns the port.
async fn first_connection_silent(upstream: u16) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move {
        let mut silent = Vec::new();
        while let Ok((mut client, _)) = listener.accept().await {
            if silent.is_empty() {
                silent.push(client);
                continue;
            }
            tokio::spawn(async move {
                if let Ok(mut redis) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut redis).await;
                }
            });
        }
    });
    port
}

#[tokio::test]
async fn a_first_attempt_left_unanswered_is_overtaken_by_a_fresh_one() {
    let server = support::RedisServer::start();
    let port = first_connection_silent(server.port()).await;
    // One attempt alone would wait out the whole connect timeout and fail.
    let locker = LockerBuilder::from_url(&format!("redis://127.0.0.1:{port}/"))
        .expect("valid url")
        .connect_timeout(Duration::from_secs(5))
        .spawn()
        .await
        .expect("the second attempt opens");
    let opts = LockOptions::new(Duration::from_secs(10));
    let guard = locker
        .try_acquire("overtaken", &opts)
        .await
        .expect("no error")
        .expect("free");
    assert!(support::get(&server, "{lock:overtaken}").is_some());
    guard.release().await.expect("released");
}
