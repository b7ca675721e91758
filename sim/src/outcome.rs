//! What one seed of a scenario produced: its concrete fault schedule, its
//! history, and the checkers' verdict.

use std::{collections::BTreeSet, time::Duration};

use serde::{Deserialize, Serialize};

use crate::{
    config::{FaultKind, FaultTarget, Property, SignedDuration},
    history::History,
};

/// A fault with every range drawn and every target resolved: the unit the
/// shrinker removes and the report prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConcreteFault {
    /// What.
    pub kind: FaultKind,
    /// When, in true sim time.
    pub at: Duration,
    /// To whom: a host, or the node that is primary when it fires.
    pub target: FaultTarget,
    /// How long, for faults that last (a failover: its stale window).
    pub duration: Option<Duration>,
    /// Clock-drift rate.
    pub rate: Option<f64>,
    /// Clock-jump offset.
    pub offset: Option<SignedDuration>,
    /// Latency faults: the largest extra one-way delay.
    pub delay: Option<Duration>,
}

/// One broken property, with the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    /// Which property.
    pub property: Property,
    /// When it was first broken, in true sim time.
    pub at: Duration,
    /// A sentence a person can act on.
    pub message: String,
    /// Indexes into the history of the entries that prove it.
    pub evidence: Vec<usize>,
}

/// The checkers' findings on one history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Every violation found (empty when safe).
    pub violations: Vec<Violation>,
    /// "Sometimes" facts: things that happened at least once in the run,
    /// e.g. `pause-outlived-ttl`, `fenced-write-rejected`,
    /// `failover-lost-lock-key`. They prove a fault actually bit.
    pub facts: BTreeSet<String>,
    /// Grants that overtook a live waiter (plain and fair lock): with the
    /// plain lock a fact, counted so that reports show what fair mode
    /// buys; in fair mode each is also an F3 violation.
    #[serde(default)]
    pub overtakings: u64,
    /// Why the run proves nothing, if it does not (too few grants, a
    /// scheduled fault without its evidence, an oracle blind for too much
    /// of the hold time): each a sentence. A run with any is
    /// `inconclusive` unless it shows a violation it was about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<String>,
}

impl Verdict {
    /// The properties violated, without repeats.
    pub fn violated(&self) -> BTreeSet<Property> {
        self.violations.iter().map(|v| v.property).collect()
    }
}

/// Everything one seed produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedOutcome {
    /// The seed.
    pub seed: u64,
    /// The faults that were injected, in time order.
    pub schedule: Vec<ConcreteFault>,
    /// What happened.
    pub history: History,
    /// What the checkers concluded.
    pub verdict: Verdict,
}
