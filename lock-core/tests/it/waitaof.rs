//! `LockOptions::wait_aof`: a grant or renewal counts only once `WAITAOF`
//! confirms the fsyncs it asks for, both counts checked. Against whichever
//! server the fixture starts (`scripts/test.sh` runs this file against
//! each server of its matrix): Redis 8.2 and Valkey answer `WAITAOF`;
//! Redis 7.0 has none, and the lock fails with a typed error before
//! sending anything.

#![cfg(feature = "redis")]

use crate::support;

use std::time::{Duration, Instant};

use lock_core::{AcquireError, AofCounts, LockOptions, Locker, LockerBuilder};
use support::RedisServer;

/// Whether the fixture's server has `WAITAOF` (Redis 7.2+, Valkey).
fn has_waitaof(server: &RedisServer) -> bool {
    let info: String = server.query(&["INFO", "server"]);
    let version = info
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .expect("INFO server has redis_version")
        .trim()
        .to_owned();
    let mut parts = version.split('.').map(|part| part.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (7, 2),
        _ => panic!("unreadable redis_version {version}"),
    }
}

/// `calls` of one command in `INFO commandstats` since the last reset.
fn calls(server: &RedisServer, command: &str) -> u64 {
    let stats: String = server.query(&["INFO", "commandstats"]);
    let prefix = format!("cmdstat_{command}:calls=");
    stats
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().expect("a count"))
}

/// Waits until the server's AOF is on and its first rewrite is done
/// (until then `WAITAOF` cannot count the local fsync).
fn wait_aof_ready(server: &RedisServer) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = server.query(&["INFO", "persistence"]);
        if info.contains("aof_enabled:1") && info.contains("aof_rewrite_in_progress:0") {
            return;
        }
        assert!(Instant::now() < deadline, "the AOF never came up:\n{info}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

async fn locker(server: &RedisServer) -> Locker {
    LockerBuilder::from_url(&server.url())
        .expect("url")
        .spawn()
        .await
        .expect("connect")
}

/// ttl 6 s, renewed every second (command timeout 900 ms), `WAITAOF local
/// replicas 800`. The servers run `appendfsync always`, so the local fsync
/// is done before the reply and the local count is there at once on every
/// server of the matrix. (Under `everysec` they differ: Redis 8.2 answers
/// `WAITAOF 1` only after its once-a-second fsync, so 800 ms can count
/// nothing; Valkey 8.1 answers at its next event-loop pass without waiting
/// for the fsync, see `LockOptions::wait_aof`.)
fn options(local: u32, replicas: u32) -> LockOptions {
    LockOptions::new(Duration::from_secs(6))
        .renew_every(Duration::from_secs(1))
        .command_timeout(Duration::from_millis(900))
        .wait(Duration::from_millis(1_200))
        .wait_aof(local, replicas, Duration::from_millis(800))
}

/// The AOF on, fsynced before each reply.
const ALWAYS: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];

const fn counts(local: u32, replicas: u32) -> AofCounts {
    AofCounts { local, replicas }
}

#[tokio::test]
async fn grants_and_renewals_wait_for_the_local_count() {
    let server = RedisServer::start_with(&ALWAYS);
    let locker = locker(&server).await;
    if !has_waitaof(&server) {
        // Redis 7.0: refused before anything is sent, with a clear error.
        let _: String = server.query(&["CONFIG", "RESETSTAT"]);
        let refused = locker.acquire("aof", &options(1, 0)).await;
        assert_eq!(refused.err(), Some(AcquireError::Unsupported));
        assert_eq!(calls(&server, "evalsha"), 0, "nothing was sent");
        assert_eq!(support::pttl(&server, "{lock:aof}"), -2, "no key left");
        // The same locker still serves locks without wait_aof.
        let plain = LockOptions::new(Duration::from_secs(1));
        let guard = locker.acquire("aof", &plain).await.expect("acquire");
        guard.release().await.expect("release");
        return;
    }
    wait_aof_ready(&server);
    let _: String = server.query(&["CONFIG", "RESETSTAT"]);
    let guard = locker
        .acquire("aof", &options(1, 0))
        .await
        .expect("acquire");
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(3_200) {
        assert!(guard.is_held(), "lost while every renewal was counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let waits = calls(&server, "waitaof");
    guard.release().await.expect("release");
    // The grant and about three renewals, each followed by its WAITAOF.
    assert!(
        waits >= 3,
        "{waits} WAITAOF for a grant and three seconds of renewals"
    );
}

#[tokio::test]
async fn a_shortfall_in_either_count_refuses_the_grant_and_removes_the_key() {
    let server = RedisServer::start_with(&ALWAYS);
    if !has_waitaof(&server) {
        return assert_eq!(
            locker(&server)
                .await
                .acquire("short", &options(1, 1))
                .await
                .err(),
            Some(AcquireError::Unsupported)
        );
    }
    wait_aof_ready(&server);
    let locker = locker(&server).await;
    // No replica: the local fsync is there, the replica's never comes.
    let short = locker.acquire("short", &options(1, 1)).await;
    assert_eq!(
        short.err(),
        Some(AcquireError::NotDurable {
            acked: counts(1, 0),
            wanted: counts(1, 1)
        })
    );
    assert_eq!(support::pttl(&server, "{lock:short}"), -2, "undone");

    // A replica without AOF never counts either; with AOF it does.
    let replica = RedisServer::replica_of(&server);
    let short = locker.acquire("short", &options(1, 1)).await;
    assert_eq!(
        short.err(),
        Some(AcquireError::NotDurable {
            acked: counts(1, 0),
            wanted: counts(1, 1)
        }),
        "a replica with appendonly no counted"
    );
    let _: String = replica.query(&["CONFIG", "SET", "appendonly", "yes"]);
    wait_aof_ready(&replica);
    // A replica reports how far its AOF is fsynced in its periodic
    // `REPLCONF ACK`, once a second: give the grant's WAITAOF that long.
    let patient = LockOptions::new(Duration::from_secs(6))
        .renew_every(Duration::from_secs(2))
        .wait(Duration::from_secs(3))
        .command_timeout(Duration::from_secs(3))
        .wait_aof(1, 1, Duration::from_millis(2_500));
    let guard = locker
        .acquire("short", &patient)
        .await
        .expect("fsynced here and on the replica");
    guard.release().await.expect("release");

    // AOF off on the primary: WAITAOF 1 answers an error, which counts
    // nothing: no grant, and the key is removed.
    let _: String = server.query(&["CONFIG", "SET", "appendonly", "no"]);
    let short = locker.acquire("off", &options(1, 0)).await;
    assert_eq!(
        short.err(),
        Some(AcquireError::NotDurable {
            acked: counts(0, 0),
            wanted: counts(1, 0)
        })
    );
    assert_eq!(support::pttl(&server, "{lock:off}"), -2, "undone");
}

#[tokio::test]
async fn a_granted_key_survives_a_kill_9_with_everysec() {
    // A process kill is not a machine crash: what redis-server wrote to its
    // AOF before replying is in the OS's page cache, fsynced or not, and
    // the restarted server reads it back. (The simulator's `aof-everysec`
    // restart models the machine crash, where it is lost.)
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "everysec"]);
    wait_aof_ready(&server);
    let locker = locker(&server).await;
    let plain = LockOptions::new(Duration::from_secs(30));
    let guard = locker.acquire("kept", &plain).await.expect("acquire");
    server.kill();
    server.restart_keeping_data();
    // It may answer LOADING for a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    let pttl = loop {
        match server.try_query::<i64>(&["PTTL", "{lock:kept}"]) {
            Ok(pttl) => break pttl,
            Err(error) => assert!(Instant::now() < deadline, "{error}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(pttl > 0, "the key was lost by a kill -9 (pttl {pttl})");
    drop(guard);
}
