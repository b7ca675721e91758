//! Heap allocations per acquire + release, against the raw calls that do
//! the same Redis work and against rslock, counted by a global allocator
//! that counts per thread (allocation-counter). The runtime is
//! single-threaded, so redis-rs's connection task, the lock's driver and
//! the caller all run on the counted thread.
//!
//! `cargo bench -p bench --features count-allocations --bench allocs`
#![warn(clippy::too_many_lines)]

use std::time::Duration;

use bench::api::{Fencing, LockOptions, Locker};
use bench::{
    raw::{fresh_key, release, runtime, set_nx_px},
    raw_connection, redis_for_bench,
};

/// Cycles per measurement: enough that per-cycle counts are stable.
const CYCLES: u64 = 2_000;

fn main() {
    let rt = runtime();
    let redis = rt.block_on(redis_for_bench());
    let url = redis.url.clone();
    let (locker, conn, rslock) = rt.block_on(async {
        let locker = Locker::connect(&url).await.expect("locker");
        let mut conn = raw_connection(&url).await;
        bench::raw::load_lock_script(&mut conn).await;
        (locker, conn, rslock::LockManager::new(vec![url.clone()]))
    });
    let fenced = LockOptions::new(Duration::from_secs(30));
    let unfenced = fenced.clone().fencing(Fencing::None);

    let mut rows = Vec::new();
    let mut count = |name: &'static str, run: &mut dyn FnMut()| {
        run(); // warm-up: connections, script caches, lazily built state
        let info = allocation_counter::measure(run);
        rows.push((name, info.count_total as f64 / CYCLES as f64));
    };
    count("raw SET NX PX + DEL", &mut || {
        rt.block_on(async {
            let mut conn = conn.clone();
            for _ in 0..CYCLES {
                let key = fresh_key("a");
                set_nx_px(&mut conn, &key).await;
                let _: () = redis::cmd("DEL")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .expect("DEL");
            }
        });
    });
    count("raw SET NX PX + EVALSHA release", &mut || {
        rt.block_on(async {
            let mut conn = conn.clone();
            for _ in 0..CYCLES {
                let key = fresh_key("b");
                set_nx_px(&mut conn, &key).await;
                release(&mut conn, &key).await;
            }
        });
    });
    for (name, opts) in [
        ("lock-core acquire + release (no fence)", &unfenced),
        ("lock-core acquire + release (time-mixed)", &fenced),
    ] {
        count(name, &mut || {
            rt.block_on(async {
                for _ in 0..CYCLES {
                    let key = fresh_key("c");
                    let guard = locker.acquire(&key, opts).await.expect("acquire");
                    guard.release().await.expect("release");
                }
            });
        });
    }
    count("rslock lock + unlock", &mut || {
        rt.block_on(async {
            for _ in 0..CYCLES {
                let key = fresh_key("d");
                let lock = rslock
                    .lock(key.as_bytes(), Duration::from_secs(30))
                    .await
                    .expect("rslock");
                rslock.unlock(&lock).await;
            }
        });
    });
    println!("\n| case | allocations per cycle |");
    println!("|---|---|");
    for (name, per_cycle) in &rows {
        println!("| {name} | {per_cycle:.1} |");
    }
    drop((locker, conn));
    let _entered = rt.enter();
    drop(redis);
}
