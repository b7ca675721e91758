//! Compares lock configurations on real Redis (latency) and in simulation
//! (availability and safety), and prints a markdown table of medians and
//! ratios to a baseline measured in the same run.
//!
//! `cargo run --release -p bench --bin compare -- [--quick] [--out FILE]`
#![warn(clippy::too_many_lines)]

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use bench::api::{LockOptions, Locker};
use bench::{
    RedisUnderTest, Route, compare, raw_connection, redis_for_bench, redis_nodes_for_bench,
};
use redis::aio::MultiplexedConnection;

/// One raw SET NX PX + DEL cycle, sent to every connection at once.
async fn raw_cycle(conns: &[MultiplexedConnection]) -> Duration {
    let started = Instant::now();
    futures_util::future::join_all(conns.iter().map(|conn| {
        let mut conn = conn.clone();
        async move {
            let _: Option<String> = redis::cmd("SET")
                .arg("compare:raw")
                .arg("x")
                .arg("NX")
                .arg("PX")
                .arg(30_000)
                .query_async(&mut conn)
                .await
                .expect("SET");
            let _: i64 = redis::cmd("DEL")
                .arg("compare:raw")
                .query_async(&mut conn)
                .await
                .expect("DEL");
        }
    }))
    .await;
    started.elapsed()
}

/// The server's `redis_version`, or "(version unknown)".
async fn server_version(url: &str) -> String {
    let mut conn = raw_connection(url).await;
    let info: redis::RedisResult<String> = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await;
    info.ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("redis_version:").map(str::to_owned))
        })
        .unwrap_or_else(|| "(version unknown)".to_owned())
}

/// What the command line asks for.
struct Args {
    /// Fewer samples and seeds.
    quick: bool,
    /// Where the table goes.
    out: PathBuf,
}

impl Args {
    /// Reads the command line; exits 2 on a bad one.
    fn parse() -> Self {
        let mut parsed = Self {
            quick: false,
            out: PathBuf::from("target/compare.md"),
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => parsed.quick = true,
                "--out" => match args.next() {
                    Some(path) => parsed.out = PathBuf::from(path),
                    None => {
                        eprintln!("--out needs a file");
                        std::process::exit(2);
                    }
                },
                other => {
                    eprintln!("unknown argument {other:?}; usage: compare [--quick] [--out FILE]");
                    std::process::exit(2);
                }
            }
        }
        parsed
    }
}

fn main() {
    let Args { quick, out } = Args::parse();
    let samples = if quick { 200 } else { 2_000 };
    // The crash gap's median and max need enough holder crashes to mean
    // something: 50 even in a quick run (a seed is 12 simulated seconds, a
    // few milliseconds of real time).
    let (min_gaps, max_seeds) = if quick { (50, 2_000) } else { (200, 8_000) };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    let (route, measured) = runtime.block_on(measure(samples));
    // turmoil runs its own runtimes: simulate outside tokio's.
    let rows: Vec<compare::Row> = measured
        .into_iter()
        .map(|(config, latency)| {
            let sim = compare::simulate(&config, min_gaps, max_seeds);
            compare::Row {
                config,
                latency,
                sim,
            }
        })
        .collect();
    let table = compare::table(&route, &rows);
    println!("{table}");
    if let Some(parent) = out.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    match std::fs::write(&out, &table) {
        Ok(()) => eprintln!("written to {}", out.display()),
        Err(error) => {
            eprintln!("cannot write {}: {error}", out.display());
            std::process::exit(1);
        }
    }
}

/// Measures every configuration's acquire + release latency on real Redis,
/// `samples` times, interleaved with its baseline; returns where the Redis
/// came from, and each configuration with its latency.
async fn measure(samples: usize) -> (String, Vec<(compare::Config, compare::Interleaved)>) {
    let redis = redis_for_bench().await;
    let single = Locker::connect(&redis.url).await.expect("connect");
    let version = server_version(&redis.url).await;
    let single_route = match redis.route {
        Route::Env => format!("REDIS_URL, redis-server {version}"),
        Route::Container => format!("a testcontainers container, redis-server {version}"),
        Route::Spawned => format!("a spawned redis-server {version} on loopback"),
    };
    // Redlock configurations get their own spawned nodes.
    let most = compare::configurations()
        .iter()
        .map(|config| config.nodes)
        .max()
        .unwrap_or(1);
    let nodes = if most > 1 {
        redis_nodes_for_bench(most).await
    } else {
        Vec::new()
    };
    let mut node_conns = Vec::new();
    for node in &nodes {
        node_conns.push(raw_connection(&node.url).await);
    }
    let single_conn = [raw_connection(&redis.url).await];
    let mut rows = Vec::new();
    for config in compare::configurations() {
        let (locker, conns) = if config.nodes > 1 {
            let urls: Vec<&str> = nodes[..config.nodes]
                .iter()
                .map(|node| node.url.as_str())
                .collect();
            let locker = Locker::connect_redlock(&urls).await.expect("connect");
            (locker, &node_conns[..config.nodes])
        } else {
            (single.clone(), &single_conn[..])
        };
        // The baseline: raw SET NX PX + DEL on the same nodes,
        // sampled alternately with the configuration.
        let opts = config.options();
        let latency = compare::interleaved(
            samples,
            || lock_cycle(locker.clone(), opts.clone()),
            || raw_cycle(conns),
        )
        .await;
        rows.push((config, latency));
    }
    let route = route_description(single_route, &nodes);
    drop(nodes);
    drop(redis);
    (route, rows)
}

/// One acquire + release cycle of `locker`.
async fn lock_cycle(locker: Locker, opts: LockOptions) -> Duration {
    let started = Instant::now();
    let guard = locker
        .acquire("compare:lock", &opts)
        .await
        .expect("acquire");
    guard.release().await.expect("release");
    started.elapsed()
}

/// Where the table's Redis came from: the single node's route, and the
/// Redlock `nodes`' if any.
fn route_description(single_route: String, nodes: &[RedisUnderTest]) -> String {
    if nodes.is_empty() {
        return single_route;
    }
    let spawned = nodes.iter().all(|node| node.route == Route::Spawned);
    format!(
        "single node from {single_route}; Redlock nodes from {}",
        if spawned {
            "spawned redis-server processes on loopback"
        } else {
            "testcontainers containers"
        }
    )
}
