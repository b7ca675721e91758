//! The fault mixes catch a broken core on their own: lock-core's test-only
//! sabotage (validity counted from the reply instead of the send) runs
//! over the safe mix scenarios with no hand-written schedule, each seed
//! drawing its own faults, and some seed must show it; the honest core
//! stays safe on the same seeds.
//!
//! `SIM_SABOTAGE_SEEDS` sets the seeds per scenario (default 300: the
//! broken core shows on about 3 % of single-Redis seeds and 12 % of
//! failover seeds).

use crate::common;

use sim::{
    config::Property,
    runner::{self, Job, RunOptions},
    scenario,
    world::WorldOptions,
};

fn seeds() -> u64 {
    std::env::var("SIM_SABOTAGE_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

/// The properties a core that overstates its validity breaks: two holders,
/// a holder without the key, or Lost after the key expired.
const CAUGHT_BY: [Property; 3] = [
    Property::LeaseExclusion,
    Property::ServerOracle,
    Property::TimelyLoss,
];

#[test]
fn the_safe_mixes_catch_validity_counted_from_the_reply() {
    let jobs: Vec<Job> = ["mix-single-safe", "mix-failover-wait"]
        .into_iter()
        .map(common::job)
        .collect();
    let options = |broken_validity| RunOptions {
        seeds: Some(seeds()),
        world: WorldOptions {
            broken_validity,
            ..WorldOptions::default()
        },
        ..RunOptions::default()
    };
    let broken = runner::run(&jobs, &options(true), &|_| {});
    let honest = runner::run(&jobs, &options(false), &|_| {});
    for (broken, honest) in broken.summaries.iter().zip(&honest.summaries) {
        let caught: u64 = CAUGHT_BY
            .iter()
            .filter_map(|property| broken.violations.get(scenario::property_name(*property)))
            .max()
            .copied()
            .unwrap_or(0);
        assert!(
            caught > 0,
            "{}: the broken core went unnoticed over {} seeds: {:?}",
            broken.name,
            broken.seeds,
            broken.violations
        );
        assert!(
            honest.met,
            "{}: the honest core broke the expectation: {:?}",
            honest.name, honest.violations
        );
        eprintln!(
            "{}: broken core caught on {caught} of {} seeds (first: seed {:?}); honest core: {:?}",
            broken.name, broken.seeds, broken.first_violating_seed, honest.violations
        );
    }
}
