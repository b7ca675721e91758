//! The lock family on a real Redis: the counting semaphore, the read-write
//! lock and fair mode, through `Locker` and its guards. Exclusion (at most
//! N permits, no reader beside a writer), a dead holder or waiter (its
//! client's driver aborted inside this process; `family_kill.rs` kills a
//! real client process with `SIGKILL`) blocking nobody longer than its ttl
//! or waiter ttl, owner-only release, the lost signal when the
//! lease is removed behind a holder's back, arrival order in fair mode,
//! writer preference, the Redlock refusal, and every kind on a cluster.
//!
//! Timings: each bound asserted is the ttl (or waiter ttl) plus at least
//! 250 ms of slack for the retry and the scheduler; each "still blocked"
//! check leaves the blocker at least 150 ms to spare.

#![cfg(feature = "redis")]

use crate::support;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use lock_core::{AcquireError, LockOptions, Locker, LockerBuilder, LostReason, OptionsError};
use support::{RedisServer, cluster::Cluster};
use tokio::{sync::Mutex, task::JoinHandle};

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

async fn connect(server: &RedisServer) -> Locker {
    Locker::connect(&server.url()).await.expect("connect")
}

/// A locker whose driver (its connections, watchdog and wake-ups) runs in
/// a task the test can abort: aborting it is a client process killed.
async fn mortal(server: &RedisServer) -> (Locker, JoinHandle<()>) {
    let (locker, driver) = LockerBuilder::from_url(&server.url())
        .expect("a valid url")
        .connect()
        .await
        .expect("connect");
    (locker, tokio::spawn(driver))
}

/// Kills a client: its driver first, so that nothing it still runs (an
/// acquire's own loop, a guard's drop) can reach Redis, then `task`.
async fn kill(driver: JoinHandle<()>, task: Option<JoinHandle<()>>) -> Instant {
    driver.abort();
    let _ = driver.await;
    if let Some(task) = task {
        task.abort();
        let _ = task.await;
    }
    Instant::now()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_admits_at_most_its_permits() {
    let server = RedisServer::start();
    let lockers = [connect(&server).await, connect(&server).await];
    let opts = LockOptions::new(ms(2_000)).wait(Duration::from_secs(30));
    let inside = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for task in 0..8 {
        let locker = lockers[task % 2].clone();
        let (opts, inside, peak) = (opts.clone(), Arc::clone(&inside), Arc::clone(&peak));
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                let guard = locker
                    .acquire_permit("jobs", 3, &opts)
                    .await
                    .expect("a permit");
                assert!(guard.fence() > 0, "every permit has a fence");
                let now_inside = inside.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now_inside, Ordering::SeqCst);
                tokio::time::sleep(ms(5)).await;
                assert!(guard.is_held());
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.expect("release");
            }
        }));
    }
    for task in tasks {
        task.await.expect("worker finished");
    }
    assert_eq!(peak.load(Ordering::SeqCst), 3, "3 permits, 8 contenders");
    let left: i64 = server.query(&["EXISTS", "{lock:jobs}"]);
    assert_eq!(left, 0, "a semaphore nobody holds leaves nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_removed_behind_its_back_is_lost_and_its_release_touches_no_one_else() {
    let server = RedisServer::start();
    let locker = connect(&server).await;
    let opts = LockOptions::new(ms(900)).wait(ms(0));
    let first = locker
        .acquire_permit("one", 1, &opts)
        .await
        .expect("a permit");
    let removed: i64 = server.query(&["ZREM", "{lock:one}", first.token()]);
    assert_eq!(removed, 1);
    let reason = tokio::time::timeout(ms(1_500), first.lost())
        .await
        .expect("the renewal finds the lease gone");
    assert_eq!(reason, LostReason::NotOwner);
    let second = locker
        .acquire_permit("one", 1, &opts)
        .await
        .expect("the permit is free");
    assert!(second.fence() > first.fence());
    assert!(matches!(
        first.release().await,
        Err(lock_core::ReleaseError::AlreadyLost(_))
    ));
    let held: Option<f64> = server.query(&["ZSCORE", "{lock:one}", second.token()]);
    assert!(
        held.is_some(),
        "the first holder's release left the second's lease"
    );
    second.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_permit_holder_blocks_nobody_longer_than_its_ttl() {
    let server = RedisServer::start();
    let ttl = ms(1_000);
    let opts = LockOptions::new(ttl).wait(Duration::from_secs(5));
    let (dying, driver) = mortal(&server).await;
    let guard = dying
        .acquire_permit("dead", 1, &opts)
        .await
        .expect("a permit");
    let died = kill(driver, None).await;
    std::mem::forget(guard);
    let locker = connect(&server).await;
    let next = locker
        .acquire_permit("dead", 1, &opts)
        .await
        .expect("the dead holder's lease ends");
    let waited = died.elapsed();
    assert!(waited <= ttl + ms(300), "blocked for {waited:?}");
    // Its last renewal came at most a third of the ttl before it died.
    assert!(waited >= ms(300), "the dead lease did exclude: {waited:?}");
    next.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_a_writer_is_alone_and_a_waiting_writer_goes_first() {
    let server = RedisServer::start();
    let locker = connect(&server).await;
    let opts = LockOptions::new(ms(2_000)).wait(Duration::from_secs(10));
    let quick = opts.clone().wait(ms(300));
    let first = locker.acquire_read("doc", &opts).await.expect("a reader");
    let second = locker
        .acquire_read("doc", &quick)
        .await
        .expect("readers share");
    let writer = {
        let (locker, opts) = (locker.clone(), opts.clone());
        tokio::spawn(async move { locker.acquire_write("doc", &opts).await })
    };
    tokio::time::sleep(ms(200)).await;
    assert!(!writer.is_finished(), "two readers hold it");
    // The waiting writer's intent keeps new readers out.
    assert!(matches!(
        locker.acquire_read("doc", &quick).await,
        Err(AcquireError::Timeout { .. })
    ));
    first.release().await.expect("release");
    tokio::time::sleep(ms(200)).await;
    assert!(!writer.is_finished(), "one reader still holds it");
    second.release().await.expect("release");
    let write = tokio::time::timeout(ms(1_000), writer)
        .await
        .expect("the last reader's release lets the writer in")
        .expect("task")
        .expect("the write hold");
    assert!(write.fence() > 0);
    assert!(matches!(
        locker.acquire_read("doc", &quick).await,
        Err(AcquireError::Timeout { .. })
    ));
    assert!(matches!(
        locker.acquire_write("doc", &quick).await,
        Err(AcquireError::Timeout { .. })
    ));
    write.release().await.expect("release");
    let again = locker
        .acquire_read("doc", &quick)
        .await
        .expect("free again");
    again.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_and_write_holds_are_lost_when_removed_behind_their_back() {
    let server = RedisServer::start();
    let locker = connect(&server).await;
    let opts = LockOptions::new(ms(900)).wait(ms(0));
    let reader = locker.acquire_read("gone", &opts).await.expect("a reader");
    let removed: i64 = server.query(&["ZREM", "{lock:gone}:readers", reader.token()]);
    assert_eq!(removed, 1);
    let reason = tokio::time::timeout(ms(1_500), reader.lost())
        .await
        .expect("the renewal finds the lease gone");
    assert_eq!(reason, LostReason::NotOwner);
    let writer = locker.acquire_write("gone", &opts).await.expect("free");
    let deleted: i64 = server.query(&["DEL", "{lock:gone}"]);
    assert_eq!(deleted, 1);
    let reason = tokio::time::timeout(ms(1_500), writer.lost())
        .await
        .expect("the renewal finds the key gone");
    assert_eq!(reason, LostReason::NotOwner);
    // A writer's release is owner-checked: it leaves a new writer alone.
    let next = locker.acquire_write("gone", &opts).await.expect("free");
    assert!(writer.release().await.is_err());
    assert_eq!(
        server
            .query::<Option<String>>(&["GET", "{lock:gone}"])
            .as_deref(),
        Some(next.token())
    );
    assert!(reader.release().await.is_err());
    next.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_reader_stops_blocking_writers_one_ttl_after_it_died() {
    let server = RedisServer::start();
    let ttl = ms(1_000);
    let opts = LockOptions::new(ttl).wait(Duration::from_secs(5));
    let locker = connect(&server).await;
    let live = locker.acquire_read("shelf", &opts).await.expect("a reader");
    let (dying, driver) = mortal(&server).await;
    let dead = dying.acquire_read("shelf", &opts).await.expect("a reader");
    let dead_token = dead.token().to_owned();
    let died = kill(driver, None).await;
    std::mem::forget(dead);
    // The live reader renews; the dead one's lease ends on its own.
    tokio::time::sleep(ttl + ms(250)).await;
    // Leases still counted: those ending after the server's now.
    let time: Vec<String> = server.query(&["TIME"]);
    let now_ms = time[0].parse::<u64>().expect("seconds") * 1_000
        + time[1].parse::<u64>().expect("microseconds") / 1_000;
    let counted: Vec<String> = server.query(&[
        "ZRANGEBYSCORE",
        "{lock:shelf}:readers",
        &format!("({now_ms}"),
        "+inf",
    ]);
    assert_eq!(
        counted,
        [live.token().to_owned()],
        "the dead reader's lease ended on its own (dead: {dead_token})"
    );
    assert!(live.is_held());
    live.release().await.expect("release");
    let writer = locker
        .acquire_write("shelf", &opts)
        .await
        .expect("no reader left");
    assert!(died.elapsed() <= ttl + ms(800));
    writer.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiting_writer_holds_readers_back_by_its_waiter_ttl_at_most() {
    let server = RedisServer::start();
    let waiter_ttl = ms(300);
    let opts = LockOptions::new(ms(2_000))
        .waiter_ttl(waiter_ttl)
        .wait(Duration::from_secs(5));
    let locker = connect(&server).await;
    let reader = locker.acquire_read("wall", &opts).await.expect("a reader");
    let (dying, driver) = mortal(&server).await;
    let writer = {
        let opts = opts.clone();
        tokio::spawn(async move {
            let _ = dying.acquire_write("wall", &opts).await;
        })
    };
    tokio::time::sleep(ms(150)).await;
    let intent: i64 = server.query(&["EXISTS", "{lock:wall}:intent"]);
    assert_eq!(intent, 1, "the waiting writer claimed the intent");
    let died = kill(driver, Some(writer)).await;
    let next = locker
        .acquire_read("wall", &opts)
        .await
        .expect("the intent lapses");
    let waited = died.elapsed();
    assert!(waited <= waiter_ttl + ms(300), "held back for {waited:?}");
    assert!(
        waited >= ms(100),
        "the intent did hold readers back: {waited:?}"
    );
    reader.release().await.expect("release");
    next.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_mode_grants_waiters_in_arrival_order() {
    let server = RedisServer::start();
    let lockers = [connect(&server).await, connect(&server).await];
    let opts = LockOptions::new(ms(2_000))
        .fair()
        .wait(Duration::from_secs(20));
    let holder = lockers[0].acquire("queue", &opts).await.expect("free");
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for waiter in 0..4 {
        let (locker, opts, order) = (
            lockers[waiter % 2].clone(),
            opts.clone(),
            Arc::clone(&order),
        );
        waiters.push(tokio::spawn(async move {
            let guard = locker.acquire("queue", &opts).await.expect("its turn");
            order.lock().await.push(waiter);
            tokio::time::sleep(ms(30)).await;
            guard.release().await.expect("release");
        }));
        // Each waiter joins the queue before the next one starts.
        tokio::time::sleep(ms(100)).await;
    }
    let queued: i64 = server.query(&["ZCARD", "{lock:queue}:queue"]);
    assert_eq!(queued, 4);
    holder.release().await.expect("release");
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("every waiter is granted")
            .expect("task");
    }
    assert_eq!(*order.lock().await, [0, 1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_fair_waiter_delays_the_next_grant_by_its_waiter_ttl_at_most() {
    let server = RedisServer::start();
    let waiter_ttl = ms(300);
    let opts = LockOptions::new(ms(2_000))
        .fair()
        .waiter_ttl(waiter_ttl)
        .wait(Duration::from_secs(10));
    let locker = connect(&server).await;
    let holder = locker.acquire("line", &opts).await.expect("free");
    let (dying, driver) = mortal(&server).await;
    let dead = {
        let opts = opts.clone();
        tokio::spawn(async move {
            let _ = dying.acquire("line", &opts).await;
        })
    };
    tokio::time::sleep(ms(150)).await;
    let next = {
        let (locker, opts) = (locker.clone(), opts.clone());
        tokio::spawn(async move { locker.acquire("line", &opts).await })
    };
    tokio::time::sleep(ms(150)).await;
    let queued: i64 = server.query(&["ZCARD", "{lock:line}:queue"]);
    assert_eq!(queued, 2, "the dead-to-be waiter heads the queue");
    let died = kill(driver, Some(dead)).await;
    holder.release().await.expect("release");
    let guard = tokio::time::timeout(Duration::from_secs(3), next)
        .await
        .expect("the dead waiter's place lapses")
        .expect("task")
        .expect("granted");
    let waited = died.elapsed();
    assert!(waited <= waiter_ttl + ms(300), "delayed by {waited:?}");
    assert!(
        waited >= ms(100),
        "the dead waiter's place did count: {waited:?}"
    );
    guard.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_waiter_that_gives_up_leaves_the_queue() {
    let server = RedisServer::start();
    let locker = connect(&server).await;
    let opts = LockOptions::new(ms(2_000)).fair();
    let holder = locker.acquire("desk", &opts).await.expect("free");
    let refused = locker.acquire("desk", &opts.clone().wait(ms(200))).await;
    assert!(
        matches!(refused, Err(AcquireError::Timeout { .. })),
        "{refused:?}"
    );
    // The release that follows the time-out is sent before the error
    // returns; give its reply a moment.
    tokio::time::sleep(ms(50)).await;
    let queued: i64 = server.query(&["ZCARD", "{lock:desk}:queue"]);
    assert_eq!(queued, 0, "the timed-out waiter gave its place up");
    // A dropped acquire gives it up too.
    let dropped = tokio::time::timeout(
        ms(200),
        locker.acquire("desk", &opts.clone().wait(Duration::from_secs(10))),
    )
    .await;
    assert!(dropped.is_err());
    tokio::time::sleep(ms(200)).await;
    let queued: i64 = server.query(&["ZCARD", "{lock:desk}:queue"]);
    assert_eq!(queued, 0, "the dropped waiter gave its place up");
    holder.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_refuses_the_family_and_bad_options_are_typed() {
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let redlock = Locker::connect_redlock(&urls).await.expect("connect");
    let opts = LockOptions::new(ms(1_000));
    let refused = |kind| AcquireError::NotOnRedlock { kind };
    assert_eq!(
        redlock.acquire_read("k", &opts).await.err(),
        Some(refused("read"))
    );
    assert_eq!(
        redlock.acquire_write("k", &opts).await.err(),
        Some(refused("write"))
    );
    assert_eq!(
        redlock.acquire_permit("k", 2, &opts).await.err(),
        Some(refused("permit"))
    );
    assert_eq!(
        redlock.acquire("k", &opts.clone().fair()).await.err(),
        Some(refused("fair"))
    );
    for server in &servers {
        let keys: Vec<String> = server.query(&["KEYS", "*"]);
        assert!(keys.is_empty(), "nothing was sent: {keys:?}");
    }
    let locker = connect(&servers[0]).await;
    assert_eq!(
        locker.acquire_read("k", &opts.clone().fair()).await.err(),
        Some(AcquireError::Options(OptionsError::FairUnsupported {
            kind: "read"
        }))
    );
    assert_eq!(
        locker.acquire_permit("k", 0, &opts).await.err(),
        Some(AcquireError::Options(OptionsError::NoPermits))
    );
    // A plain lock and a semaphore on one key: WRONGTYPE, typed.
    let plain = locker.acquire("mixed", &opts).await.expect("free");
    assert_eq!(
        locker
            .acquire_permit("mixed", 2, &opts.clone().wait(ms(0)))
            .await
            .err(),
        Some(AcquireError::WrongType)
    );
    plain.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_works_on_a_cluster() {
    let cluster = Cluster::start(3, 0);
    let urls = cluster.seed_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let locker = Locker::connect_cluster(&urls).await.expect("connect");
    let opts = LockOptions::new(ms(2_000)).wait(ms(300));
    let mut shards = std::collections::BTreeSet::new();
    for index in 0..12 {
        let key = format!("family:{index}");
        let first = locker
            .acquire_permit(&key, 1, &opts)
            .await
            .expect("a permit");
        let owner = cluster.owner_of_key(first.redis_key());
        let held: Option<f64> = owner.query(&["ZSCORE", first.redis_key(), first.token()]);
        assert!(held.is_some(), "the lease is on its slot's owner");
        shards.insert(owner.port());
        assert!(matches!(
            locker.acquire_permit(&key, 1, &opts).await,
            Err(AcquireError::Timeout { .. })
        ));
        first.release().await.expect("release");

        let rw = format!("rw:{index}");
        let reader = locker.acquire_read(&rw, &opts).await.expect("a reader");
        assert!(matches!(
            locker.acquire_write(&rw, &opts).await,
            Err(AcquireError::Timeout { .. })
        ));
        reader.release().await.expect("release");
        let writer = locker.acquire_write(&rw, &opts).await.expect("a writer");
        assert!(writer.fence() > 0);
        writer.release().await.expect("release");

        let fair = opts.clone().fair();
        let queue = format!("fair:{index}");
        let holder = locker.acquire(&queue, &fair).await.expect("free");
        let waiter = {
            let (locker, fair, queue) =
                (locker.clone(), fair.clone().wait(ms(3_000)), queue.clone());
            tokio::spawn(async move { locker.acquire(&queue, &fair).await })
        };
        tokio::time::sleep(ms(50)).await;
        holder.release().await.expect("release");
        // The head's own channel wakes it, on whichever node it listens.
        let next = tokio::time::timeout(ms(1_000), waiter)
            .await
            .expect("woken")
            .expect("task")
            .expect("granted");
        next.release().await.expect("release");
    }
    assert_eq!(shards.len(), 3, "the family's keys landed on every shard");
}

/// Waits for `waiter`, spawned before the release at `released`, and
/// checks that it was granted within `bound` of it; returns its guard.
async fn granted_within<G>(
    what: &str,
    released: Instant,
    waiter: JoinHandle<Result<G, AcquireError>>,
    bound: Duration,
) -> G {
    let guard = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("granted")
        .expect("task")
        .expect("granted");
    assert!(
        released.elapsed() < bound,
        "{what}: {:?}",
        released.elapsed()
    );
    guard
}

/// Waiters that would retry only seconds later are granted within a few
/// hundred milliseconds of the release: the release's announcement wakes
/// them (a fair lock's head on its own channel).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_the_waiter_at_once() {
    let server = RedisServer::start();
    let holders = connect(&server).await;
    let waiters = connect(&server).await;
    // Retries 3 s apart at the soonest (a third of the waiter ttl), so
    // only a wake-up can grant within the bound.
    let opts = LockOptions::new(Duration::from_secs(20))
        .retry_delay(Duration::from_secs(3), Duration::from_secs(3))
        .waiter_ttl(Duration::from_secs(9))
        .wait(Duration::from_secs(15));
    let bound = ms(500);

    let fair = opts.clone().fair();
    let holder = holders.acquire("bell", &fair).await.expect("free");
    let waiter = {
        let (waiters, fair) = (waiters.clone(), fair.clone());
        tokio::spawn(async move { waiters.acquire("bell", &fair).await })
    };
    tokio::time::sleep(ms(200)).await;
    holder.release().await.expect("release");
    let guard = granted_within("fair", Instant::now(), waiter, bound).await;
    guard.release().await.expect("release");

    let reader = holders.acquire_read("gong", &opts).await.expect("free");
    let writer = {
        let (waiters, opts) = (waiters.clone(), opts.clone());
        tokio::spawn(async move { waiters.acquire_write("gong", &opts).await })
    };
    tokio::time::sleep(ms(200)).await;
    reader.release().await.expect("release");
    let guard = granted_within("writer", Instant::now(), writer, bound).await;
    guard.release().await.expect("release");

    let permit = holders
        .acquire_permit("chime", 1, &opts)
        .await
        .expect("free");
    let next = {
        let (waiters, opts) = (waiters.clone(), opts.clone());
        tokio::spawn(async move { waiters.acquire_permit("chime", 1, &opts).await })
    };
    tokio::time::sleep(ms(200)).await;
    permit.release().await.expect("release");
    let guard = granted_within("permit", Instant::now(), next, bound).await;
    guard.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_guards_release_in_the_background() {
    let server = RedisServer::start();
    let locker = connect(&server).await;
    let opts = LockOptions::new(Duration::from_secs(20));
    let reader = locker.acquire_read("drop", &opts).await.expect("free");
    let permit = locker
        .acquire_permit("dropped", 2, &opts)
        .await
        .expect("free");
    drop(reader);
    drop(permit);
    tokio::time::sleep(ms(300)).await;
    let left: i64 = server.query(&["EXISTS", "{lock:drop}:readers", "{lock:dropped}"]);
    assert_eq!(left, 0, "both released on drop");
    let writer = locker
        .acquire_write("drop", &opts.clone().wait(ms(0)))
        .await
        .expect("no reader left");
    drop(writer);
    tokio::time::sleep(ms(300)).await;
    let left: i64 = server.query(&["EXISTS", "{lock:drop}"]);
    assert_eq!(left, 0, "the writer released on drop");
}

/// Through Sentinel, with `wait_replicas`: a permit and a write hold
/// granted before a failover still exclude on the promoted replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_permits_and_writes_survive_a_sentinel_failover_with_wait() {
    let group = support::sentinel::SentinelGroup::start();
    let urls = group.sentinel_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let connect = || Locker::connect_sentinel(&urls, support::sentinel::MASTER_NAME);
    let (first, second) = (
        connect().await.expect("connect"),
        connect().await.expect("connect"),
    );
    let opts = LockOptions::new(Duration::from_secs(20))
        .wait_replicas(1, ms(500))
        .command_timeout(Duration::from_secs(2));
    let permit = first
        .acquire_permit("seats", 1, &opts)
        .await
        .expect("a permit");
    let write = first
        .acquire_write("ledger", &opts)
        .await
        .expect("a writer");
    let old = group.master_port();
    let new = group.failover();
    assert_ne!(old, new);
    let quick = opts.clone().wait(ms(500));
    assert!(
        matches!(
            second.acquire_permit("seats", 1, &quick).await,
            Err(AcquireError::Timeout { .. })
        ),
        "the replicated lease still counts on the new primary"
    );
    assert!(
        matches!(
            second.acquire_read("ledger", &quick).await,
            Err(AcquireError::Timeout { .. })
        ),
        "the replicated write hold still excludes readers"
    );
    // Released on the new primary (or lost to the failover, as the plain
    // lock's holder is): either way the next holder gets in.
    let _ = permit.release().await;
    let _ = write.release().await;
    // The demoted primary may not be a replica again yet: no WAIT here.
    let wait = LockOptions::new(Duration::from_secs(20)).wait(Duration::from_secs(25));
    let next = second
        .acquire_permit("seats", 1, &wait)
        .await
        .expect("free");
    next.release().await.expect("release");
    let reader = second.acquire_read("ledger", &wait).await.expect("free");
    reader.release().await.expect("release");
}
