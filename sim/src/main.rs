//! The `sim` command line: runs scenario files across many seeds and says
//! whether each met its expectation.
//!
//! ```text
//! sim run [PATHS…] [--seeds N] [--seed S] [--jobs J] [--json FILE] [--report-dir DIR]
//! sim replay FILE --seed S [--history] [--report-dir DIR]
//! ```

use std::{
    collections::{BTreeMap, BTreeSet},
    io::IsTerminal,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
        mpsc,
    },
};

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use sim::{
    config::{Expect, Property, Scenario},
    outcome::{ConcreteFault, Verdict},
    report, scenario, shrink, world,
};

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
        /// Parallel workers (default: available cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Write a machine-readable summary here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Where timeline reports of violations go.
        #[arg(long, default_value = "target/sim-reports")]
        report_dir: PathBuf,
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
            jobs,
            json,
            report_dir,
        } => run(paths, seeds, seed, jobs, json, &report_dir),
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

/// What one seed contributes to its scenario's summary.
struct SeedResult {
    scenario: usize,
    seed: u64,
    verdict: Verdict,
}

#[derive(Debug, Default, Serialize)]
struct Summary {
    name: String,
    file: String,
    expect: String,
    property: Option<Property>,
    seeds: u64,
    /// Seeds that violated each property.
    violations: BTreeMap<String, u64>,
    facts: BTreeSet<String>,
    first_failing_seed: Option<u64>,
    met: bool,
    wall_ms: u128,
    report: Option<String>,
    shrunk_schedule: Option<Vec<ConcreteFault>>,
}

fn property_name(property: Property) -> String {
    // Serialises to the scenario-file spelling, e.g. "lease-exclusion".
    serde_json::to_value(property)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{property:?}"))
}

/// Whether `verdict` violates what `scenario`'s expectation is about: its
/// `property` if it names one, any property otherwise.
fn counts(scenario: &Scenario, verdict: &Verdict) -> bool {
    match scenario.property {
        Some(property) => verdict.violated().contains(&property),
        None => !verdict.violations.is_empty(),
    }
}

fn run(
    paths: Vec<PathBuf>,
    seeds: Option<u64>,
    only_seed: Option<u64>,
    jobs: Option<usize>,
    json: Option<PathBuf>,
    report_dir: &Path,
) -> ExitCode {
    let paths = if paths.is_empty() {
        vec![PathBuf::from("scenarios")]
    } else {
        paths
    };
    let files = match scenario_files(&paths) {
        Ok(files) if !files.is_empty() => files,
        Ok(_) => {
            eprintln!("error: no scenario files (*.toml) in {paths:?}");
            return ExitCode::from(2);
        }
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let mut scenarios = Vec::new();
    let mut bad = false;
    for file in &files {
        match scenario::load(file) {
            Ok(scenario) => scenarios.push(scenario),
            Err(error) => {
                eprintln!("{error}");
                bad = true;
            }
        }
    }
    if bad {
        return ExitCode::from(2);
    }
    let scenarios = Arc::new(scenarios);
    let mut tasks = Vec::new();
    for (index, scenario) in scenarios.iter().enumerate() {
        match only_seed {
            Some(seed) => tasks.push((index, seed)),
            None => tasks.extend((0..seeds.unwrap_or(scenario.seeds)).map(|seed| (index, seed))),
        }
    }
    let tasks = Arc::new(tasks);
    let jobs = jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .max(1);

    // Wall-clock time is reported, never used by the simulation itself.
    let started = std::time::Instant::now();
    let progress = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(tasks.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} seeds {elapsed} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Some(bar)
    } else {
        eprintln!(
            "running {} seeds of {} scenarios on {jobs} workers",
            tasks.len(),
            scenarios.len()
        );
        None
    };

    let next = Arc::new(AtomicUsize::new(0));
    let (sender, results) = mpsc::channel::<SeedResult>();
    let mut workers = Vec::new();
    for _ in 0..jobs {
        let (tasks, scenarios, next, sender) = (
            Arc::clone(&tasks),
            Arc::clone(&scenarios),
            Arc::clone(&next),
            sender.clone(),
        );
        workers.push(std::thread::spawn(move || {
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(scenario, seed)) = tasks.get(index) else {
                    break;
                };
                let outcome = world::run_seed(&scenarios[scenario], seed);
                let result = SeedResult {
                    scenario,
                    seed,
                    verdict: outcome.verdict,
                };
                if sender.send(result).is_err() {
                    break;
                }
            }
        }));
    }
    drop(sender);

    let mut summaries: Vec<Summary> = scenarios
        .iter()
        .zip(&files)
        .map(|(scenario, file)| Summary {
            name: scenario.name.clone(),
            file: file.display().to_string(),
            expect: format!("{:?}", scenario.expect).to_lowercase(),
            property: scenario.property,
            ..Summary::default()
        })
        .collect();
    let mut finished_per_scenario = vec![0u64; scenarios.len()];
    let totals: Vec<u64> = (0..scenarios.len())
        .map(|i| tasks.iter().filter(|(s, _)| *s == i).count() as u64)
        .collect();
    let mut scenario_started = vec![None; scenarios.len()];
    for result in results {
        let summary = &mut summaries[result.scenario];
        scenario_started[result.scenario].get_or_insert(started.elapsed());
        summary.seeds += 1;
        for property in result.verdict.violated() {
            *summary
                .violations
                .entry(property_name(property))
                .or_default() += 1;
        }
        summary.facts.extend(result.verdict.facts.iter().cloned());
        let scenario = &scenarios[result.scenario];
        // A seed "fails" the way the expectation is about: it shows the
        // violation (expect = violation) or breaks safety (expect = safe).
        let failing = counts(scenario, &result.verdict);
        if failing && summary.first_failing_seed.is_none_or(|s| result.seed < s) {
            summary.first_failing_seed = Some(result.seed);
        }
        finished_per_scenario[result.scenario] += 1;
        if finished_per_scenario[result.scenario] == totals[result.scenario] {
            let began = scenario_started[result.scenario].unwrap_or_default();
            summary.wall_ms = started.elapsed().saturating_sub(began).as_millis();
            if progress.is_none() {
                eprintln!("  {} done ({} seeds)", summary.name, summary.seeds);
            }
        }
        if let Some(bar) = &progress {
            bar.set_message(scenario.name.clone());
            bar.inc(1);
        }
    }
    for worker in workers {
        let _ = worker.join();
    }
    if let Some(bar) = &progress {
        bar.finish_and_clear();
    }

    // Expectations, then a shrunk report for each scenario that violated.
    for (summary, scenario) in summaries.iter_mut().zip(scenarios.iter()) {
        let found = summary.first_failing_seed.is_some();
        summary.met = match scenario.expect {
            Expect::Violation => found,
            Expect::Safe => !found,
        };
        let any_violation = !summary.violations.is_empty();
        if !any_violation {
            continue;
        }
        let seed = summary.first_failing_seed.unwrap_or(0);
        let outcome = world::run_seed(scenario, seed);
        let Some(property) = scenario
            .property
            .filter(|p| outcome.verdict.violated().contains(p))
            .or_else(|| outcome.verdict.violated().into_iter().next())
        else {
            continue;
        };
        let shrunk = shrink::shrink(scenario, &outcome, property);
        let html = report::render_html(scenario, &shrunk, Some(&shrunk.schedule));
        let path = report_dir.join(format!("{}-{seed}.html", scenario.name));
        match std::fs::create_dir_all(report_dir).and_then(|()| std::fs::write(&path, html)) {
            Ok(()) => summary.report = Some(path.display().to_string()),
            Err(error) => eprintln!("warning: cannot write {}: {error}", path.display()),
        }
        summary.shrunk_schedule = Some(shrunk.schedule);
    }

    print_table(&summaries, started.elapsed());
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&summaries).unwrap_or_default();
        if let Err(error) = std::fs::write(&path, text) {
            eprintln!("error: cannot write {}: {error}", path.display());
            return ExitCode::from(2);
        }
    }
    if summaries.iter().all(|s| s.met) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn print_table(summaries: &[Summary], wall: std::time::Duration) {
    let header = [
        "scenario",
        "expect",
        "seeds",
        "violations (seeds)",
        "first failing",
        "met",
        "wall",
        "facts",
    ];
    let rows: Vec<[String; 8]> = summaries
        .iter()
        .map(|s| {
            let violations = if s.violations.is_empty() {
                "-".to_owned()
            } else {
                s.violations
                    .iter()
                    .map(|(p, n)| format!("{p}:{n}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let expect = match s.property {
                Some(p) => format!("{} ({})", s.expect, property_name(p)),
                None => s.expect.clone(),
            };
            [
                s.name.clone(),
                expect,
                s.seeds.to_string(),
                violations,
                s.first_failing_seed
                    .map_or("-".to_owned(), |seed| seed.to_string()),
                if s.met {
                    "✓".to_owned()
                } else {
                    "✗ MISSED".to_owned()
                },
                format!("{:.1}s", s.wall_ms as f64 / 1000.0),
                s.facts.iter().cloned().collect::<Vec<_>>().join(", "),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row).take(7) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i < 7 {
                out.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            } else {
                out.push_str(cell);
            }
        }
        println!("{}", out.trim_end());
    };
    line(&header.map(str::to_owned));
    for row in &rows {
        line(row);
    }
    let met = summaries.iter().filter(|s| s.met).count();
    let seeds: u64 = summaries.iter().map(|s| s.seeds).sum();
    println!(
        "\n{met} of {} scenarios met their expectation ({seeds} seeds in {:.1}s)",
        summaries.len(),
        wall.as_secs_f64()
    );
    for summary in summaries.iter().filter(|s| s.report.is_some()) {
        if let Some(report) = &summary.report {
            println!("report: {report}");
        }
    }
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
            property_name(violation.property),
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
    let met = match scenario.expect {
        Expect::Violation => counts(&scenario, &outcome.verdict),
        Expect::Safe => !counts(&scenario, &outcome.verdict),
    };
    if met {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
