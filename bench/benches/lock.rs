//! The lock against real Redis, with its baselines and its peer measured in
//! the same run, on a single-threaded tokio runtime (a multi-threaded one
//! adds a cross-thread wake of ~20 µs per command on 2 cores).
//!
//! Each group holds the lock operation, the raw redis-rs commands it is
//! built from (PING, SET NX PX, EVALSHA of the same script) on the same kind
//! of connection, and rslock doing the same work. Compare medians within a
//! run; across runs this machine varies by up to 2×.
#![warn(clippy::too_many_lines)]

use std::time::{Duration, Instant};

use bench::api::{LockOptions, Locker, scripts};
use bench::{
    raw::{evalsha, fresh_key, ping, release, runtime, set_nx_px},
    raw_connection, redis_for_bench,
};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

/// What every group measures against: the lock, a raw connection with the
/// lock's scripts loaded, rslock, all on one runtime and one Redis.
struct Setup {
    rt: tokio::runtime::Runtime,
    locker: Locker,
    conn: redis::aio::MultiplexedConnection,
    rslock: rslock::LockManager,
    opts: LockOptions,
}

fn benches(c: &mut Criterion) {
    let rt = runtime();
    let redis = rt.block_on(redis_for_bench());
    let url = redis.url.clone();
    let (locker, conn, rslock) = rt.block_on(async {
        let locker = Locker::connect(&url).await.expect("locker");
        let mut conn = raw_connection(&url).await;
        bench::raw::load_all_scripts(&mut conn).await;
        let rslock = rslock::LockManager::new(vec![url.clone()]);
        (locker, conn, rslock)
    });
    let opts = LockOptions::new(Duration::from_secs(30)).wait(Duration::from_secs(5));
    let setup = Setup {
        rt,
        locker,
        conn,
        rslock,
        opts,
    };
    acquire(c, &setup);
    renew(c, &setup);
    acquire_release(c, &setup);
    throughput(c, &setup);
    handoff(c, &setup);
    // A testcontainers container stops itself on drop through the runtime
    // it was started on: drop it inside that runtime's context.
    let _entered = setup.rt.enter();
    drop(redis);
}

/// One acquire: the lock's, rslock's, and the raw commands it is built
/// from.
fn acquire(c: &mut Criterion, setup: &Setup) {
    let Setup {
        rt,
        locker,
        conn,
        rslock,
        opts,
    } = setup;
    let mut group = c.benchmark_group("acquire");
    group
        .measurement_time(Duration::from_secs(4))
        .sample_size(60);
    group.bench_function("baseline: PING", |b| {
        b.to_async(rt).iter(|| {
            let mut conn = conn.clone();
            async move { ping(&mut conn).await }
        })
    });
    group.bench_function("baseline: raw SET NX PX", |b| {
        b.to_async(rt).iter(|| async {
            let key = fresh_key("raw");
            set_nx_px(&mut conn.clone(), &key).await;
        })
    });
    group.bench_function("lock-core try_acquire", |b| {
        // Timed: the acquire. Untimed: its release.
        b.to_async(rt).iter_custom(|iters| {
            let locker = locker.clone();
            let opts = opts.clone();
            async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let key = fresh_key("lc");
                    let started = Instant::now();
                    let guard = locker.try_acquire(&key, &opts).await.expect("acquire");
                    total += started.elapsed();
                    if let Some(guard) = guard {
                        guard.release().await.expect("release");
                    }
                }
                total
            }
        })
    });
    group.bench_function("rslock lock", |b| {
        b.to_async(rt).iter(|| async {
            let key = fresh_key("rs");
            let _ = rslock
                .lock(key.as_bytes(), Duration::from_secs(30))
                .await
                .expect("rslock");
        })
    });
    group.finish();
}

/// One renewal's script call, raw.
fn renew(c: &mut Criterion, setup: &Setup) {
    let Setup { rt, conn, .. } = setup;
    let mut group = c.benchmark_group("renew");
    group
        .measurement_time(Duration::from_secs(3))
        .sample_size(50);
    group.bench_function("baseline: raw EVALSHA renew", |b| {
        rt.block_on(set_nx_px(&mut conn.clone(), "renew-me"));
        b.to_async(rt).iter(|| async {
            evalsha(
                &mut conn.clone(),
                &["renew-me"],
                &[scripts::op::RENEW, "token", "30000"],
            )
            .await
        })
    });
    group.finish();
}

/// One acquire and its release, on one key after another.
fn acquire_release(c: &mut Criterion, setup: &Setup) {
    let Setup {
        rt,
        locker,
        conn,
        rslock,
        opts,
    } = setup;
    let mut group = c.benchmark_group("acquire+release");
    group
        .measurement_time(Duration::from_secs(4))
        .sample_size(60);
    group.bench_function("baseline: raw SET NX PX + EVALSHA release", |b| {
        b.to_async(rt).iter(|| async {
            let key = fresh_key("raw");
            set_nx_px(&mut conn.clone(), &key).await;
            release(&mut conn.clone(), &key).await;
        })
    });
    group.bench_function("lock-core acquire + release", |b| {
        b.to_async(rt).iter(|| async {
            let guard = locker.acquire("cycle", opts).await.expect("acquire");
            guard.release().await.expect("release");
        })
    });
    group.bench_function("rslock lock + unlock", |b| {
        b.to_async(rt).iter(|| async {
            let lock = rslock
                .lock(b"rs-cycle".as_slice(), Duration::from_secs(30))
                .await
                .expect("rslock");
            rslock.unlock(&lock).await;
        })
    });
    group.finish();
}

/// Acquire + release cycles from 1, 8 and 64 tasks at once.
fn throughput(c: &mut Criterion, setup: &Setup) {
    let Setup {
        rt,
        locker,
        conn,
        opts,
        ..
    } = setup;
    let mut group = c.benchmark_group("throughput");
    group
        .measurement_time(Duration::from_secs(4))
        .sample_size(20);
    for tasks in [1u64, 8, 64] {
        group.throughput(criterion::Throughput::Elements(tasks));
        group.bench_with_input(
            BenchmarkId::new("raw SET NX PX + release", tasks),
            &tasks,
            |b, &tasks| {
                b.to_async(rt).iter(|| {
                    let conn = conn.clone();
                    async move {
                        let mut handles = Vec::new();
                        for _ in 0..tasks {
                            let mut conn = conn.clone();
                            handles.push(tokio::spawn(async move {
                                let key = fresh_key("tp-raw");
                                set_nx_px(&mut conn, &key).await;
                                release(&mut conn, &key).await;
                            }));
                        }
                        for handle in handles {
                            handle.await.expect("task");
                        }
                    }
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("lock-core acquire + release", tasks),
            &tasks,
            |b, &tasks| {
                b.to_async(rt).iter(|| {
                    let (locker, opts) = (locker.clone(), opts.clone());
                    async move {
                        let mut handles = Vec::new();
                        for _ in 0..tasks {
                            let (locker, opts) = (locker.clone(), opts.clone());
                            handles.push(tokio::spawn(async move {
                                let key = fresh_key("tp-lc");
                                let guard = locker.acquire(&key, &opts).await.expect("acquire");
                                guard.release().await.expect("release");
                            }));
                        }
                        for handle in handles {
                            handle.await.expect("task");
                        }
                    }
                })
            },
        );
    }
    group.finish();
}

/// From a release to the waiter's grant, through pub/sub.
fn handoff(c: &mut Criterion, setup: &Setup) {
    let Setup {
        rt,
        locker,
        conn,
        opts,
        ..
    } = setup;
    let mut group = c.benchmark_group("contended handoff");
    group
        .measurement_time(Duration::from_secs(4))
        .sample_size(30);
    group.bench_function("baseline: PING", |b| {
        b.to_async(rt).iter(|| {
            let mut conn = conn.clone();
            async move { ping(&mut conn).await }
        })
    });
    group.bench_function("lock-core release → waiter granted (pub/sub)", |b| {
        b.to_async(rt).iter_custom(|iters| {
            let (locker, opts) = (locker.clone(), opts.clone());
            async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let key = fresh_key("handoff");
                    let holder = locker.acquire(&key, &opts).await.expect("holder");
                    let (granted, at) = tokio::sync::oneshot::channel();
                    let waiter = {
                        let (locker, opts, key) = (locker.clone(), opts.clone(), key.clone());
                        tokio::spawn(async move {
                            let guard = locker.acquire(&key, &opts).await.expect("waiter");
                            let _ = granted.send(Instant::now());
                            guard.release().await.expect("release");
                        })
                    };
                    // Let the waiter find the lock taken and subscribe.
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    let released = Instant::now();
                    holder.release().await.expect("release");
                    let granted_at = at.await.expect("granted");
                    total += granted_at.saturating_duration_since(released);
                    waiter.await.expect("waiter task");
                }
                total
            }
        })
    });
    group.finish();
}

criterion_group!(lock_benches, benches);
criterion_main!(lock_benches);
