//! How long after its release the next waiter holds the lock, against a
//! PING sent after the same idle wait (both pay the wake-up from idle).
//! The waiter is a task of the same locker (woken as the release reply
//! arrives) or of another locker (woken by the pub/sub announcement, as a
//! waiter in another process is).

use std::time::{Duration, Instant};

use bench::{
    api::{LockOptions, Locker},
    raw::{fresh_key, ping},
};

use crate::{Ctx, median};
use bench::regime::{Load, Meter};

const IDLE: Duration = Duration::from_millis(30);

/// One handoff: `waiting_on` waits for the key `holder_on` holds, and gets
/// it when the holder releases. Returns release → grant.
async fn one(holder_on: &Locker, waiting_on: &Locker, opts: &LockOptions) -> Duration {
    let key = fresh_key("handoff");
    let holder = holder_on.acquire(&key, opts).await.expect("holder");
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
    waiter.await.expect("waiter task");
    granted.saturating_duration_since(released)
}

pub(crate) async fn run(ctx: &Ctx, rounds: usize, per_round: usize) {
    let other = Locker::connect(&ctx.url).await.expect("a second locker");
    let opts = ctx.fenced.clone().wait(Duration::from_secs(5));
    let regimes = ctx.regimes.len();
    // [regime][same locker, other locker, idle PING], in µs.
    let mut samples = vec![[Vec::new(), Vec::new(), Vec::new()]; regimes];
    let mut loads = vec![Load::default(); regimes];
    for _ in 0..rounds {
        for (r, regime) in ctx.regimes.iter().enumerate() {
            let _spinners = regime.enter().await;
            let meter = Meter::start(ctx.redis_pid);
            for _ in 0..per_round {
                let same = one(&ctx.locker, &ctx.locker, &opts).await;
                let remote = one(&ctx.locker, &other, &opts).await;
                tokio::time::sleep(IDLE).await;
                let mut conn = ctx.conn.clone();
                let started = Instant::now();
                ping(&mut conn).await;
                let idle_ping = started.elapsed();
                for (at, value) in [same, remote, idle_ping].into_iter().enumerate() {
                    samples[r][at].push(value.as_secs_f64() * 1e6);
                }
            }
            meter.stop(&mut loads[r]);
        }
    }
    println!(
        "\n## Handoff: release → the next waiter holds (default options; medians of {} samples \
         per regime)",
        rounds * per_round
    );
    for (regime, load) in ctx.regimes.iter().zip(&loads) {
        println!("- {}: {}", regime.name(), load.describe());
    }
    let names: Vec<&str> = ctx.regimes.iter().map(|r| r.name()).collect();
    println!(
        "\n| case | {} |",
        names
            .iter()
            .map(|r| format!("{r} | {r}: idle PINGs"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|{}", "---|---|".repeat(names.len()));
    let medians: Vec<[f64; 3]> = samples
        .iter_mut()
        .map(|[a, b, c]| [median(a), median(b), median(c)])
        .collect();
    for (at, name) in [
        "waiter on the same locker",
        "waiter on another locker (pub/sub)",
        &format!("idle PING (after the same {IDLE:?} wait)"),
    ]
    .into_iter()
    .enumerate()
    {
        let cells: Vec<String> = medians
            .iter()
            .map(|m| format!("{:.1} µs | {:.2}", m[at], m[at] / m[2]))
            .collect();
        println!("| {name} | {} |", cells.join(" | "));
    }
}
