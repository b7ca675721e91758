//! On a server with a native conditional delete (`DELIFEQ`, Valkey 9.0
//! and later) a lock without fences sends no script in its whole cycle:
//! the acquire is `SET NX PX GET`, a renewal `SET … IFEQ … PX`, a release
//! `DELIFEQ` with the waiters' `PUBLISH` pipelined behind it (a Redlock
//! node's release without it), alone or in a batch. On the other servers
//! of the matrix the release stays the lock script. Read from the server's
//! own `INFO commandstats` while locks are taken, renewed and released.
//!
//! Which one a server is comes from its own `INFO server`; a pass that
//! asks for Valkey 9 (`LOCK_TEST_SERVER=valkey-9.1`) on an older server
//! fails rather than checking the script path.

#![cfg(feature = "redis")]

use crate::support;

use std::time::Duration;

use lock_core::{Fencing, LockOptions, Locker};
use support::RedisServer;

/// Whether `server` releases natively (`DELIFEQ`), read from its `INFO
/// server`. Panics when the test run asked for Valkey 9 or later
/// (`LOCK_TEST_SERVER`) and the server is older.
fn releases_natively(server: &RedisServer) -> bool {
    let info: String = server.query(&["INFO", "server"]);
    let identity = servers::Identity::from_info(&info).expect("INFO server names the server");
    let native = identity.family == servers::Family::Valkey && identity.version.major >= 9;
    if let Ok(wanted) = std::env::var(servers::TEST_SERVER_VAR)
        && let Ok(want) = wanted.parse::<servers::Want>()
        && want.family == servers::Family::Valkey
        && want.release.is_some_and(|release| release >= (9, 0))
    {
        assert!(
            native,
            "{}={wanted} asks for Valkey 9 (DELIFEQ), but the server is {identity}",
            servers::TEST_SERVER_VAR
        );
    }
    native
}

/// `calls` of `command` in `INFO commandstats` since the last `CONFIG
/// RESETSTAT` (zero for one not run).
fn calls(server: &RedisServer, command: &str) -> u64 {
    let stats: String = server.query(&["INFO", "commandstats"]);
    let prefix = format!("cmdstat_{command}:");
    stats
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map_or(0, |line| {
            line.split(',')
                .find_map(|pair| pair.strip_prefix("calls="))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or_else(|| panic!("calls in {line:?}"))
        })
}

/// Every call of a script since the last `CONFIG RESETSTAT`.
fn script_calls(server: &RedisServer) -> u64 {
    ["evalsha", "eval", "evalsha_ro", "eval_ro", "fcall"]
        .iter()
        .map(|command| calls(server, command))
        .sum()
}

/// No fence; renewed every 100 ms; waits up to 5 s. A ttl of 3 s and a
/// command timeout of 1 s, so that a loaded machine times nothing out: a
/// retried acquire that finds its own key refreshes it with the script.
fn unfenced() -> LockOptions {
    LockOptions::new(Duration::from_secs(3))
        .renew_every(Duration::from_millis(100))
        .command_timeout(Duration::from_secs(1))
        .fencing(Fencing::None)
        .wait(Duration::from_secs(5))
}

/// Cycles of `TASKS` tasks at once on one locker, each on a key of its
/// own, so that their operations share batches.
const TASKS: usize = 8;
const CYCLES: usize = 50;

#[tokio::test]
async fn an_unfenced_cycle_sends_no_script_on_valkey_9() {
    let server = RedisServer::start();
    let native = releases_natively(&server);
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let other = Locker::connect(&server.url()).await.expect("connect");
    let opts = unfenced();
    let _: String = server.query(&["CONFIG", "RESETSTAT"]);

    // One lock held across renewals, and a waiter on another locker that
    // the release's announcement hands it to.
    let guard = locker.acquire("held", &opts).await.expect("acquire");
    let waiter = {
        let (other, opts) = (other.clone(), opts.clone());
        tokio::spawn(async move { other.acquire("held", &opts).await })
    };
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(guard.is_held(), "the lock was lost while held");
    guard.release().await.expect("release");
    let handed = waiter
        .await
        .expect("waiter task")
        .expect("the waiter's grant");
    handed.release().await.expect("release");

    // Then short cycles from several tasks at once: batches.
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (locker, opts) = (locker.clone(), opts.clone());
            tokio::spawn(async move {
                for _ in 0..CYCLES {
                    let guard = locker
                        .acquire(&format!("cycle-{task}"), &opts)
                        .await
                        .expect("acquire");
                    guard.release().await.expect("release");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("cycling task");
    }

    let releases = 2 + (TASKS * CYCLES) as u64;
    let (scripts, delifeq, publish) = (
        script_calls(&server),
        calls(&server, "delifeq"),
        calls(&server, "publish"),
    );
    let (set, subscribe) = (calls(&server, "set"), calls(&server, "subscribe"));
    if native {
        assert_eq!(
            scripts, 0,
            "Valkey 9: {releases} unfenced cycles sent {scripts} script calls"
        );
        assert!(
            delifeq >= releases && publish >= releases,
            "{releases} releases, {delifeq} DELIFEQ, {publish} PUBLISH"
        );
        // The acquires (and the waiter's retries) and the renewals.
        assert!(
            set > releases,
            "{set} SET for {releases} cycles and renewals"
        );
        assert!(subscribe >= 1, "the waiter never subscribed");
    } else {
        assert_eq!(delifeq, 0, "DELIFEQ on a server without it");
        // Batched releases share script calls.
        assert!(
            scripts >= 1 && publish >= 1,
            "{releases} releases in {scripts} script calls, {publish} PUBLISH"
        );
    }
}

#[tokio::test]
async fn a_redlock_node_releases_with_delifeq_alone_on_valkey_9() {
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let native = releases_natively(&servers[0]);
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let locker = Locker::connect_redlock(&urls).await.expect("connect");
    let opts = unfenced();
    for server in &servers {
        let _: String = server.query(&["CONFIG", "RESETSTAT"]);
    }
    let guard = locker.acquire("redlock", &opts).await.expect("acquire");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(guard.is_held(), "the lock was lost while held");
    guard.release().await.expect("release");
    // The release returns at a majority of deletes: the last node's may
    // come after it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while servers
        .iter()
        .any(|server| support::get(server, "{lock:redlock}").is_some())
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for (node, server) in servers.iter().enumerate() {
        let (scripts, delifeq, publish) = (
            script_calls(server),
            calls(server, "delifeq"),
            calls(server, "publish"),
        );
        assert_eq!(
            publish, 0,
            "node {node}: a Redlock release announced itself"
        );
        if native {
            assert!(
                scripts == 0 && delifeq >= 1,
                "node {node}: an unfenced Redlock cycle sent {scripts} script calls and {delifeq} DELIFEQ"
            );
        } else {
            assert_eq!(delifeq, 0, "node {node}: DELIFEQ on a server without it");
            assert!(scripts >= 1, "node {node}: the release sent no script");
        }
    }
}
