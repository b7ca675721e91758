//! Running scenarios across seeds: the one engine behind `sim run`, `sim
//! chaos` and `bench`'s `compare`.
//!
//! [`drive`] runs each seed of a set of scenarios to an outcome in a
//! [`Mode`] (the simulated world, [`Simulated`], or real processes), folds
//! the verdicts into one [`Summary`] per scenario, and for each scenario
//! that saw a violation writes the timeline report of its first failing
//! seed, shrunk where the mode can shrink. [`run`] is `drive` in the
//! simulated world for a set of scenarios (or a [`Shard`] of them);
//! [`map_seeds`] runs seeds of one scenario on worker threads and hands
//! back what a caller extracts from each outcome, in seed order. [`merge`]
//! combines the summaries of the shards of one run into what the whole run
//! gives. [`junit`] writes a run's results as JUnit XML. [`cli`] is what
//! the command line does with them.

pub mod agree;
pub mod cli;
pub mod junit;
pub mod output;
mod real;
mod seeds;
mod summary;

use std::{
    path::{Path, PathBuf},
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

pub use real::Real;
pub use seeds::{Shard, counts, inconclusive, seed_meets};
pub use summary::{MergeError, RunFile, Status, Summary, merge, table};

use crate::{
    config::{Property, Scenario},
    outcome::SeedOutcome,
    report,
    schedule::draw_schedule,
    shrink,
    world::{self, WorldOptions},
};

/// A scenario to run, and the file it came from (for the table and JSON).
#[derive(Debug, Clone)]
pub struct Job {
    /// The file, as given.
    pub file: String,
    /// The scenario.
    pub scenario: Scenario,
}

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Seeds per scenario (`0..seeds`); each file's `seeds` when `None`.
    pub seeds: Option<u64>,
    /// Run only this seed of each scenario.
    pub only_seed: Option<u64>,
    /// Which of the seeds run here.
    pub shard: Shard,
    /// Worker threads.
    pub jobs: usize,
    /// How each world runs.
    pub world: WorldOptions,
    /// Where timeline reports of violations go; `None` writes none (and
    /// shrinks nothing).
    pub report_dir: Option<PathBuf>,
    /// Whether each scenario stops at its first failing seed ([`Until`]).
    pub until: Until,
}

/// How far each scenario's seeds run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Until {
    /// Every seed: the rates of every property over the whole budget.
    #[default]
    EverySeed,
    /// Up to the scenario's first failing seed (the lowest one that shows
    /// what its expectation is about), then no further: the verdict and
    /// its seed without the rest of the budget. Every seed below it runs
    /// and none above it is folded in (one that was already running is
    /// dropped), so the summary is the same whatever the threads did.
    FirstFailure,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            seeds: None,
            only_seed: None,
            shard: Shard::WHOLE,
            jobs: available_jobs(),
            world: WorldOptions::default(),
            report_dir: None,
            until: Until::EverySeed,
        }
    }
}

/// The cores this machine offers (at least 1).
pub fn available_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// What [`run`] reports as it goes.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// `total` seeds are about to run.
    Started {
        /// Seeds in all.
        total: usize,
    },
    /// One seed of `scenario` finished.
    SeedDone {
        /// The scenario's name.
        scenario: &'a str,
        /// What it gave.
        outcome: &'a SeedOutcome,
    },
    /// Every seed of `scenario` finished.
    ScenarioDone {
        /// The scenario's name.
        scenario: &'a str,
        /// Its seeds.
        seeds: u64,
    },
}

/// A finished run: one summary per scenario, in the order given.
#[derive(Debug, Clone)]
pub struct Run {
    /// The summaries.
    pub summaries: Vec<Summary>,
    /// Wall-clock time, for the people reading; the simulation never reads it.
    pub wall: Duration,
}

impl Run {
    /// Whether every scenario met its expectation.
    pub fn met(&self) -> bool {
        self.summaries.iter().all(|summary| summary.met)
    }
}

/// Runs `seeds` of `scenario` on `jobs` worker threads with `options`,
/// and returns `extract` of each outcome, in the order of `seeds`.
pub fn map_seeds<T: Send>(
    scenario: &Scenario,
    seeds: &[u64],
    jobs: usize,
    options: WorldOptions,
    extract: impl Fn(SeedOutcome) -> T + Sync,
) -> Vec<T> {
    let tasks: Vec<(usize, u64)> = seeds.iter().copied().enumerate().collect();
    let mut results: Vec<(usize, T)> = parallel(&tasks, jobs, |&(position, seed)| {
        let schedule = draw_schedule(scenario, seed);
        (
            position,
            extract(world::run_with(scenario, seed, &schedule, options)),
        )
    });
    results.sort_by_key(|(position, _)| *position);
    results.into_iter().map(|(_, value)| value).collect()
}

/// Runs `work` on every task, on up to `jobs` threads; results in the
/// order they finish.
fn parallel<I: Sync, T: Send>(tasks: &[I], jobs: usize, work: impl Fn(&I) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::with_capacity(tasks.len()));
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, tasks.len().max(1)) {
            scope.spawn(|| {
                while let Some(task) = tasks.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let result = work(task);
                    results
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(result);
                }
            });
        }
    });
    results.into_inner().unwrap_or_else(PoisonError::into_inner)
}

/// The seeds of `scenario` that `options` runs, in order.
pub fn seeds_of(scenario: &Scenario, options: &RunOptions) -> Vec<u64> {
    match options.only_seed {
        Some(seed) => vec![seed],
        None => (0..options.seeds.unwrap_or(scenario.seeds))
            .filter(|seed| options.shard.owns(*seed))
            .collect(),
    }
}

/// How one seed runs to an outcome: in the simulated world
/// ([`Simulated`]) or on real processes (`sim chaos`'s mode, which the
/// `chaos` tree provides). Everything after the outcome (folding the
/// verdicts, shrinking where the mode can, the reports) is [`drive`]'s, the
/// same for both.
pub trait Mode: Sync {
    /// Why a seed could not run at all (never: [`Simulated`]).
    type Error: std::fmt::Display + Send;

    /// Runs seed `seed` of `scenario` to its outcome.
    fn run_seed(&self, scenario: &Scenario, seed: u64) -> Result<SeedOutcome, Self::Error>;

    /// How many seeds run at once.
    fn workers(&self) -> usize;

    /// The outcome the report of a failing seed shows, for `property`: the
    /// simulator shrinks the schedule (a replay is exact); a real run
    /// cannot be run again alike, and is shown as it went.
    fn shrink(&self, scenario: &Scenario, outcome: SeedOutcome, property: Property) -> SeedOutcome;

    /// The report file's name (without directory) for `seed` of `scenario`.
    fn report_name(&self, scenario: &Scenario, seed: u64) -> String;
}

/// The simulated world as a [`Mode`]: deterministic, in parallel, shrunk.
#[derive(Debug, Clone, Copy)]
pub struct Simulated {
    /// How each world runs.
    pub world: WorldOptions,
    /// Worker threads.
    pub jobs: usize,
}

impl Mode for Simulated {
    type Error = std::convert::Infallible;

    fn run_seed(&self, scenario: &Scenario, seed: u64) -> Result<SeedOutcome, Self::Error> {
        let schedule = draw_schedule(scenario, seed);
        Ok(world::run_with(scenario, seed, &schedule, self.world))
    }

    fn workers(&self) -> usize {
        self.jobs
    }

    fn shrink(&self, scenario: &Scenario, outcome: SeedOutcome, property: Property) -> SeedOutcome {
        shrink::shrink_with(scenario, &outcome, property, self.world)
    }

    fn report_name(&self, scenario: &Scenario, seed: u64) -> String {
        format!("{}-{seed}.html", scenario.name)
    }
}

/// Runs every seed of every job (the shard's share of them) in the
/// simulated world, folds the verdicts into summaries, and shrinks and
/// reports each scenario's first failing seed.
pub fn run(jobs: &[Job], options: &RunOptions, progress: &(dyn Fn(Progress<'_>) + Sync)) -> Run {
    let mode = Simulated {
        world: options.world,
        jobs: options.jobs,
    };
    let seeds: Vec<Vec<u64>> = jobs
        .iter()
        .map(|job| seeds_of(&job.scenario, options))
        .collect();
    match drive(
        jobs,
        &seeds,
        Drive {
            shard: options.shard,
            report_dir: options.report_dir.as_deref(),
            until: options.until,
        },
        &mode,
        progress,
    ) {
        Ok(run) => run,
        Err(never) => match never.error {},
    }
}

/// A seed that could not run, and which.
#[derive(Debug)]
pub struct SeedError<E> {
    /// The scenario's name.
    pub scenario: String,
    /// The seed.
    pub seed: u64,
    /// Why.
    pub error: E,
}

impl<E: std::fmt::Display> std::fmt::Display for SeedError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} seed {}: {}", self.scenario, self.seed, self.error)
    }
}

/// The outcomes a scenario's report may come from: its lowest failing
/// seed's, its lowest violating seed's and its lowest inconclusive seed's
/// (kept as they finish, in any order, so that no seed runs twice).
#[derive(Default)]
struct Kept {
    failing: Option<SeedOutcome>,
    violating: Option<SeedOutcome>,
    inconclusive: Option<SeedOutcome>,
}

impl Kept {
    /// The lowest failing seed offered so far.
    fn failing_seed(&self) -> Option<u64> {
        self.failing.as_ref().map(|outcome| outcome.seed)
    }

    fn offer(&mut self, scenario: &Scenario, outcome: &SeedOutcome) {
        let lower =
            |kept: &Option<SeedOutcome>| kept.as_ref().is_none_or(|k| outcome.seed < k.seed);
        if counts(scenario, &outcome.verdict) && lower(&self.failing) {
            self.failing = Some(outcome.clone());
        }
        if !outcome.verdict.violations.is_empty() && lower(&self.violating) {
            self.violating = Some(outcome.clone());
        }
        if inconclusive(scenario, &outcome.verdict) && lower(&self.inconclusive) {
            self.inconclusive = Some(outcome.clone());
        }
    }
}

/// How [`drive`] runs: which shard the seeds are, where reports go, and
/// how far each scenario's seeds run.
#[derive(Debug, Clone, Copy)]
pub struct Drive<'a> {
    /// Which of the seeds these are (for the summaries).
    pub shard: Shard,
    /// Where the reports of failing seeds go; `None` writes none.
    pub report_dir: Option<&'a Path>,
    /// Every seed, or up to each scenario's first failing one.
    pub until: Until,
}

/// Runs `seeds[i]` of `jobs[i]` in `mode`, folds each scenario's verdicts
/// into its [`Summary`] in seed order, and, with a report directory,
/// writes the report of each scenario's first failing seed (else its first
/// violating one), shrunk where `mode` shrinks. Stops at the first seed
/// that cannot run.
pub fn drive<M: Mode>(
    jobs: &[Job],
    seeds: &[Vec<u64>],
    how: Drive<'_>,
    mode: &M,
    progress: &(dyn Fn(Progress<'_>) + Sync),
) -> Result<Run, SeedError<M::Error>> {
    let Drive {
        shard,
        report_dir,
        until,
    } = how;
    // Wall-clock time is reported, never used by the simulation itself.
    let started = Instant::now();
    let tasks: Vec<(usize, u64)> = seeds
        .iter()
        .enumerate()
        .flat_map(|(index, seeds)| seeds.iter().map(move |seed| (index, *seed)))
        .collect();
    progress(Progress::Started { total: tasks.len() });
    let remaining: Vec<AtomicUsize> = seeds.iter().map(|s| AtomicUsize::new(s.len())).collect();
    let scenario_started: Vec<Mutex<Option<Instant>>> =
        jobs.iter().map(|_| Mutex::new(None)).collect();
    let wall_ms: Vec<Mutex<u128>> = jobs.iter().map(|_| Mutex::new(0)).collect();
    let kept: Vec<Mutex<Kept>> = jobs.iter().map(|_| Mutex::default()).collect();
    let failed = AtomicBool::new(false);
    // Above the scenario's lowest failing seed so far (the one `Kept`
    // holds for its report).
    let past_first_failure = |index: usize, seed: u64| {
        until == Until::FirstFailure
            && lock(&kept[index])
                .failing_seed()
                .is_some_and(|first| seed > first)
    };
    let scenario_done = |index: usize| {
        if remaining[index].fetch_sub(1, Ordering::AcqRel) == 1 {
            let began = *lock(&scenario_started[index]);
            *lock(&wall_ms[index]) = began.map_or(0, |began| began.elapsed().as_millis());
            progress(Progress::ScenarioDone {
                scenario: &jobs[index].scenario.name,
                seeds: seeds[index].len() as u64,
            });
        }
    };
    let results = parallel(&tasks, mode.workers(), |&(index, seed)| {
        if failed.load(Ordering::Acquire) {
            return None;
        }
        if past_first_failure(index, seed) {
            scenario_done(index);
            return None;
        }
        let job = &jobs[index];
        lock(&scenario_started[index]).get_or_insert_with(Instant::now);
        let outcome = match mode.run_seed(&job.scenario, seed) {
            Ok(outcome) => outcome,
            Err(error) => {
                failed.store(true, Ordering::Release);
                return Some(Err(SeedError {
                    scenario: job.scenario.name.clone(),
                    seed,
                    error,
                }));
            }
        };
        progress(Progress::SeedDone {
            scenario: &job.scenario.name,
            outcome: &outcome,
        });
        lock(&kept[index]).offer(&job.scenario, &outcome);
        scenario_done(index);
        Some(Ok((index, seed, outcome.verdict)))
    });
    let mut verdicts = Vec::with_capacity(results.len());
    for result in results.into_iter().flatten() {
        verdicts.push(result?);
    }
    // Fold in seed order, so the summary does not depend on thread timing.
    verdicts.sort_by_key(|(index, seed, _)| (*index, *seed));
    let mut summaries: Vec<Summary> = jobs
        .iter()
        .map(|job| Summary::new(&job.file, &job.scenario, shard))
        .collect();
    for (index, seed, verdict) in verdicts {
        // A seed above the first failing one ran only because it had
        // started before that seed failed: dropped, so the summary does
        // not depend on how far the threads got.
        if past_first_failure(index, seed) {
            continue;
        }
        summaries[index].add(&jobs[index].scenario, seed, &verdict);
    }
    if until == Until::FirstFailure {
        for (index, (summary, seeds)) in summaries.iter_mut().zip(seeds).enumerate() {
            summary.stopped = seeds.iter().any(|seed| past_first_failure(index, *seed));
        }
    }
    for (((summary, job), wall), kept) in summaries.iter_mut().zip(jobs).zip(&wall_ms).zip(kept) {
        summary.wall_ms = *lock(wall);
        summary.judge();
        if let Some(dir) = report_dir {
            let kept = kept.into_inner().unwrap_or_else(PoisonError::into_inner);
            shrink_and_report(&job.scenario, summary, kept, mode, dir);
        }
    }
    Ok(Run {
        summaries,
        wall: started.elapsed(),
    })
}

/// Locks `mutex`; a poisoned one still holds what was written before the
/// panic, which the fold reports.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// For a scenario that saw a violation: its first failing seed's outcome
/// (or its first violating one's, for a safe scenario that broke another
/// property), shrunk where `mode` shrinks, as a timeline report. For an
/// inconclusive scenario without one: its first inconclusive seed's, as it
/// went (the report says why it proved nothing).
fn shrink_and_report<M: Mode>(
    scenario: &Scenario,
    summary: &mut Summary,
    kept: Kept,
    mode: &M,
    dir: &Path,
) {
    let Some(outcome) = kept.failing.or(kept.violating) else {
        if summary.status == Status::Inconclusive
            && let Some(outcome) = kept.inconclusive
        {
            write_report(scenario, summary, &outcome, false, mode, dir);
        }
        return;
    };
    let Some(property) = scenario
        .property
        .filter(|p| outcome.verdict.violated().contains(p))
        .or_else(|| outcome.verdict.violated().into_iter().next())
    else {
        return;
    };
    let shrunk = mode.shrink(scenario, outcome, property);
    write_report(scenario, summary, &shrunk, true, mode, dir);
    summary.shrunk_property = Some(property);
    summary.shrunk_schedule = Some(shrunk.schedule);
}

/// Writes `outcome`'s timeline report into `dir`, named for its seed, and
/// records its path in `summary`; `shrunk`: its schedule is a shrunk one.
fn write_report<M: Mode>(
    scenario: &Scenario,
    summary: &mut Summary,
    outcome: &SeedOutcome,
    shrunk: bool,
    mode: &M,
    dir: &Path,
) {
    let schedule = shrunk.then_some(outcome.schedule.as_slice());
    let html = report::render_html(scenario, outcome, schedule);
    let path = dir.join(mode.report_name(scenario, outcome.seed));
    match std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, html)) {
        Ok(()) => summary.report = Some(path.display().to_string()),
        Err(error) => eprintln!("warning: cannot write {}: {error}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_split_the_seeds_exactly_once() {
        let shards: Vec<Shard> = ["1/3", "2/3", "3/3"]
            .iter()
            .map(|text| text.parse().expect("a shard"))
            .collect();
        for seed in 0..30 {
            assert_eq!(shards.iter().filter(|shard| shard.owns(seed)).count(), 1);
        }
        for bad in ["0/3", "4/3", "1/0", "1", "a/b", "2/-1"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert_eq!(shards[1].to_string(), "2/3");
    }
}
