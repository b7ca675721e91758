//! Which command a renewal sends is chosen at connect time from the
//! server's `INFO server`: on Valkey 8.1 and later a lone renewal is a
//! native `SET key token IFEQ token PX ttl`, and no `EVALSHA` goes out for
//! it; on Redis (7.0 and 8.2: `SET … IFEQ` came in 8.4) it stays the lock
//! script's renew operation. Read from the server's own `INFO commandstats`,
//! on whichever server the fixture starts (`scripts/test.sh` runs this file
//! against each server of its matrix).
//!
//! Renewals that fall due together go out as one batch: on Valkey a
//! pipeline of those `SET`s, on Redis one script call for all of them.
//!
//! Unfenced acquires that share a batch go out as native `SET NX PX GET`
//! commands in its pipeline, on both servers, beside one script call for
//! the batch's other operations (on Valkey 9 its releases are native too:
//! `DELIFEQ`); each takes its own answer.
//!
//! On a full Valkey (above `maxmemory`, `noeviction`) `SET` is refused with
//! `OOM` where the script's `PEXPIRE` still renews: the renewal falls back
//! to the script and the lock stays held; once memory is back, renewals are
//! native again.

#![cfg(feature = "redis")]

use crate::support;

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use lock_core::{Event, Fencing, LockGuard, LockOptions, Locker, LockerBuilder};
use support::RedisServer;

/// The fixture's server family, read from its own `INFO server`.
#[derive(Debug, PartialEq, Eq)]
enum Family {
    /// Valkey 8.1 or later: `SET … IFEQ` is there.
    Valkey81,
    /// Redis before 8.4, which has no `SET … IFEQ` (Debian's 7.0.15 and
    /// 8.2.3 in the matrix).
    Redis,
}

fn family(server: &RedisServer) -> Family {
    let info: String = server.query(&["INFO", "server"]);
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(|value| value.trim().to_owned())
    };
    match field("valkey_version") {
        Some(version) => {
            let mut parts = version.split('.').map(|part| part.parse::<u32>().ok());
            let release = (parts.next().flatten(), parts.next().flatten());
            assert!(
                matches!(release, (Some(major), Some(minor)) if (major, minor) >= (8, 1)),
                "the matrix runs Valkey 8.1 or later, this is {version}"
            );
            Family::Valkey81
        }
        None => {
            let version = field("redis_version").expect("INFO server has redis_version");
            let mut parts = version.split('.').map(|part| part.parse::<u32>().ok());
            let release = (parts.next().flatten(), parts.next().flatten());
            assert!(
                matches!(release, (Some(major), Some(minor)) if (7..=8).contains(&major) && (major, minor) < (8, 4)),
                "the matrix runs Redis 7.0 and 8.2 (no SET IFEQ before 8.4), this is {version}"
            );
            Family::Redis
        }
    }
}

/// Whether the server has `DELIFEQ` (Valkey 9.0 and later), from its
/// `INFO server`: its releases go native too.
fn has_delifeq(server: &RedisServer) -> bool {
    let info: String = server.query(&["INFO", "server"]);
    servers::Identity::from_info(&info).is_some_and(|identity| {
        identity.family == servers::Family::Valkey && identity.version.major >= 9
    })
}

/// `calls` and `rejected_calls` of one command in `INFO commandstats`
/// (zero for a command not run since the last `CONFIG RESETSTAT`).
fn command_stats(server: &RedisServer, command: &str) -> (u64, u64) {
    let stats: String = server.query(&["INFO", "commandstats"]);
    let prefix = format!("cmdstat_{command}:");
    let Some(line) = stats.lines().find_map(|line| line.strip_prefix(&prefix)) else {
        return (0, 0);
    };
    let number = |name: &str| {
        line.split(',')
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
            .and_then(|value| value.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{name} in {line:?}"))
    };
    (number("calls"), number("rejected_calls"))
}

/// A locker on `server` and its count of renewals.
async fn locker(server: &RedisServer) -> (Locker, Arc<AtomicU64>) {
    let renewals = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&renewals);
    let locker = LockerBuilder::from_url(&server.url())
        .expect("url")
        .observer(move |observed| {
            if matches!(observed.event, Event::Renewed { .. }) {
                counted.fetch_add(1, Ordering::Relaxed);
            }
        })
        .spawn()
        .await
        .expect("connect");
    (locker, renewals)
}

/// Holds `guard` for `window`, checking it stays held, and returns how
/// many renewals happened meanwhile.
async fn hold(guard: &LockGuard, renewals: &AtomicU64, window: Duration) -> u64 {
    let before = renewals.load(Ordering::Relaxed);
    let started = tokio::time::Instant::now();
    while started.elapsed() < window {
        assert!(guard.is_held(), "the lock was lost while held");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(guard.is_held(), "the lock was lost while held");
    renewals.load(Ordering::Relaxed) - before
}

/// ttl 300 ms, renewed every 100 ms: about ten renewals a second.
fn options() -> LockOptions {
    LockOptions::new(Duration::from_millis(300)).renew_every(Duration::from_millis(100))
}

#[tokio::test]
async fn renewals_are_native_on_valkey_and_the_script_on_redis() {
    let server = RedisServer::start();
    let family = family(&server);
    let (locker, renewals) = locker(&server).await;
    let guard = locker.acquire("native", &options()).await.expect("acquire");
    // Count from here: the acquire (a script call, fenced) is behind us.
    let _: String = server.query(&["CONFIG", "RESETSTAT"]);
    let renewed = hold(&guard, &renewals, Duration::from_millis(1_200)).await;
    let (evalsha, _) = command_stats(&server, "evalsha");
    let (set, set_rejected) = command_stats(&server, "set");
    guard.release().await.expect("release");
    assert!(renewed >= 5, "only {renewed} renewals in 1.2 s");
    match family {
        Family::Valkey81 => {
            assert_eq!(
                evalsha, 0,
                "Valkey 8.1: {renewed} renewals sent {evalsha} EVALSHA (expected native SET IFEQ)"
            );
            assert!(
                set >= renewed,
                "Valkey 8.1: {renewed} renewals but only {set} SET calls"
            );
            assert_eq!(set_rejected, 0);
        }
        Family::Redis => {
            assert_eq!(
                set, 0,
                "Redis before 8.4 has no SET IFEQ, yet {set} SET calls went out"
            );
            assert!(
                evalsha >= renewed,
                "Redis: {renewed} renewals but only {evalsha} EVALSHA"
            );
        }
    }
    assert_eq!(
        support::pttl(&server, "{lock:native}"),
        -2,
        "release deletes the key"
    );
}

#[tokio::test]
async fn a_full_valkey_refuses_set_and_the_script_renews_in_its_place() {
    let server = RedisServer::start();
    let family = family(&server);
    let (locker, renewals) = locker(&server).await;
    let guard = locker.acquire("full", &options()).await.expect("acquire");
    let _: String = server.query(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    // Any dataset is above one byte: every denyoom command is refused.
    let _: String = server.query(&["CONFIG", "SET", "maxmemory", "1"]);
    let _: String = server.query(&["CONFIG", "RESETSTAT"]);
    let renewed = hold(&guard, &renewals, Duration::from_millis(800)).await;
    let (evalsha, _) = command_stats(&server, "evalsha");
    let (set, set_rejected) = command_stats(&server, "set");
    assert!(
        renewed >= 3,
        "only {renewed} renewals in 0.8 s on a full server"
    );
    assert!(
        evalsha >= renewed,
        "{renewed} renewals on a full server, {evalsha} by the script"
    );
    match family {
        Family::Valkey81 => {
            // Each renewal tried SET first, was refused (OOM), then the script.
            assert!(
                set_rejected >= renewed,
                "{renewed} renewals, {set_rejected} SET refused"
            );
            // `calls` counts the commands that ran, `rejected_calls` the refused.
            assert_eq!(set, 0, "a SET ran on a full server");
        }
        Family::Redis => assert_eq!(set, 0, "Redis never sends SET for a renewal"),
    }

    // Memory back: OOM was not a refusal for good, renewals go native again.
    let _: String = server.query(&["CONFIG", "SET", "maxmemory", "0"]);
    let _: String = server.query(&["CONFIG", "RESETSTAT"]);
    let renewed = hold(&guard, &renewals, Duration::from_millis(800)).await;
    let (evalsha, _) = command_stats(&server, "evalsha");
    let (set, set_rejected) = command_stats(&server, "set");
    assert!(renewed >= 3, "only {renewed} renewals in 0.8 s");
    if family == Family::Valkey81 {
        assert_eq!(evalsha, 0, "native again after OOM, yet {evalsha} EVALSHA");
        assert!(
            set >= renewed && set_rejected == 0,
            "{set} SET, {set_rejected} refused"
        );
    }
    guard.release().await.expect("release");
}

/// How many locks the batched test holds: acquired together, so their
/// renewals fall due together and the watchdog sends them as batches.
const TOGETHER: usize = 8;

#[tokio::test]
async fn batched_renewals_are_a_native_pipeline_on_valkey_and_one_script_call_on_redis() {
    let server = RedisServer::start();
    let family = family(&server);
    let (locker, renewals) = locker(&server).await;
    let opts = options();
    let guards: Vec<LockGuard> = futures_util::future::join_all((0..TOGETHER).map(|index| {
        let (locker, opts) = (&locker, &opts);
        async move { locker.acquire(&format!("batched-{index}"), opts).await }
    }))
    .await
    .into_iter()
    .map(|guard| guard.expect("acquire"))
    .collect();
    let _: String = server.query(&["CONFIG", "RESETSTAT"]);
    let renewed = hold_all(&guards, &renewals, Duration::from_millis(1_200)).await;
    let (evalsha, _) = command_stats(&server, "evalsha");
    let (set, set_rejected) = command_stats(&server, "set");
    assert!(
        renewed >= 5 * TOGETHER as u64,
        "only {renewed} renewals of {TOGETHER} locks in 1.2 s"
    );
    match family {
        Family::Valkey81 => {
            assert_eq!(
                evalsha, 0,
                "Valkey 8.1: {renewed} batched renewals sent {evalsha} EVALSHA (expected a pipeline of SET IFEQ)"
            );
            assert!(
                set >= renewed && set_rejected == 0,
                "{renewed} renewals, {set} SET, {set_rejected} refused"
            );
        }
        Family::Redis => {
            assert_eq!(
                set, 0,
                "Redis before 8.4 has no SET IFEQ, yet {set} SET calls went out"
            );
            // The renewals shared calls: the batches this test is about.
            assert!(
                evalsha >= 1 && evalsha < renewed,
                "Redis: {renewed} renewals in {evalsha} EVALSHA (expected batches)"
            );
        }
    }

    // A full server refuses every SET of a pipeline (OOM): those renewals
    // go out again as the script, and every lock stays held.
    let _: String = server.query(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    let _: String = server.query(&["CONFIG", "SET", "maxmemory", "1"]);
    let _: String = server.query(&["CONFIG", "RESETSTAT"]);
    let renewed = hold_all(&guards, &renewals, Duration::from_millis(800)).await;
    let (evalsha, _) = command_stats(&server, "evalsha");
    let (set, set_rejected) = command_stats(&server, "set");
    assert!(
        renewed >= 3 * TOGETHER as u64,
        "only {renewed} renewals of {TOGETHER} locks in 0.8 s on a full server"
    );
    assert!(
        evalsha >= 1,
        "{renewed} renewals on a full server, none by the script"
    );
    assert_eq!(set, 0, "a SET ran on a full server");
    if family == Family::Valkey81 {
        assert!(
            set_rejected >= renewed,
            "{renewed} renewals, {set_rejected} SET refused"
        );
    }
    let _: String = server.query(&["CONFIG", "SET", "maxmemory", "0"]);
    for guard in guards {
        guard.release().await.expect("release");
    }
}

/// [`hold`] for several guards at once.
async fn hold_all(guards: &[LockGuard], renewals: &AtomicU64, window: Duration) -> u64 {
    let before = renewals.load(Ordering::Relaxed);
    let started = tokio::time::Instant::now();
    while started.elapsed() < window {
        assert!(
            guards.iter().all(LockGuard::is_held),
            "a lock was lost while held"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        guards.iter().all(LockGuard::is_held),
        "a lock was lost while held"
    );
    renewals.load(Ordering::Relaxed) - before
}

/// How many unfenced acquires the batched-acquire test sends at once.
const ACQUIRES: usize = 32;

#[tokio::test]
async fn batched_unfenced_acquires_are_native_sets_beside_one_script_call() {
    let server = RedisServer::start();
    let (other, _) = locker(&server).await;
    let (locker, _) = locker(&server).await;
    let opts = LockOptions::new(Duration::from_secs(30)).fencing(Fencing::None);
    let taken = other.acquire("taken", &opts).await.expect("acquire");
    let _: String = server.query(&["CONFIG", "RESETSTAT"]);
    // Distinct keys and the taken one, interleaved, all at once: the first
    // goes alone, the rest share the batch it opens.
    let (locker, opts) = (&locker, &opts);
    let attempts = |round: usize| {
        futures_util::future::join_all((0..ACQUIRES).map(move |index| async move {
            let key = if index % 4 == 3 {
                "taken".to_owned()
            } else {
                format!("free-{round}-{index}")
            };
            (key.clone(), locker.try_acquire(&key, opts).await)
        }))
    };
    let check = |outcomes: Vec<(String, Result<Option<LockGuard>, lock_core::AcquireError>)>| {
        let mut held = Vec::new();
        for (key, outcome) in outcomes {
            let outcome = outcome.expect("try_acquire");
            if key == "taken" {
                assert!(outcome.is_none(), "granted a key another locker holds");
                continue;
            }
            let guard = outcome.unwrap_or_else(|| panic!("{key} is free, yet refused"));
            let on_server: String = server.query(&["GET", guard.redis_key()]);
            assert_eq!(on_server, guard.token(), "{key}: another token on Redis");
            held.push(guard);
        }
        held
    };
    let held = check(attempts(0).await);
    let (evalsha, _) = command_stats(&server, "evalsha");
    let (set, _) = command_stats(&server, "set");
    assert_eq!(
        evalsha, 0,
        "{ACQUIRES} unfenced acquires sent {evalsha} EVALSHA"
    );
    assert_eq!(
        set, ACQUIRES as u64,
        "{ACQUIRES} unfenced acquires, {set} SET"
    );

    // Releases (script operations) and acquires in the same batches.
    let _: String = server.query(&["CONFIG", "RESETSTAT"]);
    let releases = futures_util::future::join_all(held.into_iter().map(|guard| guard.release()));
    let (released, acquired) = tokio::join!(releases, attempts(1));
    assert!(released.iter().all(Result::is_ok), "a release failed");
    let held = check(acquired);
    let (evalsha, _) = command_stats(&server, "evalsha");
    let (set, _) = command_stats(&server, "set");
    assert_eq!(
        set, ACQUIRES as u64,
        "{ACQUIRES} unfenced acquires, {set} SET"
    );
    if has_delifeq(&server) {
        // Valkey 9: the releases are native too (`native_release.rs`).
        let (delifeq, _) = command_stats(&server, "delifeq");
        assert_eq!(
            (evalsha, delifeq),
            (0, released.len() as u64),
            "{} releases: {evalsha} EVALSHA, {delifeq} DELIFEQ",
            released.len()
        );
    } else {
        assert!(
            evalsha >= 1 && evalsha < released.len() as u64,
            "{} releases in {evalsha} EVALSHA (expected batches)",
            released.len()
        );
    }

    // The server forgets the scripts (a restart, `SCRIPT FLUSH`): the
    // batches' script calls meet `NOSCRIPT` beside their native acquires;
    // every release still deletes its key and every acquire still takes
    // its own answer (whether the call is sent again at once, once the
    // scripts are loaded, or the release is retried, is not told apart
    // here: both end the same).
    let _: String = server.query(&["SCRIPT", "FLUSH"]);
    let keys: Vec<String> = held
        .iter()
        .map(|guard| guard.redis_key().to_owned())
        .collect();
    let releases = futures_util::future::join_all(held.into_iter().map(|guard| guard.release()));
    let (released, acquired) = tokio::join!(releases, attempts(2));
    assert!(
        released.iter().all(Result::is_ok),
        "a release failed after SCRIPT FLUSH"
    );
    for key in keys {
        let left: Option<String> = server.query(&["GET", &key]);
        assert_eq!(left, None, "{key} still there after its release");
    }
    for guard in check(acquired) {
        guard.release().await.expect("release");
    }
    taken.release().await.expect("release");
}
