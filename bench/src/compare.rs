//! The configuration comparison behind `cargo run -p bench --bin compare`:
//! latency on real Redis, and availability and safety in simulation, for
//! the same lock configurations.

use std::{future::Future, time::Duration};

use crate::api::LockOptions;
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
    /// Simulation results.
    pub sim: SimResult,
}

/// A configuration's timing and its baseline's, sampled alternately in one
/// loop so that both see the same machine noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interleaved {
    /// Median of the configuration's samples.
    pub subject: Duration,
    /// Median of the baseline's samples.
    pub baseline: Duration,
    /// Median of the per-pair ratios subject / baseline.
    pub ratio: f64,
}

/// Runs `subject` and `baseline` alternately, `samples` times each
/// (starting with the baseline on even samples and with the subject on odd
/// ones, so neither always runs first), and returns both medians and the
/// median ratio of each pair.
pub async fn interleaved<S, SF, B, BF>(
    samples: usize,
    mut subject: S,
    mut baseline: B,
) -> Interleaved
where
    S: FnMut() -> SF,
    SF: Future<Output = Duration>,
    B: FnMut() -> BF,
    BF: Future<Output = Duration>,
{
    let samples = samples.max(1);
    let (mut subjects, mut baselines, mut ratios) = (
        Vec::with_capacity(samples),
        Vec::with_capacity(samples),
        Vec::with_capacity(samples),
    );
    for i in 0..samples {
        let (s, b) = if i % 2 == 0 {
            let b = baseline().await;
            (subject().await, b)
        } else {
            let s = subject().await;
            (s, baseline().await)
        };
        ratios.push(s.as_secs_f64() / b.as_secs_f64().max(1e-9));
        subjects.push(s);
        baselines.push(b);
    }
    subjects.sort();
    baselines.sort();
    ratios.sort_by(f64::total_cmp);
    Interleaved {
        subject: subjects[samples / 2],
        baseline: baselines[samples / 2],
        ratio: ratios[samples / 2],
    }
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

/// The markdown table, preceded by a line that says where the Redis came
/// from (`redis`, for example "spawned redis-server 7.0.15").
pub fn table(redis: &str, rows: &[Row]) -> String {
    let us = |d: Duration| format!("{:.0} µs", d.as_secs_f64() * 1e6);
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1e3);
    let mut out = format!(
        "Real Redis: {redis}. Latency: medians of samples interleaved with the baseline; ratio: median of per-pair ratios.\n\n\
         | configuration | acquire+release p50 | raw SET NX PX + DEL p50 (same nodes) | ratio | availability (sim) | gap after holder crash (sim): median / max (seeds) | unsafe seeds (sim) |\n|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {:.2}× | {:.1} % | {} / {} ({}) | {}/{} |\n",
            row.config.label,
            us(row.latency.subject),
            us(row.latency.baseline),
            row.latency.ratio,
            row.sim.availability * 100.0,
            ms(row.sim.crash_gap),
            ms(row.sim.crash_gap_max),
            row.sim.gaps,
            row.sim.unsafe_seeds,
            row.sim.seeds,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_one_row_per_configuration_and_seven_columns() {
        let rows: Vec<Row> = configurations()
            .into_iter()
            .map(|config| {
                let sim = simulate(&config, 1, 64);
                Row {
                    config,
                    latency: Interleaved {
                        subject: Duration::from_micros(300),
                        baseline: Duration::from_micros(150),
                        ratio: 2.0,
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
            assert_eq!(line.matches('|').count(), 8, "{line}");
        }
        assert!(lines[2].contains("2.00×"));
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
        assert_eq!(result.subject, Duration::from_micros(30));
        assert_eq!(result.baseline, Duration::from_micros(10));
        assert!((result.ratio - 3.0).abs() < 1e-9);
    }

    /// Runs a future that never waits (the closures above are ready at once).
    fn futures_executor_block_on<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime")
            .block_on(future)
    }
}
