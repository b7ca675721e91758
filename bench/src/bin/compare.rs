//! Compares lock configurations on real Redis (latency, cycles/s) and in
//! simulation (availability, the gap after a holder's crash, safety), and
//! writes a markdown table of medians and ratios to a baseline measured in
//! the same run, and an HTML page that draws them.
//!
//! `cargo run --release -p bench --bin compare -- [--quick] [--out FILE] [--html FILE]`
#![warn(clippy::too_many_lines)]

use std::{
    path::{Path, PathBuf},
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

use bench::api::{LockGuard, LockOptions, Locker, ReleaseError};
use bench::{
    RedisUnderTest, Route, compare, raw_connection, redis_for_bench, redis_nodes_for_bench,
};
use redis::aio::MultiplexedConnection;

/// One raw SET NX PX + DEL cycle on `key`, sent to every connection at once.
async fn raw_cycle(conns: &[MultiplexedConnection], key: &str) -> Duration {
    let started = Instant::now();
    futures_util::future::join_all(conns.iter().map(|conn| {
        let mut conn = conn.clone();
        async move {
            let _: Option<String> = redis::cmd("SET")
                .arg(key)
                .arg("x")
                .arg("NX")
                .arg("PX")
                .arg(30_000)
                .query_async(&mut conn)
                .await
                .expect("SET");
            let _: i64 = redis::cmd("DEL")
                .arg(key)
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

/// Compares lock configurations: acquire + release latency (p50, p99) and
/// cycles/s on real Redis, each against the raw SET NX PX + DEL on the same
/// nodes measured alternately with it, and availability, the gap after a
/// holder's crash and safety in simulation. Writes a markdown table and an
/// HTML page of charts (inline SVG; it loads nothing else).
#[derive(clap::Parser)]
#[command(name = "compare")]
struct Args {
    /// Fewer samples, windows and seeds: a run of under a minute (CI's).
    #[arg(long)]
    quick: bool,
    /// Where the markdown table goes.
    #[arg(long, value_name = "FILE", default_value = "target/compare.md")]
    out: PathBuf,
    /// Where the HTML page of charts goes [default: the table's path with
    /// the extension .html, so target/compare.html].
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

/// How much a run measures.
struct Effort {
    /// Latency samples per configuration (and as many of its baseline).
    samples: usize,
    /// Concurrent tasks in a cycles/s window.
    tasks: usize,
    /// Cycles/s windows per configuration (and as many of its baseline).
    rounds: usize,
    /// A cycles/s window's length.
    window: Duration,
}

fn main() {
    let Args { quick, out, html } = clap::Parser::parse();
    let html = html.unwrap_or_else(|| out.with_extension("html"));
    if html == out {
        eprintln!(
            "the table and the page would both go to {}: give --html another file",
            out.display()
        );
        std::process::exit(2);
    }
    let effort = if quick {
        Effort {
            samples: 200,
            tasks: 16,
            rounds: 3,
            window: Duration::from_millis(200),
        }
    } else {
        Effort {
            samples: 2_000,
            tasks: 16,
            rounds: 5,
            window: Duration::from_secs(1),
        }
    };
    // The crash gap's median and max need enough holder crashes to mean
    // something: 50 even in a quick run (a seed is 12 simulated seconds, a
    // few milliseconds of real time).
    let (min_gaps, max_seeds) = if quick { (50, 2_000) } else { (200, 8_000) };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    let (route, measured) = runtime.block_on(measure(&effort));
    let lost = LOST_AT_RELEASE.load(Ordering::Relaxed);
    if lost > 0 {
        eprintln!(
            "note: {lost} measured cycles found their lease already lost at their release \
             (a stall longer than the ttl); they count as cycles"
        );
    }
    // turmoil runs its own runtimes: simulate outside tokio's.
    let rows: Vec<compare::Row> = measured
        .into_iter()
        .map(|(config, latency, throughput)| {
            let sim = compare::simulate(&config, min_gaps, max_seeds);
            compare::Row {
                config,
                latency,
                throughput,
                sim,
            }
        })
        .collect();
    let table = compare::table(&route, &rows);
    println!("{table}");
    write(&out, &table);
    match compare::charts::page(&route, &rows) {
        Ok(page) => write(&html, &page),
        Err(error) => {
            eprintln!("cannot draw the page: {error}");
            std::process::exit(1);
        }
    }
}

/// Writes `text` to `path` (creating its directory), or exits 1.
fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
    {
        let _ = std::fs::create_dir_all(parent);
    }
    match std::fs::write(path, text) {
        Ok(()) => eprintln!("written to {}", path.display()),
        Err(error) => {
            eprintln!("cannot write {}: {error}", path.display());
            std::process::exit(1);
        }
    }
}

/// A configuration with what real Redis says of it.
type Measured = (compare::Config, compare::Interleaved, compare::Throughput);

/// Measures every configuration's acquire + release latency and cycles/s on
/// real Redis, as much as `effort` says, each interleaved with its
/// baseline; returns where the Redis came from, and each configuration with
/// its figures.
async fn measure(effort: &Effort) -> (String, Vec<Measured>) {
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
            effort.samples,
            || lock_cycle(locker.clone(), opts.clone()),
            || raw_cycle(conns, "compare:raw"),
        )
        .await;
        let (tasks, window) = (effort.tasks, effort.window);
        // Unmeasured first windows: connections and Redis warm, whichever
        // case is measured first.
        let warm_up = window / 4;
        lock_window(&locker, &opts, tasks, warm_up).await;
        raw_window(conns, tasks, warm_up).await;
        let throughput = compare::interleaved_rates(
            effort.rounds,
            tasks,
            || lock_window(&locker, &opts, tasks, window),
            || raw_window(conns, tasks, window),
        )
        .await;
        rows.push((config, latency, throughput));
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
    release(guard).await;
    started.elapsed()
}

/// Cycles whose lease had run out by their release (a stall longer than
/// the ttl: the "ttl 1s" configurations on a loaded machine). They count
/// as cycles, and the run says how many there were.
static LOST_AT_RELEASE: AtomicU64 = AtomicU64::new(0);

/// Releases `guard`; a lease already lost is counted, not a failure of the
/// measurement. Any other error is.
async fn release(guard: LockGuard) {
    match guard.release().await {
        Ok(_) => {}
        Err(ReleaseError::AlreadyLost(_)) => {
            LOST_AT_RELEASE.fetch_add(1, Ordering::Relaxed);
        }
        Err(error) => panic!("release: {error}"),
    }
}

/// Cycles per second of `tasks` tasks cycling acquire + release on
/// `locker`, each on its own key, for `window` (the tasks finish the cycle
/// they are in; the rate counts the time they took).
async fn lock_window(locker: &Locker, opts: &LockOptions, tasks: usize, window: Duration) -> f64 {
    let started = Instant::now();
    let cycles = futures_util::future::join_all((0..tasks).map(|task| async move {
        let key = format!("compare:tasks:{task}");
        let mut cycles = 0_u64;
        while started.elapsed() < window {
            let guard = locker.acquire(&key, opts).await.expect("acquire");
            release(guard).await;
            cycles += 1;
        }
        cycles
    }))
    .await;
    cycles.iter().sum::<u64>() as f64 / started.elapsed().as_secs_f64()
}

/// Cycles per second of `tasks` tasks cycling raw SET NX PX + DEL on
/// `conns`, each on its own key, for `window`, as [`lock_window`] counts.
async fn raw_window(conns: &[MultiplexedConnection], tasks: usize, window: Duration) -> f64 {
    let started = Instant::now();
    let cycles = futures_util::future::join_all((0..tasks).map(|task| async move {
        let key = format!("compare:raw:{task}");
        let mut cycles = 0_u64;
        while started.elapsed() < window {
            raw_cycle(conns, &key).await;
            cycles += 1;
        }
        cycles
    }))
    .await;
    cycles.iter().sum::<u64>() as f64 / started.elapsed().as_secs_f64()
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
