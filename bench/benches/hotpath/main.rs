//! The lock as a service uses it, against the raw calls doing the same
//! Redis work, in both regimes of a small machine, every figure interleaved
//! with its baseline in the same run.
//!
//! `cargo bench -p bench --bench hotpath` runs every section in both
//! regimes and prints them side by side; options after `--`:
//! - `--quick`: a short run (about a minute);
//! - `--regime idle|busy|both` (both by default): idle leaves the machine
//!   alone; busy runs one `nice -n 19` spinning shell per core, started and
//!   stopped by the bench round by round (regime.rs);
//! - `--only latency,throughput,handoff,renewal`: some sections;
//! - `--rounds N`, `--window-ms N`: the throughput section's rounds per
//!   regime and each case's window in a round.
//!
//! Default options (the time-mixed fence) come first, then
//! `Fencing::None`. Latency is one `try_acquire` at a time; throughput is
//! 1, 4, 16 and 64 tasks on one current-thread runtime and one `Locker` (a
//! service's shape), each against the raw `SET NX PX` + `DEL` loop on one
//! multiplexed connection at the same concurrency. Rounds alternate the
//! regimes, and within a round the cases take turns (their order rotates
//! from round to round), so a neighbour's burst or Redis's own expiry work
//! falls on all of them alike. The tables report medians and same-run
//! ratios with their spread over rounds. Use a loopback Redis (a spawned
//! `redis-server` by default, or `REDIS_URL`): Docker's port proxy adds
//! ~80 µs. bench/README.md says what moves these figures.
#![warn(clippy::too_many_lines)]

mod handoff;
mod latency;
mod renewal;
mod throughput;

use std::time::Duration;

use bench::{
    api::{Fencing, LockOptions, Locker},
    loopback_redis_for_bench,
    raw::runtime,
    raw_connection,
};
use redis::aio::MultiplexedConnection;

use bench::regime::{self, Regime};

/// What every section shares.
pub(crate) struct Ctx {
    pub(crate) url: String,
    pub(crate) locker: Locker,
    pub(crate) conn: MultiplexedConnection,
    /// Default options: the time-mixed fence, ttl 30 s.
    pub(crate) fenced: LockOptions,
    /// The same with `Fencing::None`.
    pub(crate) unfenced: LockOptions,
    pub(crate) regimes: Vec<Regime>,
    /// The Redis server's pid when it runs here (its CPU is its own line).
    pub(crate) redis_pid: Option<u32>,
}

struct Args {
    quick: bool,
    only: Option<Vec<String>>,
    regimes: Vec<Regime>,
    rounds: Option<usize>,
    window: Option<Duration>,
}

fn parse_args() -> Result<Args, String> {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| {
        args.iter()
            .position(|arg| arg == name)
            .and_then(|at| args.get(at + 1))
            .map(String::as_str)
    };
    let number = |name: &str| -> Result<Option<u64>, String> {
        value(name)
            .map(|text| {
                text.parse::<u64>()
                    .map_err(|_| format!("{name} {text}: expected a number"))
            })
            .transpose()
    };
    Ok(Args {
        quick: args.iter().any(|arg| arg == "--quick"),
        only: value("--only").map(|list| list.split(',').map(str::to_owned).collect()),
        regimes: Regime::parse(value("--regime"))?,
        rounds: number("--rounds")?.map(|n| n.max(1) as usize),
        window: number("--window-ms")?.map(Duration::from_millis),
    })
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("hotpath: {message}");
            std::process::exit(2);
        }
    };
    let runs = |section: &str| {
        args.only
            .as_ref()
            .is_none_or(|only| only.iter().any(|s| s == section))
    };
    let rt = runtime();
    let redis = rt.block_on(loopback_redis_for_bench());
    rt.block_on(async {
        let url = redis.url.clone();
        let locker = Locker::connect(&url).await.expect("locker");
        let conn = raw_connection(&url).await;
        let mut load = conn.clone();
        bench::raw::load_lock_script(&mut load).await;
        let fenced = LockOptions::new(Duration::from_secs(30));
        let unfenced = fenced.clone().fencing(Fencing::None);
        let (version, redis_pid) = server_facts(&conn).await;
        let ctx = Ctx {
            url,
            locker,
            conn,
            fenced,
            unfenced,
            regimes: args.regimes.clone(),
            redis_pid,
        };
        println!(
            "# hotpath: Redis {version} at {} ({}), {} cores, load average {} at start, regimes {}{}",
            ctx.url,
            match redis_pid {
                Some(pid) => format!("pid {pid} on this machine"),
                None => "its CPU not readable here".into(),
            },
            regime::cores(),
            bench::stats::loadavg(),
            ctx.regimes
                .iter()
                .map(|r| r.name())
                .collect::<Vec<_>>()
                .join(" + "),
            if args.quick { ", --quick" } else { "" },
        );
        if runs("latency") {
            let (rounds, per_round) = if args.quick { (6, 50) } else { (20, 200) };
            latency::run(&ctx, rounds, per_round).await;
        }
        if runs("throughput") {
            let (rounds, window) = if args.quick {
                (3, Duration::from_millis(200))
            } else {
                (5, Duration::from_millis(500))
            };
            throughput::run(
                &ctx,
                args.rounds.unwrap_or(rounds),
                args.window.unwrap_or(window),
            )
            .await;
        }
        if runs("handoff") {
            let (rounds, per_round) = if args.quick { (3, 10) } else { (5, 40) };
            handoff::run(&ctx, rounds, per_round).await;
        }
        if runs("renewal") {
            let (locks, window) = if args.quick {
                (2_000, Duration::from_secs(12))
            } else {
                (10_000, Duration::from_secs(30))
            };
            renewal::run(&ctx, locks, window).await;
        }
    });
    let _entered = rt.enter();
    drop(redis);
}

/// The server's version, and its pid when that process runs here.
async fn server_facts(conn: &MultiplexedConnection) -> (String, Option<u32>) {
    let mut conn = conn.clone();
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await
        .expect("INFO server");
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let version = field("redis_version").unwrap_or("?").to_owned();
    // A pid from a container's namespace may name another process here:
    // count it only if that process is a Redis server.
    let pid = field("process_id")
        .and_then(|pid| pid.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.contains("redis"))
        });
    (version, pid)
}

/// The server's CPU time so far (user + system, seconds), from `INFO cpu`.
pub(crate) async fn server_cpu(conn: &MultiplexedConnection) -> f64 {
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

/// The median; NaN for no samples.
pub(crate) fn median(values: &mut [f64]) -> f64 {
    values.sort_unstable_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// "1.05× (0.98–1.09)": a ratio with its spread over rounds.
pub(crate) fn ratio_cell(ratio: f64, per_round: &[f64]) -> String {
    let low = per_round.iter().copied().fold(f64::INFINITY, f64::min);
    let high = per_round.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if per_round.len() > 1 {
        format!("{ratio:.2}× ({low:.2}–{high:.2})")
    } else {
        format!("{ratio:.2}×")
    }
}
