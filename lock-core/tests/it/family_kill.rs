//! A dead reader, fair waiter or permit holder blocks nobody longer than
//! its ttl, with the client a real OS process killed by `SIGKILL`: each
//! test starts this test binary again as a child (`FAMILY_KILL_CHILD`
//! says which role it plays), which connects its own `Locker`, takes a
//! read hold, a permit, or a place in a fair queue, says so on stdout and
//! keeps renewing it; the test kills it with `kill -9` and a second client
//! acquires.
//!
//! Each test reads, right after the kill, when the dead client's lease or
//! place ends on the server (its score in the sorted set: server time,
//! ms), and measures the second client's grant against it on the same
//! clock: never before it (the dead hold still excluded, safety), and
//! within a retry after it (liveness). The wall-clock wait from the kill
//! is bounded by the ttl (the waiter ttl for a place) plus 300 ms.

#![cfg(feature = "redis")]

use crate::support;

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use lock_core::{LockOptions, Locker};
use support::RedisServer;

/// Set in the child process: `<role> <url> <key>`.
const CHILD: &str = "FAMILY_KILL_CHILD";

const TTL: Duration = Duration::from_millis(1_000);
const WAITER_TTL: Duration = Duration::from_millis(300);
/// Slack (ms) for a retry's timer and round trip on a loaded machine.
const RETRY: u64 = 250;

fn opts() -> LockOptions {
    LockOptions::new(TTL)
        .waiter_ttl(WAITER_TTL)
        .wait(Duration::from_secs(5))
}

/// The child's part: takes what `role` says on `key`, prints `HELD
/// <token>` (or `QUEUEING` before a fair acquire that must wait), and
/// renews until it is killed.
async fn child(spec: &str) {
    let parts: Vec<&str> = spec.split(' ').collect();
    let [role, url, key] = parts[..] else {
        panic!("{CHILD}={spec}: expected `<role> <url> <key>`");
    };
    let locker = Locker::connect(url).await.expect("the child connects");
    match role {
        "read" => {
            let guard = locker.acquire_read(key, &opts()).await.expect("a reader");
            println!("HELD {}", guard.token());
            std::mem::forget(guard);
        }
        "permit" => {
            let guard = locker
                .acquire_permit(key, 1, &opts())
                .await
                .expect("a permit");
            println!("HELD {}", guard.token());
            std::mem::forget(guard);
        }
        "fair" => {
            println!("QUEUEING");
            let outcome = locker.acquire(key, &opts().fair()).await;
            panic!("the fair waiter was not killed while it waited: {outcome:?}");
        }
        other => panic!("{CHILD}: unknown role {other}"),
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
}

/// A child process, killed on drop if the test ends early.
struct Mortal {
    process: Child,
    lines: mpsc::Receiver<String>,
}

impl Mortal {
    /// Starts this test binary as the child of test `test` (its name in
    /// this module), in `role` on `key`.
    fn start(test: &str, role: &str, server: &RedisServer, key: &str) -> Self {
        let module = module_path!().split_once("::").map_or("", |(_, rest)| rest);
        let mut process = Command::new(std::env::current_exe().expect("the test binary's path"))
            .args(["--exact", &format!("{module}::{test}"), "--nocapture"])
            .env(CHILD, format!("{role} {} {key}", server.url()))
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the child");
        let stdout = process.stdout.take().expect("piped");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Self { process, lines }
    }

    /// The first line the child prints that starts with `prefix`, less
    /// the prefix.
    fn said(&self, prefix: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return rest.trim().to_owned();
                    }
                }
                Err(error) => panic!("the child never said {prefix:?}: {error}"),
            }
        }
    }

    /// `kill -9`, and waits for the process to be gone.
    fn kill(mut self) -> Instant {
        self.process.kill().expect("SIGKILL the child");
        self.process.wait().expect("reap the child");
        Instant::now()
    }
}

impl Drop for Mortal {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// The server's clock, in ms.
fn server_ms(server: &RedisServer) -> u64 {
    let time: Vec<String> = server.query(&["TIME"]);
    time[0].parse::<u64>().expect("seconds") * 1_000
        + time[1].parse::<u64>().expect("microseconds") / 1_000
}

fn score(server: &RedisServer, set: &str, member: &str) -> u64 {
    let score: Option<f64> = server.query(&["ZSCORE", set, member]);
    score.unwrap_or_else(|| panic!("{member} is not in {set}")) as u64
}

/// When the string `key` (a writer's or a fair holder's lease, set with the
/// ttl at the grant) was granted, on the server's clock (±1 ms). The
/// clock and the ttl are read in one script call, at one instant: read by
/// two commands, the time between them (milliseconds on a loaded machine)
/// moved the grant earlier, before the dead client's end (CI).
fn granted_at(server: &RedisServer, key: &str) -> u64 {
    let (seconds, micros, pttl): (u64, u64, i64) = server.query(&[
        "EVAL",
        "local t = redis.call('TIME') return {tonumber(t[1]), tonumber(t[2]), redis.call('PTTL', KEYS[1])}",
        "1",
        key,
    ]);
    assert!(pttl > 0, "{key} holds a lease ({pttl})");
    let now = seconds * 1_000 + micros / 1_000;
    now - (TTL.as_millis() as u64 - pttl as u64)
}

/// The grant at `granted` (server ms) came no earlier than the dead
/// client's lease or place ended (`ended`, server ms) and within `retry`
/// after it; the wall-clock wait since the kill is within `bound`.
fn assert_bounded(
    what: &str,
    ended: u64,
    granted: u64,
    retry: u64,
    waited: Duration,
    bound: Duration,
) {
    eprintln!(
        "{what}: granted {} ms after the dead client's end on the server, {waited:?} after the kill",
        granted as i64 - ended as i64
    );
    // The server's clock in ms: a grant in the same ms as the end is on time.
    assert!(
        granted + 1 >= ended,
        "{what}: granted at {granted}, before the dead client's end at {ended}"
    );
    assert!(
        granted <= ended + retry,
        "{what}: granted at {granted}, more than {retry} ms after the dead client's end at {ended}"
    );
    assert!(
        waited <= bound,
        "{what}: blocked for {waited:?} after the kill"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_reader_blocks_the_writer_until_its_lease_ends_and_no_longer() {
    if let Ok(spec) = std::env::var(CHILD) {
        return child(&spec).await;
    }
    let server = RedisServer::start();
    let key = "killed-reader";
    let dying = Mortal::start(
        "a_killed_reader_blocks_the_writer_until_its_lease_ends_and_no_longer",
        "read",
        &server,
        key,
    );
    let token = dying.said("HELD ");
    // Past a renewal (every ttl / 3): the renewals stop with the process.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let killed = dying.kill();
    let (now, ended) = (
        server_ms(&server),
        score(&server, "{lock:killed-reader}:readers", &token),
    );
    assert!(
        ended > now && ended <= now + TTL.as_millis() as u64,
        "the dead reader's lease still ran at the kill: it ends at {ended}, now {now}"
    );
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let writer = locker
        .acquire_write(key, &opts())
        .await
        .expect("the dead reader's lease ends");
    let waited = killed.elapsed();
    let granted = granted_at(&server, "{lock:killed-reader}");
    // The writer's refusal says when the reader's lease ends; it retries
    // then (+1 ms), and a grant takes a round trip: `RETRY` leaves the
    // rest to a loaded machine's scheduler.
    assert_bounded("writer", ended, granted, RETRY, waited, TTL + ms(300));
    writer.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_permit_holder_blocks_the_next_until_its_lease_ends_and_no_longer() {
    if let Ok(spec) = std::env::var(CHILD) {
        return child(&spec).await;
    }
    let server = RedisServer::start();
    let key = "killed-permit";
    let dying = Mortal::start(
        "a_killed_permit_holder_blocks_the_next_until_its_lease_ends_and_no_longer",
        "permit",
        &server,
        key,
    );
    let token = dying.said("HELD ");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let killed = dying.kill();
    let leases = "{lock:killed-permit}";
    let (now, ended) = (server_ms(&server), score(&server, leases, &token));
    assert!(
        ended > now && ended <= now + TTL.as_millis() as u64,
        "the dead holder's lease still ran at the kill: it ends at {ended}, now {now}"
    );
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let permit = locker
        .acquire_permit(key, 1, &opts())
        .await
        .expect("the dead holder's lease ends");
    let waited = killed.elapsed();
    // The new lease's score is its grant plus the ttl.
    let granted = score(&server, leases, permit.token()) - TTL.as_millis() as u64;
    assert_bounded("permit", ended, granted, RETRY, waited, TTL + ms(300));
    permit.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_fair_waiter_delays_the_next_grant_by_its_waiter_ttl_at_most() {
    if let Ok(spec) = std::env::var(CHILD) {
        return child(&spec).await;
    }
    let server = RedisServer::start();
    let key = "killed-waiter";
    let queue = "{lock:killed-waiter}:queue";
    let fair = opts().fair();
    let locker = Locker::connect(&server.url()).await.expect("connect");
    let holder = locker.acquire(key, &fair).await.expect("free");
    let dying = Mortal::start(
        "a_killed_fair_waiter_delays_the_next_grant_by_its_waiter_ttl_at_most",
        "fair",
        &server,
        key,
    );
    dying.said("QUEUEING");
    let queued = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let members: Vec<String> = server.query(&["ZRANGE", queue, "0", "-1"]);
            if members.len() == n {
                return members;
            }
            assert!(
                Instant::now() < deadline,
                "{n} waiters never queued: {members:?}"
            );
            std::thread::sleep(ms(10));
        }
    };
    let dead = queued(1).remove(0);
    // The second waiter queues behind the child.
    let next = {
        let (locker, fair) = (locker.clone(), fair.clone());
        tokio::spawn(async move { locker.acquire(key, &fair).await })
    };
    assert_eq!(queued(2)[0], dead, "the child heads the queue");
    // Past a renewal of its place (every waiter ttl / 3).
    tokio::time::sleep(ms(250)).await;
    let killed = dying.kill();
    let (now, lapses) = (
        server_ms(&server),
        score(&server, "{lock:killed-waiter}:waiters", &dead),
    );
    assert!(
        lapses > now && lapses <= now + WAITER_TTL.as_millis() as u64,
        "the dead waiter's place still stood at the kill: it lapses at {lapses}, now {now}"
    );
    // The release wakes the head: the dead child, so the live waiter
    // finds out on its own retry (every waiter ttl / 3 at most).
    holder.release().await.expect("release");
    let guard = tokio::time::timeout(Duration::from_secs(5), next)
        .await
        .expect("the dead waiter's place lapses")
        .expect("task")
        .expect("granted");
    let waited = killed.elapsed();
    let granted = granted_at(&server, "{lock:killed-waiter}");
    let retry = WAITER_TTL.as_millis() as u64 / 3 + RETRY;
    assert_bounded(
        "fair waiter",
        lapses,
        granted,
        retry,
        waited,
        WAITER_TTL + ms(300),
    );
    guard.release().await.expect("release");
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
