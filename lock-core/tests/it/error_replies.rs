//! Every error reply the README names, produced by a real `redis-server`
//! and followed through the public API to what the guard and the user see:
//! `READONLY`, `LOADING`, `BUSY`, `NOSCRIPT`, `WRONGTYPE`, `NOREPLICAS` and
//! a connection reset.
//!
//! The timing assertions are about the lock's semantics (lost at the next
//! renewal, or at the deadline and not before), never about speed; each
//! leaves a margin for scheduler noise far below the gap it tells apart.

#![cfg(feature = "redis")]

use crate::support;

use std::{
    thread,
    time::{Duration, Instant},
};

use lock_core::{
    AcquireError, Failure, LockGuard, LockOptions, Locker, LostReason, ReleaseError, scripts,
};
use support::RedisServer;

/// Scheduler noise allowed on a loaded 2-core machine.
const SLACK: Duration = Duration::from_millis(150);

/// The locker's clock (tokio's), for comparison with `valid_until`.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Waits for the loss (at most `within`) and returns its reason and instant.
async fn lost_within(guard: &LockGuard, within: Duration) -> (LostReason, Instant) {
    let reason = tokio::time::timeout(within, guard.lost())
        .await
        .unwrap_or_else(|_| panic!("lost() did not resolve within {within:?}"));
    (reason, now())
}

/// Asserts the loss came at the deadline: not before it (nothing but time
/// ended the lock), and not late.
fn assert_lost_at_deadline(lost_at: Instant, valid_until: Instant) {
    assert!(
        lost_at >= valid_until,
        "lost {:?} before the deadline",
        valid_until - lost_at
    );
    assert!(
        lost_at <= valid_until + SLACK,
        "lost {:?} after the deadline",
        lost_at - valid_until
    );
}

/// Polls `condition` every 5 ms until it holds (at most 10 s).
fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

fn error_code(result: redis::RedisResult<redis::Value>) -> Option<String> {
    result
        .err()
        .and_then(|error| error.code().map(str::to_owned))
}

// READONLY -------------------------------------------------------------------

/// A primary demoted under a held lock answers the renewal's write with
/// `READONLY`: the lock is lost at that renewal, as `Failover`, long before
/// its deadline. The new primary is frozen, so the demoted node never
/// resyncs and still has the key: only the write can fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readonly_loses_the_lock_at_the_next_renewal_not_at_the_deadline() {
    let server = RedisServer::start();
    let new_primary = RedisServer::start();
    new_primary.pause();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let renew_every = Duration::from_millis(300);
    let opts = LockOptions::new(Duration::from_secs(6)).renew_every(renew_every);
    let guard = locker.acquire("demoted", &opts).await.expect("acquire");
    // A lock whose next renewal is seconds away, to be released instead.
    let slow = LockOptions::new(Duration::from_secs(6)).renew_every(Duration::from_secs(5));
    let to_release = locker
        .acquire("demoted-release", &slow)
        .await
        .expect("acquire");

    let port = new_primary.port().to_string();
    let _: String = server.query(&["REPLICAOF", "127.0.0.1", &port]);
    let demoted_at = now();
    let valid_until = guard.valid_until().expect("held");
    let release = tokio::spawn(to_release.release());
    let (reason, lost_at) = lost_within(&guard, Duration::from_secs(6)).await;

    assert_eq!(reason, LostReason::Failover);
    assert!(!guard.is_held());
    // At the next renewal: within one period of the demotion...
    assert!(
        lost_at <= demoted_at + renew_every + SLACK,
        "lost {:?} after the demotion, renewals every {renew_every:?}",
        lost_at - demoted_at
    );
    // ...which is seconds before the deadline.
    assert!(valid_until - lost_at > Duration::from_secs(4));
    assert_eq!(
        support::get(&server, "{lock:demoted}").as_deref(),
        Some(guard.token()),
        "the demoted node still has the key: only the write failed"
    );
    assert_eq!(
        guard.release().await,
        Err(ReleaseError::AlreadyLost(LostReason::Failover))
    );
    // The demoted node refuses the release's delete too: it is unconfirmed,
    // and the key stays until its ttl.
    assert_eq!(
        release.await.expect("no panic"),
        Err(ReleaseError::Unconfirmed)
    );
    assert!(support::get(&server, "{lock:demoted-release}").is_some());
    new_primary.resume();
}

/// A demotion to a live primary: the node resyncs (and drops the key), so
/// the next renewal meets `READONLY` or a missing key. Either way the lock
/// is lost at that renewal, not at the deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demoted_and_resynced_node_loses_the_lock_at_the_next_renewal() {
    let server = RedisServer::start();
    let new_primary = RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let renew_every = Duration::from_millis(300);
    let opts = LockOptions::new(Duration::from_secs(6)).renew_every(renew_every);
    let guard = locker.acquire("resynced", &opts).await.expect("acquire");

    let port = new_primary.port().to_string();
    let _: String = server.query(&["REPLICAOF", "127.0.0.1", &port]);
    let demoted_at = now();
    let (reason, lost_at) = lost_within(&guard, Duration::from_secs(6)).await;
    assert!(
        matches!(reason, LostReason::Failover | LostReason::NotOwner),
        "{reason:?}"
    );
    assert!(lost_at <= demoted_at + renew_every + SLACK);
}

/// An acquire against a replica is refused (`READONLY`) on every attempt
/// until the wait runs out, and says why.
#[tokio::test]
async fn acquire_on_a_replica_is_unavailable_with_readonly() {
    let primary = RedisServer::start();
    let replica = RedisServer::replica_of(&primary);
    let locker = Locker::connect(&replica.url()).await.expect("connect");
    let wait = Duration::from_millis(400);
    let opts = LockOptions::new(Duration::from_secs(5)).wait(wait);
    let started = now();
    let error = locker
        .acquire("on-replica", &opts)
        .await
        .expect_err("a replica refuses writes");
    assert_eq!(error, AcquireError::Unavailable(Failure::ReadOnly));
    assert!(now() - started >= wait, "retried until the wait ran out");
}

// LOADING --------------------------------------------------------------------

/// A server restarted on an RDB that takes seconds to load: every renewal
/// meets `LOADING`, none extends the lock, and it is lost at its deadline.
/// An acquire meanwhile is refused with `LOADING`, and one that waits long
/// enough is granted once the load ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loading_refuses_renewals_and_the_lock_is_lost_at_its_deadline() {
    // key-load-delay (µs per key) and a small event interval make a small
    // RDB load slowly while the server keeps answering LOADING.
    let mut server = RedisServer::start_with(&[
        "--key-load-delay",
        "100",
        "--loading-process-events-interval-bytes",
        "1024",
    ]);
    let _: i64 = server.query(&[
        "EVAL",
        "for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'filler:' .. i, i) end return 1",
        "0",
        "30000",
    ]);
    let _: String = server.query(&["SAVE"]);
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let opts = LockOptions::new(Duration::from_secs(1)).drift_factor(0.1);
    let guard = locker.acquire("loading", &opts).await.expect("acquire");
    let to_release = locker
        .acquire("loading-release", &opts)
        .await
        .expect("acquire");

    server.restart_keeping_data();
    let loading = || {
        server
            .query::<String>(&["INFO", "persistence"])
            .contains("loading:1")
    };
    assert!(loading(), "the server is loading its dataset");
    // Renewals since the restart failed: this deadline is final.
    let valid_until = guard.valid_until().expect("still within validity");
    let release = tokio::spawn(to_release.release());
    let (reason, lost_at) = lost_within(&guard, Duration::from_secs(2)).await;
    assert_eq!(reason, LostReason::Expired);
    assert_lost_at_deadline(lost_at, valid_until);
    assert_eq!(
        release.await.expect("no panic"),
        Err(ReleaseError::Unconfirmed)
    );
    assert!(loading(), "the load outlasted the lock and the release");

    let short = LockOptions::new(Duration::from_secs(1)).wait(Duration::from_millis(300));
    let error = locker
        .acquire("during-load", &short)
        .await
        .expect_err("a loading server refuses the acquire");
    assert_eq!(error, AcquireError::Unavailable(Failure::Loading));

    let patient = LockOptions::new(Duration::from_secs(1)).wait(Duration::from_secs(20));
    let granted = locker
        .acquire("after-load", &patient)
        .await
        .expect("granted once the load ends");
    assert!(!loading());
    granted.release().await.expect("release");
}

// BUSY -----------------------------------------------------------------------

/// Runs a script that loops until `SCRIPT KILL`, on its own connection and
/// thread, and returns once the server answers `BUSY`.
fn start_busy_script(server: &RedisServer) -> thread::JoinHandle<()> {
    let _: String = server.query(&["CONFIG", "SET", "busy-reply-threshold", "50"]);
    let url = server.url();
    let script = thread::spawn(move || {
        let client = redis::Client::open(url).expect("a valid url");
        let mut conn = client.get_connection().expect("connect");
        let killed = redis::cmd("EVAL")
            .arg("while true do end")
            .arg(0)
            .query::<redis::Value>(&mut conn);
        assert!(killed.is_err(), "the script only ends when killed");
    });
    wait_until("the server answers BUSY", || {
        error_code(server.try_query(&["PING"])).as_deref() == Some("BUSY")
    });
    script
}

fn kill_busy_script(server: &RedisServer, script: thread::JoinHandle<()>) {
    let _: String = server.query(&["SCRIPT", "KILL"]);
    script.join().expect("the script thread ends");
}

/// A server busy with a slow script answers every renewal `BUSY`: none
/// extends the lock, which is lost at its deadline, not before; an acquire
/// meanwhile fails with `BUSY` once its wait runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_never_extends_the_lock_and_it_is_lost_at_its_deadline() {
    let server = RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let opts = LockOptions::new(Duration::from_secs(1)).drift_factor(0.1);
    let guard = locker.acquire("busy", &opts).await.expect("acquire");
    let to_release = locker
        .acquire("busy-release", &opts)
        .await
        .expect("acquire");

    let script = start_busy_script(&server);
    // A renewal that ran just before the script has been answered by now.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let valid_until = guard.valid_until().expect("held");
    let release = tokio::spawn(to_release.release());
    let (reason, lost_at) = lost_within(&guard, Duration::from_secs(2)).await;
    assert_eq!(reason, LostReason::Expired);
    assert_lost_at_deadline(lost_at, valid_until);
    assert_eq!(
        release.await.expect("no panic"),
        Err(ReleaseError::Unconfirmed)
    );

    let short = LockOptions::new(Duration::from_secs(1)).wait(Duration::from_millis(300));
    let error = locker
        .acquire("while-busy", &short)
        .await
        .expect_err("a busy server refuses the acquire");
    assert_eq!(error, AcquireError::Unavailable(Failure::Busy));
    kill_busy_script(&server, script);
}

/// A busy spell shorter than the remaining validity costs nothing: the
/// renewals that met `BUSY` are retried, and the lock stays held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_busy_spell_is_survived() {
    let server = RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let ttl = Duration::from_secs(3);
    let opts = LockOptions::new(ttl).renew_every(Duration::from_millis(500));
    let guard = locker.acquire("busy-short", &opts).await.expect("acquire");

    let script = start_busy_script(&server);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let during = guard.valid_until().expect("held through the busy spell");
    kill_busy_script(&server, script);

    tokio::select! {
        reason = guard.lost() => panic!("lost after a short busy spell: {reason:?}"),
        () = tokio::time::sleep(ttl * 2) => {}
    }
    assert!(guard.is_held());
    assert!(guard.valid_until().expect("held") > during + ttl);
    guard.release().await.expect("release");
}

// NOSCRIPT -------------------------------------------------------------------

/// `SCRIPT FLUSH` under a held lock: the next renewal meets `NOSCRIPT`,
/// loads the script again and succeeds (on Valkey 8.1+ the renewal is a
/// native `SET … IFEQ` and needs no script); so does the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noscript_reloads_and_the_renewal_succeeds() {
    let server = RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let ttl = Duration::from_millis(900);
    let opts = LockOptions::new(ttl);
    let guard = locker.acquire("noscript", &opts).await.expect("acquire");
    let renew_loaded =
        || server.query::<Vec<i64>>(&["SCRIPT", "EXISTS", scripts::LOCK.sha1]) == [1];

    let _: String = server.query(&["SCRIPT", "FLUSH"]);
    assert!(!renew_loaded());
    let flushed_valid_until = guard.valid_until().expect("held");
    tokio::select! {
        reason = guard.lost() => panic!("lost after SCRIPT FLUSH: {reason:?}"),
        () = tokio::time::sleep(ttl * 2) => {}
    }
    assert!(guard.is_held());
    assert!(
        guard.valid_until().expect("held") > flushed_valid_until + ttl,
        "renewals succeeded after the flush"
    );
    // On Valkey 8.1+ a lone renewal is a native `SET … IFEQ`: no script
    // to load, and the release below meets the flush alone.
    let native = server
        .query::<String>(&["INFO", "server"])
        .contains("valkey_version:");
    assert_eq!(
        renew_loaded(),
        !native,
        "the script renewal loaded its script again; the native one needs none"
    );

    let _: String = server.query(&["SCRIPT", "FLUSH"]);
    guard
        .release()
        .await
        .expect("the release reloads its script too");
    assert_eq!(support::get(&server, "{lock:noscript}"), None);
}

// WRONGTYPE ------------------------------------------------------------------

/// A lock key (or its fence key) that holds a list: the acquire fails at
/// once with `WrongType`, without waiting out its wait, and sets nothing.
#[tokio::test]
async fn wrongtype_fails_the_acquire_at_once() {
    let server = RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let wait = Duration::from_secs(5);
    let opts = LockOptions::new(Duration::from_secs(1)).wait(wait);

    let _: i64 = server.query(&["RPUSH", "{lock:a-list}", "x"]);
    let started = now();
    let error = locker
        .acquire("a-list", &opts)
        .await
        .expect_err("wrong type");
    assert_eq!(error, AcquireError::WrongType);
    assert!(now() - started < wait / 2, "permanent: not retried");

    let _: i64 = server.query(&["RPUSH", "{lock}:fence-floor", "x"]);
    let error = locker
        .acquire("fenced", &opts)
        .await
        .expect_err("wrong type");
    assert_eq!(error, AcquireError::WrongType);
    assert_eq!(support::get(&server, "{lock:fenced}"), None);
}

/// A held lock's key replaced by a list: the key is no longer ours, and the
/// renewal that meets `WRONGTYPE` says so at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrongtype_on_renewal_loses_the_lock_at_once() {
    let server = RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let renew_every = Duration::from_millis(300);
    let opts = LockOptions::new(Duration::from_secs(6)).renew_every(renew_every);
    let guard = locker.acquire("retyped", &opts).await.expect("acquire");

    let _: redis::Value = server.cmd(&["DEL", "{lock:retyped}"]);
    let _: i64 = server.query(&["RPUSH", "{lock:retyped}", "x"]);
    let replaced_at = now();
    let (reason, lost_at) = lost_within(&guard, Duration::from_secs(6)).await;
    assert_eq!(reason, LostReason::NotOwner);
    assert!(
        lost_at <= replaced_at + renew_every + SLACK,
        "lost {:?} after the key was replaced",
        lost_at - replaced_at
    );
}

/// A release that meets `WRONGTYPE` deleted nothing, because the key was
/// not ours: the user hears the lock was lost, not that the release is
/// merely unconfirmed.
#[tokio::test]
async fn wrongtype_on_release_reports_the_lock_lost() {
    let server = RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let opts = LockOptions::new(Duration::from_secs(6));
    let guard = locker
        .acquire("retyped-release", &opts)
        .await
        .expect("acquire");
    let _: redis::Value = server.cmd(&["DEL", "{lock:retyped-release}"]);
    let _: i64 = server.query(&["RPUSH", "{lock:retyped-release}", "x"]);
    assert_eq!(
        guard.release().await,
        Err(ReleaseError::AlreadyLost(LostReason::NotOwner))
    );
    assert_eq!(
        server.query::<i64>(&["LLEN", "{lock:retyped-release}"]),
        1,
        "the list is untouched"
    );
}

// NOREPLICAS -----------------------------------------------------------------

/// `min-replicas-to-write 1` with no replica: every write is refused with
/// `NOREPLICAS`, so an acquire fails with it once its wait runs out.
#[tokio::test]
async fn noreplicas_fails_the_acquire_after_the_wait() {
    let server = RedisServer::start_with(&[
        "--min-replicas-to-write",
        "1",
        "--min-replicas-max-lag",
        "10",
    ]);
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let wait = Duration::from_millis(400);
    let opts = LockOptions::new(Duration::from_secs(5)).wait(wait);
    let started = now();
    let error = locker
        .acquire("no-replicas", &opts)
        .await
        .expect_err("writes are refused");
    assert_eq!(error, AcquireError::Unavailable(Failure::NoReplicas));
    assert!(now() - started >= wait, "retried until the wait ran out");
    assert_eq!(support::get(&server, "{lock:no-replicas}"), None);
}

/// A primary that starts refusing writes under a held lock: renewals fail
/// with `NOREPLICAS`, none extends it, and it is lost at its deadline,
/// while the key is still on the server (the drift margin).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noreplicas_renewals_never_extend_and_the_lock_is_lost_at_its_deadline() {
    let server = RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let ttl = Duration::from_secs(1);
    let opts = LockOptions::new(ttl).drift_factor(0.1);
    let guard = locker.acquire("cut-off", &opts).await.expect("acquire");
    let to_release = locker
        .acquire("cut-off-release", &opts)
        .await
        .expect("acquire");

    let _: String = server.query(&["CONFIG", "SET", "min-replicas-max-lag", "10"]);
    let _: String = server.query(&["CONFIG", "SET", "min-replicas-to-write", "1"]);
    // A renewal that ran before the change has been answered by now.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let valid_until = guard.valid_until().expect("held");
    let release = tokio::spawn(to_release.release());
    let (reason, lost_at) = lost_within(&guard, ttl * 2).await;
    assert_eq!(reason, LostReason::Expired);
    assert_lost_at_deadline(lost_at, valid_until);
    let pttl = support::pttl(&server, "{lock:cut-off}");
    assert!(
        pttl > 0,
        "lost before the server could expire the key (pttl {pttl})"
    );
    // The release's delete is a write, refused like the renewals.
    assert_eq!(
        release.await.expect("no panic"),
        Err(ReleaseError::Unconfirmed)
    );
}

// Connection reset -----------------------------------------------------------

/// `CLIENT KILL` of the lock's connection, again and again while the lock
/// is held: the locker reconnects, and the renewals carry on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_continue_after_the_connection_is_reset() {
    let server = RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let ttl = Duration::from_millis(900);
    let opts = LockOptions::new(ttl);
    let guard = locker.acquire("reset", &opts).await.expect("acquire");
    let client_ids = || -> Vec<String> {
        let list: String = server.query(&["CLIENT", "LIST", "TYPE", "normal"]);
        list.lines()
            .filter(|line| !line.contains("cmd=client|list"))
            .filter_map(|line| line.split(' ').next().map(str::to_owned))
            .collect()
    };

    let mut killed = Vec::new();
    for _ in 0..3 {
        let ids = client_ids();
        assert!(!ids.is_empty(), "the locker is connected");
        let _: i64 = server.query(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
        killed.extend(ids);
        tokio::select! {
            reason = guard.lost() => panic!("lost after a connection reset: {reason:?}"),
            () = tokio::time::sleep(ttl) => {}
        }
    }
    assert!(guard.is_held());
    let now_connected = client_ids();
    assert!(
        now_connected.iter().all(|id| !killed.contains(id)),
        "a new connection carries the renewals: {now_connected:?} after killing {killed:?}"
    );
    let pttl = support::pttl(&server, "{lock:reset}");
    assert!(
        pttl > i64::try_from(ttl.as_millis() / 3).unwrap_or(i64::MAX),
        "renewed recently: pttl {pttl}"
    );
    // A release right after a reset goes out on the next connection.
    let _: i64 = server.query(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
    guard.release().await.expect("released after the reset");
    assert_eq!(support::get(&server, "{lock:reset}"), None);
}

/// The connection is reset while an acquire's outcome is unknown: the
/// script ran (the key is set) but its reply never came, because the
/// `WAIT` behind it was cut off. The acquire gives up, and the key it may
/// have set is released instead of lingering for its ttl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_whose_outcome_is_unknown_is_released() {
    let server = RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    // No replica: WAIT blocks for its whole timeout after the grant.
    let opts = LockOptions::new(Duration::from_secs(60))
        .wait_replicas(1, Duration::from_secs(20))
        .command_timeout(Duration::from_secs(30));
    let attempt = tokio::spawn({
        let locker = locker.clone();
        async move { locker.try_acquire("unknown", &opts).await }
    });

    let waiting_client = || -> Option<String> {
        let list: String = server.query(&["CLIENT", "LIST"]);
        list.lines()
            .find(|line| line.contains("cmd=wait"))
            .and_then(|line| line.split(' ').next())
            .and_then(|id| id.strip_prefix("id="))
            .map(str::to_owned)
    };
    wait_until("the acquire's WAIT blocks", || waiting_client().is_some());
    let token = support::get(&server, "{lock:unknown}").expect("the script set the key");
    let id = waiting_client().expect("still waiting");
    let _: i64 = server.query(&["CLIENT", "KILL", "ID", &id]);

    let result = tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .expect("the acquire ends soon after the reset")
        .expect("the task does not panic");
    assert_eq!(
        result.map(|guard| guard.is_some()),
        Err(AcquireError::Unavailable(Failure::Connection))
    );
    wait_until("the key is released", || {
        support::get(&server, "{lock:unknown}").is_none()
    });
    assert!(token.contains(':'), "an owner token: {token}");
}
