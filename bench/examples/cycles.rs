//! Runs acquire+release cycles from 64 tasks on one Locker, for profiling:
//! `cargo run --release -p bench --example cycles -- [--no-fence] [--raw]`
//! (`REDIS_URL`, else a spawned `redis-server`). `--raw` runs the raw
//! `SET NX PX` + `DEL` loop instead, for a profile of the baseline;
//! `--multi` runs on a two-worker multi-thread runtime, `--tasks N` with N
//! tasks instead of 64, `--cycles N` N cycles in all instead of 192,000.
//! `--redlock` runs one task's cycles, one after another, on a Redlock
//! over 3 spawned `redis-server`s, for a profile of the fan-out (add
//! `--rslock` to run rslock's instead).
#![warn(clippy::too_many_lines)]

use std::time::{Duration, Instant};

use bench::api::{Fencing, LockOptions, Locker};

fn main() {
    // `--multi`: a multi-thread runtime (two workers) instead of the
    // current-thread one every bench uses.
    let runtime = if std::env::args().any(|arg| arg == "--multi") {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    runtime.expect("a tokio runtime").block_on(run());
}

async fn run() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().any(|arg| arg == name);
    if flag("--redlock") {
        return redlock(flag("--no-fence"), flag("--rslock")).await;
    }
    let redis = bench::redis_for_bench().await;
    let locker = Locker::connect(&redis.url).await.expect("connect");
    let raw = bench::raw_connection(&redis.url).await;
    let mut opts = LockOptions::new(Duration::from_secs(30));
    if flag("--no-fence") {
        opts = opts.fencing(Fencing::None);
    }
    // `--tasks N`: how many tasks cycle at once (64 unless given).
    let task_count: u32 = args
        .iter()
        .position(|arg| arg == "--tasks")
        .and_then(|at| args.get(at + 1)?.parse().ok())
        .unwrap_or(64);
    // `--cycles N`: how many cycles in all (192,000 unless given; fewer
    // for a run under callgrind).
    let total: u32 = args
        .iter()
        .position(|arg| arg == "--cycles")
        .and_then(|at| args.get(at + 1)?.parse().ok())
        .unwrap_or(192_000);
    let per_task = total / task_count.max(1);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..task_count {
        let (locker, opts, mut raw) = (locker.clone(), opts.clone(), raw.clone());
        let raw_loop = flag("--raw");
        tasks.push(tokio::spawn(async move {
            for cycle in 0..per_task {
                let key = format!("cycle:{task}:{cycle}");
                if raw_loop {
                    bench::raw::set_nx_px(&mut raw, &key).await;
                    let _: () = redis::cmd("DEL")
                        .arg(&key)
                        .query_async(&mut raw)
                        .await
                        .expect("DEL");
                } else {
                    let guard = locker.acquire(&key, &opts).await.expect("acquire");
                    guard.release().await.expect("release");
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    let cycles = f64::from(task_count) * f64::from(per_task);
    println!(
        "{:.0} cycles/s, client CPU {:.2} µs per cycle",
        cycles / started.elapsed().as_secs_f64(),
        own_cpu_us() / cycles
    );
}

async fn redlock(no_fence: bool, rslock: bool) {
    let nodes = bench::redis_nodes_for_bench(3).await;
    let urls: Vec<&str> = nodes.iter().map(|node| node.url.as_str()).collect();
    let cycles = 20_000;
    if rslock {
        let rslock = rslock::LockManager::new(urls.clone());
        let started = Instant::now();
        for cycle in 0..cycles {
            let key = format!("redlock:{cycle}");
            let lock = rslock
                .lock(key.as_bytes(), Duration::from_secs(30))
                .await
                .expect("rslock");
            rslock.unlock(&lock).await;
        }
        println!(
            "{:.1} µs per cycle (rslock), client CPU {:.1} µs per cycle",
            started.elapsed().as_secs_f64() * 1e6 / f64::from(cycles),
            own_cpu_us() / f64::from(cycles)
        );
        return;
    }
    let locker = Locker::connect_redlock(&urls).await.expect("connect");
    let mut opts = LockOptions::new(Duration::from_secs(30));
    if no_fence {
        opts = opts.fencing(Fencing::None);
    }
    let started = Instant::now();
    for cycle in 0..cycles {
        let key = format!("redlock:{cycle}");
        let guard = locker.acquire(&key, &opts).await.expect("acquire");
        guard.release().await.expect("release");
    }
    println!(
        "{:.1} µs per cycle, client CPU {:.1} µs per cycle",
        started.elapsed().as_secs_f64() * 1e6 / f64::from(cycles),
        own_cpu_us() / f64::from(cycles)
    );
}

/// This process's CPU time so far (user + system), in µs, from
/// `/proc/self/stat` (0 where that is unreadable).
fn own_cpu_us() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|at| fields.get(*at)?.parse::<f64>().ok())
        .sum();
    ticks * 1e6 / 100.0
}
