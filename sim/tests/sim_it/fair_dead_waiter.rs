//! F4 (`dead-waiter`) catches a dead waiter's place that outlives its
//! waiter ttl: the fair clients of `fair-dead-waiters.toml` run with a
//! waiter ttl ten times the one the checker holds them to (the server
//! then keeps a paused or crashed waiter's place that long), and some
//! seed must show a live waiter granted too late; the honest clients,
//! over the same seeds, never are.
//!
//! `SIM_DEAD_WAITER_SEEDS` sets the seeds (default 60).

use std::path::Path;

use sim::{
    config::Property,
    runner::{self, available_jobs},
    scenario,
    world::WorldOptions,
};

fn seeds() -> Vec<u64> {
    let count = std::env::var("SIM_DEAD_WAITER_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    (0..count).collect()
}

#[test]
fn a_dead_waiters_place_outliving_its_waiter_ttl_is_caught() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/fair-dead-waiters.toml");
    let scenario = scenario::load(&path).expect("a valid scenario");
    let seeds = seeds();
    let run = |stretched_waiter_ttl| {
        let options = WorldOptions {
            stretched_waiter_ttl,
            ..WorldOptions::default()
        };
        runner::map_seeds(&scenario, &seeds, available_jobs(), options, |outcome| {
            (outcome.seed, outcome.verdict.violated())
        })
    };
    let caught: Vec<u64> = run(true)
        .into_iter()
        .filter(|(_, violated)| violated.contains(&Property::DeadWaiter))
        .map(|(seed, _)| seed)
        .collect();
    assert!(
        !caught.is_empty(),
        "a waiter ttl ten times too long went unnoticed over {} seeds",
        seeds.len()
    );
    let honest: Vec<(u64, _)> = run(false)
        .into_iter()
        .filter(|(_, violated)| violated.iter().any(|p| p.expected_by_default()))
        .collect();
    assert_eq!(honest, [], "the honest clients broke a property");
    eprintln!(
        "stretched waiter ttl caught on {} of {} seeds (first: {:?})",
        caught.len(),
        seeds.len(),
        caught.first()
    );
}
