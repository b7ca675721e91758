//! `sim agree`: the agreement table between the simulator and real
//! processes, made by one command and kept with everything that recomputes
//! it.
//!
//! For each scenario file it runs the simulator's seeds first, and takes
//! from the simulated rate how many real runs the file gets (`K`):
//! - a file that expects a violation gets enough runs that a real rate
//!   equal to the simulated one shows at least once with 95 % probability
//!   ([`stats::runs_to_show`]), up to `--max-runs`;
//! - a safe file gets what the budget leaves, shared out by each run's
//!   expected length, and the table states the rate its clean runs rule
//!   out ([`stats::ruled_out_above`]).
//!
//! Then it runs seeds `0..K` on real processes (`crate::chaos`), one at a
//! time, and writes the table: both rates with their Wilson intervals and
//! a two-sided Fisher test per row. The archive directory holds the
//! commit, the command, the machine, the scenario files as run, every real
//! history as gzipped JSON lines, both runs' summaries (`sim run --json`'s
//! schema) and the table as Markdown and JSON. `sim agree --recheck DIR`
//! recomputes the table from an archive alone: the real verdicts from the
//! kept histories, the simulated ones from their seeds (the simulator is
//! deterministic), and says whether it matches the kept table.

mod archive;
pub mod readme;
mod row;
pub mod stats;
mod table;

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
    time::{Duration, Instant},
};

use super::output::emit;
use archive::Archive;
pub use archive::{ArchiveError, recheck};
pub use row::{Row, Tally};
use row::{fold, simulate};
pub use table::{Header, markdown};

use super::{Job, Summary, counts, inconclusive};
use crate::{
    chaos::{self, RealOptions},
    config::{Expect, Topology},
    outcome::SeedOutcome,
};

/// How `sim agree` runs.
#[derive(Debug, Clone)]
pub struct AgreeOptions {
    /// What the real runs may take in all (an estimate planned from each
    /// run's length; the table says what they took).
    pub budget: Duration,
    /// Simulated seeds per file (`0..sim_seeds`).
    pub sim_seeds: u64,
    /// The most real runs a file gets.
    pub max_runs: u64,
    /// Worker threads for the simulated seeds.
    pub jobs: usize,
    /// How each real run goes.
    pub real: RealOptions,
    /// The archive directory to create.
    pub archive: PathBuf,
    /// The command line, as typed, for the archive.
    pub command: String,
}

/// What one real run takes besides the scenario's own length: starting
/// the deployment and the clients, and stopping them (measured on this
/// 2-core machine: about 1 s for a single node, 3 s for Sentinel, 5 s for
/// a cluster, which `redis-cli --cluster create` makes).
fn setup(topology: &Topology) -> Duration {
    Duration::from_secs(match topology {
        Topology::Single | Topology::PrimaryReplica { .. } | Topology::Redlock { .. } => 1,
        Topology::Sentinel { .. } => 3,
        Topology::Cluster { .. } => 5,
    })
}

/// Each row's `K` and why: unsafe files first, at what they need; safe
/// files share what the budget leaves, by each run's expected length.
fn plan(rows: &mut [Row], jobs: &[&Job], options: &AgreeOptions) -> Vec<u64> {
    let cost: Vec<Duration> = jobs
        .iter()
        .map(|job| job.scenario.duration + setup(&job.scenario.topology))
        .collect();
    let mut runs = vec![0; rows.len()];
    let mut spent = Duration::ZERO;
    for (index, row) in rows.iter_mut().enumerate() {
        if row.expect != Expect::Violation {
            continue;
        }
        let rate = row.simulated.rate();
        let (k, why) = match stats::runs_to_show(rate, 0.95) {
            Some(k) if k <= options.max_runs => (
                k,
                format!("an equal real rate shows in {k} runs with 95 % probability"),
            ),
            Some(k) => (
                options.max_runs,
                format!(
                    "capped at {}: an equal real rate shows with {:.0} % probability (95 % needs {k})",
                    options.max_runs,
                    100.0 * stats::chance_to_show(rate, options.max_runs)
                ),
            ),
            None => (
                options.max_runs,
                "the simulator never showed it: --max-runs".to_owned(),
            ),
        };
        runs[index] = k;
        row.plan = why;
        spent += cost[index] * u32::try_from(k).unwrap_or(u32::MAX);
    }
    let left = options.budget.saturating_sub(spent);
    let safe_cost: Duration = rows
        .iter()
        .zip(&cost)
        .filter(|(row, _)| row.expect == Expect::Safe)
        .map(|(_, cost)| *cost)
        .sum();
    let safe_k = if safe_cost.is_zero() {
        0
    } else {
        ((left.as_secs_f64() / safe_cost.as_secs_f64()) as u64).clamp(1, options.max_runs)
    };
    for (index, row) in rows.iter_mut().enumerate() {
        if row.expect == Expect::Safe {
            runs[index] = safe_k;
            row.plan = format!(
                "what the budget left: {safe_k} runs, which rule out a real rate above {:.1} % (95 %) if none shows it",
                100.0 * stats::ruled_out_above(safe_k)
            );
        }
    }
    runs
}

/// Runs seeds `0..runs` of `job` on real processes, keeping each history
/// in `archive`; the row's real tally and time, or why it stopped.
fn run_real(job: &Job, runs: u64, options: &AgreeOptions, archive: &mut Archive, row: &mut Row) {
    let started = Instant::now();
    let mut outcomes: Vec<SeedOutcome> = Vec::new();
    for seed in 0..runs {
        match chaos::run_seed(&job.scenario, seed, &options.real) {
            Ok(outcome) => {
                eprintln!(
                    "  {} real seed {seed} ({} of {runs}): {} entries, {}",
                    job.scenario.name,
                    seed + 1,
                    outcome.history.entries.len(),
                    if counts(&job.scenario, &outcome.verdict) {
                        "shows it"
                    } else if inconclusive(&job.scenario, &outcome.verdict) {
                        "proved nothing"
                    } else {
                        "does not show it"
                    }
                );
                if let Err(error) = archive.keep_history(&job.scenario, &outcome) {
                    row.not_run = Some(format!("archiving seed {seed}: {error}"));
                    break;
                }
                outcomes.push(outcome);
            }
            Err(error) => {
                row.not_run = Some(format!("seed {seed} could not run: {error}"));
                break;
            }
        }
    }
    row.real_ms = started.elapsed().as_millis();
    let (tally, summary) = fold(
        &job.scenario,
        &job.file,
        outcomes.iter().map(|o| (o.seed, &o.verdict)),
    );
    row.real = tally;
    archive.keep_report(&job.scenario, &outcomes);
    archive.add_summary(summary);
}

/// `sim agree`: plans, runs both sides, writes the archive and prints the
/// table. Exit status 0 when every row agrees, 1 when one does not, 2 for
/// bad input or an archive that cannot be written.
pub fn agree(jobs: &[Job], options: &AgreeOptions) -> ExitCode {
    let mut archive = match Archive::create(&options.archive, &options.command) {
        Ok(archive) => archive,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let mut rows = Vec::new();
    let mut runnable: Vec<&Job> = Vec::new();
    let all: Vec<u64> = (0..options.max_runs).collect();
    let sims_started = Instant::now();
    for job in jobs {
        let refused =
            chaos::check_binaries(&job.file, &job.scenario, &options.real).and_then(|_| {
                chaos::check_faults(&job.file, &job.scenario, &all, &options.real.target)
            });
        let (tally, summary) = simulate(&job.scenario, options.sim_seeds, options.jobs);
        eprintln!(
            "{}: the simulator shows it on {} of {} seeds",
            job.scenario.name, tally.showing, tally.seeds
        );
        archive.add_simulated(Summary {
            file: job.file.clone(),
            ..summary
        });
        let mut row = Row::new(job, tally);
        if let Err(error) = refused {
            row.not_run = Some(error.to_string());
        } else {
            runnable.push(job);
        }
        rows.push(row);
    }
    let sim_time = sims_started.elapsed();
    let mut planned: Vec<Row> = rows
        .iter()
        .filter(|r| r.not_run.is_none())
        .cloned()
        .collect();
    let runs = plan(&mut planned, &runnable, options);
    for ((job, row), runs) in runnable.iter().zip(&mut planned).zip(runs) {
        eprintln!("{}: {runs} real runs ({})", job.scenario.name, row.plan);
        run_real(job, runs, options, &mut archive, row);
        row.test();
    }
    let mut planned = planned.into_iter();
    for row in &mut rows {
        if row.not_run.is_none()
            && let Some(done) = planned.next()
        {
            *row = done;
        }
    }
    let header = archive.header(
        options.sim_seeds,
        options.budget,
        sim_time,
        options.real.network.partitions(),
    );
    let text = table::markdown(&rows, &header);
    emit(&text);
    if let Err(error) = archive.finish(&rows, &header, &text, jobs) {
        eprintln!("error: {error}");
        return ExitCode::from(2);
    }
    emit(&format!("archive: {}\n", archive.dir().display()));
    exit(&rows)
}

/// `sim agree --readme FILE`: fills the guarantees table's last column of
/// `readme` from the archive `from` (default: the one its marker names),
/// or with `check`, says whether it already is what that archive gives.
/// Exit status 0 when written or matching, 1 when `check` finds it
/// differs, 2 when the README or the archive cannot be read.
pub fn readme(readme: &Path, from: Option<&Path>, check: bool) -> ExitCode {
    let text = match std::fs::read_to_string(readme) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("error: reading {}: {error}", readme.display());
            return ExitCode::from(2);
        }
    };
    let base = readme.parent().unwrap_or(Path::new(""));
    // The archive as the README names it: relative to the README.
    let shown = match from {
        Some(dir) => dir
            .strip_prefix(base)
            .unwrap_or(dir)
            .to_string_lossy()
            .into_owned(),
        None => match readme::marked_archive(&text) {
            Some(dir) => dir.to_owned(),
            None => {
                eprintln!(
                    "error: {} names no archive (a line `<!-- agreement: DIR -->`): give --from DIR",
                    readme.display()
                );
                return ExitCode::from(2);
            }
        },
    };
    let rendered = match readme::render(&text, &base.join(&shown), &shown) {
        Ok(rendered) => rendered,
        Err(error) => {
            eprintln!("error: {}: {error}", readme.display());
            return ExitCode::from(2);
        }
    };
    if check {
        if rendered == text {
            emit(&format!(
                "{}: the agreement column is what {shown} says\n",
                readme.display()
            ));
            return ExitCode::SUCCESS;
        }
        let first = text
            .lines()
            .zip(rendered.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        eprintln!(
            "{}:{}: the agreement column is not what {shown} says (edited by hand?): run `sim agree --readme {} --from {shown}`\n  is:       {}\n  archive:  {}",
            readme.display(),
            first + 1,
            readme.display(),
            text.lines().nth(first).unwrap_or(""),
            rendered.lines().nth(first).unwrap_or("")
        );
        return ExitCode::FAILURE;
    }
    match std::fs::write(readme, rendered) {
        Ok(()) => {
            emit(&format!(
                "{}: the agreement column written from {shown}\n",
                readme.display()
            ));
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: writing {}: {error}", readme.display());
            ExitCode::from(2)
        }
    }
}

/// 0 when every row that ran agrees, else 1.
fn exit(rows: &[Row]) -> ExitCode {
    if rows.iter().all(|row| row.not_run.is_some() || row.agrees()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The archive directory a run without `--archive` writes: under
/// `target/agree/`, named by the UTC time it started.
pub fn default_archive(now: std::time::SystemTime) -> PathBuf {
    let stamp = humantime::format_rfc3339_seconds(now)
        .to_string()
        .replace(':', "");
    Path::new("target").join("agree").join(stamp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(expect: Expect, showing: u64, seeds: u64) -> Row {
        Row {
            file: "f.toml".into(),
            name: "f".into(),
            topology: "single".into(),
            server: "redis-7.0".into(),
            expect,
            property: None,
            simulated: Tally {
                seeds,
                showing,
                inconclusive: 0,
            },
            real: Tally::default(),
            plan: String::new(),
            fisher_p: 1.0,
            real_ms: 0,
            not_run: None,
        }
    }

    #[test]
    fn a_row_agrees_only_on_the_expected_verdict_with_valid_runs_and_like_rates() {
        let mut unsafe_row = row(Expect::Violation, 131, 1500);
        unsafe_row.real = Tally {
            seeds: 33,
            showing: 5,
            inconclusive: 0,
        };
        unsafe_row.test();
        assert!(unsafe_row.agrees(), "{unsafe_row:?}");
        // Never shown on real processes: disagrees.
        unsafe_row.real.showing = 0;
        unsafe_row.test();
        assert!(!unsafe_row.agrees());
        // Shown far more often than the simulator says: the rates differ.
        unsafe_row.real.showing = 30;
        unsafe_row.test();
        assert!(unsafe_row.fisher_p < 0.05 && !unsafe_row.agrees());
        // A safe file broken on real processes, or a run that proved
        // nothing: disagrees.
        let mut safe_row = row(Expect::Safe, 0, 1500);
        safe_row.real = Tally {
            seeds: 20,
            showing: 0,
            inconclusive: 0,
        };
        safe_row.test();
        assert!(safe_row.agrees());
        safe_row.real.inconclusive = 1;
        assert!(!safe_row.agrees());
        safe_row.real.inconclusive = 0;
        safe_row.real.showing = 1;
        safe_row.test();
        assert!(!safe_row.agrees());
    }

    #[test]
    fn unsafe_files_get_the_runs_to_show_their_rate_and_safe_ones_share_the_rest() {
        let scenario = |head: &str| {
            let text = format!("{head}[lock]\nttl = \"1s\"\n\n[clients]\ncount = 2\n");
            crate::scenario::parse_scenario("t.toml", &text).expect("parses")
        };
        let unsafe_job = Job {
            file: "u.toml".into(),
            scenario: scenario(
                "name = \"u\"\ndescription = \"d\"\nduration = \"9s\"\nexpect = \"violation\"\n",
            ),
        };
        let safe_job = Job {
            file: "s.toml".into(),
            scenario: scenario(
                "name = \"s\"\ndescription = \"d\"\nduration = \"9s\"\nexpect = \"safe\"\n",
            ),
        };
        let mut rows = vec![
            row(Expect::Violation, 131, 1500),
            row(Expect::Safe, 0, 1500),
        ];
        let options = AgreeOptions {
            // 33 unsafe runs of 10 s, then 170 s: 17 safe runs of 10 s.
            budget: Duration::from_secs(500),
            sim_seeds: 1500,
            max_runs: 60,
            jobs: 1,
            real: RealOptions {
                target: chaos::Target::Started,
                base_port: None,
                work_dir: PathBuf::new(),
                pids_file: None,
                servers: PathBuf::new(),
                network: chaos::netns::Network::Kernel,
                plants: Vec::new(),
            },
            archive: PathBuf::new(),
            command: String::new(),
        };
        let runs = plan(&mut rows, &[&unsafe_job, &safe_job], &options);
        assert_eq!(runs, vec![33, 17]);
        assert!(rows[1].plan.contains("16.2 %"), "{}", rows[1].plan);
        // A budget already spent still runs each safe file once.
        let options = AgreeOptions {
            budget: Duration::from_secs(10),
            ..options
        };
        assert_eq!(
            plan(&mut rows, &[&unsafe_job, &safe_job], &options),
            vec![33, 1]
        );
    }
}
