//! Which seeds a run takes ([`Shard`]) and which of their verdicts count
//! against a scenario's expectation.

use crate::{
    config::{Expect, Scenario},
    outcome::Verdict,
};

/// Which seeds run here: shard `index` of `count` (1-based) runs the seeds
/// `s` of every scenario with `s % count == index - 1`. Every shard of a
/// run together runs each seed exactly once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    /// Which shard, from 1.
    pub index: u64,
    /// How many shards.
    pub count: u64,
}

impl Shard {
    /// The whole run in one shard.
    pub const WHOLE: Self = Self { index: 1, count: 1 };

    /// Whether `seed` is this shard's.
    pub fn owns(self, seed: u64) -> bool {
        seed % self.count == self.index - 1
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    /// Parses `i/n` with 1 ≤ i ≤ n.
    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("bad shard {text:?}: write i/n with 1 <= i <= n, e.g. 2/3");
        let (index, count) = text.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            index.trim().parse::<u64>().map_err(|_| bad())?,
            count.trim().parse::<u64>().map_err(|_| bad())?,
        );
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Self { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Whether `verdict` violates what `scenario`'s expectation is about: its
/// `property` if it names one, else any property expected by default.
pub fn counts(scenario: &Scenario, verdict: &Verdict) -> bool {
    match scenario.property {
        Some(property) => verdict.violated().contains(&property),
        None => verdict
            .violations
            .iter()
            .any(|violation| violation.property.expected_by_default()),
    }
}

/// Whether a seed with `verdict` is what `scenario` expects of all seeds
/// (safe) or of some (violation).
pub fn seed_meets(scenario: &Scenario, verdict: &Verdict) -> bool {
    match scenario.expect {
        Expect::Violation => counts(scenario, verdict),
        Expect::Safe => !counts(scenario, verdict),
    }
}

/// Whether a seed with `verdict` proves nothing about `scenario`: its run
/// is not valid (see `checker::validity`) and shows no violation its
/// expectation is about (a violation is evidence however the run went).
pub fn inconclusive(scenario: &Scenario, verdict: &Verdict) -> bool {
    !verdict.invalid.is_empty() && !counts(scenario, verdict)
}
