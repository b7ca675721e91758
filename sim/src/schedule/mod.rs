//! Drawing a seed's concrete fault schedule from a scenario's ranges (and
//! its `[mix]`): the same schedule for the simulated world and for a real
//! run of the same seed. Nothing here runs anything.

mod mix;

use crate::{
    clock::TICK,
    config::{FaultTarget, Scenario, Target},
    outcome::ConcreteFault,
    rng::Rng,
};

/// Draws the fault schedule of `seed` from the scenario's ranges.
pub fn draw_schedule(scenario: &Scenario, seed: u64) -> Vec<ConcreteFault> {
    let mut schedule = Vec::new();
    for (index, spec) in scenario.faults.iter().enumerate() {
        let mut rng = Rng::fork(seed, 0xFA17 + index as u64);
        let mut at = rng.duration(spec.at);
        loop {
            if at >= scenario.duration {
                break;
            }
            let target = match spec.target {
                Target::Client(n) => FaultTarget::Client(n),
                Target::AnyClient => {
                    let count = scenario.clients.count.max(1) as u64;
                    FaultTarget::Client(rng.between(0, count - 1) as usize)
                }
                Target::Primary => FaultTarget::Primary,
                Target::Redis(n) => FaultTarget::Redis(n),
                Target::Storage => FaultTarget::Storage,
            };
            schedule.push(ConcreteFault {
                kind: spec.kind,
                at,
                target,
                duration: spec.duration.map(|range| rng.duration(range)),
                rate: spec.rate,
                offset: spec.offset,
                delay: spec.delay.map(|range| rng.duration(range)),
            });
            match spec.every {
                Some(every) => at += rng.duration(every).max(TICK),
                None => break,
            }
        }
    }
    if let Some(mix) = &scenario.mix {
        schedule.extend(mix::draw(scenario, mix, seed));
    }
    schedule.sort_by_key(|fault| fault.at);
    schedule
}
