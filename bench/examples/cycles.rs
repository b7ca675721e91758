//! Runs acquire+release cycles from 64 tasks on one Locker, for profiling:
//! `cargo run --release -p bench --example cycles -- [--no-fence] [--raw]`
//! (`REDIS_URL`, else a spawned `redis-server`). `--raw` runs the raw
//! `SET NX PX` + `DEL` loop instead, for a profile of the baseline.

use std::time::{Duration, Instant};

use lock_core::{Fencing, LockOptions, Locker};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().any(|arg| arg == name);
    let redis = bench::redis_for_bench().await;
    let locker = Locker::connect(&redis.url).await.expect("connect");
    let raw = bench::raw_connection(&redis.url).await;
    let mut opts = LockOptions::new(Duration::from_secs(30));
    if flag("--no-fence") {
        opts = opts.fencing(Fencing::None);
    }
    let per_task = 3_000;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..64 {
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
    let cycles = 64.0 * f64::from(per_task);
    println!("{:.0} cycles/s", cycles / started.elapsed().as_secs_f64());
}
