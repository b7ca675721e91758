//! The watchdog never puts the lock family's renewals in a group-commit
//! batch, while it does batch the plain lock's, on a real Redis under
//! `MONITOR`.
//!
//! A batch is one call of the plain lock's script (`lock.lua`), which
//! knows only the plain lock's string key: a read hold's or a permit's
//! renewal there would renew a key the hold does not have (its lease is a
//! sorted set's member), come back `NotOwner`, and lose the hold. A fair
//! or write hold's lease is that string key, so its renewal would happen
//! to work there today, but it belongs to its own script. So the design
//! (`watchdog.rs`, `dispatch.rs`) sends each family renewal alone, through
//! its kind's script, and never renews a family lock early (early renewal
//! exists only to share a call). This test holds plain locks and
//! every family kind on one locker, all due for renewal together, and
//! reads every call the server got after the grants: each call that
//! carries a family token carries no other token, the plain tokens do
//! share calls (the batching is on in the same run), and every hold is
//! still held after several renewal rounds.

#![cfg(feature = "redis")]

use crate::support;

use std::{collections::BTreeMap, sync::mpsc, time::Duration};

use futures_util::future::join_all;
use lock_core::{LockOptions, Locker};
use redis::Value;
use support::RedisServer;

/// Every top-level call (not the commands scripts run) `MONITOR` shows
/// between `ECHO <from>` and `ECHO <to>`, read on a thread.
fn watch(
    server: &RedisServer,
    from: &'static str,
    to: &'static str,
) -> mpsc::Receiver<Vec<Vec<String>>> {
    let client = redis::Client::open(server.url()).expect("a valid url");
    let mut monitor = client.get_connection().expect("connect");
    let _: String = redis::cmd("MONITOR").query(&mut monitor).expect("MONITOR");
    let (send, calls) = mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut started = false;
        loop {
            let line = match monitor.recv_response() {
                Ok(Value::SimpleString(line)) => line,
                other => panic!("MONITOR sent {other:?}"),
            };
            if line.contains(" lua] ") {
                continue;
            }
            let args = support::monitor_args(&line);
            if args.first().is_some_and(|c| c.eq_ignore_ascii_case("ECHO")) {
                if args.get(1).map(String::as_str) == Some(from) {
                    started = true;
                } else if args.get(1).map(String::as_str) == Some(to) {
                    let _ = send.send(seen);
                    return;
                }
                continue;
            }
            if started {
                seen.push(args);
            }
        }
    });
    calls
}

fn echo(server: &RedisServer, marker: &str) {
    let _: String = server.query(&["ECHO", marker]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_batches_plain_renewals_and_never_the_familys() {
    let server = RedisServer::start();
    let calls = watch(&server, "held", "done");
    let locker = Locker::connect(&server.url()).await.expect("connect");
    // Renewed every 500 ms; a renewal window of 62 ms, so that holds
    // taken together stay due together on a loaded machine.
    let opts = LockOptions::new(Duration::from_millis(1_500));
    let fair = opts.clone().fair();
    // Taken together, so that every renewal falls due within the window.
    let names = |kind: &str, n: usize| (0..n).map(|i| format!("{kind}-{i}")).collect::<Vec<_>>();
    let (plain, fair_names, read, permit) = (
        names("plain", 4),
        names("fair", 2),
        names("read", 2),
        names("permit", 2),
    );
    let plain = join_all(plain.iter().map(|key| locker.acquire(key, &opts)));
    let fair_holds = join_all(fair_names.iter().map(|key| locker.acquire(key, &fair)));
    let reads = join_all(read.iter().map(|key| locker.acquire_read(key, &opts)));
    let permits = join_all(
        permit
            .iter()
            .map(|key| locker.acquire_permit(key, 1, &opts)),
    );
    let write = locker.acquire_write("write-0", &opts);
    let (plain, fair_holds, reads, permits, write) =
        tokio::join!(plain, fair_holds, reads, permits, write);
    let plain: Vec<_> = plain.into_iter().map(|g| g.expect("plain")).collect();
    let fair_holds: Vec<_> = fair_holds.into_iter().map(|g| g.expect("fair")).collect();
    let reads: Vec<_> = reads.into_iter().map(|g| g.expect("read")).collect();
    let permits: Vec<_> = permits.into_iter().map(|g| g.expect("permit")).collect();
    let write = write.expect("write");
    echo(&server, "held");
    // Four renewal rounds.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    echo(&server, "done");
    let calls = calls
        .recv_timeout(Duration::from_secs(10))
        .expect("the MONITOR thread saw both markers");

    let mut kind_of: BTreeMap<String, &str> = BTreeMap::new();
    for guard in &plain {
        kind_of.insert(guard.token().to_owned(), "plain");
    }
    for guard in &fair_holds {
        kind_of.insert(guard.token().to_owned(), "fair");
    }
    for guard in &reads {
        kind_of.insert(guard.token().to_owned(), "read");
    }
    for guard in &permits {
        kind_of.insert(guard.token().to_owned(), "permit");
    }
    kind_of.insert(write.token().to_owned(), "write");

    let mut renewals: BTreeMap<&str, usize> = BTreeMap::new();
    let mut batched_plain = 0;
    for call in &calls {
        let tokens: Vec<&str> = call
            .iter()
            .filter(|arg| kind_of.contains_key(arg.as_str()))
            .map(String::as_str)
            .collect();
        for token in &tokens {
            *renewals.entry(token).or_default() += 1;
        }
        let family = tokens.iter().any(|token| kind_of[*token] != "plain");
        assert!(
            !family || tokens.len() == 1,
            "a family renewal shared a call: {call:?} ({:?})",
            tokens.iter().map(|t| kind_of[*t]).collect::<Vec<_>>()
        );
        if tokens.len() > 1 {
            batched_plain += 1;
        }
    }
    for (token, kind) in &kind_of {
        let count = renewals.get(token.as_str()).copied().unwrap_or(0);
        assert!(
            count >= 3,
            "the {kind} hold {token} was renewed {count} times in 2.1 s (every 500 ms)"
        );
    }
    assert!(
        batched_plain >= 2,
        "the plain renewals shared {batched_plain} calls: the group commit was off, so the test shows nothing"
    );
    eprintln!(
        "{} calls after the grants; {batched_plain} carried several plain renewals; renewals per hold: {:?}",
        calls.len(),
        renewals.values().collect::<Vec<_>>()
    );
    assert!(plain.iter().all(|g| g.is_held()));
    assert!(fair_holds.iter().all(|g| g.is_held()));
    assert!(reads.iter().all(|g| g.is_held()));
    assert!(permits.iter().all(|g| g.is_held()));
    assert!(write.is_held());
}
