//! Redlock against real Redis: one acquire+release cycle over N = 3 and 5
//! independent nodes, next to the single-node lock, the raw commands it is
//! built from, and rslock's multi-node mode, all measured in the same run on
//! a single-threaded tokio runtime (as in `lock.rs`).
//!
//! The nodes are `redis-server`s spawned on loopback (see
//! [`redis_nodes_for_bench`]); the single-node cases use the first of them,
//! and N = 3 its first three, so every case talks to the same kind of
//! server. Compare medians within a run; across runs this machine varies by
//! up to 2×.

use std::time::Duration;

use bench::{
    raw::{fresh_key, ping, release, runtime, set_nx_px},
    raw_connection, redis_nodes_for_bench,
};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use lock_core::{LockOptions, Locker, scripts};

/// The Redlock sizes measured.
const NODES: [usize; 2] = [3, 5];

fn benches(c: &mut Criterion) {
    let rt = runtime();
    let max_nodes = NODES.into_iter().max().unwrap_or(1);
    let nodes = rt.block_on(redis_nodes_for_bench(max_nodes));
    let urls: Vec<&str> = nodes.iter().map(|node| node.url.as_str()).collect();
    let (single, conns, redlocks) = rt.block_on(async {
        let single = Locker::connect(urls[0]).await.expect("locker");
        let mut conns = Vec::new();
        for url in &urls {
            let mut conn = raw_connection(url).await;
            let _: String = redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(scripts::LOCK.source)
                .query_async(&mut conn)
                .await
                .expect("SCRIPT LOAD");
            conns.push(conn);
        }
        let mut redlocks = Vec::new();
        for n in NODES {
            let locker = Locker::connect_redlock(&urls[..n])
                .await
                .expect("Redlock locker");
            redlocks.push((n, locker));
        }
        (single, conns, redlocks)
    });
    // rslock connects lazily, on its first command (in the warm-up).
    let rslocks: Vec<(usize, rslock::LockManager)> = [1]
        .into_iter()
        .chain(NODES)
        .map(|n| (n, rslock::LockManager::new(urls[..n].to_vec())))
        .collect();
    let opts = LockOptions::new(Duration::from_secs(30)).wait(Duration::from_secs(5));

    let mut group = c.benchmark_group("redlock acquire+release");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30)
        // Criterion's default 100 000 bootstrap resamples take longer than
        // the measurement on 2 cores; 10 000 keep the file under a minute.
        .nresamples(10_000);
    group.bench_function("baseline: PING", |b| {
        b.to_async(&rt).iter(|| {
            let mut conn = conns[0].clone();
            async move { ping(&mut conn).await }
        })
    });
    for n in [1].into_iter().chain(NODES) {
        group.bench_with_input(
            BenchmarkId::new(
                "baseline: raw SET NX PX + EVALSHA release, on N nodes at once",
                n,
            ),
            &n,
            |b, &n| {
                b.to_async(&rt).iter(|| async {
                    let key = fresh_key("raw");
                    futures_util::future::join_all(conns[..n].iter().map(|conn| {
                        let mut conn = conn.clone();
                        let key = &key;
                        async move { set_nx_px(&mut conn, key).await }
                    }))
                    .await;
                    futures_util::future::join_all(conns[..n].iter().map(|conn| {
                        let mut conn = conn.clone();
                        let key = &key;
                        async move {
                            release(&mut conn, key).await;
                        }
                    }))
                    .await;
                })
            },
        );
    }
    group.bench_function("lock-core single node acquire + release", |b| {
        b.to_async(&rt).iter(|| async {
            let key = fresh_key("lc");
            let guard = single.acquire(&key, &opts).await.expect("acquire");
            guard.release().await.expect("release");
        })
    });
    for (n, locker) in &redlocks {
        group.bench_with_input(
            BenchmarkId::new("lock-core Redlock acquire + release", n),
            locker,
            |b, locker| {
                b.to_async(&rt).iter(|| async {
                    let key = fresh_key("redlock");
                    let guard = locker.acquire(&key, &opts).await.expect("acquire");
                    guard.release().await.expect("release");
                })
            },
        );
    }
    for (n, rslock) in &rslocks {
        group.bench_with_input(
            BenchmarkId::new("rslock lock + unlock", n),
            rslock,
            |b, rslock| {
                b.to_async(&rt).iter(|| async {
                    let key = fresh_key("rs");
                    let lock = rslock
                        .lock(key.as_bytes(), Duration::from_secs(30))
                        .await
                        .expect("rslock");
                    rslock.unlock(&lock).await;
                })
            },
        );
    }
    group.finish();
    drop((single, redlocks, rslocks, conns));
    // Containers (the fallback route) stop themselves on drop through the
    // runtime they were started on: drop them inside its context.
    let _entered = rt.enter();
    drop(nodes);
}

criterion_group!(redlock_benches, benches);
criterion_main!(redlock_benches);
