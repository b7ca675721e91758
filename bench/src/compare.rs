//! The configuration comparison behind `cargo run -p bench --bin compare`:
//! latency on real Redis, and availability and safety in simulation, for
//! the same lock configurations.

use std::{future::Future, time::Duration};

use crate::api::LockOptions;

pub mod charts;
use sim::{
    checker,
    config::{
        ClientsConfig, DurationRange, Expect, FaultKind, FaultSpec, FencingMode, LockConfig,
        Scenario, Target, Topology,
    },
    runner,
    world::WorldOptions,
};

/// One configuration under comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Short label for the table.
    pub label: &'static str,
    /// The key's ttl.
    pub ttl: Duration,
    /// The renewal period.
    pub renew_every: Duration,
    /// The upper bound of the contention backoff (how eagerly a waiter
    /// polls besides the pub/sub wake-up).
    pub retry_max: Duration,
    /// Redis nodes: 1 is a single Redis; more is a Redlock over that many
    /// independent primaries.
    pub nodes: usize,
}

impl Config {
    /// The lock options this configuration stands for.
    pub fn options(&self) -> LockOptions {
        LockOptions::new(self.ttl)
            .renew_every(self.renew_every)
            .retry_delay(Duration::from_millis(5).min(self.retry_max), self.retry_max)
            .wait(self.ttl * 2)
    }
}

/// The swept configurations: ttl, renewal rate, polling eagerness, and
/// topology (one Redis or a Redlock).
pub fn configurations() -> Vec<Config> {
    let ms = Duration::from_millis;
    vec![
        Config {
            label: "ttl 1s, renew ttl/3",
            ttl: ms(1_000),
            renew_every: ms(333),
            retry_max: ms(200),
            nodes: 1,
        },
        Config {
            label: "ttl 1s, renew ttl/10",
            ttl: ms(1_000),
            renew_every: ms(100),
            retry_max: ms(200),
            nodes: 1,
        },
        Config {
            label: "ttl 5s, renew ttl/3",
            ttl: ms(5_000),
            renew_every: ms(1_666),
            retry_max: ms(200),
            nodes: 1,
        },
        Config {
            label: "ttl 1s, polling every ≤20ms",
            ttl: ms(1_000),
            renew_every: ms(333),
            retry_max: ms(20),
            nodes: 1,
        },
        Config {
            label: "Redlock, 3 nodes, ttl 1s, renew ttl/3",
            ttl: ms(1_000),
            renew_every: ms(333),
            retry_max: ms(200),
            nodes: 3,
        },
    ]
}

/// What the simulation says about a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SimResult {
    /// Median fraction of simulated time some client held the lock.
    pub availability: f64,
    /// Median gap between a holder's crash and the next grant, over the
    /// seeds where client 0 held the lock when it crashed.
    pub crash_gap: Duration,
    /// The longest such gap.
    pub crash_gap_max: Duration,
    /// Seeds where the holder crashed and another client got the lock
    /// later (the gap's sample size).
    pub gaps: usize,
    /// Seeds that violated any safety property.
    pub unsafe_seeds: usize,
    /// Seeds run.
    pub seeds: usize,
}

/// One row of the table.
#[derive(Debug, Clone)]
pub struct Row {
    /// The configuration.
    pub config: Config,
    /// Latency on real Redis, interleaved with its baseline.
    pub latency: Interleaved,
    /// Cycles per second on real Redis from concurrent tasks, interleaved
    /// with its baseline.
    pub throughput: Throughput,
    /// Simulation results.
    pub sim: SimResult,
}

/// The median and the 99th percentile of a set of cycle times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Percentiles {
    /// The median.
    pub p50: Duration,
    /// The 99th percentile (nearest rank: the smallest sample that at
    /// least 99 % of the samples do not exceed).
    pub p99: Duration,
}

impl Percentiles {
    /// The percentiles of `samples` (zero for none).
    pub fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort();
        let rank = |fraction: f64| {
            // ceil(fraction * n) is the nearest rank, counted from 1.
            let rank = (fraction * samples.len() as f64).ceil() as usize;
            samples
                .get(rank.clamp(1, samples.len().max(1)) - 1)
                .copied()
                .unwrap_or_default()
        };
        Self {
            p50: rank(0.5),
            p99: rank(0.99),
        }
    }
}

/// A configuration's acquire + release time and its baseline's, sampled
/// alternately in one loop so that both see the same machine noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interleaved {
    /// The configuration's samples.
    pub subject: Percentiles,
    /// The baseline's samples.
    pub baseline: Percentiles,
    /// Median of the per-pair ratios subject / baseline.
    pub ratio: f64,
    /// Samples taken of each.
    pub samples: usize,
}

/// Runs `subject` and `baseline` alternately, `samples` times each
/// (starting with the baseline on even samples and with the subject on odd
/// ones, so neither always runs first), and returns both medians and 99th
/// percentiles and the median ratio of each pair.
pub async fn interleaved<S, SF, B, BF>(samples: usize, subject: S, baseline: B) -> Interleaved
where
    S: FnMut() -> SF,
    SF: Future<Output = Duration>,
    B: FnMut() -> BF,
    BF: Future<Output = Duration>,
{
    let pairs = alternate(samples, subject, baseline).await;
    let ratios = pairs
        .iter()
        .map(|(s, b)| s.as_secs_f64() / b.as_secs_f64().max(1e-9));
    Interleaved {
        subject: Percentiles::of(pairs.iter().map(|&(s, _)| s).collect()),
        baseline: Percentiles::of(pairs.iter().map(|&(_, b)| b).collect()),
        ratio: crate::stats::median(ratios),
        samples: pairs.len(),
    }
}

/// A configuration's cycles per second from concurrent tasks, and its
/// baseline's at the same concurrency, measured in alternating windows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throughput {
    /// Median cycles/s of the configuration's windows.
    pub subject: f64,
    /// Median cycles/s of the baseline's windows.
    pub baseline: f64,
    /// Median of the per-pair ratios subject / baseline.
    pub ratio: f64,
    /// Concurrent tasks.
    pub tasks: usize,
    /// Windows measured of each.
    pub rounds: usize,
}

/// Runs `subject` and `baseline` windows alternately, `rounds` times each
/// (as [`interleaved`] does), each returning the cycles/s it reached with
/// `tasks` concurrent tasks, and returns both medians and the median ratio
/// of each pair.
pub async fn interleaved_rates<S, SF, B, BF>(
    rounds: usize,
    tasks: usize,
    subject: S,
    baseline: B,
) -> Throughput
where
    S: FnMut() -> SF,
    SF: Future<Output = f64>,
    B: FnMut() -> BF,
    BF: Future<Output = f64>,
{
    let pairs = alternate(rounds, subject, baseline).await;
    Throughput {
        subject: crate::stats::median(pairs.iter().map(|&(s, _)| s)),
        baseline: crate::stats::median(pairs.iter().map(|&(_, b)| b)),
        ratio: crate::stats::median(pairs.iter().map(|&(s, b)| s / b.max(1e-9))),
        tasks,
        rounds: pairs.len(),
    }
}

/// `samples` (at least one) pairs of (subject, baseline) results, the
/// baseline run first on even samples and the subject on odd ones, so
/// neither always runs first.
async fn alternate<T, S, SF, B, BF>(samples: usize, mut subject: S, mut baseline: B) -> Vec<(T, T)>
where
    S: FnMut() -> SF,
    SF: Future<Output = T>,
    B: FnMut() -> BF,
    BF: Future<Output = T>,
{
    let samples = samples.max(1);
    let mut pairs = Vec::with_capacity(samples);
    for i in 0..samples {
        pairs.push(if i % 2 == 0 {
            let b = baseline().await;
            (subject().await, b)
        } else {
            let s = subject().await;
            (s, baseline().await)
        });
    }
    pairs
}

/// When client 0 dies, in simulated milliseconds.
const CRASH_AT_MS: u64 = 3_000;

fn scenario(config: &Config) -> Scenario {
    let ms = Duration::from_millis;
    Scenario {
        name: "compare".into(),
        description: String::new(),
        seeds: 1,
        duration: ms(12_000),
        expect: Expect::Safe,
        property: None,
        min_grants: 1,
        max_stall: std::time::Duration::from_millis(500),
        topology: if config.nodes > 1 {
            Topology::Redlock {
                nodes: config.nodes,
            }
        } else {
            Topology::Single
        },
        server: sim::config::ServerConfig::default(),
        lock: LockConfig {
            ttl: config.ttl,
            renew_every: Some(config.renew_every),
            drift_factor: 0.01,
            // A Redlock's per-node fences are not globally ordered.
            fencing: if config.nodes > 1 {
                FencingMode::None
            } else {
                FencingMode::TimeMixed
            },
            wait_replicas: 0,
            wait_aof: None,
            wait: Some(config.ttl * 2),
        },
        clients: ClientsConfig {
            count: 3,
            hold: DurationRange {
                min: ms(50),
                max: ms(300),
            },
            think: DurationRange {
                min: ms(0),
                max: ms(50),
            },
            unfenced_register: false,
            locks: 1,
            drop_guard: 0.0,
            cancel: 0.0,
            workload: Default::default(),
        },
        // A holder-or-not client dies silently at 3 s: the gap until the
        // next grant is the availability cost of the ttl.
        faults: vec![FaultSpec {
            kind: FaultKind::Crash,
            at: DurationRange::fixed(ms(CRASH_AT_MS)),
            target: Target::Client(0),
            duration: None,
            every: None,
            rate: None,
            offset: None,
            delay: None,
        }],
        mix: None,
    }
}

/// Runs the configuration's scenario on every core, seed after seed from 0,
/// until `min_gaps` seeds have crashed client 0 while it held the lock (or
/// `max_seeds` seeds ran). Availability and safety count every seed run;
/// the crash gap counts only the holder crashes.
pub fn simulate(config: &Config, min_gaps: usize, max_seeds: u64) -> SimResult {
    let scenario = scenario(config);
    let crash = Duration::from_millis(CRASH_AT_MS);
    let mut availability = Vec::new();
    let mut gaps = Vec::new();
    let mut unsafe_seeds = 0;
    let mut next_seed = 0;
    while gaps.len() < min_gaps && next_seed < max_seeds {
        let batch = (min_gaps as u64).max(16).min(max_seeds - next_seed);
        let seed_list: Vec<u64> = (next_seed..next_seed + batch).collect();
        next_seed += batch;
        let outcomes = runner::map_seeds(
            &scenario,
            &seed_list,
            runner::available_jobs(),
            WorldOptions::default(),
            |outcome| outcome,
        );
        for outcome in outcomes {
            if !outcome.verdict.violations.is_empty() {
                unsafe_seeds += 1;
            }
            let holds = checker::holds(&outcome.history, scenario.duration);
            let mut covered = Duration::ZERO;
            let mut until = Duration::ZERO;
            for hold in &holds {
                let start = hold.start.max(until);
                if hold.end > start {
                    covered += hold.end - start;
                    until = hold.end;
                }
            }
            availability.push(covered.as_secs_f64() / scenario.duration.as_secs_f64());
            // Only a crash of the holder costs the ttl; a crash of a
            // waiter costs nothing, and would hide the cost in the median.
            let holder_crashed = holds
                .iter()
                .any(|h| h.client == 0 && h.start <= crash && h.end > crash);
            if holder_crashed
                && let Some(next) = holds.iter().find(|h| h.client != 0 && h.start >= crash)
            {
                gaps.push(next.start - crash);
            }
        }
    }
    availability.sort_by(f64::total_cmp);
    gaps.sort();
    SimResult {
        availability: availability
            .get(availability.len() / 2)
            .copied()
            .unwrap_or(0.0),
        crash_gap: gaps.get(gaps.len() / 2).copied().unwrap_or_default(),
        crash_gap_max: gaps.last().copied().unwrap_or_default(),
        gaps: gaps.len(),
        unsafe_seeds,
        seeds: next_seed as usize,
    }
}

/// What the table's and the page's introduction say about how the figures
/// were taken; `redis` says where the Redis came from (for example "a
/// spawned redis-server 7.0.15 on loopback").
pub fn method(redis: &str) -> String {
    format!(
        "Real Redis: {redis}. Latency: percentiles of samples interleaved with the baseline; \
         cycles/s: medians of windows alternating with the baseline's at the same concurrency; \
         ratios: medians of per-pair ratios. Availability, crash gap and safety: simulation."
    )
}

/// The table's column headers.
pub const COLUMNS: [&str; 8] = [
    "configuration",
    "acquire+release p50 / p99",
    "raw SET NX PX + DEL p50 / p99 (same nodes)",
    "p50 ratio",
    "cycles/s: lock / raw (ratio, tasks)",
    "availability (sim)",
    "gap after holder crash (sim): median / max (seeds)",
    "safety (sim): unsafe seeds",
];

/// `row`'s cells, in [`COLUMNS`]' order.
pub fn cells(row: &Row) -> [String; 8] {
    let us = |d: Duration| format!("{:.0} µs", d.as_secs_f64() * 1e6);
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1e3);
    let Row {
        config,
        latency,
        throughput,
        sim,
    } = row;
    [
        config.label.to_owned(),
        format!("{} / {}", us(latency.subject.p50), us(latency.subject.p99)),
        format!(
            "{} / {}",
            us(latency.baseline.p50),
            us(latency.baseline.p99)
        ),
        format!("{:.2}×", latency.ratio),
        format!(
            "{} / {} ({:.2}×, {} tasks)",
            rate(throughput.subject),
            rate(throughput.baseline),
            throughput.ratio,
            throughput.tasks
        ),
        format!("{:.1} %", sim.availability * 100.0),
        format!(
            "{} / {} ({})",
            ms(sim.crash_gap),
            ms(sim.crash_gap_max),
            sim.gaps
        ),
        verdict(sim),
    ]
}

/// Cycles per second, in thousands above 10,000: `45.0 k`, `812`.
pub fn rate(per_second: f64) -> String {
    if per_second >= 10_000.0 {
        format!("{:.1} k", per_second / 1e3)
    } else {
        format!("{per_second:.0}")
    }
}

/// The safety verdict of a simulation: `safe, 0/150` or `UNSAFE, 3/150`
/// (unsafe seeds of seeds run).
pub fn verdict(sim: &SimResult) -> String {
    let word = if sim.unsafe_seeds == 0 {
        "safe"
    } else {
        "UNSAFE"
    };
    format!("{word}, {}/{}", sim.unsafe_seeds, sim.seeds)
}

/// The markdown table, preceded by [`method`]'s line.
pub fn table(redis: &str, rows: &[Row]) -> String {
    let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
    let mut out = format!("{}\n\n", method(redis));
    out.push_str(&line(&COLUMNS.map(str::to_owned)));
    out.push_str(&line(&COLUMNS.map(|_| "---".to_owned())).replace(' ', ""));
    for row in rows {
        out.push_str(&line(&cells(row)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_one_row_per_configuration_and_eight_columns() {
        let rows: Vec<Row> = configurations()
            .into_iter()
            .map(|config| {
                let sim = simulate(&config, 1, 64);
                Row {
                    config,
                    latency: Interleaved {
                        subject: Percentiles {
                            p50: Duration::from_micros(300),
                            p99: Duration::from_micros(900),
                        },
                        baseline: Percentiles {
                            p50: Duration::from_micros(150),
                            p99: Duration::from_micros(400),
                        },
                        ratio: 2.0,
                        samples: 200,
                    },
                    throughput: Throughput {
                        subject: 45_000.0,
                        baseline: 90_000.0,
                        ratio: 0.5,
                        tasks: 16,
                        rounds: 3,
                    },
                    sim,
                }
            })
            .collect();
        let table = table("spawned redis-server", &rows);
        let lines: Vec<&str> = table.lines().skip(2).collect();
        assert!(table.starts_with("Real Redis: spawned redis-server."));
        assert_eq!(lines.len(), 2 + configurations().len());
        for line in &lines {
            assert_eq!(line.matches('|').count(), 9, "{line}");
        }
        assert!(lines[1].starts_with("|---|"), "{}", lines[1]);
        assert!(lines[2].contains("| 300 µs / 900 µs | 150 µs / 400 µs | 2.00× |"));
        assert!(lines[2].contains("| 45.0 k / 90.0 k (0.50×, 16 tasks) |"));
        assert!(lines[2].ends_with(&format!("| safe, 0/{} |", rows[0].sim.seeds)));
        for row in &rows {
            assert!(
                row.sim.gaps >= 1 && row.sim.gaps <= row.sim.seeds,
                "{row:?}"
            );
            // A holder's crash costs at most its key's ttl (plus a wake-up)
            // and at least something.
            assert!(row.sim.crash_gap > Duration::ZERO, "{row:?}");
            assert!(
                row.sim.crash_gap_max <= row.config.ttl + Duration::from_millis(300),
                "{row:?}"
            );
        }
        assert!(
            rows.iter()
                .all(|row| row.sim.availability > 0.0 && row.sim.availability <= 1.0)
        );
    }

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let us = Duration::from_micros;
        // 1..=200 µs: the median is the 100th, p99 the 198th.
        let hundreds = Percentiles::of((1..=200).map(us).rev().collect());
        assert_eq!((hundreds.p50, hundreds.p99), (us(100), us(198)));
        // One slow sample in 50 is above p99's rank there.
        let mut samples = vec![us(10); 49];
        samples.push(us(5_000));
        assert_eq!(Percentiles::of(samples).p99, us(5_000));
        assert_eq!(Percentiles::of(vec![us(7)]).p99, us(7));
        assert_eq!(Percentiles::of(Vec::new()), Percentiles::default());
        assert_eq!(
            verdict(&SimResult {
                unsafe_seeds: 3,
                seeds: 150,
                ..SimResult::default()
            }),
            "UNSAFE, 3/150"
        );
        assert_eq!(rate(812.4), "812");
    }

    #[test]
    fn interleaving_alternates_which_runs_first_and_takes_pair_ratios() {
        let order = std::cell::RefCell::new(Vec::new());
        let result = futures_executor_block_on(interleaved(
            4,
            || {
                order.borrow_mut().push('s');
                async { Duration::from_micros(30) }
            },
            || {
                order.borrow_mut().push('b');
                async { Duration::from_micros(10) }
            },
        ));
        assert_eq!(
            order.into_inner(),
            vec!['b', 's', 's', 'b', 'b', 's', 's', 'b']
        );
        assert_eq!(result.subject.p50, Duration::from_micros(30));
        assert_eq!(result.baseline.p99, Duration::from_micros(10));
        assert!((result.ratio - 3.0).abs() < 1e-9);
        assert_eq!(result.samples, 4);
    }

    #[test]
    fn rates_alternate_too_and_take_pair_ratios() {
        let order = std::cell::RefCell::new(Vec::new());
        let rate = std::cell::Cell::new(0.0);
        let result = futures_executor_block_on(interleaved_rates(
            3,
            16,
            || {
                order.borrow_mut().push('s');
                rate.set(rate.get() + 100.0);
                let subject = rate.get();
                async move { subject }
            },
            || {
                order.borrow_mut().push('b');
                async { 400.0 }
            },
        ));
        assert_eq!(order.into_inner(), vec!['b', 's', 's', 'b', 'b', 's']);
        assert_eq!((result.subject, result.baseline), (200.0, 400.0));
        assert!((result.ratio - 0.5).abs() < 1e-9);
        assert_eq!((result.tasks, result.rounds), (16, 3));
    }

    /// Runs a future that never waits (the closures above are ready at once).
    fn futures_executor_block_on<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime")
            .block_on(future)
    }
}
