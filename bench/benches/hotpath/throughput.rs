//! Acquire + release cycles from 1, 4, 16 and 64 tasks on one
//! current-thread runtime and one `Locker`, each against the raw loop of
//! `SET NX PX` and `DEL` on one multiplexed connection at the same
//! concurrency, measured in the same round.

use std::{
    cell::Cell,
    future::Future,
    pin::Pin,
    rc::Rc,
    time::{Duration, Instant},
};

use bench::{
    api::scripts,
    raw::{evalsha, fence_floor, fresh_key, release, set_nx_px},
};
use redis::aio::MultiplexedConnection;

use crate::{Ctx, median, ratio_cell, server_cpu};
use bench::regime::{Load, Meter};

pub(crate) const CONCURRENCY: [usize; 4] = [1, 4, 16, 64];

type Cycle = Rc<dyn Fn() -> Pin<Box<dyn Future<Output = ()>>>>;

struct Case {
    name: &'static str,
    /// The case whose Redis work this one sends (itself for a baseline).
    same_work: usize,
    cycle: Cycle,
}

const RAW: usize = 0;
const RAW_FENCED_WORK: usize = 3;
const RAW_UNFENCED_WORK: usize = 4;

fn cases(ctx: &Ctx) -> Vec<Case> {
    let rslock = rslock::LockManager::new(vec![ctx.url.clone()]);
    let lock = |opts: &bench::api::LockOptions| -> Cycle {
        let (locker, opts) = (ctx.locker.clone(), opts.clone());
        Rc::new(move || {
            let (locker, opts) = (locker.clone(), opts.clone());
            Box::pin(async move {
                let key = fresh_key("tp-lc");
                let guard = locker.acquire(&key, &opts).await.expect("acquire");
                guard.release().await.expect("release");
            })
        })
    };
    let raw = |body: fn(MultiplexedConnection) -> Pin<Box<dyn Future<Output = ()>>>| -> Cycle {
        let conn = ctx.conn.clone();
        Rc::new(move || body(conn.clone()))
    };
    vec![
        Case {
            name: "raw SET NX PX + DEL (the baseline)",
            same_work: RAW,
            cycle: raw(|mut conn| {
                Box::pin(async move {
                    let key = fresh_key("tp-raw");
                    set_nx_px(&mut conn, &key).await;
                    let _: () = redis::cmd("DEL")
                        .arg(&key)
                        .query_async(&mut conn)
                        .await
                        .expect("DEL");
                })
            }),
        },
        Case {
            name: "lock-core, default options (time-mixed fence)",
            same_work: RAW_FENCED_WORK,
            cycle: lock(&ctx.fenced),
        },
        Case {
            name: "lock-core, Fencing::None",
            same_work: RAW_UNFENCED_WORK,
            cycle: lock(&ctx.unfenced),
        },
        // The Redis work of a fenced cycle, one command at a time: the
        // time-mixed acquire script, then the owner-checked release.
        Case {
            name: "raw EVALSHA acquire (time-mixed) + EVALSHA release",
            same_work: RAW_FENCED_WORK,
            cycle: raw(|mut conn| {
                Box::pin(async move {
                    let key = format!("{{{}}}", fresh_key("tp-ev"));
                    let fence = fence_floor();
                    evalsha(
                        &mut conn,
                        &[&key, &fence],
                        &[scripts::op::ACQUIRE_TIME_MIXED, "token", "30000"],
                    )
                    .await;
                    release(&mut conn, &key).await;
                })
            }),
        },
        // The Redis work of an unfenced cycle: a plain SET NX PX, then
        // lock.lua's owner-checked release (which also announces it).
        Case {
            name: "raw SET NX PX + EVALSHA release",
            same_work: RAW_UNFENCED_WORK,
            cycle: raw(|mut conn| {
                Box::pin(async move {
                    let key = fresh_key("tp-own");
                    set_nx_px(&mut conn, &key).await;
                    release(&mut conn, &key).await;
                })
            }),
        },
        Case {
            name: "rslock lock + unlock",
            same_work: RAW_UNFENCED_WORK,
            cycle: Rc::new(move || {
                let rslock = rslock.clone();
                Box::pin(async move {
                    let key = fresh_key("tp-rs");
                    let lock = rslock
                        .lock(key.as_bytes(), Duration::from_secs(30))
                        .await
                        .expect("rslock");
                    rslock.unlock(&lock).await;
                })
            }),
        },
    ]
}

/// One window's result.
#[derive(Clone, Copy)]
struct Rate {
    per_second: f64,
    /// Redis CPU (user + system) per cycle, µs.
    server_us_per_cycle: f64,
    /// Top-level `EVALSHA` calls per cycle (below 2 when batches share).
    evalsha_per_cycle: f64,
    /// Redis time inside `EVALSHA` (commandstats), µs per cycle.
    evalsha_us_per_cycle: f64,
    /// Redis time inside `SET` and `DEL` (commandstats; scripts' calls
    /// included), µs per cycle.
    set_del_us_per_cycle: f64,
}

/// `INFO commandstats`: (calls, µs) of `EVALSHA`, and µs of `SET` + `DEL`.
/// Redis counts a script's own calls under their commands as well.
async fn command_stats(conn: &MultiplexedConnection) -> (u64, u64, u64) {
    let mut conn = conn.clone();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .expect("INFO commandstats");
    let stat = |command: &str, field: &str| -> u64 {
        info.lines()
            .find_map(|line| line.strip_prefix(&format!("cmdstat_{command}:")))
            .and_then(|fields| {
                fields
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(field)?.strip_prefix('='))
            })
            .and_then(|value| value.parse().ok())
            .unwrap_or(0)
    };
    (
        stat("evalsha", "calls"),
        stat("evalsha", "usec"),
        stat("set", "usec") + stat("del", "usec"),
    )
}

/// Runs `tasks` tasks, each repeating `cycle` until `window` has passed.
async fn cycles_per_second(
    conn: &MultiplexedConnection,
    tasks: usize,
    window: Duration,
    cycle: &Cycle,
) -> Rate {
    let cpu_before = server_cpu(conn).await;
    let stats_before = command_stats(conn).await;
    let started = Instant::now();
    let local = tokio::task::LocalSet::new();
    let counts = Rc::new(Cell::new(0u64));
    for _ in 0..tasks {
        let (cycle, counts) = (Rc::clone(cycle), Rc::clone(&counts));
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
    let stats_after = command_stats(conn).await;
    let cpu = server_cpu(conn).await - cpu_before;
    let per_cycle = |after: u64, before: u64| after.saturating_sub(before) as f64 / cycles;
    Rate {
        per_second: cycles / elapsed,
        server_us_per_cycle: cpu * 1e6 / cycles,
        evalsha_per_cycle: per_cycle(stats_after.0, stats_before.0),
        evalsha_us_per_cycle: per_cycle(stats_after.1, stats_before.1),
        set_del_us_per_cycle: per_cycle(stats_after.2, stats_before.2),
    }
}

pub(crate) async fn run(ctx: &Ctx, rounds: usize, window: Duration) {
    let cases = cases(ctx);
    let n = cases.len();
    // Warm-up: every case at every concurrency, unmeasured.
    for tasks in CONCURRENCY {
        for case in &cases {
            cycles_per_second(&ctx.conn, tasks, Duration::from_millis(50), &case.cycle).await;
        }
    }
    let regimes = ctx.regimes.len();
    // rates[regime][concurrency][case]: one Rate per round.
    let mut rates: Vec<Vec<Vec<Vec<Rate>>>> =
        vec![vec![vec![Vec::new(); n]; CONCURRENCY.len()]; regimes];
    let mut loads = vec![Load::default(); regimes];
    for round in 0..rounds {
        for (r, regime) in ctx.regimes.iter().enumerate() {
            let _spinners = regime.enter().await;
            let meter = Meter::start(ctx.redis_pid);
            for (c, tasks) in CONCURRENCY.into_iter().enumerate() {
                for turn in 0..n {
                    let at = (turn + round) % n;
                    let rate = cycles_per_second(&ctx.conn, tasks, window, &cases[at].cycle).await;
                    rates[r][c][at].push(rate);
                }
            }
            meter.stop(&mut loads[r]);
        }
    }
    report(ctx, &cases, &rates, &loads, rounds, window);
}

/// The median rate, and the median and spread of the per-round ratios to
/// case `base`.
fn summarise(rounds: &[Vec<Rate>], at: usize, base: usize) -> (f64, f64, Vec<f64>) {
    let mut per_second: Vec<f64> = rounds[at].iter().map(|r| r.per_second).collect();
    let mut ratios: Vec<f64> = rounds[at]
        .iter()
        .zip(&rounds[base])
        .map(|(a, b)| a.per_second / b.per_second)
        .collect();
    let spread = ratios.clone();
    (median(&mut per_second), median(&mut ratios), spread)
}

fn report(
    ctx: &Ctx,
    cases: &[Case],
    rates: &[Vec<Vec<Vec<Rate>>>],
    loads: &[Load],
    rounds: usize,
    window: Duration,
) {
    println!(
        "\n## Throughput: acquire + release cycles per second on one current-thread runtime \
         (median of {rounds} rounds of {window:?} per case, concurrency and regime; a ratio is \
         the median of the per-round ratios to the case measured in the same round)"
    );
    for (regime, load) in ctx.regimes.iter().zip(loads) {
        println!("- {}: {}", regime.name(), load.describe());
    }
    let names: Vec<&str> = ctx.regimes.iter().map(|r| r.name()).collect();
    ratio_table(&names, rates);
    for (c, tasks) in CONCURRENCY.into_iter().enumerate() {
        // By regime, then case.
        let at_tasks: Vec<&[Vec<Rate>]> = rates.iter().map(|regime| regime[c].as_slice()).collect();
        println!("\n{tasks} task(s):\n");
        rate_table(&names, cases, &at_tasks);
        redis_time_table(tasks, &names, cases, &at_tasks);
    }
}

/// The headline: the lock's rate over the raw loop's, with and without a
/// fence, by concurrency and regime.
fn ratio_table(names: &[&str], rates: &[Vec<Vec<Vec<Rate>>>]) {
    println!(
        "\n| tasks | {} |",
        names
            .iter()
            .map(|r| format!("default / raw loop, {r} | Fencing::None / raw loop, {r}"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|{}", "---|---|".repeat(names.len()));
    for (c, tasks) in CONCURRENCY.into_iter().enumerate() {
        let cells: Vec<String> = rates
            .iter()
            .map(|regime| {
                let (_, fenced, fenced_spread) = summarise(&regime[c], 1, RAW);
                let (_, unfenced, unfenced_spread) = summarise(&regime[c], 2, RAW);
                format!(
                    "{} | {}",
                    ratio_cell(fenced, &fenced_spread),
                    ratio_cell(unfenced, &unfenced_spread)
                )
            })
            .collect();
        println!("| {tasks} | {} |", cells.join(" | "));
    }
}

/// Every case's rate at one concurrency, and its ratios to the raw loop,
/// the raw calls doing the same Redis work, and rslock; `rates` by
/// regime, then case.
fn rate_table(names: &[&str], cases: &[Case], rates: &[&[Vec<Rate>]]) {
    println!(
        "| case | {} |",
        names
            .iter()
            .map(|r| format!(
                "{r}: cycles/s | × raw loop | × raw calls, same Redis work | × rslock | Redis CPU per cycle"
            ))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|{}", "---|---|---|---|---|".repeat(names.len()));
    for (at, case) in cases.iter().enumerate() {
        let cells: Vec<String> = rates
            .iter()
            .map(|rounds| {
                let (rate, vs_raw, _) = summarise(rounds, at, RAW);
                let (_, vs_work, _) = summarise(rounds, at, case.same_work);
                let (_, vs_rslock, _) = summarise(rounds, at, cases.len() - 1);
                let mut server: Vec<f64> =
                    rounds[at].iter().map(|r| r.server_us_per_cycle).collect();
                format!(
                    "{:.1} k | {vs_raw:.2}× | {vs_work:.2}× | {vs_rslock:.2}× | {:.1} µs",
                    rate / 1e3,
                    median(&mut server)
                )
            })
            .collect();
        println!("| {} | {} |", case.name, cells.join(" | "));
    }
}

/// Where Redis's time goes per cycle of every case at `tasks` tasks;
/// `rates` by regime, then case.
fn redis_time_table(tasks: usize, names: &[&str], cases: &[Case], rates: &[&[Vec<Rate>]]) {
    println!(
        "\nwhere Redis's time goes at {tasks} task(s), per cycle (medians; commandstats count a \
         script's own SET and DEL under SET and DEL too):\n"
    );
    println!(
        "| case | {} |",
        names
            .iter()
            .map(|r| format!("{r}: EVALSHA calls | µs in EVALSHA | µs in SET + DEL | Redis CPU"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|{}", "---|---|---|---|".repeat(names.len()));
    for (at, case) in cases.iter().enumerate() {
        let cells: Vec<String> = rates
            .iter()
            .map(|regime| {
                let rounds = &regime[at];
                let field = |get: fn(&Rate) -> f64| {
                    let mut values: Vec<f64> = rounds.iter().map(get).collect();
                    median(&mut values)
                };
                format!(
                    "{:.2} | {:.1} µs | {:.1} µs | {:.1} µs",
                    field(|r| r.evalsha_per_cycle),
                    field(|r| r.evalsha_us_per_cycle),
                    field(|r| r.set_del_us_per_cycle),
                    field(|r| r.server_us_per_cycle),
                )
            })
            .collect();
        println!("| {} | {} |", case.name, cells.join(" | "));
    }
}
