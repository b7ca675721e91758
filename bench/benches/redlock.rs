//! Redlock against real Redis: one acquire+release cycle over N = 3 and 5
//! independent nodes, next to the single-node lock, the raw commands it is
//! built from sent to the N nodes at once (waiting for every node, and
//! waiting for the first majority, as lock-core does), and rslock's
//! multi-node mode.
//!
//! Every case is measured interleaved with the others in one run on a
//! single-threaded tokio runtime: each round runs a batch of every case in
//! turn, so a noisy neighbour slows all of them alike; the table gives the
//! medians over all rounds and the ratios to the same-run baselines.
//!
//! The nodes are `redis-server`s spawned on loopback (see
//! [`redis_nodes_for_bench`]); N = 1 uses the first of them and N = 3 its
//! first three, so every case talks to the same kind of server.
//!
//! `cargo bench -p bench --bench redlock` (add `-- --quick` for a short run).
#![warn(clippy::too_many_lines)]

use std::{
    future::Future,
    pin::Pin,
    time::{Duration, Instant},
};

use bench::api::{Fencing, LockOptions, Locker};
use bench::{
    raw::{fresh_key, release, runtime, set_nx_px},
    raw_connection, redis_nodes_for_bench,
};
use futures_util::{StreamExt, future::join_all, stream::FuturesUnordered};
use redis::aio::MultiplexedConnection;

/// The node counts measured.
const NODES: [usize; 3] = [1, 3, 5];

type Case<'a> = Box<dyn FnMut() -> Pin<Box<dyn Future<Output = Duration> + 'a>> + 'a>;

/// One measured case: which N, what, and its samples.
struct Row<'a> {
    nodes: usize,
    name: &'static str,
    run: Case<'a>,
    samples: Vec<Duration>,
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

/// Raw `SET NX PX` on every connection at once, then the release script
/// on every connection at once: the Redis work of one unfenced Redlock
/// cycle with nothing around it.
async fn raw_fan_out(conns: &[MultiplexedConnection]) -> Duration {
    let key = fresh_key("raw");
    let started = Instant::now();
    join_all(conns.iter().map(|conn| {
        let mut conn = conn.clone();
        let key = &key;
        async move { set_nx_px(&mut conn, key).await }
    }))
    .await;
    join_all(conns.iter().map(|conn| {
        let mut conn = conn.clone();
        let key = &key;
        async move { release(&mut conn, key).await }
    }))
    .await;
    started.elapsed()
}

/// The same commands as [`raw_fan_out`], each step done once the first
/// majority of nodes answered (the rest are answered later and their
/// replies dropped): what a cycle costs when, like lock-core, it does not
/// wait for the slowest node.
async fn raw_majority(conns: &[MultiplexedConnection]) -> Duration {
    let key = fresh_key("rawq");
    let started = Instant::now();
    first_majority(conns, &key, |mut conn, key| async move {
        set_nx_px(&mut conn, &key).await;
    })
    .await;
    first_majority(conns, &key, |mut conn, key| async move {
        release(&mut conn, &key).await;
    })
    .await;
    started.elapsed()
}

/// Runs `step` on every connection at once and returns once a majority of
/// them finished (the others are dropped; their replies are discarded).
async fn first_majority<F, Fut>(conns: &[MultiplexedConnection], key: &str, step: F)
where
    F: Fn(MultiplexedConnection, String) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut running: FuturesUnordered<Fut> = conns
        .iter()
        .map(|conn| step(conn.clone(), key.to_owned()))
        .collect();
    for _ in 0..conns.len() / 2 + 1 {
        running.next().await;
    }
}

/// One acquire + release cycle of `locker`.
async fn lock_cycle(locker: &Locker, opts: &LockOptions) -> Duration {
    let key = fresh_key("lc");
    let started = Instant::now();
    let guard = locker.acquire(&key, opts).await.expect("acquire");
    guard.release().await.expect("release");
    started.elapsed()
}

/// One lock + unlock cycle of rslock.
async fn rslock_cycle(rslock: &rslock::LockManager) -> Duration {
    let key = fresh_key("rs");
    let started = Instant::now();
    let lock = rslock
        .lock(key.as_bytes(), Duration::from_secs(30))
        .await
        .expect("rslock");
    rslock.unlock(&lock).await;
    started.elapsed()
}

/// What the cases talk through: a locker and an rslock per N, and a raw
/// connection per node with the lock's script loaded. Dropped in this
/// order.
struct Clients {
    lockers: Vec<Locker>,
    rslocks: Vec<rslock::LockManager>,
    conns: Vec<MultiplexedConnection>,
}

impl Clients {
    async fn connect(urls: &[&str]) -> Self {
        let mut conns = Vec::new();
        for url in urls {
            let mut conn = raw_connection(url).await;
            bench::raw::load_lock_script(&mut conn).await;
            conns.push(conn);
        }
        let mut lockers = Vec::new();
        for n in NODES {
            let locker = if n == 1 {
                Locker::connect(urls[0]).await.expect("locker")
            } else {
                Locker::connect_redlock(&urls[..n])
                    .await
                    .expect("Redlock locker")
            };
            lockers.push(locker);
        }
        let rslocks: Vec<rslock::LockManager> = NODES
            .into_iter()
            .map(|n| rslock::LockManager::new(urls[..n].to_vec()))
            .collect();
        Self {
            lockers,
            rslocks,
            conns,
        }
    }

    /// Every case at every N, in the order they run in a round.
    fn rows<'a>(&'a self, fenced: &'a LockOptions, unfenced: &'a LockOptions) -> Vec<Row<'a>> {
        let mut rows: Vec<Row<'_>> = Vec::new();
        for (i, n) in NODES.into_iter().enumerate() {
            let (conns, locker, rslock) = (&self.conns[..n], &self.lockers[i], &self.rslocks[i]);
            rows.push(Row {
                nodes: n,
                name: "raw SET NX PX + EVALSHA release, N nodes at once",
                run: Box::new(move || Box::pin(raw_fan_out(conns))),
                samples: Vec::new(),
            });
            rows.push(Row {
                nodes: n,
                name: "raw, first majority",
                run: Box::new(move || Box::pin(raw_majority(conns))),
                samples: Vec::new(),
            });
            rows.push(Row {
                nodes: n,
                name: "lock-core (no fence)",
                run: Box::new(move || Box::pin(lock_cycle(locker, unfenced))),
                samples: Vec::new(),
            });
            rows.push(Row {
                nodes: n,
                name: "lock-core (time-mixed fence)",
                run: Box::new(move || Box::pin(lock_cycle(locker, fenced))),
                samples: Vec::new(),
            });
            rows.push(Row {
                nodes: n,
                name: "rslock lock + unlock",
                run: Box::new(move || Box::pin(rslock_cycle(rslock))),
                samples: Vec::new(),
            });
        }
        rows
    }
}

/// Warms every case up, then runs `rounds` rounds of `per_round` samples
/// of every case in turn.
async fn measure(rows: &mut [Row<'_>], rounds: usize, per_round: usize) {
    // Warm-up: connections (rslock connects lazily), script caches.
    for row in rows.iter_mut() {
        for _ in 0..per_round {
            (row.run)().await;
        }
    }
    for _ in 0..rounds {
        for row in rows.iter_mut() {
            for _ in 0..per_round {
                let elapsed = (row.run)().await;
                row.samples.push(elapsed);
            }
        }
    }
}

/// Prints the medians of `samples` samples per case, and their ratios, as
/// a Markdown table.
fn print_table(rows: &mut [Row<'_>], samples: usize) {
    let medians: Vec<(usize, &str, Duration)> = rows
        .iter_mut()
        .map(|row| (row.nodes, row.name, median(&mut row.samples)))
        .collect();
    let of = |n: usize, prefix: &str| {
        medians
            .iter()
            .find(|(nodes, name, _)| *nodes == n && name.starts_with(prefix))
            .map(|(_, _, d)| d.as_secs_f64())
            .unwrap_or(f64::NAN)
    };
    println!(
        "\nacquire + release, medians of {samples} interleaved samples per case (N = 1 is the single-node lock):",
    );
    println!(
        "| N | raw fan-out, every node | raw fan-out, first majority | lock-core, no fence | lock-core, time-mixed | rslock | no fence / raw (every node) | no fence / raw (majority) | no fence / rslock | time-mixed / raw (majority) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for n in NODES {
        let (raw, majority, unfenced, fenced, peer) = (
            of(n, "raw SET"),
            of(n, "raw, first majority"),
            of(n, "lock-core (no fence)"),
            of(n, "lock-core (time-mixed"),
            of(n, "rslock"),
        );
        println!(
            "| {n} | {:.1} µs | {:.1} µs | {:.1} µs | {:.1} µs | {:.1} µs | {:.2}× | {:.2}× | {:.2}× | {:.2}× |",
            raw * 1e6,
            majority * 1e6,
            unfenced * 1e6,
            fenced * 1e6,
            peer * 1e6,
            unfenced / raw,
            unfenced / majority,
            unfenced / peer,
            fenced / majority,
        );
    }
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let (rounds, per_round) = if quick { (10, 30) } else { (40, 100) };
    let rt = runtime();
    let max_nodes = NODES.into_iter().max().unwrap_or(1);
    let nodes = rt.block_on(redis_nodes_for_bench(max_nodes));
    let urls: Vec<&str> = nodes.iter().map(|node| node.url.as_str()).collect();
    rt.block_on(async {
        let clients = Clients::connect(&urls).await;
        let fenced = LockOptions::new(Duration::from_secs(30)).wait(Duration::from_secs(5));
        let unfenced = fenced.clone().fencing(Fencing::None);
        let mut rows = clients.rows(&fenced, &unfenced);
        measure(&mut rows, rounds, per_round).await;
        print_table(&mut rows, rounds * per_round);
        drop(rows);
        drop(clients);
    });
    // Containers (the fallback route) stop themselves on drop through the
    // runtime they were started on: drop them inside its context.
    let _entered = rt.enter();
    drop(nodes);
}
