//! A node that accepts connections but never answers (a hung process, a
//! host behind a firewall that lets the TCP handshake through) does not
//! hold up connecting while enough others answer, on real processes:
//! - Redlock: `connect_redlock` returns once a majority has answered the
//!   handshake, and a lock is granted right after; a node silent at
//!   connect that answers later joins, and the next grant reaches it;
//! - Sentinel: a silent sentinel listed first does not hold up resolving
//!   the primary through the others;
//! - Cluster: a silent seed node listed first does not hold up reading the
//!   slot table from the others.
//!
//! Each test sets a connect timeout far above what connecting takes on
//! loopback (milliseconds), and checks that connecting returned within a
//! sixth of it: waiting for the silent node would take the whole timeout.

#![cfg(feature = "redis")]

use crate::support;

use std::time::Duration;

use lock_core::{LockOptions, Locker, LockerBuilder};
use support::{RedisServer, cluster::Cluster, sentinel::SentinelGroup};
use tokio::time::Instant;

/// The connect timeout of every locker here: what waiting for a silent
/// node would cost.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long connecting may take while enough nodes answer: generous for a
/// loaded machine (the handshakes take milliseconds on loopback), and a
/// sixth of [`CONNECT_TIMEOUT`].
const PROMPT: Duration = Duration::from_secs(5);

const KEY: &str = "{lock:orders}";

fn opts() -> LockOptions {
    LockOptions::new(Duration::from_secs(2)).wait(Duration::from_secs(2))
}

/// Polls `check` every 10 ms until it holds or `within` has passed;
/// returns whether it held.
async fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn url(port: u16) -> String {
    format!("redis://127.0.0.1:{port}/")
}

/// Spawns the locker `builder` makes (with [`CONNECT_TIMEOUT`]) and
/// returns it with how long connecting took.
async fn timed(builder: LockerBuilder) -> (Locker, Duration) {
    let started = Instant::now();
    let locker = builder
        .connect_timeout(CONNECT_TIMEOUT)
        .spawn()
        .await
        .expect("connect while enough nodes answer");
    (locker, started.elapsed())
}

fn redlock(urls: &[String]) -> LockerBuilder {
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    LockerBuilder::redlock(&urls).expect("valid urls")
}

#[tokio::test]
async fn redlock_connects_once_a_majority_answered_and_grants_at_once() {
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let (_silent_a, a) = support::silent_port();
    let (_silent_b, b) = support::silent_port();
    // Five nodes, two silent (the first and the fourth): three answer, a
    // majority.
    let urls = vec![
        url(a),
        servers[0].url(),
        servers[1].url(),
        url(b),
        servers[2].url(),
    ];
    let (locker, took) = timed(redlock(&urls)).await;
    assert!(
        took < PROMPT,
        "connect_redlock took {took:?} with a majority answering (connect timeout \
         {CONNECT_TIMEOUT:?})"
    );
    let guard = locker
        .try_acquire("orders", &opts())
        .await
        .expect("no error")
        .expect("the three nodes that answer are a majority of five");
    for server in &servers {
        assert_eq!(support::get(server, KEY).as_deref(), Some(guard.token()));
    }
    guard.release().await.expect("release");
}

#[tokio::test]
async fn a_node_silent_at_connect_joins_once_it_answers() {
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    // Frozen, its kernel still completes TCP handshakes (into the listen
    // backlog); the Redis handshake waits for it to thaw.
    servers[2].pause();
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let (locker, took) = timed(redlock(&urls)).await;
    assert!(
        took < PROMPT,
        "connect_redlock took {took:?} with two of three answering"
    );
    let early = locker
        .try_acquire("orders", &opts())
        .await
        .expect("no error")
        .expect("two of three is a majority");
    let early_token = early.token().to_owned();
    early.release().await.expect("release");

    servers[2].resume();
    // The attempt begun at connect is still open (the connect timeout is
    // far off): it completes now, in the driver. An acquire that starts
    // before the driver has installed the connection skips the node, so
    // try a few, each released before the next.
    let deadline = Instant::now() + PROMPT;
    let mut tries = 0;
    let joined = loop {
        tries += 1;
        let guard = locker.acquire("orders", &opts()).await.expect("acquire");
        // The acquire returns on a majority; the third node's grant may
        // come just after.
        let token = guard.token().to_owned();
        let reached = eventually(Duration::from_secs(1), || {
            support::get(&servers[2], KEY).as_deref() == Some(token.as_str())
        })
        .await;
        if reached {
            break Some(guard);
        }
        guard.release().await.expect("release");
        if Instant::now() >= deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let guard = joined.unwrap_or_else(|| {
        panic!(
            "the node that answered late never received a grant ({tries} acquires over \
             {PROMPT:?} after it thawed)"
        )
    });
    eprintln!("the late node joined: granted on the acquire {tries} after it thawed");
    assert_ne!(guard.token(), early_token);
    for server in &servers {
        assert_eq!(support::get(server, KEY).as_deref(), Some(guard.token()));
    }
    guard.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_sentinel_listed_first_does_not_hold_up_connecting() {
    let group = tokio::task::spawn_blocking(SentinelGroup::start)
        .await
        .expect("the group starts");
    let (_silent, silent) = support::silent_port();
    let mut urls = vec![url(silent)];
    urls.extend(group.sentinel_urls());
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let builder = LockerBuilder::sentinel(&urls, group.master_name()).expect("valid urls");
    let (locker, took) = timed(builder).await;
    assert!(
        took < PROMPT,
        "connect_sentinel took {took:?} with a silent sentinel first and three answering"
    );
    let guard = locker
        .try_acquire("orders", &opts())
        .await
        .expect("no error")
        .expect("granted by the primary the other sentinels named");
    guard.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_seed_node_listed_first_does_not_hold_up_connecting() {
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(3, 0))
        .await
        .expect("the cluster starts");
    let (_silent, silent) = support::silent_port();
    let mut urls = vec![url(silent)];
    urls.extend(cluster.seed_urls());
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let builder = LockerBuilder::cluster(&urls).expect("valid urls");
    let (locker, took) = timed(builder).await;
    assert!(
        took < PROMPT,
        "connect_cluster took {took:?} with a silent seed first and three answering"
    );
    let guard = locker
        .try_acquire("orders", &opts())
        .await
        .expect("no error")
        .expect("granted on the slot's primary");
    guard.release().await.expect("release");
}
