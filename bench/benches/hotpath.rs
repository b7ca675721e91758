//! The lock's hot path against the raw calls doing the same Redis work,
//! measured interleaved: every round runs each case in turn, so a noisy
//! neighbour slows all of them alike, and the table reports medians over
//! all samples and the ratio of each case to its baseline.
//!
//! `cargo bench -p bench --bench hotpath` (add `-- --quick` for a short
//! run, `-- --only latency,throughput` to run some sections: `latency`,
//! `throughput`, `handoff`, `renewal`). Use a loopback `REDIS_URL`:
//! Docker's port proxy adds ~80 µs.

use std::{
    future::Future,
    pin::Pin,
    time::{Duration, Instant},
};

use bench::{
    raw::{evalsha, fresh_key, ping, release, runtime, set_nx_px},
    raw_connection, redis_for_bench,
};
use lock_core::{Fencing, LockOptions, Locker, scripts};
use redis::aio::MultiplexedConnection;

type Case<'a> = Box<dyn FnMut() -> Pin<Box<dyn Future<Output = Duration> + 'a>> + 'a>;

struct Row<'a> {
    name: &'static str,
    run: Case<'a>,
    samples: Vec<Duration>,
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|arg| arg == "--quick");
    let only: Option<Vec<String>> = args
        .iter()
        .position(|arg| arg == "--only")
        .and_then(|at| args.get(at + 1))
        .map(|list| list.split(',').map(str::to_owned).collect());
    let runs = |section: &str| {
        only.as_ref()
            .is_none_or(|only| only.iter().any(|s| s == section))
    };
    let (rounds, per_round) = if quick { (10, 50) } else { (40, 200) };
    let rt = runtime();
    let redis = rt.block_on(redis_for_bench());
    let url = redis.url.clone();
    rt.block_on(async {
        let locker = Locker::connect(&url).await.expect("locker");
        let conn = raw_connection(&url).await;
        let mut load = conn.clone();
        let _: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(scripts::LOCK.source)
            .query_async(&mut load)
            .await
            .expect("SCRIPT LOAD");
        let rslock = rslock::LockManager::new(vec![url.clone()]);
        let fenced = LockOptions::new(Duration::from_secs(30));
        let unfenced = fenced.clone().fencing(Fencing::None);
        if runs("latency") {
            latency(
                &locker, &conn, &rslock, &fenced, &unfenced, rounds, per_round,
            )
            .await;
        }
        let (tp_rounds, tp_window) = if quick {
            (3, Duration::from_millis(300))
        } else {
            (10, Duration::from_secs(1))
        };
        if runs("throughput") {
            throughput(
                &locker, &conn, &url, &fenced, &unfenced, 64, tp_rounds, tp_window,
            )
            .await;
        }
        let handoffs = if quick { 30 } else { 200 };
        let other = Locker::connect(&url).await.expect("a second locker");
        if runs("handoff") {
            handoff(&locker, &other, &conn, &fenced, handoffs).await;
        }
        let (locks, window) = if quick {
            (2_000, Duration::from_secs(12))
        } else {
            (10_000, Duration::from_secs(30))
        };
        if runs("renewal") {
            renewal_cost(&url, &conn, locks, window).await;
        }
    });
    let _entered = rt.enter();
    drop(redis);
}

async fn latency(
    locker: &Locker,
    conn: &MultiplexedConnection,
    rslock: &rslock::LockManager,
    fenced: &LockOptions,
    unfenced: &LockOptions,
    rounds: usize,
    per_round: usize,
) {
    let mut rows: Vec<Row<'_>> = vec![
        Row {
            name: "PING",
            run: Box::new(move || {
                let mut conn = conn.clone();
                Box::pin(async move {
                    let started = Instant::now();
                    ping(&mut conn).await;
                    started.elapsed()
                })
            }),
            samples: Vec::new(),
        },
        Row {
            name: "raw SET NX PX",
            run: Box::new(move || {
                let mut conn = conn.clone();
                Box::pin(async move {
                    let key = fresh_key("raw");
                    let started = Instant::now();
                    set_nx_px(&mut conn, &key).await;
                    let elapsed = started.elapsed();
                    let _: () = redis::cmd("DEL")
                        .arg(&key)
                        .query_async(&mut conn)
                        .await
                        .expect("DEL");
                    elapsed
                })
            }),
            samples: Vec::new(),
        },
        Row {
            name: "raw EVALSHA acquire (time-mixed)",
            run: Box::new(move || {
                let mut conn = conn.clone();
                Box::pin(async move {
                    let key = format!("{{{}}}", fresh_key("ev"));
                    let fence = format!("{key}:fence");
                    let started = Instant::now();
                    evalsha(
                        &mut conn,
                        &[&key, &fence],
                        &[scripts::op::ACQUIRE_TIME_MIXED, "token", "30000"],
                    )
                    .await;
                    let elapsed = started.elapsed();
                    release(&mut conn, &key).await;
                    elapsed
                })
            }),
            samples: Vec::new(),
        },
        Row {
            name: "lock-core try_acquire (time-mixed)",
            run: Box::new(move || {
                Box::pin(async move {
                    let key = fresh_key("lc");
                    let started = Instant::now();
                    let guard = locker.try_acquire(&key, fenced).await.expect("acquire");
                    let elapsed = started.elapsed();
                    if let Some(guard) = guard {
                        guard.release().await.expect("release");
                    }
                    elapsed
                })
            }),
            samples: Vec::new(),
        },
        Row {
            name: "lock-core try_acquire (no fence)",
            run: Box::new(move || {
                Box::pin(async move {
                    let key = fresh_key("lu");
                    let started = Instant::now();
                    let guard = locker.try_acquire(&key, unfenced).await.expect("acquire");
                    let elapsed = started.elapsed();
                    if let Some(guard) = guard {
                        guard.release().await.expect("release");
                    }
                    elapsed
                })
            }),
            samples: Vec::new(),
        },
        Row {
            name: "rslock lock",
            run: Box::new(move || {
                Box::pin(async move {
                    let key = fresh_key("rs");
                    let started = Instant::now();
                    let lock = rslock
                        .lock(key.as_bytes(), Duration::from_secs(30))
                        .await
                        .expect("rslock");
                    let elapsed = started.elapsed();
                    rslock.unlock(&lock).await;
                    elapsed
                })
            }),
            samples: Vec::new(),
        },
    ];
    // Warm-up: connections, script caches, allocator.
    for row in &mut rows {
        for _ in 0..per_round {
            (row.run)().await;
        }
    }
    for _ in 0..rounds {
        for row in &mut rows {
            for _ in 0..per_round {
                let elapsed = (row.run)().await;
                row.samples.push(elapsed);
            }
        }
    }
    let medians: Vec<(&str, Duration)> = rows
        .iter_mut()
        .map(|row| (row.name, median(&mut row.samples)))
        .collect();
    let of = |name: &str| {
        medians
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, d)| d.as_secs_f64())
            .unwrap_or(f64::NAN)
    };
    println!("\n| case | median | ratio |");
    println!("|---|---|---|");
    for (name, median) in &medians {
        println!("| {name} | {:.1} µs | |", median.as_secs_f64() * 1e6);
    }
    let ratio = |a: &str, b: &str| of(a) / of(b);
    println!(
        "\nfenced try_acquire / raw EVALSHA of its script: {:.2}×",
        ratio(
            "lock-core try_acquire (time-mixed)",
            "raw EVALSHA acquire (time-mixed)"
        )
    );
    println!(
        "fenced try_acquire / raw SET NX PX: {:.2}×",
        ratio("lock-core try_acquire (time-mixed)", "raw SET NX PX")
    );
    println!(
        "unfenced try_acquire / raw SET NX PX: {:.2}×",
        ratio("lock-core try_acquire (no fence)", "raw SET NX PX")
    );
    println!(
        "unfenced try_acquire / rslock lock: {:.2}×",
        ratio("lock-core try_acquire (no fence)", "rslock lock")
    );
}

/// The server's CPU time so far (user + system), from `INFO cpu`.
async fn server_cpu(conn: &MultiplexedConnection) -> f64 {
    let mut conn = conn.clone();
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(&mut conn)
        .await
        .expect("INFO cpu");
    info.lines()
        .filter(|line| line.starts_with("used_cpu_sys:") || line.starts_with("used_cpu_user:"))
        .filter_map(|line| line.split(':').nth(1)?.trim().parse::<f64>().ok())
        .sum()
}

/// Cycles per second, and the server's CPU time per cycle.
struct Rate {
    per_second: f64,
    server_us_per_cycle: f64,
}

/// Runs `tasks` tasks, each repeating `cycle` until `window` has passed.
async fn cycles_per_second<F, Fut>(
    conn: &MultiplexedConnection,
    tasks: usize,
    window: Duration,
    cycle: F,
) -> Rate
where
    F: Fn() -> Fut + Clone + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let cpu_before = server_cpu(conn).await;
    let started = Instant::now();
    let local = tokio::task::LocalSet::new();
    let counts = std::rc::Rc::new(std::cell::Cell::new(0u64));
    for _ in 0..tasks {
        let (cycle, counts) = (cycle.clone(), std::rc::Rc::clone(&counts));
        local.spawn_local(async move {
            while started.elapsed() < window {
                cycle().await;
                counts.set(counts.get() + 1);
            }
        });
    }
    local.await;
    let elapsed = started.elapsed().as_secs_f64();
    let cycles = counts.get().max(1) as f64;
    let cpu = server_cpu(conn).await - cpu_before;
    Rate {
        per_second: cycles / elapsed,
        server_us_per_cycle: cpu * 1e6 / cycles,
    }
}

#[allow(clippy::too_many_arguments)]
async fn throughput(
    locker: &Locker,
    conn: &MultiplexedConnection,
    url: &str,
    fenced: &LockOptions,
    unfenced: &LockOptions,
    tasks: usize,
    rounds: usize,
    window: Duration,
) {
    let rslock = rslock::LockManager::new(vec![url.to_owned()]);
    let mut raw = Vec::new();
    let mut raw_owned = Vec::new();
    let mut raw_fenced = Vec::new();
    let mut lock_fenced = Vec::new();
    let mut lock_unfenced = Vec::new();
    let mut peer = Vec::new();
    let conn_for_rate = conn.clone();
    for _ in 0..rounds {
        let conn = conn.clone();
        let base = conn.clone();
        raw.push(
            cycles_per_second(&conn_for_rate, tasks, window, move || {
                let mut conn = base.clone();
                async move {
                    let key = fresh_key("tp-raw");
                    set_nx_px(&mut conn, &key).await;
                    let _: () = redis::cmd("DEL")
                        .arg(&key)
                        .query_async(&mut conn)
                        .await
                        .expect("DEL");
                }
            })
            .await,
        );
        // The Redis work of an unfenced cycle, one command at a time: a
        // plain SET NX PX, then the owner-checked release (lock.lua's, which
        // also announces the release).
        let base = conn.clone();
        raw_owned.push(
            cycles_per_second(&conn_for_rate, tasks, window, move || {
                let mut conn = base.clone();
                async move {
                    let key = fresh_key("tp-own");
                    set_nx_px(&mut conn, &key).await;
                    release(&mut conn, &key).await;
                }
            })
            .await,
        );
        // The Redis work of a fenced cycle: the time-mixed acquire script,
        // then the release.
        let base = conn.clone();
        raw_fenced.push(
            cycles_per_second(&conn_for_rate, tasks, window, move || {
                let mut conn = base.clone();
                async move {
                    let key = format!("{{{}}}", fresh_key("tp-ev"));
                    let fence = format!("{key}:fence");
                    evalsha(
                        &mut conn,
                        &[&key, &fence],
                        &[scripts::op::ACQUIRE_TIME_MIXED, "token", "30000"],
                    )
                    .await;
                    release(&mut conn, &key).await;
                }
            })
            .await,
        );
        for (opts, out) in [(fenced, &mut lock_fenced), (unfenced, &mut lock_unfenced)] {
            let (locker, opts) = (locker.clone(), opts.clone());
            out.push(
                cycles_per_second(&conn_for_rate, tasks, window, move || {
                    let (locker, opts) = (locker.clone(), opts.clone());
                    async move {
                        let key = fresh_key("tp-lc");
                        let guard = locker.acquire(&key, &opts).await.expect("acquire");
                        guard.release().await.expect("release");
                    }
                })
                .await,
            );
        }
        let rslock = rslock.clone();
        peer.push(
            cycles_per_second(&conn_for_rate, tasks, window, move || {
                let rslock = rslock.clone();
                async move {
                    let key = fresh_key("tp-rs");
                    let lock = rslock
                        .lock(key.as_bytes(), Duration::from_secs(30))
                        .await
                        .expect("rslock");
                    rslock.unlock(&lock).await;
                }
            })
            .await,
        );
    }
    let med = |rates: &mut Vec<Rate>| {
        rates.sort_by(|a, b| a.per_second.total_cmp(&b.per_second));
        let middle = &rates[rates.len() / 2];
        (middle.per_second, middle.server_us_per_cycle)
    };
    let (raw, raw_owned, raw_fenced, fenced, unfenced, peer) = (
        med(&mut raw),
        med(&mut raw_owned),
        med(&mut raw_fenced),
        med(&mut lock_fenced),
        med(&mut lock_unfenced),
        med(&mut peer),
    );
    println!("\n{tasks} tasks, acquire + release cycles per second (median of {rounds} rounds):");
    println!(
        "| case | cycles/s | vs raw SET NX PX + DEL | vs raw calls doing the same Redis work | vs rslock | Redis CPU per cycle |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, (value, server), same_work) in [
        ("raw SET NX PX + DEL", raw, raw),
        (
            "raw SET NX PX + EVALSHA release (an unfenced cycle's Redis work)",
            raw_owned,
            raw_owned,
        ),
        (
            "raw EVALSHA acquire (time-mixed) + EVALSHA release (a fenced cycle's Redis work)",
            raw_fenced,
            raw_fenced,
        ),
        ("lock-core (no fence)", unfenced, raw_owned),
        ("lock-core (time-mixed)", fenced, raw_fenced),
        ("rslock lock + unlock", peer, raw_owned),
    ] {
        println!(
            "| {name} | {:.0} | {:.2}× | {:.2}× | {:.2}× | {:.1} µs |",
            value,
            value / raw.0,
            value / same_work.0,
            value / peer.0,
            server
        );
    }
}

/// How long after its release the next waiter holds the lock, against a
/// PING sent after the same idle wait (both pay the wake-up from idle).
/// The waiter is a task of the same locker (woken as the release reply
/// arrives) or of another locker (woken by the pub/sub announcement, as
/// a waiter in another process is).
async fn handoff(
    locker: &Locker,
    other: &Locker,
    conn: &MultiplexedConnection,
    opts: &LockOptions,
    samples: usize,
) {
    const IDLE: Duration = Duration::from_millis(30);
    let opts = opts.clone().wait(Duration::from_secs(5));
    let mut same = Vec::with_capacity(samples);
    let mut remote = Vec::with_capacity(samples);
    let mut pings = Vec::with_capacity(samples);
    for _ in 0..samples {
        for (waiting_on, out) in [(locker, &mut same), (other, &mut remote)] {
            let key = fresh_key("handoff");
            let holder = locker.acquire(&key, &opts).await.expect("holder");
            let (granted_tx, granted_rx) = tokio::sync::oneshot::channel();
            let waiter = {
                let (waiting_on, opts, key) = (waiting_on.clone(), opts.clone(), key.clone());
                tokio::spawn(async move {
                    let guard = waiting_on.acquire(&key, &opts).await.expect("waiter");
                    let _ = granted_tx.send(Instant::now());
                    guard.release().await.expect("release");
                })
            };
            // The waiter meets the holder, subscribes, and goes idle.
            tokio::time::sleep(IDLE).await;
            let released = Instant::now();
            holder.release().await.expect("release");
            let granted = granted_rx.await.expect("granted");
            out.push(granted.saturating_duration_since(released));
            waiter.await.expect("waiter task");
        }
        tokio::time::sleep(IDLE).await;
        let mut conn = conn.clone();
        let started = Instant::now();
        ping(&mut conn).await;
        pings.push(started.elapsed());
    }
    let idle_ping = median(&mut pings);
    println!("\nhandoff (release → the next waiter holds), {samples} samples:");
    println!("| case | median | idle PINGs |");
    println!("|---|---|---|");
    for (name, samples) in [
        ("waiter on the same locker", &mut same),
        ("waiter on another locker (pub/sub)", &mut remote),
    ] {
        let handoff = median(samples);
        println!(
            "| {name} | {:.1} µs | {:.2} |",
            handoff.as_secs_f64() * 1e6,
            handoff.as_secs_f64() / idle_ping.as_secs_f64()
        );
    }
    println!(
        "| idle PING (after the same {IDLE:?} wait) | {:.1} µs | 1 |",
        idle_ping.as_secs_f64() * 1e6
    );
}

/// This process's CPU time so far (user + system), from /proc/self/stat.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start after ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // Linux reports these in clock ticks of 1/100 s (USER_HZ).
    Some(Duration::from_millis((utime + stime) * 10))
}

/// The steady cost of holding `locks` locks (ttl 30 s, renewed every 10 s):
/// CPU of this process and of Redis per second of wall time.
async fn renewal_cost(url: &str, conn: &MultiplexedConnection, locks: usize, window: Duration) {
    let renewals = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let locker = {
        let renewals = std::sync::Arc::clone(&renewals);
        lock_core::LockerBuilder::from_url(url)
            .expect("url")
            .observer(move |observed| {
                if matches!(observed.event, lock_core::Event::Renewed { .. }) {
                    renewals.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
            .spawn()
            .await
            .expect("locker")
    };
    let opts = LockOptions::new(Duration::from_secs(30));
    let mut guards = Vec::with_capacity(locks);
    for _ in 0..locks {
        let key = fresh_key("held");
        guards.push(locker.acquire(&key, &opts).await.expect("acquire"));
    }
    // Let the acquisitions' own work settle, then measure a steady window.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let renewed_before = renewals.load(std::sync::atomic::Ordering::Relaxed);
    let (client_before, server_before) = (process_cpu(), server_cpu(conn).await);
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let elapsed = started.elapsed().as_secs_f64();
    let server = (server_cpu(conn).await - server_before) / elapsed;
    let held = guards.iter().filter(|guard| guard.is_held()).count();
    let renewed = renewals.load(std::sync::atomic::Ordering::Relaxed) - renewed_before;
    println!(
        "\n{locks} held locks (ttl 30 s, renewed every 10 s), over {window:?}: \
         {renewed} renewals, {held} still held"
    );
    match (client_before, process_cpu()) {
        (Some(before), Some(after)) => println!(
            "client CPU: {:.2}% of a core",
            (after - before).as_secs_f64() / elapsed * 100.0
        ),
        _ => println!("client CPU: /proc/self/stat unreadable on this system"),
    }
    println!("Redis CPU: {:.2}% of a core", server * 100.0);
    for guard in guards {
        guard.release().await.expect("release");
    }
}
