//! Shrinking a failing fault schedule to the smallest one that still fails.
//!
//! Greedy delta debugging over the list of concrete faults, with the seed
//! fixed (shrinking a seed is useless: a different seed is a different
//! run). First drop faults one at a time, then halve the durations that
//! remain; keep every change after which the same property still breaks.

use std::time::Duration;

use crate::{
    config::{Property, Scenario},
    outcome::{ConcreteFault, SeedOutcome},
    world::{self, WorldOptions},
};

/// The most re-runs one shrink may spend.
pub const MAX_RUNS: usize = 64;

/// Shrinks `failing`'s schedule while `property` stays violated. Returns
/// the smallest outcome found (the original if nothing could go).
pub fn shrink(scenario: &Scenario, failing: &SeedOutcome, property: Property) -> SeedOutcome {
    shrink_with(scenario, failing, property, WorldOptions::default())
}

/// [`shrink`], re-running with `options` (those `failing` ran with).
pub fn shrink_with(
    scenario: &Scenario,
    failing: &SeedOutcome,
    property: Property,
    options: WorldOptions,
) -> SeedOutcome {
    let mut best = failing.clone();
    let mut runs = 0;
    let still_fails = |schedule: &[ConcreteFault], runs: &mut usize| -> Option<SeedOutcome> {
        *runs += 1;
        let outcome = world::run_with(scenario, failing.seed, schedule, options);
        outcome
            .verdict
            .violated()
            .contains(&property)
            .then_some(outcome)
    };
    // Drop faults, one at a time, from the last.
    let mut index = best.schedule.len();
    while index > 0 && runs < MAX_RUNS {
        index -= 1;
        let mut candidate = best.schedule.clone();
        candidate.remove(index);
        if let Some(outcome) = still_fails(&candidate, &mut runs) {
            best = outcome;
        }
    }
    // Halve what lasts.
    for index in 0..best.schedule.len() {
        while runs < MAX_RUNS {
            let Some(duration) = best.schedule[index].duration else {
                break;
            };
            if duration <= Duration::from_millis(10) {
                break;
            }
            let mut candidate = best.schedule.clone();
            candidate[index].duration = Some(duration / 2);
            match still_fails(&candidate, &mut runs) {
                Some(outcome) => best = outcome,
                None => break,
            }
        }
    }
    best
}
