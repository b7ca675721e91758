//! One scenario's results over its seeds, the table they print as, and
//! merging the results of the shards of one run.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
};

use serde::{Deserialize, Serialize};

use super::seeds::{Shard, counts, inconclusive};
use crate::{
    config::{Expect, Property, Scenario},
    outcome::{ConcreteFault, Verdict},
    scenario::property_name,
};

/// What the seeds of one scenario gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The scenario's name.
    pub name: String,
    /// Its file, as given.
    pub file: String,
    /// What it expects.
    pub expect: Expect,
    /// The property the expectation is about, if one.
    pub property: Option<Property>,
    /// The shard these seeds were (1/1 for a whole run).
    pub shard: Shard,
    /// Seeds run (and folded in).
    pub seeds: u64,
    /// Whether the seeds stopped at the first failing one, with seeds of
    /// the budget left above it (`sim run --stop-at-first-failure`): the
    /// counts are then of the seeds up to it.
    #[serde(default)]
    pub stopped: bool,
    /// Seeds that violated each property, by property name.
    pub violations: BTreeMap<String, u64>,
    /// "Sometimes" facts seen on any seed.
    pub facts: BTreeSet<String>,
    /// Grants that overtook a live waiter, over all seeds (plain and fair
    /// lock; see `Verdict::overtakings`).
    #[serde(default)]
    pub overtakings: u64,
    /// The lowest seed that fails the way the expectation is about: it
    /// shows the violation (expect = violation) or breaks safety (safe).
    pub first_failing_seed: Option<u64>,
    /// The lowest seed that violated any property.
    pub first_violating_seed: Option<u64>,
    /// Seeds whose run proved nothing (not valid, and no violation the
    /// expectation is about).
    #[serde(default)]
    pub inconclusive: u64,
    /// The lowest of them.
    #[serde(default)]
    pub first_inconclusive_seed: Option<u64>,
    /// Why that seed proved nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inconclusive_reasons: Vec<String>,
    /// What the seeds say of the expectation: met, missed, inconclusive,
    /// or open (a shard's seeds, until the shards are merged).
    #[serde(default)]
    pub status: Status,
    /// Whether the scenario met its expectation (on these seeds): its
    /// status is `met`.
    pub met: bool,
    /// Wall-clock milliseconds its seeds took (not part of the table).
    pub wall_ms: u128,
    /// The timeline report of the shrunk failing seed, if one was written.
    pub report: Option<String>,
    /// The property the shrunk schedule still violates.
    pub shrunk_property: Option<Property>,
    /// The shrunk schedule of that seed.
    pub shrunk_schedule: Option<Vec<ConcreteFault>>,
}

impl Summary {
    /// An empty summary of `scenario` from `file`.
    pub fn new(file: &str, scenario: &Scenario, shard: Shard) -> Self {
        Self {
            name: scenario.name.clone(),
            file: file.to_owned(),
            expect: scenario.expect,
            property: scenario.property,
            shard,
            seeds: 0,
            stopped: false,
            violations: BTreeMap::new(),
            facts: BTreeSet::new(),
            overtakings: 0,
            first_failing_seed: None,
            first_violating_seed: None,
            inconclusive: 0,
            first_inconclusive_seed: None,
            inconclusive_reasons: Vec::new(),
            status: Status::Open,
            met: false,
            wall_ms: 0,
            report: None,
            shrunk_property: None,
            shrunk_schedule: None,
        }
    }

    /// Folds in one seed's verdict.
    pub fn add(&mut self, scenario: &Scenario, seed: u64, verdict: &Verdict) {
        self.seeds += 1;
        for property in verdict.violated() {
            *self
                .violations
                .entry(property_name(property).to_owned())
                .or_default() += 1;
        }
        self.facts.extend(verdict.facts.iter().cloned());
        self.overtakings += verdict.overtakings;
        if counts(scenario, verdict) {
            self.first_failing_seed = lowest(self.first_failing_seed, Some(seed));
        }
        if !verdict.violations.is_empty() {
            self.first_violating_seed = lowest(self.first_violating_seed, Some(seed));
        }
        if inconclusive(scenario, verdict) {
            self.inconclusive += 1;
            if self
                .first_inconclusive_seed
                .is_none_or(|first| seed < first)
            {
                self.first_inconclusive_seed = Some(seed);
                self.inconclusive_reasons.clone_from(&verdict.invalid);
            }
        }
    }

    /// Whether these seeds already fail the run: a safe scenario's seed
    /// broke it (a violation that no seed showed is only known once every
    /// shard is in).
    pub fn fails_run(&self) -> bool {
        self.expect == Expect::Safe && self.first_failing_seed.is_some()
            || self.shard == Shard::WHOLE && self.status == Status::Missed
    }

    /// Whether these seeds meet `expect`: some failing seed for a
    /// violation, none for safe (whether every seed proved something is
    /// [`Self::judge`]'s).
    pub fn meets(&self, expect: Expect) -> bool {
        match expect {
            Expect::Violation => self.first_failing_seed.is_some(),
            Expect::Safe => self.first_failing_seed.is_none(),
        }
    }

    /// Sets `status` and `met` from the seeds folded in: a violation the
    /// expectation is about decides (met for an unsafe file, missed for a
    /// safe one); without one, a seed that proved nothing makes the
    /// scenario inconclusive, never safe; else a safe file is met, and an
    /// unsafe one missed (or open, on a shard: another shard may hold it).
    pub fn judge(&mut self) {
        self.status = match (self.expect, self.first_failing_seed) {
            (Expect::Violation, Some(_)) => Status::Met,
            (Expect::Safe, Some(_)) => Status::Missed,
            (_, None) if self.inconclusive > 0 => Status::Inconclusive,
            (Expect::Safe, None) => Status::Met,
            (Expect::Violation, None) if self.shard == Shard::WHOLE => Status::Missed,
            (Expect::Violation, None) => Status::Open,
        };
        self.met = self.status == Status::Met;
    }
}

/// What a scenario's seeds say of its expectation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Met: the violation shown, or every seed safe and valid.
    Met,
    /// Missed: a safe file broken, or an unsafe one never caught.
    Missed,
    /// No violation the expectation is about, and a seed whose run proved
    /// nothing (too few grants, a fault without evidence, a blind oracle):
    /// neither safe nor caught.
    Inconclusive,
    /// A shard's seeds of an unsafe file that showed nothing: the merged
    /// shards decide.
    #[default]
    Open,
}

impl Status {
    /// The word the table, the report and JUnit use.
    pub fn word(self) -> &'static str {
        match self {
            Self::Met => "met",
            Self::Missed => "missed",
            Self::Inconclusive => "inconclusive",
            Self::Open => "open",
        }
    }
}

fn lowest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What `sim run --json` writes: one shard's summaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFile {
    /// Which shard of the run this is.
    pub shard: Shard,
    /// One summary per scenario, in the run's order.
    pub scenarios: Vec<Summary>,
}

/// Shard results that do not make one run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MergeError {
    /// Nothing to merge.
    Empty,
    /// The shards say different shard counts.
    Counts(u64, u64),
    /// A shard is there twice.
    Twice(Shard),
    /// A shard is missing.
    Missing(Shard),
    /// The shards ran different scenarios.
    Scenarios(Shard),
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("no shard results to merge"),
            Self::Counts(a, b) => write!(f, "shards of {a} and of {b} shards cannot merge"),
            Self::Twice(shard) => write!(f, "shard {shard} is there twice"),
            Self::Missing(shard) => write!(f, "shard {shard} is missing"),
            Self::Scenarios(shard) => write!(
                f,
                "shard {shard} ran other scenarios than shard 1 (or in another order)"
            ),
        }
    }
}

impl std::error::Error for MergeError {}

/// Combines the results of every shard of one run into the results the
/// whole run gives: counts add up, the lowest failing seed wins and brings
/// its shrunk report.
pub fn merge(files: &[RunFile]) -> Result<RunFile, MergeError> {
    let first = files.first().ok_or(MergeError::Empty)?;
    let count = first.shard.count;
    let mut seen = BTreeSet::new();
    for file in files {
        if file.shard.count != count {
            return Err(MergeError::Counts(count, file.shard.count));
        }
        if !seen.insert(file.shard.index) {
            return Err(MergeError::Twice(file.shard));
        }
        let same = file.scenarios.len() == first.scenarios.len()
            && file
                .scenarios
                .iter()
                .zip(&first.scenarios)
                .all(|(a, b)| a.name == b.name && a.file == b.file);
        if !same {
            return Err(MergeError::Scenarios(file.shard));
        }
    }
    if let Some(index) = (1..=count).find(|index| !seen.contains(index)) {
        return Err(MergeError::Missing(Shard { index, count }));
    }
    let mut merged: Vec<Summary> = first
        .scenarios
        .iter()
        .map(|summary| Summary {
            shard: Shard::WHOLE,
            seeds: 0,
            stopped: false,
            violations: BTreeMap::new(),
            facts: BTreeSet::new(),
            overtakings: 0,
            first_failing_seed: None,
            first_violating_seed: None,
            inconclusive: 0,
            first_inconclusive_seed: None,
            inconclusive_reasons: Vec::new(),
            wall_ms: 0,
            report: None,
            shrunk_property: None,
            shrunk_schedule: None,
            ..summary.clone()
        })
        .collect();
    for (position, total) in merged.iter_mut().enumerate() {
        let parts: Vec<&Summary> = files.iter().map(|file| &file.scenarios[position]).collect();
        for part in &parts {
            total.seeds += part.seeds;
            total.stopped |= part.stopped;
            for (property, seeds) in &part.violations {
                *total.violations.entry(property.clone()).or_default() += seeds;
            }
            total.facts.extend(part.facts.iter().cloned());
            total.overtakings += part.overtakings;
            total.first_failing_seed = lowest(total.first_failing_seed, part.first_failing_seed);
            total.first_violating_seed =
                lowest(total.first_violating_seed, part.first_violating_seed);
            total.wall_ms += part.wall_ms;
            total.inconclusive += part.inconclusive;
            if let Some(seed) = part.first_inconclusive_seed
                && total
                    .first_inconclusive_seed
                    .is_none_or(|first| seed < first)
            {
                total.first_inconclusive_seed = Some(seed);
                total
                    .inconclusive_reasons
                    .clone_from(&part.inconclusive_reasons);
            }
        }
        // The report comes from the seed a whole run would have shrunk.
        let reported = total.first_failing_seed.or(total.first_violating_seed);
        if let Some(part) = parts
            .iter()
            .find(|part| part.first_failing_seed.or(part.first_violating_seed) == reported)
        {
            total.report = part.report.clone();
            total.shrunk_property = part.shrunk_property;
            total.shrunk_schedule = part.shrunk_schedule.clone();
        }
        total.judge();
    }
    Ok(RunFile {
        shard: Shard::WHOLE,
        scenarios: merged,
    })
}

/// One scenario's row of [`table`].
fn row(s: &Summary) -> [String; 7] {
    let violations = if s.violations.is_empty() {
        "-".to_owned()
    } else {
        s.violations
            .iter()
            .map(|(p, n)| format!("{p}:{n}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let expect = match (s.expect, s.property) {
        (Expect::Safe, None) => "safe".to_owned(),
        (Expect::Violation, None) => "violation".to_owned(),
        (Expect::Safe, Some(p)) => format!("safe ({})", property_name(p)),
        (Expect::Violation, Some(p)) => format!("violation ({})", property_name(p)),
    };
    [
        s.name.clone(),
        expect,
        if s.stopped {
            format!("{} (stopped)", s.seeds)
        } else {
            s.seeds.to_string()
        },
        violations,
        s.first_failing_seed
            .map_or("-".to_owned(), |seed| seed.to_string()),
        match s.status {
            Status::Met => "✓".to_owned(),
            // Another shard may hold the violating seed.
            Status::Open => "? merge".to_owned(),
            Status::Missed => "✗ MISSED".to_owned(),
            Status::Inconclusive => format!("? INCONCLUSIVE ({} seeds)", s.inconclusive),
        },
        {
            let mut facts: Vec<String> = s.facts.iter().cloned().collect();
            if s.overtakings > 0 {
                facts.push(format!("{} overtakings", s.overtakings));
            }
            facts.join(", ")
        },
    ]
}

/// The results table, the verdict line and the report paths: the same
/// text for one run and for the merged shards of it.
pub fn table(file: &RunFile) -> String {
    let summaries = &file.scenarios;
    let header = [
        "scenario",
        "expect",
        "seeds",
        "violations (seeds)",
        "first failing",
        "met",
        "facts",
    ];
    let rows: Vec<[String; 7]> = summaries.iter().map(row).collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 < cells.len() {
                text.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            } else {
                text.push_str(cell);
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&header.map(str::to_owned));
    for row in &rows {
        line(row);
    }
    let met = summaries.iter().filter(|s| s.met).count();
    let seeds: u64 = summaries.iter().map(|s| s.seeds).sum();
    let shard = if file.shard == Shard::WHOLE {
        String::new()
    } else {
        format!("; shard {}: merge the shards for the verdict", file.shard)
    };
    let inconclusive = summaries
        .iter()
        .filter(|s| s.status == Status::Inconclusive)
        .count();
    let inconclusive = if inconclusive > 0 {
        format!(", {inconclusive} inconclusive")
    } else {
        String::new()
    };
    out.push_str(&format!(
        "\n{met} of {} scenarios met their expectation{inconclusive} ({seeds} seeds{shard})\n",
        summaries.len()
    ));
    if summaries.iter().any(|s| s.stopped) {
        out.push_str(
            "(stopped): the scenario's seeds stopped at its first failing seed; \
             its counts are of the seeds up to it\n",
        );
    }
    for s in summaries
        .iter()
        .filter(|s| s.status == Status::Inconclusive)
    {
        out.push_str(&format!(
            "inconclusive: {}: {} of {} seeds proved nothing; seed {}: {}\n",
            s.name,
            s.inconclusive,
            s.seeds,
            s.first_inconclusive_seed.unwrap_or_default(),
            s.inconclusive_reasons.join("; ")
        ));
    }
    for report in summaries.iter().filter_map(|s| s.report.as_ref()) {
        out.push_str(&format!("report: {report}\n"));
    }
    out
}
