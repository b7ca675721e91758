//! Running scenarios across seeds, in parallel: the engine behind
//! `sim run` and `bench`'s `compare`.
//!
//! [`map_seeds`] runs seeds of one scenario on worker threads and hands
//! back what a caller extracts from each outcome, in seed order. [`run`]
//! runs every seed of a set of scenarios (or a [`Shard`] of them), folds
//! the verdicts into one [`Summary`] per scenario, and for each scenario
//! that saw a violation shrinks its first failing seed and writes the
//! timeline report. [`merge`] combines the summaries of the shards of one
//! run into what the whole run gives.

mod seeds;
mod summary;

use std::{
    path::{Path, PathBuf},
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

pub use seeds::{Shard, counts, seed_meets};
pub use summary::{MergeError, RunFile, Summary, merge, table};

use crate::{
    config::Scenario,
    outcome::SeedOutcome,
    report, shrink,
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
        let schedule = world::draw_schedule(scenario, seed);
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

/// Runs every seed of every job (the shard's share of them), folds the
/// verdicts into summaries, and shrinks and reports each scenario's first
/// failing seed.
pub fn run(jobs: &[Job], options: &RunOptions, progress: &(dyn Fn(Progress<'_>) + Sync)) -> Run {
    // Wall-clock time is reported, never used by the simulation itself.
    let started = Instant::now();
    let tasks: Vec<(usize, u64)> = jobs
        .iter()
        .enumerate()
        .flat_map(|(index, job)| {
            seeds_of(&job.scenario, options)
                .into_iter()
                .map(move |seed| (index, seed))
        })
        .collect();
    progress(Progress::Started { total: tasks.len() });
    let mut summaries: Vec<Summary> = jobs
        .iter()
        .map(|job| Summary::new(&job.file, &job.scenario, options.shard))
        .collect();
    let remaining: Vec<AtomicUsize> = jobs
        .iter()
        .enumerate()
        .map(|(index, _)| AtomicUsize::new(tasks.iter().filter(|(s, _)| *s == index).count()))
        .collect();
    let scenario_started: Vec<Mutex<Option<Instant>>> =
        jobs.iter().map(|_| Mutex::new(None)).collect();
    let wall_ms: Vec<Mutex<u128>> = jobs.iter().map(|_| Mutex::new(0)).collect();
    let verdicts = parallel(&tasks, options.jobs, |&(index, seed)| {
        let job = &jobs[index];
        scenario_started[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(Instant::now);
        let schedule = world::draw_schedule(&job.scenario, seed);
        let outcome = world::run_with(&job.scenario, seed, &schedule, options.world);
        progress(Progress::SeedDone {
            scenario: &job.scenario.name,
        });
        if remaining[index].fetch_sub(1, Ordering::AcqRel) == 1 {
            let began = *scenario_started[index]
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *wall_ms[index]
                .lock()
                .unwrap_or_else(PoisonError::into_inner) =
                began.map_or(0, |began| began.elapsed().as_millis());
            progress(Progress::ScenarioDone {
                scenario: &job.scenario.name,
                seeds: seeds_of(&job.scenario, options).len() as u64,
            });
        }
        (index, seed, outcome.verdict)
    });
    let mut verdicts = verdicts;
    // Fold in seed order, so the summary does not depend on thread timing.
    verdicts.sort_by_key(|(index, seed, _)| (*index, *seed));
    for (index, seed, verdict) in verdicts {
        summaries[index].add(&jobs[index].scenario, seed, &verdict);
    }
    for ((summary, job), wall) in summaries.iter_mut().zip(jobs).zip(&wall_ms) {
        summary.wall_ms = *wall.lock().unwrap_or_else(PoisonError::into_inner);
        summary.met = summary.meets(job.scenario.expect);
        if let Some(dir) = &options.report_dir {
            shrink_and_report(&job.scenario, summary, options.world, dir);
        }
    }
    Run {
        summaries,
        wall: started.elapsed(),
    }
}

/// For a scenario that saw a violation: re-runs its first failing seed (or
/// its first violating one, for a safe scenario that broke another
/// property), shrinks the schedule, and writes the timeline report.
fn shrink_and_report(
    scenario: &Scenario,
    summary: &mut Summary,
    options: WorldOptions,
    dir: &Path,
) {
    let Some(seed) = summary.first_failing_seed.or(summary.first_violating_seed) else {
        return;
    };
    let schedule = world::draw_schedule(scenario, seed);
    let outcome = world::run_with(scenario, seed, &schedule, options);
    let Some(property) = scenario
        .property
        .filter(|p| outcome.verdict.violated().contains(p))
        .or_else(|| outcome.verdict.violated().into_iter().next())
    else {
        return;
    };
    let shrunk = shrink::shrink_with(scenario, &outcome, property, options);
    let html = report::render_html(scenario, &shrunk, Some(&shrunk.schedule));
    let path = dir.join(format!("{}-{seed}.html", scenario.name));
    match std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, html)) {
        Ok(()) => summary.report = Some(path.display().to_string()),
        Err(error) => eprintln!("warning: cannot write {}: {error}", path.display()),
    }
    summary.shrunk_property = Some(property);
    summary.shrunk_schedule = Some(shrunk.schedule);
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
