//! The turmoil world: builds the hosts of one scenario seed and runs it.

use crate::{
    config::Scenario,
    outcome::{ConcreteFault, SeedOutcome},
};

/// Draws the fault schedule of `seed` from the scenario's ranges.
pub fn draw_schedule(scenario: &Scenario, seed: u64) -> Vec<ConcreteFault> {
    let _ = (scenario, seed);
    unimplemented!("the world lands in the next commit")
}

/// Runs `scenario` with `seed`, injecting exactly `schedule`, and checks it.
pub fn run_schedule(scenario: &Scenario, seed: u64, schedule: &[ConcreteFault]) -> SeedOutcome {
    let _ = (scenario, seed, schedule);
    unimplemented!("the world lands in the next commit")
}

/// Runs one seed with the schedule drawn from it.
pub fn run_seed(scenario: &Scenario, seed: u64) -> SeedOutcome {
    run_schedule(scenario, seed, &draw_schedule(scenario, seed))
}
