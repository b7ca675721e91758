//! The steady cost of holding many locks (ttl 30 s, renewed every 10 s):
//! CPU of this process and of Redis per second of wall time. It runs once,
//! in the idle regime (the spinners would blur a CPU count).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use bench::{
    api::{Event, LockOptions, LockerBuilder},
    raw::fresh_key,
};

use bench::regime::process_cpu;

use crate::{Ctx, server_cpu};

pub(crate) async fn run(ctx: &Ctx, locks: usize, window: Duration) {
    let renewals = Arc::new(AtomicU64::new(0));
    let locker = {
        let renewals = Arc::clone(&renewals);
        LockerBuilder::from_url(&ctx.url)
            .expect("url")
            .observer(move |observed| {
                if matches!(observed.event, Event::Renewed { .. }) {
                    renewals.fetch_add(1, Ordering::Relaxed);
                }
            })
            .spawn()
            .await
            .expect("locker")
    };
    let opts = LockOptions::new(Duration::from_secs(30));
    let mut guards = Vec::with_capacity(locks);
    for _ in 0..locks {
        let key = fresh_key("held");
        guards.push(locker.acquire(&key, &opts).await.expect("acquire"));
    }
    // Let the acquisitions' own work settle, then measure a steady window.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let renewed_before = renewals.load(Ordering::Relaxed);
    let (client_before, server_before) = (process_cpu(), server_cpu(&ctx.conn).await);
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let elapsed = started.elapsed().as_secs_f64();
    let server = (server_cpu(&ctx.conn).await - server_before) / elapsed;
    let held = guards.iter().filter(|guard| guard.is_held()).count();
    let renewed = renewals.load(Ordering::Relaxed) - renewed_before;
    println!(
        "\n## Renewal: {locks} held locks (ttl 30 s, renewed every 10 s), over {window:?}, idle \
         regime: {renewed} renewals, {held} still held"
    );
    match (client_before, process_cpu()) {
        (Some(before), Some(after)) => println!(
            "client CPU: {:.2}% of a core",
            (after - before).as_secs_f64() / elapsed * 100.0
        ),
        _ => println!("client CPU: /proc/self/stat unreadable on this system"),
    }
    println!("Redis CPU: {:.2}% of a core", server * 100.0);
    for guard in guards {
        guard.release().await.expect("release");
    }
}
