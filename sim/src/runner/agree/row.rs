//! One row of the agreement table: the tallies of both sides, and whether
//! they agree.

use serde::{Deserialize, Serialize};

use super::stats;
use crate::{
    config::{Expect, Scenario},
    outcome::Verdict,
    runner::{Job, Shard, Summary, counts, inconclusive, map_seeds},
    scenario::{
        names::{FLAVOURS, name_of},
        property_name,
    },
    world::WorldOptions,
};

/// Seeds run, and what they showed, on one side of a row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Seeds run.
    pub seeds: u64,
    /// Seeds that showed the violation the file is about.
    pub showing: u64,
    /// Seeds that proved nothing (not valid, and not showing it).
    pub inconclusive: u64,
}

impl Tally {
    /// Folds in one seed's verdict.
    pub(super) fn add(&mut self, scenario: &Scenario, verdict: &Verdict) {
        self.seeds += 1;
        self.showing += u64::from(counts(scenario, verdict));
        self.inconclusive += u64::from(inconclusive(scenario, verdict));
    }

    /// The seeds that count: every one but those that proved nothing.
    pub fn valid(&self) -> u64 {
        self.seeds - self.inconclusive
    }

    /// The rate of showing over the seeds that count.
    pub fn rate(&self) -> f64 {
        if self.valid() == 0 {
            0.0
        } else {
            self.showing as f64 / self.valid() as f64
        }
    }
}

/// One file's row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The file, as given.
    pub file: String,
    /// The scenario's name.
    pub name: String,
    /// Its topology's kind.
    pub topology: String,
    /// The server flavour it runs on.
    pub server: String,
    /// What it expects.
    pub expect: Expect,
    /// The property its expectation is about (`None`: any expected by
    /// default).
    pub property: Option<String>,
    /// The simulator's seeds.
    pub simulated: Tally,
    /// The real runs (seeds `0..K`).
    pub real: Tally,
    /// Why the file got `K` real runs.
    pub plan: String,
    /// Two-sided Fisher test of the two rates.
    pub fisher_p: f64,
    /// What the real runs took, in milliseconds.
    pub real_ms: u128,
    /// Why the file did not run on real processes, if it did not.
    pub not_run: Option<String>,
}

impl Row {
    /// Whether the real runs agree with the simulator: the real verdict
    /// is the file's expectation (shown at least once for an unsafe file,
    /// never for a safe one), every real run proved something, and the
    /// rates do not differ (Fisher p ≥ 0.05).
    pub fn agrees(&self) -> bool {
        let verdict = match self.expect {
            Expect::Violation => self.real.showing > 0,
            Expect::Safe => self.real.showing == 0,
        };
        self.not_run.is_none() && verdict && self.real.inconclusive == 0 && self.fisher_p >= 0.05
    }

    pub(super) fn new(job: &Job, simulated: Tally) -> Self {
        Self {
            file: job.file.clone(),
            name: job.scenario.name.clone(),
            topology: job.scenario.topology.kind_name().to_owned(),
            server: name_of(&FLAVOURS, job.scenario.server.flavour).to_owned(),
            expect: job.scenario.expect,
            property: job.scenario.property.map(|p| property_name(p).to_owned()),
            simulated,
            real: Tally::default(),
            plan: String::new(),
            fisher_p: 1.0,
            real_ms: 0,
            not_run: None,
        }
    }

    /// Sets the Fisher test from both tallies.
    pub(super) fn test(&mut self) {
        let (real, sim) = (self.real, self.simulated);
        self.fisher_p = stats::fisher(
            real.showing,
            real.valid() - real.showing,
            sim.showing,
            sim.valid() - sim.showing,
        );
    }
}

/// The seeds `0..seeds` of `scenario` in the simulator, folded.
pub(super) fn simulate(scenario: &Scenario, seeds: u64, jobs: usize) -> (Tally, Summary) {
    let list: Vec<u64> = (0..seeds).collect();
    let verdicts = map_seeds(scenario, &list, jobs, WorldOptions::default(), |outcome| {
        outcome.verdict
    });
    fold(
        scenario,
        "",
        verdicts.iter().zip(&list).map(|(v, s)| (*s, v)),
    )
}

/// Folds `(seed, verdict)` pairs into a tally and a summary (for
/// `file`).
pub(super) fn fold<'a>(
    scenario: &Scenario,
    file: &str,
    verdicts: impl Iterator<Item = (u64, &'a Verdict)>,
) -> (Tally, Summary) {
    let mut tally = Tally::default();
    let mut summary = Summary::new(file, scenario, Shard::WHOLE);
    for (seed, verdict) in verdicts {
        tally.add(scenario, verdict);
        summary.add(scenario, seed, verdict);
    }
    summary.judge();
    (tally, summary)
}
