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
    scenario, world,
};

/// The most re-runs one shrink may spend.
pub const MAX_RUNS: usize = 64;

/// Shrinks `failing`'s schedule while `property` stays violated. Returns
/// the smallest outcome found (the original if nothing could go).
pub fn shrink(scenario: &Scenario, failing: &SeedOutcome, property: Property) -> SeedOutcome {
    let mut best = failing.clone();
    let mut runs = 0;
    let still_fails = |schedule: &[ConcreteFault], runs: &mut usize| -> Option<SeedOutcome> {
        *runs += 1;
        let outcome = world::run_schedule(scenario, failing.seed, schedule);
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

/// A schedule in scenario-file form (`[[fault]]` tables), ready to paste
/// into a file as a regression scenario.
pub fn schedule_toml(schedule: &[ConcreteFault]) -> String {
    let text = |d: Duration| scenario::quoted(&scenario::duration_text(d));
    let mut out = String::new();
    for fault in schedule {
        out.push_str("[[fault]]\n");
        out.push_str(&format!("kind = \"{}\"\n", scenario::kind_name(fault.kind)));
        out.push_str(&format!("at = {}\n", text(fault.at)));
        out.push_str(&format!("target = {}\n", scenario::quoted(&fault.target)));
        if let Some(duration) = fault.duration {
            out.push_str(&format!("duration = {}\n", text(duration)));
        }
        if let Some(delay) = fault.delay {
            out.push_str(&format!("delay = {}\n", text(delay)));
        }
        if let Some(rate) = fault.rate {
            out.push_str(&format!("rate = {rate:?}\n"));
        }
        if let Some(offset) = fault.offset {
            out.push_str(&format!(
                "offset = {}\n",
                scenario::quoted(&scenario::offset_text(offset))
            ));
        }
        out.push('\n');
    }
    out
}
