//! The lock family against the plain lock and against the raw script doing
//! the same Redis work, on one `Locker` over a loopback Redis, every figure
//! beside its baseline from the same round:
//!
//! - a cycle (acquire + release, uncontended, one task) of the fair lock,
//!   a read hold, a write hold and a semaphore permit, each against the
//!   plain lock's cycle; the permit's also against the raw `EVALSHA`s of
//!   the semaphore script (acquire, then release) that it sends;
//! - a handoff (a holder releases while one waiter waits: the time from the
//!   release call to the waiter's grant), fair against plain: the fair lock
//!   wakes its queue's head on its own channel, the plain lock every
//!   waiter on the shared one.
//!
//! Rounds interleave the cases, their order rotating; the table gives
//! medians over rounds and the median of the per-round ratios with their
//! range. Default options (ttl 30 s, time-mixed fence), a current-thread
//! runtime. Each round runs every case in both regimes of the machine
//! (`bench::regime`: idle, and busy with a `nice -n 19` spinner per core),
//! each regime's table with the CPU the rest of the machine used.
//! `cargo bench -p bench --bench family` (`-- --quick`: fewer rounds;
//! `-- --regime idle|busy|both`); needs a Redis as the other benches find one (`REDIS_URL`, a
//! spawned `redis-server`, or the Docker image).
#![warn(clippy::too_many_lines)]

use std::time::{Duration, Instant};

use bench::{
    api::{AcquireError, LockGuard, LockOptions, Locker, scripts},
    loopback_redis_for_bench,
    raw::{fresh_key, runtime},
    raw_connection,
    regime::{Load, Meter, Regime},
    stats::{loadavg, median, spread},
};
use redis::{Value, aio::MultiplexedConnection};
use scripts::{KeyNames, LockKind, family_op};

/// Cycles of one case in one round.
const PER_ROUND: usize = 400;
/// Handoffs of one case in one round (each waits a little to be sure the
/// waiter is queued, untimed).
const HANDOFFS: usize = 40;
const PERMITS: u32 = 4;
const TTL: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Case {
    Plain,
    Fair,
    Read,
    Write,
    Permit,
    RawPermit,
    PlainHandoff,
    FairHandoff,
}

impl Case {
    const ALL: [Self; 8] = [
        Self::Plain,
        Self::Fair,
        Self::Read,
        Self::Write,
        Self::Permit,
        Self::RawPermit,
        Self::PlainHandoff,
        Self::FairHandoff,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Plain => "plain lock: acquire + release",
            Self::Fair => "fair lock: acquire + release",
            Self::Read => "read hold: acquire_read + release",
            Self::Write => "write hold: acquire_write + release",
            Self::Permit => "semaphore (4 permits): acquire_permit + release",
            Self::RawPermit => "raw EVALSHA semaphore.lua: acquire, release",
            Self::PlainHandoff => "plain lock: handoff to a waiter",
            Self::FairHandoff => "fair lock: handoff to the queue's head",
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|arg| arg == "--quick");
    let rounds = if quick { 3 } else { 10 };
    let regime = args
        .iter()
        .position(|arg| arg == "--regime")
        .and_then(|at| args.get(at + 1))
        .map(String::as_str);
    let regimes = Regime::parse(regime).unwrap_or_else(|error| {
        eprintln!("family: {error}");
        std::process::exit(2)
    });
    let rt = runtime();
    rt.block_on(async {
        let redis = loopback_redis_for_bench().await;
        let locker = Locker::connect(&redis.url).await.expect("a locker");
        let mut conn = raw_connection(&redis.url).await;
        bench::raw::load_all_scripts(&mut conn).await;
        let redis_pid = server_pid(&mut conn).await;
        println!(
            "# family: {rounds} rounds x {PER_ROUND} cycles ({HANDOFFS} handoffs) per case and \
             regime, {}, load average {} at start",
            redis.url,
            loadavg()
        );
        // [regime][case]: one sample per round.
        let mut samples = vec![vec![Vec::new(); Case::ALL.len()]; regimes.len()];
        let mut loads = vec![Load::default(); regimes.len()];
        for round in 0..rounds {
            for (r, regime) in regimes.iter().enumerate() {
                let _spinners = regime.enter().await;
                let meter = Meter::start(redis_pid);
                for turn in 0..Case::ALL.len() {
                    let index = (turn + round) % Case::ALL.len();
                    let case = Case::ALL[index];
                    samples[r][index].push(run_case(&locker, &mut conn, case).await);
                }
                meter.stop(&mut loads[r]);
            }
        }
        println!("load average {} at end", loadavg());
        for ((regime, load), samples) in regimes.iter().zip(&loads).zip(&samples) {
            println!("\n## {} regime: {}\n", regime.name(), load.describe());
            report(samples);
        }
    });
}

/// The Redis server's pid from its `INFO server`, to tell its CPU from
/// the rest of the machine's (a server elsewhere: its pid means nothing
/// here, and the load line then counts it among the others).
async fn server_pid(conn: &mut MultiplexedConnection) -> Option<u32> {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(conn)
        .await
        .ok()?;
    info.lines()
        .find_map(|line| line.strip_prefix("process_id:"))
        .and_then(|pid| pid.trim().parse().ok())
}

fn report(samples: &[Vec<f64>]) {
    println!("| case | µs per cycle or handoff (median) |");
    println!("|---|---|");
    for (case, samples) in Case::ALL.iter().zip(samples) {
        println!(
            "| {} | {:.1} |",
            case.name(),
            median(samples.iter().copied())
        );
    }
    println!("\nSame-run ratios, median of the per-round ratios [min, max]:");
    for (label, case, baseline) in [
        ("fair / plain cycle", Case::Fair, Case::Plain),
        ("read / plain cycle", Case::Read, Case::Plain),
        ("write / plain cycle", Case::Write, Case::Plain),
        ("permit / plain cycle", Case::Permit, Case::Plain),
        (
            "permit / raw semaphore script",
            Case::Permit,
            Case::RawPermit,
        ),
        (
            "fair / plain handoff",
            Case::FairHandoff,
            Case::PlainHandoff,
        ),
    ] {
        let ratios: Vec<f64> = samples[case as usize]
            .iter()
            .zip(&samples[baseline as usize])
            .map(|(a, b)| a / b)
            .collect();
        println!("- {label}: {}", spread(&ratios));
    }
}

/// Runs one round of `case`; µs per cycle (or per handoff).
async fn run_case(locker: &Locker, conn: &mut MultiplexedConnection, case: Case) -> f64 {
    let plain = LockOptions::new(TTL).wait(Duration::from_secs(5));
    let fair = plain.clone().fair();
    match case {
        Case::PlainHandoff => return handoffs(locker, &plain).await,
        Case::FairHandoff => return handoffs(locker, &fair).await,
        _ => {}
    }
    let started = Instant::now();
    for _ in 0..PER_ROUND {
        let key = fresh_key("family");
        match case {
            Case::Plain => released(locker.acquire(&key, &plain).await).await,
            Case::Fair => released(locker.acquire(&key, &fair).await).await,
            Case::Read => {
                let guard = locker.acquire_read(&key, &plain).await.expect("read hold");
                guard.release().await.expect("release");
            }
            Case::Write => released(locker.acquire_write(&key, &plain).await).await,
            Case::Permit => released(locker.acquire_permit(&key, PERMITS, &plain).await).await,
            Case::RawPermit => raw_permit(conn, &key).await,
            Case::PlainHandoff | Case::FairHandoff => unreachable!("handled above"),
        }
    }
    started.elapsed().as_secs_f64() * 1e6 / PER_ROUND as f64
}

async fn released(guard: Result<LockGuard, AcquireError>) {
    guard
        .expect("an uncontended acquire")
        .release()
        .await
        .expect("release");
}

/// What `acquire_permit` + `release` send, as raw `EVALSHA`s: the
/// semaphore script's acquire, then its release.
async fn raw_permit(conn: &mut MultiplexedConnection, key: &str) {
    let names = KeyNames::with_kind("lock", key, LockKind::Permit { permits: PERMITS });
    let keys = names.script_keys();
    let sha = scripts::SEMAPHORE.sha1;
    let ttl = TTL.as_millis().to_string();
    let token = fresh_key("token");
    let fence: Value = redis::cmd("EVALSHA")
        .arg(sha)
        .arg(keys.len())
        .arg(&keys)
        .arg(family_op::PERMIT_ACQUIRE)
        .arg(&token)
        .arg(&ttl)
        .arg(PERMITS)
        .query_async(conn)
        .await
        .expect("EVALSHA acquire");
    assert!(
        matches!(fence, Value::Int(fence) if fence > 0),
        "granted: {fence:?}"
    );
    let released: Value = redis::cmd("EVALSHA")
        .arg(sha)
        .arg(1)
        .arg(&keys[0])
        .arg(family_op::PERMIT_RELEASE)
        .arg(&token)
        .query_async(conn)
        .await
        .expect("EVALSHA release");
    assert_eq!(released, Value::Int(1));
}

/// `HANDOFFS` handoffs on fresh keys: a holder, one waiter queued behind
/// it, the release; µs from the release call to the waiter's grant.
async fn handoffs(locker: &Locker, opts: &LockOptions) -> f64 {
    let mut total = Duration::ZERO;
    for _ in 0..HANDOFFS {
        let key = fresh_key("handoff");
        let holder = locker.acquire(&key, opts).await.expect("the holder");
        let waiter = tokio::spawn({
            let (locker, key, opts) = (locker.clone(), key.clone(), opts.clone());
            async move {
                let guard = locker.acquire(&key, &opts).await.expect("the waiter");
                (Instant::now(), guard)
            }
        });
        // Untimed: long enough for the waiter's first attempt to be
        // refused (and, in fair mode, queued) and its subscription made.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let release = Instant::now();
        holder.release().await.expect("release");
        let (granted, guard) = waiter.await.expect("the waiter's task");
        total += granted.saturating_duration_since(release);
        guard.release().await.expect("release");
    }
    total.as_secs_f64() * 1e6 / HANDOFFS as f64
}
