//! Runs acquire+release cycles from 64 tasks on one Locker, for profiling:
//! `cargo run --release -p bench --example cycles`.

use std::time::{Duration, Instant};

use lock_core::{LockOptions, Locker};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let redis = bench::spawn_redis_server().expect("redis-server");
    let locker = Locker::connect(&redis.url).await.expect("connect");
    let opts = LockOptions::new(Duration::from_secs(30));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..64 {
        let (locker, opts) = (locker.clone(), opts.clone());
        tasks.push(tokio::spawn(async move {
            for cycle in 0..300 {
                let key = format!("cycle:{task}:{cycle}");
                let guard = locker.acquire(&key, &opts).await.expect("acquire");
                guard.release().await.expect("release");
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    let cycles = 64.0 * 300.0;
    println!("{:.0} cycles/s", cycles / started.elapsed().as_secs_f64());
}
