//! How fast the simulation runs: simulated seconds per wall-clock second
//! for a 60 s, 5-client single-Redis scenario with faults, in the build
//! profile the bench runs in (`cargo bench -p sim --bench speed`).

use std::time::{Duration, Instant};

use sim::{
    config::{
        ClientsConfig, DurationRange, Expect, FaultKind, FaultSpec, FencingMode, LockConfig,
        Scenario, Target, Topology,
    },
    world,
};

fn scenario() -> Scenario {
    let ms = Duration::from_millis;
    Scenario {
        name: "speed".into(),
        description: String::new(),
        seeds: 1,
        duration: Duration::from_secs(60),
        expect: Expect::Safe,
        property: None,
        topology: Topology::Single,
        lock: LockConfig {
            ttl: ms(1_000),
            renew_every: None,
            drift_factor: 0.01,
            fencing: FencingMode::TimeMixed,
            wait_replicas: 0,
            wait: None,
        },
        clients: ClientsConfig {
            count: 5,
            hold: DurationRange {
                min: ms(10),
                max: ms(500),
            },
            think: DurationRange {
                min: ms(0),
                max: ms(200),
            },
            unfenced_register: true,
        },
        faults: vec![FaultSpec {
            kind: FaultKind::Partition,
            at: DurationRange {
                min: ms(1_000),
                max: ms(5_000),
            },
            target: Target::AnyClient,
            duration: Some(DurationRange {
                min: ms(500),
                max: ms(2_000),
            }),
            every: Some(DurationRange {
                min: ms(3_000),
                max: ms(6_000),
            }),
            rate: None,
            offset: None,
            delay: None,
        }],
    }
}

fn main() {
    // `cargo bench` passes harness flags such as `--bench`; ignore them.
    let scenario = scenario();
    let runs = 5;
    let mut walls = Vec::new();
    for seed in 0..runs {
        let started = Instant::now();
        let outcome = world::run_seed(&scenario, seed);
        walls.push(started.elapsed());
        assert!(!outcome.history.entries.is_empty());
    }
    walls.sort();
    let median = walls[walls.len() / 2];
    let ratio = scenario.duration.as_secs_f64() / median.as_secs_f64();
    println!(
        "sim speed: 60 s simulated, 5 clients + redis + storage: median {:.0} ms wall over {runs} seeds = {ratio:.0}x real time",
        median.as_secs_f64() * 1000.0
    );
}
