//! One operation at a time: `try_acquire` with default options and with
//! `Fencing::None`, against the raw calls, every case taking its turn in
//! every pass of every round.

use std::{
    future::Future,
    pin::Pin,
    time::{Duration, Instant},
};

use bench::{
    api::{LockOptions, Locker, scripts},
    raw::{evalsha, fence_floor, fresh_key, ping, release, set_nx_px},
};

use redis::aio::MultiplexedConnection;

use crate::{Ctx, median, ratio_cell};
use bench::regime::{Load, Meter};

type Case<'a> = Box<dyn FnMut() -> Pin<Box<dyn Future<Output = Duration> + 'a>> + 'a>;

const DEFAULT: &str = "lock-core try_acquire, default options (time-mixed fence)";
const UNFENCED: &str = "lock-core try_acquire, Fencing::None";
const EVALSHA: &str = "raw EVALSHA of the same acquire script (time-mixed)";
const SET_NX_PX: &str = "raw SET NX PX";
const RSLOCK: &str = "rslock lock";
const PING: &str = "PING";

fn cases<'a>(ctx: &'a Ctx, rslock: &'a rslock::LockManager) -> Vec<(&'static str, Case<'a>)> {
    let conn = &ctx.conn;
    vec![
        (
            DEFAULT,
            Box::new(move || Box::pin(try_acquire_once(&ctx.locker, &ctx.fenced, "lc"))),
        ),
        (
            UNFENCED,
            Box::new(move || Box::pin(try_acquire_once(&ctx.locker, &ctx.unfenced, "lu"))),
        ),
        (
            EVALSHA,
            Box::new(move || Box::pin(evalsha_once(conn.clone()))),
        ),
        (
            SET_NX_PX,
            Box::new(move || Box::pin(set_nx_px_once(conn.clone()))),
        ),
        (RSLOCK, Box::new(move || Box::pin(rslock_once(rslock)))),
        (PING, Box::new(move || Box::pin(ping_once(conn.clone())))),
    ]
}

/// One timed `try_acquire` on a fresh key named from `prefix`; its
/// release is not timed.
async fn try_acquire_once(locker: &Locker, opts: &LockOptions, prefix: &str) -> Duration {
    let key = fresh_key(prefix);
    let started = Instant::now();
    let guard = locker.try_acquire(&key, opts).await.expect("acquire");
    let elapsed = started.elapsed();
    if let Some(guard) = guard {
        guard.release().await.expect("release");
    }
    elapsed
}

/// One timed raw `EVALSHA` of the time-mixed acquire script; its release
/// is not timed.
async fn evalsha_once(mut conn: MultiplexedConnection) -> Duration {
    let key = format!("{{{}}}", fresh_key("ev"));
    let fence = fence_floor();
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
}

/// One timed raw `SET NX PX`; the `DEL` after it is not timed.
async fn set_nx_px_once(mut conn: MultiplexedConnection) -> Duration {
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
}

/// One timed rslock `lock`; its unlock is not timed.
async fn rslock_once(rslock: &rslock::LockManager) -> Duration {
    let key = fresh_key("rs");
    let started = Instant::now();
    let lock = rslock
        .lock(key.as_bytes(), Duration::from_secs(30))
        .await
        .expect("rslock");
    let elapsed = started.elapsed();
    rslock.unlock(&lock).await;
    elapsed
}

/// One timed `PING`.
async fn ping_once(mut conn: MultiplexedConnection) -> Duration {
    let started = Instant::now();
    ping(&mut conn).await;
    started.elapsed()
}

/// Samples of one case in one regime, in µs.
#[derive(Default)]
struct Samples {
    all: Vec<f64>,
    /// The median of each round.
    rounds: Vec<f64>,
}

pub(crate) async fn run(ctx: &Ctx, rounds: usize, per_round: usize) {
    let rslock = rslock::LockManager::new(vec![ctx.url.clone()]);
    let mut cases = cases(ctx, &rslock);
    let n = cases.len();
    // Warm-up: connections, script caches, allocator.
    for (_, case) in &mut cases {
        for _ in 0..per_round {
            case().await;
        }
    }
    let regimes = ctx.regimes.len();
    let mut samples: Vec<Vec<Samples>> = (0..regimes)
        .map(|_| (0..n).map(|_| Samples::default()).collect())
        .collect();
    let mut loads = vec![Load::default(); regimes];
    for round in 0..rounds {
        for (r, regime) in ctx.regimes.iter().enumerate() {
            let _spinners = regime.enter().await;
            let meter = Meter::start(ctx.redis_pid);
            let mut this_round: Vec<Vec<f64>> = vec![Vec::with_capacity(per_round); n];
            for _ in 0..per_round {
                for turn in 0..n {
                    let at = (turn + round) % n;
                    let elapsed = (cases[at].1)().await;
                    this_round[at].push(elapsed.as_secs_f64() * 1e6);
                }
            }
            meter.stop(&mut loads[r]);
            for (at, mut values) in this_round.into_iter().enumerate() {
                samples[r][at].rounds.push(median(&mut values));
                samples[r][at].all.extend(values);
            }
        }
    }
    let names: Vec<&str> = cases.iter().map(|(name, _)| *name).collect();
    drop(cases);
    report(ctx, &names, &mut samples, &loads, rounds, per_round);
}

fn report(
    ctx: &Ctx,
    names: &[&str],
    samples: &mut [Vec<Samples>],
    loads: &[Load],
    rounds: usize,
    per_round: usize,
) {
    let index = |name: &str| names.iter().position(|n| *n == name);
    println!(
        "\n## Latency: one operation at a time (medians of {} samples per case and regime; \
         {rounds} rounds alternating the regimes)",
        rounds * per_round
    );
    for (regime, load) in ctx.regimes.iter().zip(loads) {
        println!("- {}: {}", regime.name(), load.describe());
    }
    let header: Vec<&str> = ctx.regimes.iter().map(|r| r.name()).collect();
    println!("\n| case | {} |", header.join(" | "));
    println!("|---|{}", "---|".repeat(header.len()));
    let medians: Vec<Vec<f64>> = samples
        .iter_mut()
        .map(|cases| cases.iter_mut().map(|s| median(&mut s.all)).collect())
        .collect();
    for (at, name) in names.iter().enumerate() {
        let cells: Vec<String> = medians.iter().map(|m| format!("{:.1} µs", m[at])).collect();
        println!("| {name} | {} |", cells.join(" | "));
    }
    println!(
        "\n| same-run ratio (median; per-round spread) | {} |",
        header.join(" | ")
    );
    println!("|---|{}", "---|".repeat(header.len()));
    for (label, a, b) in [
        (
            "default try_acquire / raw EVALSHA of its script",
            DEFAULT,
            EVALSHA,
        ),
        ("default try_acquire / raw SET NX PX", DEFAULT, SET_NX_PX),
        (
            "Fencing::None try_acquire / raw SET NX PX",
            UNFENCED,
            SET_NX_PX,
        ),
        ("Fencing::None try_acquire / rslock lock", UNFENCED, RSLOCK),
    ] {
        let (Some(a), Some(b)) = (index(a), index(b)) else {
            continue;
        };
        let cells: Vec<String> = samples
            .iter()
            .zip(&medians)
            .map(|(cases, m)| {
                let per_round: Vec<f64> = cases[a]
                    .rounds
                    .iter()
                    .zip(&cases[b].rounds)
                    .map(|(x, y)| x / y)
                    .collect();
                ratio_cell(m[a] / m[b], &per_round)
            })
            .collect();
        println!("| {label} | {} |", cells.join(" | "));
    }
}
