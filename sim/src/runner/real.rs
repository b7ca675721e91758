//! Real processes as a [`Mode`]: `sim chaos`'s runs, one at a time.

use super::Mode;
use crate::{
    chaos::{self, ChaosError, RealOptions},
    config::{Property, Scenario},
    outcome::SeedOutcome,
};

/// Each seed on real processes (`crate::chaos`), never shrunk: a real run
/// cannot be run again alike, so its report shows it as it went.
#[derive(Debug, Clone)]
pub struct Real {
    /// How each real run goes.
    pub options: RealOptions,
}

impl Mode for Real {
    type Error = ChaosError;

    fn run_seed(&self, scenario: &Scenario, seed: u64) -> Result<SeedOutcome, ChaosError> {
        chaos::run_seed(scenario, seed, &self.options)
    }

    /// One at a time: real runs share the machine's cores and timing, and
    /// a run's faults are timed in real time.
    fn workers(&self) -> usize {
        1
    }

    fn shrink(&self, _: &Scenario, outcome: SeedOutcome, _: Property) -> SeedOutcome {
        outcome
    }

    fn report_name(&self, scenario: &Scenario, seed: u64) -> String {
        format!("{}-real-{seed}.html", scenario.name)
    }
}
