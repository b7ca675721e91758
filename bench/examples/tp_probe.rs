// Throwaway probe: TASKS tasks of acquire+release (or raw) for SECS seconds.
use bench::api::{Fencing, LockOptions, Locker};
use bench::raw::fresh_key;
use std::{
    cell::Cell,
    rc::Rc,
    time::{Duration, Instant},
};

fn main() {
    let rt = bench::raw::runtime();
    rt.block_on(async {
        let url = std::env::var("REDIS_URL").unwrap();
        let tasks: usize = std::env::var("TASKS")
            .unwrap_or("64".into())
            .parse()
            .unwrap();
        let secs: u64 = std::env::var("SECS").unwrap_or("5".into()).parse().unwrap();
        let mode = std::env::var("MODE").unwrap_or("fenced".into());
        let locker = Locker::connect(&url).await.unwrap();
        let client = redis::Client::open(url.as_str()).unwrap();
        let conn = client.get_multiplexed_async_connection().await.unwrap();
        let mut opts = LockOptions::new(Duration::from_secs(30));
        if mode == "none" {
            opts = opts.fencing(Fencing::None);
        }
        let started = Instant::now();
        let window = Duration::from_secs(secs);
        let counts = Rc::new(Cell::new(0u64));
        let local = tokio::task::LocalSet::new();
        for ti in 0..tasks {
            let (locker, opts, counts, mode, mut conn) = (
                locker.clone(),
                opts.clone(),
                counts.clone(),
                mode.clone(),
                conn.clone(),
            );
            local.spawn_local(async move {
                while started.elapsed() < window {
                    if mode == "raw" {
                        let key = if std::env::var("REUSE").is_ok() {
                            format!("p-rraw:{}", ti)
                        } else {
                            fresh_key("p-raw")
                        };
                        let _: Option<String> = redis::cmd("SET")
                            .arg(&key)
                            .arg("t")
                            .arg("NX")
                            .arg("PX")
                            .arg(30000)
                            .query_async(&mut conn)
                            .await
                            .unwrap();
                        let _: () = redis::cmd("DEL")
                            .arg(&key)
                            .query_async(&mut conn)
                            .await
                            .unwrap();
                    } else {
                        let key = if std::env::var("REUSE").is_ok() {
                            format!("p-reuse:{}", ti)
                        } else {
                            fresh_key("p-lc")
                        };
                        let g = locker.acquire(&key, &opts).await.unwrap();
                        g.release().await.unwrap();
                    }
                    counts.set(counts.get() + 1);
                }
            });
        }
        local.await;
        println!(
            "{mode} tasks={tasks}: {:.0} cycles/s",
            counts.get() as f64 / started.elapsed().as_secs_f64()
        );
    });
}
