//! The `sim` command line: runs scenario files across many seeds and says
//! whether each met its expectation.
//!
//! ```text
//! sim run [PATHS…] [--seeds N] [--seed S] [--shard I/N] [--jobs J] [--json FILE] [--report-dir DIR]
//! sim merge FILE…
//! sim replay FILE --seed S [--history] [--report-dir DIR]
//! sim chaos [PATHS…] [--runs K] [--seed S] [--target redis://127.0.0.1:PORT] [--base-port P]
//! ```
//!
//! `sim chaos` runs the same scenario files against real processes (see
//! `sim::chaos`); `chaos-client` and `chaos-exec` are its own children.
#![warn(clippy::too_many_lines)]

use std::{
    io::IsTerminal,
    path::{Path, PathBuf},
    process::ExitCode,
};

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use sim::{
    chaos, report,
    runner::{self, Job, Progress, RunFile, RunOptions, Shard},
    scenario, world,
};

/// The simulator allocates and frees small objects at a high rate (frames,
/// futures, history entries): under glibc's allocator about 15 % of a
/// scenario run's CPU was in `malloc` and `free`. Allocation addresses never
/// reach the simulation's behaviour, so replays stay byte-identical.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "sim",
    about = "Deterministic fault simulation of the Redis lock"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run scenario files (or directories of them) across their seeds.
    Run {
        /// Scenario files or directories (default: scenarios/).
        paths: Vec<PathBuf>,
        /// Seeds per scenario (default: each file's `seeds`).
        #[arg(long)]
        seeds: Option<u64>,
        /// Run only this seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Run shard I of N (1-based): the seeds s with s mod N = I - 1 of
        /// every scenario. `sim merge` combines the shards' --json files.
        #[arg(long)]
        shard: Option<Shard>,
        /// Parallel workers (default: available cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Write the results here, as JSON (what `sim merge` reads).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Where timeline reports of violations go.
        #[arg(long, default_value = "target/sim-reports")]
        report_dir: PathBuf,
    },
    /// Combine the --json results of every shard of a run into the table
    /// and exit code of the whole run.
    Merge {
        /// One --json file per shard.
        files: Vec<PathBuf>,
        /// Write the merged results here, as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Run scenario files against REAL processes on loopback
    /// (redis-server, redis-sentinel, a redis-cli-made cluster; each client
    /// its own OS process running the production adapter), applying the
    /// fault schedule the simulator draws for the same seeds, and check the
    /// real history with the same checkers. Faults real processes cannot
    /// take (a server clock jump) are refused by name and file:line:col.
    Chaos {
        /// Scenario files or directories (default: scenarios/).
        paths: Vec<PathBuf>,
        /// Real runs per scenario: seeds 0..K.
        #[arg(long, default_value_t = 3)]
        runs: u64,
        /// Run only this seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Run against your own Redis (redis://127.0.0.1:PORT) instead of
        /// starting one: client-side faults only, others refused by name.
        #[arg(long)]
        target: Option<String>,
        /// Use ports from here up (each must be free) instead of letting
        /// the kernel pick free ones.
        #[arg(long)]
        base_port: Option<u16>,
        /// Write the results here, as JSON (the `sim run --json` schema).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Where timeline reports of violations go.
        #[arg(long, default_value = "target/chaos-reports")]
        report_dir: PathBuf,
        /// Where the servers' logs and data go while a run lasts.
        #[arg(long, default_value = "target/chaos-work")]
        work_dir: PathBuf,
        /// Print each run's history as JSON lines.
        #[arg(long)]
        history: bool,
        /// Append the pid of every process the run starts to this file
        /// (for tests that check none is left).
        #[arg(long, hide = true)]
        pids_file: Option<PathBuf>,
    },
    /// (internal) A chaos client process.
    #[command(hide = true)]
    ChaosClient {
        /// Its arguments, as JSON.
        args: String,
    },
    /// (internal) Arms the death signal, then runs PROGRAM.
    #[command(hide = true)]
    ChaosExec {
        /// The program.
        program: String,
        /// Its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Re-run one seed of one scenario exactly.
    Replay {
        /// The scenario file.
        file: PathBuf,
        /// The seed.
        #[arg(long)]
        seed: u64,
        /// Print the history as JSON lines.
        #[arg(long)]
        history: bool,
        /// Where the timeline report goes.
        #[arg(long, default_value = "target/sim-reports")]
        report_dir: PathBuf,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run {
            paths,
            seeds,
            seed,
            shard,
            jobs,
            json,
            report_dir,
        } => {
            let options = RunOptions {
                seeds,
                only_seed: seed,
                shard: shard.unwrap_or(Shard::WHOLE),
                jobs: jobs.unwrap_or_else(runner::available_jobs).max(1),
                report_dir: Some(report_dir),
                ..RunOptions::default()
            };
            run(paths, &options, json.as_deref())
        }
        Command::Merge { files, json } => merge(&files, json.as_deref()),
        Command::Chaos {
            paths,
            runs,
            seed,
            target,
            base_port,
            json,
            report_dir,
            work_dir,
            history,
            pids_file,
        } => {
            let target = match target.as_deref().map(chaos::Target::parse_url) {
                None => chaos::Target::Started,
                Some(Ok(target)) => target,
                Some(Err(error)) => {
                    eprintln!("error: {error}");
                    return ExitCode::from(2);
                }
            };
            let options = chaos::RealOptions {
                target,
                base_port,
                work_dir,
                pids_file,
            };
            let seeds: Vec<u64> = seed.map_or_else(|| (0..runs).collect(), |seed| vec![seed]);
            run_chaos(
                paths,
                &seeds,
                &options,
                &report_dir,
                json.as_deref(),
                history,
            )
        }
        Command::ChaosClient { args } => match chaos::client::main(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error}");
                ExitCode::from(2)
            }
        },
        Command::ChaosExec { program, args } => {
            let error = chaos::procs::exec_child(&program, &args);
            eprintln!("error: cannot run {program}: {error}");
            ExitCode::from(127)
        }
        Command::Replay {
            file,
            seed,
            history,
            report_dir,
        } => replay(&file, seed, history, &report_dir),
    }
}

/// Every `*.toml` under the given paths, in a stable order.
fn scenario_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let entries =
                std::fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut found: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|p| p.extension().is_some_and(|ext| ext == "toml"))
                .collect();
            found.sort();
            files.extend(found);
        } else if path.is_file() {
            files.push(path.clone());
        } else {
            return Err(format!("{}: no such file or directory", path.display()));
        }
    }
    Ok(files)
}

/// Loads every scenario under `paths`; prints each bad file's error.
fn load_jobs(paths: Vec<PathBuf>) -> Result<Vec<Job>, ExitCode> {
    let paths = if paths.is_empty() {
        vec![PathBuf::from("scenarios")]
    } else {
        paths
    };
    let files = match scenario_files(&paths) {
        Ok(files) if !files.is_empty() => files,
        Ok(_) => {
            eprintln!("error: no scenario files (*.toml) in {paths:?}");
            return Err(ExitCode::from(2));
        }
        Err(error) => {
            eprintln!("error: {error}");
            return Err(ExitCode::from(2));
        }
    };
    let mut jobs = Vec::new();
    let mut bad = false;
    for file in &files {
        match scenario::load(file) {
            Ok(scenario) => jobs.push(Job {
                file: file.display().to_string(),
                scenario,
            }),
            Err(error) => {
                eprintln!("{error}");
                bad = true;
            }
        }
    }
    if bad {
        Err(ExitCode::from(2))
    } else {
        Ok(jobs)
    }
}

fn run(paths: Vec<PathBuf>, options: &RunOptions, json: Option<&Path>) -> ExitCode {
    let jobs = match load_jobs(paths) {
        Ok(jobs) => jobs,
        Err(code) => return code,
    };
    let bar = std::io::stderr()
        .is_terminal()
        .then(|| ProgressBar::new(0))
        .inspect(|bar| {
            bar.set_style(
                ProgressStyle::with_template("{bar:40} {pos}/{len} seeds {elapsed} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
        });
    let progress = |event: Progress<'_>| match (&bar, event) {
        (Some(bar), Progress::Started { total }) => bar.set_length(total as u64),
        (Some(bar), Progress::SeedDone { scenario }) => {
            bar.set_message(scenario.to_owned());
            bar.inc(1);
        }
        (None, Progress::Started { total }) => eprintln!(
            "running {total} seeds of {} scenarios on {} workers{}",
            jobs.len(),
            options.jobs,
            if options.shard == Shard::WHOLE {
                String::new()
            } else {
                format!(", shard {}", options.shard)
            }
        ),
        (None, Progress::ScenarioDone { scenario, seeds }) => {
            eprintln!("  {scenario} done ({seeds} seeds)");
        }
        _ => {}
    };
    let outcome = runner::run(&jobs, options, &progress);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let file = RunFile {
        shard: options.shard,
        scenarios: outcome.summaries,
    };
    print!("{}", runner::table(&file));
    println!(
        "ran in {:.1}s on {} workers",
        outcome.wall.as_secs_f64(),
        options.jobs
    );
    finish(&file, json)
}

/// Writes `file` as JSON if asked, and exits by its verdict.
fn finish(file: &RunFile, json: Option<&Path>) -> ExitCode {
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(file).unwrap_or_default();
        if let Err(error) = std::fs::write(path, text) {
            eprintln!("error: cannot write {}: {error}", path.display());
            return ExitCode::from(2);
        }
    }
    if file.scenarios.iter().any(runner::Summary::fails_run) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn merge(paths: &[PathBuf], json: Option<&Path>) -> ExitCode {
    let mut files = Vec::new();
    for path in paths {
        let read = std::fs::read_to_string(path)
            .map_err(|error| error.to_string())
            .and_then(|text| {
                serde_json::from_str::<RunFile>(&text).map_err(|error| error.to_string())
            });
        match read {
            Ok(file) => files.push(file),
            Err(error) => {
                eprintln!("error: {}: {error}", path.display());
                return ExitCode::from(2);
            }
        }
    }
    match runner::merge(&files) {
        Ok(merged) => {
            print!("{}", runner::table(&merged));
            finish(&merged, json)
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
    }
}

/// `sim chaos`: every scenario, each seed on real processes; the same
/// table, JSON and reports as `sim run`.
fn run_chaos(
    paths: Vec<PathBuf>,
    seeds: &[u64],
    options: &chaos::RealOptions,
    report_dir: &Path,
    json: Option<&Path>,
    history: bool,
) -> ExitCode {
    let jobs = match load_jobs(paths) {
        Ok(jobs) => jobs,
        Err(code) => return code,
    };
    // Refuse before starting anything.
    for job in &jobs {
        let checked = chaos::check_binaries(&job.scenario, &options.target)
            .and_then(|()| chaos::check_faults(&job.file, &job.scenario, seeds, &options.target));
        if let Err(error) = checked {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    }
    let started = std::time::Instant::now();
    let mut summaries = Vec::new();
    for job in &jobs {
        let scenario = &job.scenario;
        let mut summary = runner::Summary::new(&job.file, scenario, Shard::WHOLE);
        let began = std::time::Instant::now();
        let mut reported = false;
        for &seed in seeds {
            let (outcome, schedule) = match chaos::run_seed(scenario, seed, options) {
                Ok(done) => done,
                Err(error) => {
                    eprintln!("error: {} seed {seed}: {error}", scenario.name);
                    return ExitCode::from(2);
                }
            };
            let violated: Vec<&str> = outcome
                .verdict
                .violated()
                .into_iter()
                .map(scenario::property_name)
                .collect();
            eprintln!(
                "  {} seed {seed}: {} entries, {}",
                scenario.name,
                outcome.history.entries.len(),
                if violated.is_empty() {
                    "no violations".to_owned()
                } else {
                    format!("violated {}", violated.join(", "))
                }
            );
            if history {
                print!("{}", outcome.history.to_json_lines());
            }
            summary.add(scenario, seed, &outcome.verdict);
            if !reported && !outcome.verdict.violations.is_empty() {
                reported = true;
                let html = report::render_html(scenario, &outcome, Some(&schedule));
                let path = report_dir.join(format!("{}-real-{seed}.html", scenario.name));
                match std::fs::create_dir_all(report_dir).and_then(|()| std::fs::write(&path, html))
                {
                    Ok(()) => summary.report = Some(path.display().to_string()),
                    Err(error) => eprintln!("warning: cannot write {}: {error}", path.display()),
                }
            }
        }
        summary.wall_ms = began.elapsed().as_millis();
        summary.met = summary.meets(scenario.expect);
        summaries.push(summary);
    }
    let file = RunFile {
        shard: Shard::WHOLE,
        scenarios: summaries,
    };
    print!("{}", runner::table(&file));
    println!(
        "ran {} scenarios x {} real runs in {:.1}s",
        jobs.len(),
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
    finish(&file, json)
}

fn replay(file: &Path, seed: u64, history: bool, report_dir: &Path) -> ExitCode {
    let scenario = match scenario::load(file) {
        Ok(scenario) => scenario,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let outcome = world::run_seed(&scenario, seed);
    if history {
        print!("{}", outcome.history.to_json_lines());
    }
    println!("scenario: {}  seed: {seed}", scenario.name);
    println!(
        "history: {} entries, hash {}",
        outcome.history.entries.len(),
        outcome.history.hash()
    );
    if outcome.verdict.violations.is_empty() {
        println!("verdict: no violations");
    }
    for violation in &outcome.verdict.violations {
        println!(
            "violation: {} at {:?}: {}",
            scenario::property_name(violation.property),
            violation.at,
            violation.message
        );
    }
    println!(
        "facts: {}",
        outcome
            .verdict
            .facts
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    );
    let html = report::render_html(&scenario, &outcome, None);
    let path = report_dir.join(format!("{}-{seed}.html", scenario.name));
    match std::fs::create_dir_all(report_dir).and_then(|()| std::fs::write(&path, html)) {
        Ok(()) => println!("report: {}", path.display()),
        Err(error) => eprintln!("warning: cannot write {}: {error}", path.display()),
    }
    if runner::seed_meets(&scenario, &outcome.verdict) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
