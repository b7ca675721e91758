//! A bounded key space, against a real `redis-server`: a thousand distinct
//! lock names, some released, some dropped, some lost by a holder that
//! crashed, leave nothing behind once their ttl has passed, in every
//! fencing mode. `DBSIZE` is back to what it was before, with one stated
//! exception per fencing mode: `Fencing::TimeMixed` keeps one floor per
//! namespace, `{namespace}:fence-floor`, and `Fencing::Counter` one counter,
//! `{namespace}:fence-counter`, neither of which expires (one key however
//! many lock names, which is what bounds it).
//!
//! And fences stay strictly increasing per key across a release and a
//! re-acquire of the same name, with the time-mixed floor and in counter
//! mode.

#![cfg(feature = "redis")]

use crate::support;

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use lock_core::{Fencing, LockGuard, LockOptions, Locker, LockerBuilder};
use support::RedisServer;

/// Distinct lock names per fencing mode.
const NAMES: usize = 1_000;

/// Short, so that the test waits for expiry in a few seconds, and long
/// enough that a crashed holder's keys are all still there when they are
/// read, one round trip after the crash, on a machine at load 8 or more
/// (at 500 ms, reading them one by one outlasted the ttl in CI).
const TTL: Duration = Duration::from_secs(2);

/// How long Redis gets to delete expired keys once the ttl has passed (it
/// samples keys with a ttl ten times a second; `DBSIZE` counts an expired
/// key until it is deleted).
const EXPIRY_GRACE: Duration = Duration::from_secs(10);

/// Keys the test did not make, which must survive untouched.
const UNRELATED: [&str; 3] = ["unrelated:a", "unrelated:b", "unrelated:c"];

fn options(namespace: &str, fencing: Fencing) -> LockOptions {
    LockOptions::new(TTL)
        .namespace(namespace)
        .fencing(fencing)
        .wait(Duration::from_secs(2))
}

fn keys(server: &RedisServer) -> BTreeSet<String> {
    server
        .query::<Vec<String>>(&["KEYS", "*"])
        .into_iter()
        .collect()
}

fn dbsize(server: &RedisServer) -> usize {
    server.query(&["DBSIZE"])
}

/// Each remaining key with its `PTTL`, for a failure message.
fn describe(server: &RedisServer, keys: &BTreeSet<String>) -> String {
    keys.iter()
        .take(20)
        .map(|key| format!("{key} (pttl {})", support::pttl(server, key)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Which of a lock's keys `key` is, if any: the lock key `{ns:name}`, or
/// the namespace's time-mixed floor or counter.
fn kind_of(key: &str, namespace: &str) -> Option<&'static str> {
    if key == format!("{{{namespace}}}:fence-counter") {
        return Some("counter");
    }
    if key == format!("{{{namespace}}}:fence-floor") {
        return Some("floor");
    }
    let rest = key.strip_prefix(&format!("{{{namespace}:orders:"))?;
    let (number, suffix) = rest.split_once('}')?;
    number.parse::<usize>().ok()?;
    match suffix {
        "" => Some("lock"),
        _ => None,
    }
}

/// Takes `NAMES` distinct locks: a third released, a third dropped (released
/// in the background), a third held by a locker whose driver is then
/// aborted (a crashed holder: never renewed, never released, lost by
/// expiry). Returns the key kinds seen while the locks were held.
async fn churn(server: &RedisServer, namespace: &str, fencing: Fencing) -> BTreeSet<&'static str> {
    let opts = options(namespace, fencing);
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let (crasher, driver) = LockerBuilder::from_url(&server.url())
        .expect("a valid url")
        .connect()
        .await
        .expect("connect the holder that crashes");
    let driver = tokio::spawn(driver);

    let mut dropped = Vec::new();
    let mut crashed = Vec::new();
    for index in 0..NAMES {
        let name = format!("orders:{index}");
        match index % 3 {
            0 => locker
                .acquire(&name, &opts)
                .await
                .expect("acquire")
                .release()
                .await
                .expect("release"),
            1 => dropped.push(locker.acquire(&name, &opts).await.expect("acquire")),
            _ => crashed.push(crasher.acquire(&name, &opts).await.expect("acquire")),
        }
    }

    // While two thirds are held: every key is one of this lock scheme's.
    let held = keys(server);
    let mut kinds = BTreeSet::new();
    for key in held.iter().filter(|key| !UNRELATED.contains(&key.as_str())) {
        let kind = kind_of(key, namespace)
            .unwrap_or_else(|| panic!("{fencing:?}: a key of no lock: {key}"));
        kinds.insert(kind);
    }

    // The crash: no renewal, no release from here on.
    driver.abort();
    let _ = driver.await;
    // Every crashed holder's key read at once, in one script call: a
    // snapshot one round trip after the crash, however slow the machine.
    let mut read = vec![
        "EVAL",
        "local t = {} for i, k in ipairs(KEYS) do t[i] = redis.call('PTTL', k) end return t",
    ];
    let count = crashed.len().to_string();
    read.push(&count);
    read.extend(crashed.iter().map(LockGuard::redis_key));
    let pttls: Vec<i64> = server.query(&read);
    for (guard, pttl) in crashed.iter().zip(pttls) {
        assert!(
            pttl > 0 && pttl <= i64::try_from(TTL.as_millis()).expect("small"),
            "{fencing:?}: a crashed holder's key {} is there until it expires (pttl {pttl})",
            guard.redis_key()
        );
    }
    drop(crashed);
    drop(dropped);
    kinds
}

/// Runs the churn on a fresh server and checks what remains after the ttl.
async fn leaves_nothing_behind(fencing: Fencing, expected_kinds: &[&str]) {
    let server = RedisServer::start();
    for key in UNRELATED {
        let _: () = server.query(&["SET", key, "kept"]);
    }
    let namespace = "ks";
    let before = dbsize(&server);
    assert_eq!(before, UNRELATED.len());

    let kinds = churn(&server, namespace, fencing).await;
    assert_eq!(
        kinds,
        expected_kinds.iter().copied().collect(),
        "{fencing:?}: the kinds of keys a held lock uses"
    );

    // The one key that may outlive its locks: the namespace's floor or
    // counter, by fencing mode.
    let counter = format!("{{{namespace}}}:fence-counter");
    let floor = format!("{{{namespace}}}:fence-floor");
    let kept = match fencing {
        Fencing::Counter => Some(counter.clone()),
        Fencing::TimeMixed => Some(floor.clone()),
        _ => None,
    };
    let expected: BTreeSet<String> = UNRELATED
        .iter()
        .map(|key| (*key).to_owned())
        .chain(kept.clone())
        .collect();

    tokio::time::sleep(TTL).await;
    let deadline = Instant::now() + EXPIRY_GRACE;
    let after = loop {
        let size = dbsize(&server);
        if size == expected.len() || Instant::now() >= deadline {
            break size;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let remaining = keys(&server);
    let extra: BTreeSet<String> = remaining.difference(&expected).cloned().collect();
    assert!(
        extra.is_empty(),
        "{fencing:?}: {} keys remain {:?} after the ttl: {}",
        extra.len(),
        TTL + EXPIRY_GRACE,
        describe(&server, &extra)
    );
    assert_eq!(remaining, expected, "{fencing:?}: the keys that remain");
    // The exception, by name: the namespace's counter or floor, never
    // expiring.
    match &kept {
        Some(key) => {
            assert_eq!(after, before + 1, "{fencing:?}: DBSIZE is before + {key}");
            assert_eq!(support::pttl(&server, key), -1, "{key} never expires");
        }
        None => assert_eq!(after, before, "{fencing:?}: DBSIZE is back to what it was"),
    }
    match fencing {
        Fencing::Counter => {
            let issued: u64 = server.query(&["GET", &counter]);
            assert_eq!(issued, NAMES as u64, "one INCR per grant");
        }
        // The floor holds a server time (µs) from this run: the last fence.
        Fencing::TimeMixed => {
            let last: u64 = server.query(&["GET", &floor]);
            assert!(
                last <= server_us(&server) && last + 60_000_000 > server_us(&server),
                "the floor holds a fence of this run: {last}"
            );
        }
        _ => {}
    }
    for key in UNRELATED {
        assert_eq!(support::get(&server, key).as_deref(), Some("kept"));
    }
    println!(
        "{fencing:?}: DBSIZE before {before}, after {NAMES} lock names and their ttl: {after}"
    );
}

#[tokio::test]
async fn no_fencing_leaves_nothing_behind() {
    leaves_nothing_behind(Fencing::None, &["lock"]).await;
}

#[tokio::test]
async fn time_mixed_fencing_leaves_only_the_namespace_floor() {
    leaves_nothing_behind(Fencing::TimeMixed, &["floor", "lock"]).await;
}

#[tokio::test]
async fn counter_fencing_leaves_only_the_namespace_counter() {
    leaves_nothing_behind(Fencing::Counter, &["counter", "lock"]).await;
}

/// The server's clock in microseconds (`TIME`).
fn server_us(server: &RedisServer) -> u64 {
    let (seconds, micros): (u64, u64) = server.query(&["TIME"]);
    seconds * 1_000_000 + micros
}

#[tokio::test]
async fn time_mixed_fences_increase_across_release_and_expiry() {
    let server = RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let opts = options("lock", Fencing::TimeMixed);
    let floor = "{lock}:fence-floor";

    let first = locker.acquire("again", &opts).await.expect("acquire");
    let f1 = first.fence();
    assert_eq!(
        server.query::<u64>(&["GET", floor]),
        f1,
        "the floor is the last fence"
    );
    first.release().await.expect("release");
    let second = locker.acquire("again", &opts).await.expect("acquire");
    let f2 = second.fence();
    assert!(f2 > f1, "{f2} > {f1} re-acquired at once");
    // Another name of the namespace counts on from the same floor.
    let other = locker.acquire("other", &opts).await.expect("acquire");
    assert!(other.fence() > f2, "{} > {f2}", other.fence());
    other.release().await.expect("release");
    drop(second);

    // The lock expires; the floor stays.
    tokio::time::sleep(TTL + Duration::from_millis(100)).await;
    assert_eq!(support::pttl(&server, floor), -1, "the floor never expires");
    let third = locker.acquire("again", &opts).await.expect("acquire");
    assert!(third.fence() > f2, "{} > {f2} after expiry", third.fence());
    third.release().await.expect("release");
}

#[tokio::test]
async fn a_floor_ahead_of_the_server_clock_orders_fences() {
    // As after the server clock stepped back, by any amount: the floor is
    // ahead of TIME, and grants count on from it for as long as it lasts.
    let server = RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let opts = options("lock", Fencing::TimeMixed);
    let floor = "{lock}:fence-floor";
    let ahead = Duration::from_secs(3_600);
    let planted = server_us(&server) + u64::try_from(ahead.as_micros()).expect("small");
    let _: () = server.query(&["SET", floor, &planted.to_string()]);

    let guard = locker.acquire("behind", &opts).await.expect("acquire");
    assert_eq!(guard.fence(), planted + 1, "counts on from the floor");
    assert_eq!(server.query::<u64>(&["GET", floor]), planted + 1);
    assert_eq!(support::pttl(&server, floor), -1, "the floor never expires");
    guard.release().await.expect("release");
    // Long after the lock's ttl, the floor still orders the next grant.
    tokio::time::sleep(TTL + Duration::from_millis(100)).await;
    let again = locker.acquire("behind", &opts).await.expect("acquire");
    assert_eq!(again.fence(), planted + 2);
    again.release().await.expect("release");
}

#[tokio::test]
async fn counter_fences_increase_across_release_and_expiry() {
    let server = RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let opts = options("lock", Fencing::Counter);
    let counter = "{lock}:fence-counter";

    let first = locker.acquire("again", &opts).await.expect("acquire");
    let f1 = first.fence();
    first.release().await.expect("release");
    tokio::time::sleep(TTL + Duration::from_millis(100)).await;
    let second = locker.acquire("again", &opts).await.expect("acquire");
    let f2 = second.fence();
    assert!(f2 > f1, "{f2} > {f1} after the lock expired");
    assert_eq!(server.query::<u64>(&["GET", counter]), f2);
    second.release().await.expect("release");
}

#[tokio::test]
async fn the_redis_key_shows_who_holds_a_lock() {
    let server = RedisServer::start();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let guard = locker
        .acquire("orders:42", &LockOptions::new(Duration::from_secs(30)))
        .await
        .expect("acquire");
    assert_eq!(guard.redis_key(), "{lock:orders:42}");
    let holder = support::get(&server, guard.redis_key()).expect("the key is there");
    assert_eq!(holder, guard.token());
    // uuid:pid:host
    let mut parts = holder.splitn(3, ':');
    let uuid = parts.next().expect("a uuid");
    assert_eq!(uuid.len(), 36, "{holder}");
    let pid: u32 = parts
        .next()
        .and_then(|pid| pid.parse().ok())
        .expect("a pid");
    assert_eq!(pid, std::process::id());
    assert!(
        parts.next().is_some_and(|host| !host.is_empty()),
        "{holder}"
    );
    let pttl = support::pttl(&server, guard.redis_key());
    assert!(pttl > 0 && pttl <= 30_000, "pttl {pttl}");
    guard.release().await.expect("release");
}
