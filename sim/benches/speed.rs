//! How fast the simulation runs: simulated seconds per wall-clock second
//! for 60 s, 5-client scenarios with faults on a single Redis, a primary
//! with replicas that fails over, and a Redlock over three nodes, each with
//! idle skipping off (every host stepped every 1 ms tick) and on, in the
//! same run (`cargo bench -p sim --bench speed`). Prints medians over
//! seeds and the ratios to real time.
#![warn(clippy::too_many_lines)]

use std::time::{Duration, Instant};

use sim::{
    config::{
        ClientsConfig, DurationRange, Expect, FaultKind, FaultSpec, FencingMode, LockConfig,
        Scenario, Target, Topology,
    },
    world::{self, WorldOptions},
};

const SECONDS: u64 = 60;
const CLIENTS: usize = 5;
const SEEDS: u64 = 5;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn range(min: u64, max: u64) -> DurationRange {
    DurationRange {
        min: ms(min),
        max: ms(max),
    }
}

fn fault(kind: FaultKind, at: DurationRange, target: Target) -> FaultSpec {
    FaultSpec {
        kind,
        at,
        target,
        duration: None,
        every: None,
        rate: None,
        offset: None,
        delay: None,
    }
}

/// A client partitioned for 0.5–2 s every 3–6 s.
fn client_partitions() -> FaultSpec {
    FaultSpec {
        duration: Some(range(500, 2_000)),
        every: Some(range(3_000, 6_000)),
        ..fault(FaultKind::Partition, range(1_000, 5_000), Target::AnyClient)
    }
}

fn scenario(name: &str, topology: Topology, faults: Vec<FaultSpec>) -> Scenario {
    let redlock = matches!(topology, Topology::Redlock { .. });
    Scenario {
        name: name.into(),
        description: String::new(),
        seeds: SEEDS,
        duration: Duration::from_secs(SECONDS),
        expect: Expect::Safe,
        property: None,
        min_grants: 1,
        max_stall: std::time::Duration::from_millis(500),
        topology,
        server: sim::config::ServerConfig::default(),
        lock: LockConfig {
            ttl: ms(1_000),
            renew_every: None,
            drift_factor: 0.01,
            // Redlock's per-node fences are not globally ordered.
            fencing: if redlock {
                FencingMode::None
            } else {
                FencingMode::TimeMixed
            },
            wait_replicas: 0,
            wait_aof: None,
            wait: None,
        },
        clients: ClientsConfig {
            count: CLIENTS,
            hold: range(10, 500),
            think: range(0, 200),
            unfenced_register: true,
            locks: 1,
            drop_guard: 0.0,
            cancel: 0.0,
            workload: Default::default(),
        },
        faults,
        mix: None,
    }
}

pub(crate) fn scenarios() -> Vec<Scenario> {
    let failover = |at| fault(FaultKind::Failover, range(at, at + 5_000), Target::Primary);
    let node_partition = |node| FaultSpec {
        duration: Some(range(1_000, 3_000)),
        every: Some(range(8_000, 12_000)),
        ..fault(
            FaultKind::Partition,
            range(2_000 + 3_000 * node as u64, 8_000),
            Target::Redis(node),
        )
    };
    vec![
        scenario("single-redis", Topology::Single, vec![client_partitions()]),
        scenario(
            "failover",
            Topology::PrimaryReplica {
                replicas: 2,
                replication_lag: range(1, 20),
            },
            vec![client_partitions(), failover(15_000), failover(40_000)],
        ),
        scenario(
            "redlock-3",
            Topology::Redlock { nodes: 3 },
            vec![client_partitions(), node_partition(0), node_partition(2)],
        ),
    ]
}

/// The median wall time of one seed, over `SEEDS` seeds.
fn median_wall(scenario: &Scenario, skip_idle: bool) -> Duration {
    let options = WorldOptions {
        skip_idle,
        ..WorldOptions::default()
    };
    let mut walls = Vec::new();
    for seed in 0..SEEDS {
        let schedule = world::draw_schedule(scenario, seed);
        let started = Instant::now();
        let outcome = world::run_with(scenario, seed, &schedule, options);
        walls.push(started.elapsed());
        assert!(
            outcome.history.entries.len() > 100,
            "{} seed {seed} did little",
            scenario.name
        );
    }
    walls.sort();
    walls[walls.len() / 2]
}

fn main() {
    // `cargo bench` passes harness flags such as `--bench`; ignore them.
    println!(
        "sim speed: {SECONDS} s simulated, {CLIENTS} clients, medians over {SEEDS} seeds (ratio = simulated / wall time)"
    );
    println!("| scenario | skipping off | skipping on | on vs off |\n|---|---|---|---|");
    for scenario in scenarios() {
        let ratio = |wall: Duration| scenario.duration.as_secs_f64() / wall.as_secs_f64();
        let off = median_wall(&scenario, false);
        let on = median_wall(&scenario, true);
        println!(
            "| {} | {:.0} ms = {:.0}x real time | {:.0} ms = {:.0}x real time | {:.1}x |",
            scenario.name,
            off.as_secs_f64() * 1000.0,
            ratio(off),
            on.as_secs_f64() * 1000.0,
            ratio(on),
            off.as_secs_f64() / on.as_secs_f64()
        );
    }
}
