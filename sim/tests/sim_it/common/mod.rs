//! Scenario builders shared by the simulation tests.
#![allow(dead_code, unreachable_pub)] // each test binary uses a subset

pub mod real_cluster;

use std::time::Duration;

use sim::{
    config::{
        ClientsConfig, DurationRange, Expect, FaultKind, FencingMode, LockConfig, Property,
        Scenario, Topology,
    },
    outcome::{ConcreteFault, SeedOutcome},
};

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn range(min: u64, max: u64) -> DurationRange {
    DurationRange {
        min: ms(min),
        max: ms(max),
    }
}

/// A small single-Redis scenario: 3 clients, ttl 1 s, 8 s of simulated time.
pub fn single(name: &str) -> Scenario {
    Scenario {
        name: name.to_owned(),
        description: String::new(),
        seeds: 1,
        duration: ms(8_000),
        expect: Expect::Safe,
        property: None,
        min_grants: 1,
        max_stall: std::time::Duration::from_millis(500),
        topology: Topology::Single,
        server: sim::config::ServerConfig::default(),
        lock: LockConfig {
            ttl: ms(1_000),
            renew_every: None,
            drift_factor: 0.01,
            fencing: FencingMode::TimeMixed,
            wait_replicas: 0,
            wait_aof: None,
            wait: None,
        },
        clients: ClientsConfig {
            count: 3,
            hold: range(10, 400),
            think: range(0, 100),
            unfenced_register: true,
            locks: 1,
            drop_guard: 0.0,
            cancel: 0.0,
            workload: Default::default(),
        },
        faults: Vec::new(),
        mix: None,
    }
}

/// One primary and one replica with 1–50 ms replication lag.
pub fn primary_replica(name: &str) -> Scenario {
    Scenario {
        topology: Topology::PrimaryReplica {
            replicas: 1,
            replication_lag: range(1, 50),
        },
        ..single(name)
    }
}

/// Redlock over `nodes` independent primaries, without fencing (per-node
/// fences are not globally ordered).
pub fn redlock(name: &str, nodes: usize) -> Scenario {
    let mut scenario = Scenario {
        topology: Topology::Redlock { nodes },
        ..single(name)
    };
    scenario.lock.fencing = FencingMode::None;
    scenario
}

pub fn fault(kind: FaultKind, at_ms: u64, target: &str, duration_ms: Option<u64>) -> ConcreteFault {
    ConcreteFault {
        kind,
        at: ms(at_ms),
        target: target.parse().expect("a fault target"),
        duration: duration_ms.map(ms),
        rate: None,
        offset: None,
        delay: None,
    }
}

/// The properties the outcome violated.
pub fn violated(outcome: &SeedOutcome) -> Vec<Property> {
    outcome.verdict.violated().into_iter().collect()
}

/// Panics with the violations and schedule if any property but `allowed`
/// was violated.
pub fn assert_only(outcome: &SeedOutcome, allowed: &[Property]) {
    let unexpected: Vec<_> = outcome
        .verdict
        .violations
        .iter()
        .filter(|v| !allowed.contains(&v.property))
        .collect();
    assert!(
        unexpected.is_empty(),
        "seed {} violated {:#?}\nschedule: {:#?}",
        outcome.seed,
        unexpected,
        outcome.schedule
    );
}

/// A schedule in scenario-file form, to paste as a regression scenario.
pub fn as_toml(schedule: &[ConcreteFault]) -> String {
    sim::scenario::schedule_toml(schedule)
}

/// Searches schedules from `strategy` (deterministically) for one whose run
/// violates `property`, lets proptest shrink it, and returns the smallest
/// schedule with its outcome. Panics if none of `cases` schedules violates.
pub fn find_violation(
    scenario: &Scenario,
    seed: u64,
    strategy: impl proptest::strategy::Strategy<Value = Vec<ConcreteFault>>,
    property: Property,
    cases: u32,
) -> (Vec<ConcreteFault>, SeedOutcome) {
    use proptest::test_runner::{Config, RngAlgorithm, TestError, TestRng, TestRunner};
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 200,
        ..Config::default()
    };
    let rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let result = runner.run(&strategy, |schedule| {
        let outcome = sim::world::run_schedule(scenario, seed, &schedule);
        proptest::prop_assert!(!outcome.verdict.violated().contains(&property));
        Ok(())
    });
    match result {
        Err(TestError::Fail(_, minimal)) => {
            let outcome = sim::world::run_schedule(scenario, seed, &minimal);
            assert!(
                outcome.verdict.violated().contains(&property),
                "the shrunk schedule must still violate {property:?}"
            );
            (minimal, outcome)
        }
        Ok(()) => panic!(
            "no schedule out of {cases} violated {property:?}: the harness missed a known-unsafe setup"
        ),
        Err(error) => panic!("search aborted: {error}"),
    }
}

/// The scenario file `scenarios/{name}.toml`.
pub fn load(name: &str) -> Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(format!("{name}.toml"));
    sim::scenario::load(&path).expect("a valid scenario")
}

/// The scenario file `scenarios/{name}.toml` as a job for the runner.
pub fn job(name: &str) -> sim::runner::Job {
    sim::runner::Job {
        file: format!("{name}.toml"),
        scenario: load(name),
    }
}

/// Over seeds `0..seeds`: some seed of `unsafe_setup` breaks lease
/// exclusion with a grant on the deposed primary, no seed of `safe_setup`
/// breaks anything but no-orphans, and some `WAIT` on a deposed primary
/// comes up short there.
pub fn assert_stale_window_pair(unsafe_setup: &str, safe_setup: &str, seeds: u64) {
    let (unsafe_setup, safe_setup) = (load(unsafe_setup), load(safe_setup));
    let mut caught = None;
    let mut refused = false;
    for seed in 0..seeds {
        let outcome = sim::world::run_seed(&unsafe_setup, seed);
        if caught.is_none() && violated(&outcome).contains(&Property::LeaseExclusion) {
            caught = Some(outcome.verdict.facts.clone());
        }
        let outcome = sim::world::run_seed(&safe_setup, seed);
        assert_only(&outcome, &[Property::NoOrphans]);
        refused |= outcome
            .verdict
            .facts
            .contains("wait-short-on-deposed-primary");
    }
    let facts = caught
        .unwrap_or_else(|| panic!("some seed of {seeds} breaks lease exclusion without WAIT"));
    assert!(
        facts.contains("grant-on-deposed-primary"),
        "the stale window bit: {facts:?}"
    );
    assert!(refused, "some WAIT on a deposed primary came up short");
}

/// Runs seeds `seeds` of the scenario file `name` twice with idle skipping
/// and once without: the three histories must be the same, byte for byte.
pub fn assert_replays_exactly(name: &str, seeds: &[u64]) {
    let scenario = load(name);
    for &seed in seeds {
        let schedule = sim::world::draw_schedule(&scenario, seed);
        let run = |skip_idle| {
            let options = sim::world::WorldOptions {
                skip_idle,
                ..sim::world::WorldOptions::default()
            };
            sim::world::run_with(&scenario, seed, &schedule, options)
        };
        let (first, again, stepped) = (run(true), run(true), run(false));
        assert!(first.history.entries.len() > 100, "{name} {seed}");
        assert_eq!(first.history.hash(), again.history.hash(), "{name} {seed}");
        assert_eq!(
            first.history.hash(),
            stepped.history.hash(),
            "{name} {seed}"
        );
    }
}

/// The turmoil world the differential tests replay a command sequence in:
/// seeded, at the Unix epoch, and with replies never delayed past the
/// short ttls some sequences use (a real loopback answers in
/// microseconds).
pub fn loopback_world<'a>() -> turmoil::Sim<'a> {
    let mut builder = turmoil::Builder::new();
    builder
        .rng_seed(1)
        .epoch(std::time::UNIX_EPOCH)
        .min_message_latency(Duration::ZERO)
        .max_message_latency(Duration::from_millis(1))
        .simulation_duration(Duration::from_secs(60));
    builder.build()
}
