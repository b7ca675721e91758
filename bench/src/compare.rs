//! The configuration comparison behind `cargo run -p bench --bin compare`:
//! latency on real Redis, and availability and safety in simulation, for
//! the same lock configurations.

use std::{future::Future, time::Duration};

use lock_core::LockOptions;
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
    /// Median gap between a holder's crash and the next grant.
    pub crash_gap: Duration,
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
    /// Median acquire+release cycle on real Redis.
    pub cycle: Duration,
    /// Median raw SET NX PX + DEL cycle on the same number of nodes (sent
    /// to all at once), same run.
    pub baseline: Duration,
    /// Simulation results.
    pub sim: SimResult,
}

/// The median of `samples` timed runs of `run`.
pub async fn median<F, Fut>(samples: usize, mut run: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Duration>,
{
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples.max(1) {
        times.push(run().await);
    }
    times.sort();
    times[times.len() / 2]
}

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
        },
        // A holder-or-not client dies silently at 3 s: the gap until the
        // next grant is the availability cost of the ttl.
        faults: vec![FaultSpec {
            kind: FaultKind::Crash,
            at: DurationRange::fixed(ms(3_000)),
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

/// Runs the configuration's scenario over `seeds` seeds, on every core.
pub fn simulate(config: &Config, seeds: u64) -> SimResult {
    let scenario = scenario(config);
    let mut availability = Vec::new();
    let mut gaps = Vec::new();
    let mut unsafe_seeds = 0;
    let seed_list: Vec<u64> = (0..seeds).collect();
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
        let crash = Duration::from_millis(3_000);
        if let Some(next) = holds.iter().find(|h| h.client != 0 && h.start >= crash) {
            // The gap from the crash to the next grant, minus the time the
            // others were not even trying (they only start waiting when the
            // current hold ends).
            let holding_at_crash = holds.iter().find(|h| h.start <= crash && h.end > crash);
            let from =
                holding_at_crash.map_or(crash, |h| if h.client == 0 { crash } else { h.end });
            gaps.push(next.start.saturating_sub(from));
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
        unsafe_seeds,
        seeds: seeds as usize,
    }
}

/// The markdown table.
pub fn table(rows: &[Row]) -> String {
    let us = |d: Duration| format!("{:.0} µs", d.as_secs_f64() * 1e6);
    let mut out = String::from(
        "| configuration | acquire+release p50 | raw SET NX PX + DEL p50 (same nodes) | ratio | availability (sim) | gap after holder crash (sim) | unsafe seeds (sim) |\n|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {:.2}× | {:.1} % | {:.0} ms | {}/{} |\n",
            row.config.label,
            us(row.cycle),
            us(row.baseline),
            row.cycle.as_secs_f64() / row.baseline.as_secs_f64().max(1e-9),
            row.sim.availability * 100.0,
            row.sim.crash_gap.as_secs_f64() * 1000.0,
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
                let sim = simulate(&config, 1);
                Row {
                    config,
                    cycle: Duration::from_micros(300),
                    baseline: Duration::from_micros(150),
                    sim,
                }
            })
            .collect();
        let table = table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 2 + configurations().len());
        for line in &lines {
            assert_eq!(line.matches('|').count(), 8, "{line}");
        }
        assert!(lines[2].contains("2.00×"));
        assert!(
            rows.iter()
                .all(|row| row.sim.availability > 0.0 && row.sim.availability <= 1.0)
        );
    }
}
