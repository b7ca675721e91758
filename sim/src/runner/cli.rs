//! What the `sim` command line does: load the scenario files, run them in
//! a [`Mode`](super::Mode), print the table, write the JSON and the JUnit
//! XML, and exit by the verdict. `main.rs` only turns arguments into these
//! calls.
//!
//! Exit status: 0 when every file met its expectation; 1 when one did
//! not; 2 for bad input (a file that does not parse, a fault refused on
//! real processes, a run that could not start); 3 when none missed but
//! one is inconclusive (a seed whose run proved nothing, and no violation
//! the file is about).

use std::{
    fmt::Write as _,
    io::IsTerminal,
    path::{Path, PathBuf},
    process::ExitCode,
};

use indicatif::{ProgressBar, ProgressStyle};

use super::output::emit;
use super::{
    Drive, Job, Progress, Real, RunFile, RunOptions, Shard, Status, Summary, Until, drive,
    inconclusive,
    junit::{self, Source},
    merge, seed_meets, table,
};
use crate::{
    chaos::{self, RealOptions},
    report, scenario, world,
};

/// The files a run writes its results to, besides the table it prints.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outputs<'a> {
    /// The results as JSON (what `sim merge` reads).
    pub json: Option<&'a Path>,
    /// The results as JUnit XML.
    pub junit: Option<&'a Path>,
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

/// Loads every scenario under `paths` (`scenarios/` when none); prints
/// each bad file's error.
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

/// `sim run`: every scenario under `paths` in the simulated world.
pub fn run(paths: Vec<PathBuf>, options: &RunOptions, outputs: Outputs<'_>) -> ExitCode {
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
        (Some(bar), Progress::SeedDone { scenario, .. }) => {
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
    let outcome = super::run(&jobs, options, &progress);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let file = RunFile {
        shard: options.shard,
        scenarios: outcome.summaries,
    };
    emit(&format!(
        "{}ran in {:.1}s on {} workers\n",
        table(&file),
        outcome.wall.as_secs_f64(),
        options.jobs
    ));
    finish(&file, Source::Simulated, outputs)
}

/// `sim chaos`: every scenario under `paths`, seeds `seeds` of each on
/// real processes; the same table, JSON and reports as `sim run`.
pub fn chaos(
    paths: Vec<PathBuf>,
    seeds: &[u64],
    options: RealOptions,
    report_dir: &Path,
    outputs: Outputs<'_>,
    history: bool,
    until: Until,
) -> ExitCode {
    let jobs = match load_jobs(paths) {
        Ok(jobs) => jobs,
        Err(code) => return code,
    };
    // Refuse before starting anything.
    let mut servers = Vec::new();
    for job in &jobs {
        // A plant whose bug cannot show in this file would make its
        // positive control pass for nothing.
        if let Some(why) = options
            .plants
            .iter()
            .find_map(|plant| plant.refusal(&job.scenario))
        {
            eprintln!("error: {}: {why}", job.file);
            return ExitCode::from(2);
        }
        let checked = chaos::check_binaries(&job.file, &job.scenario, &options).and_then(|found| {
            chaos::check_faults(&job.file, &job.scenario, seeds, &options.target).map(|()| found)
        });
        match checked {
            Ok(found) => servers.push(found),
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(2);
            }
        }
    }
    let progress = |event: Progress<'_>| {
        if let Progress::SeedDone { scenario, outcome } = event {
            eprintln!(
                "  {scenario} seed {}: {} entries, {}",
                outcome.seed,
                outcome.history.entries.len(),
                seed_words(outcome),
            );
            if history {
                emit(&outcome.history.to_json_lines());
            }
        }
    };
    let per_job: Vec<Vec<u64>> = jobs.iter().map(|_| seeds.to_vec()).collect();
    let mechanisms: Vec<Vec<String>> = jobs
        .iter()
        .map(|job| mechanisms(&job.scenario, &options.network))
        .collect();
    let plants: Vec<String> = options.plants.iter().map(|p| p.describe()).collect();
    let mode = Real { options };
    let outcome = match drive(
        &jobs,
        &per_job,
        Drive {
            shard: Shard::WHOLE,
            report_dir: Some(report_dir),
            until,
        },
        &mode,
        &progress,
    ) {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let file = RunFile {
        shard: Shard::WHOLE,
        scenarios: outcome.summaries,
    };
    let mut text = table(&file);
    for ((job, found), mechanisms) in jobs.iter().zip(&servers).zip(&mechanisms) {
        if let Some(found) = found {
            let _ = writeln!(
                text,
                "{}: {} ({}), each node checked from its INFO server",
                job.scenario.name,
                found.identity(),
                found.server().display()
            );
        }
        for line in mechanisms.iter().chain(&plants) {
            let _ = writeln!(text, "{}: {line}", job.scenario.name);
        }
    }
    let _ = writeln!(
        text,
        "ran {} scenarios x {} real runs in {:.1}s",
        jobs.len(),
        seeds.len(),
        outcome.wall.as_secs_f64()
    );
    emit(&text);
    finish(&file, Source::Real, outputs)
}

/// How a real run of `scenario` makes each kind of fault its file names,
/// one line per kind and target (partitions as `network` says); a mix's
/// kinds on a server and on a client where the two differ.
fn mechanisms(scenario: &crate::config::Scenario, network: &chaos::netns::Network) -> Vec<String> {
    use crate::config::{FaultKind, Target};
    let name = |kind| crate::scenario::names::fault_kind(kind).name;
    let mut lines = std::collections::BTreeSet::new();
    for fault in &scenario.faults {
        let server = matches!(fault.target, Target::Redis(_) | Target::Primary);
        lines.insert(format!(
            "{} on {}: {}",
            name(fault.kind),
            fault.target,
            chaos::netns::mechanism(fault.kind, server, network)
        ));
    }
    for &kind in scenario.mix.iter().flat_map(|mix| &mix.kinds) {
        let both = matches!(
            kind,
            FaultKind::Crash | FaultKind::ClockDrift | FaultKind::ClockJump
        );
        for server in [true, false].into_iter().take(if both { 2 } else { 1 }) {
            let on = match (both, server) {
                (false, _) => "",
                (true, true) => " on a server",
                (true, false) => " on a client",
            };
            lines.insert(format!(
                "{} (mix){on}: {}",
                name(kind),
                chaos::netns::mechanism(kind, server, network)
            ));
        }
    }
    lines.into_iter().collect()
}

/// What one seed showed, in words: the properties it violated, or none.
fn seed_words(outcome: &crate::outcome::SeedOutcome) -> String {
    let violated: Vec<&str> = outcome
        .verdict
        .violated()
        .into_iter()
        .map(scenario::property_name)
        .collect();
    let words = if violated.is_empty() {
        "no violations".to_owned()
    } else {
        format!("violated {}", violated.join(", "))
    };
    if outcome.verdict.invalid.is_empty() {
        words
    } else {
        format!("{words}; not valid: {}", outcome.verdict.invalid.join("; "))
    }
}

/// Writes `file` as JSON and as JUnit XML where asked, and exits by its
/// verdict.
fn finish(file: &RunFile, source: Source, outputs: Outputs<'_>) -> ExitCode {
    if let Some(path) = outputs.json {
        let text = serde_json::to_string_pretty(file).unwrap_or_default();
        if let Err(error) = std::fs::write(path, text) {
            eprintln!("error: cannot write {}: {error}", path.display());
            return ExitCode::from(2);
        }
    }
    if let Some(path) = outputs.junit {
        let written = std::fs::File::create(path).and_then(|out| {
            let mut out = std::io::BufWriter::new(out);
            junit::write(file, source, &mut out)?;
            std::io::Write::flush(&mut out)
        });
        if let Err(error) = written {
            eprintln!("error: cannot write {}: {error}", path.display());
            return ExitCode::from(2);
        }
    }
    exit_code(file)
}

/// The exit status of a finished run: 1 when a scenario missed its
/// expectation, else 3 when one is inconclusive (a seed proved nothing and
/// none showed what the file is about), else 0.
pub fn exit_code(file: &RunFile) -> ExitCode {
    if file.scenarios.iter().any(Summary::fails_run) {
        ExitCode::FAILURE
    } else if file
        .scenarios
        .iter()
        .any(|s| s.status == Status::Inconclusive)
    {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    }
}

/// `sim merge`: the shards' `--json` files as one run (of `sim run`: only
/// it runs shards).
pub fn merge_files(paths: &[PathBuf], outputs: Outputs<'_>) -> ExitCode {
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
    match merge(&files) {
        Ok(merged) => {
            emit(&table(&merged));
            finish(&merged, Source::Simulated, outputs)
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
    }
}

/// `sim agree`: the agreement table of every scenario under `paths` (see
/// [`super::agree`]).
pub fn agree(paths: Vec<PathBuf>, options: &super::agree::AgreeOptions) -> ExitCode {
    match load_jobs(paths) {
        Ok(jobs) => super::agree::agree(&jobs, options),
        Err(code) => code,
    }
}

/// `sim replay`: one seed of one file, exactly, with its report.
pub fn replay(file: &Path, seed: u64, history: bool, report_dir: &Path) -> ExitCode {
    let scenario = match scenario::load(file) {
        Ok(scenario) => scenario,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let outcome = world::run_seed(&scenario, seed);
    // One text, written once: a reader that stops early (`| head`) ends
    // the output, not the program.
    let mut text = String::new();
    if history {
        text.push_str(&outcome.history.to_json_lines());
    }
    let _ = writeln!(text, "scenario: {}  seed: {seed}", scenario.name);
    let _ = writeln!(
        text,
        "history: {} entries, hash {}",
        outcome.history.entries.len(),
        outcome.history.hash()
    );
    if outcome.verdict.violations.is_empty() {
        let _ = writeln!(text, "verdict: no violations");
    }
    for violation in &outcome.verdict.violations {
        let _ = writeln!(
            text,
            "violation: {} at {:?}: {}",
            scenario::property_name(violation.property),
            violation.at,
            violation.message
        );
    }
    let _ = writeln!(
        text,
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
        Ok(()) => {
            let _ = writeln!(text, "report: {}", path.display());
        }
        Err(error) => eprintln!("warning: cannot write {}: {error}", path.display()),
    }
    for reason in &outcome.verdict.invalid {
        let _ = writeln!(text, "not valid: {reason}");
    }
    let inconclusive = inconclusive(&scenario, &outcome.verdict);
    if seed_meets(&scenario, &outcome.verdict) && inconclusive {
        let _ = writeln!(text, "inconclusive: the run proves nothing");
    }
    emit(&text);
    if !seed_meets(&scenario, &outcome.verdict) {
        ExitCode::FAILURE
    } else if inconclusive {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    }
}

/// `sim schema`: the scenario files' JSON Schema, on stdout.
pub fn schema() -> ExitCode {
    match serde_json::to_string_pretty(&scenario::json_schema()) {
        Ok(text) => {
            emit(&format!("{text}\n"));
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
    }
}
