//! The archive a `sim agree` run leaves, and the recheck that recomputes
//! its table from it alone.
//!
//! ```text
//! DIR/README.md                 what the files are, and the recheck command
//! DIR/table.md, table.json      the table, and its rows and header as data
//! DIR/real.json, simulated.json both sides' summaries (`sim run --json`'s schema)
//! DIR/scenarios/NAME.toml       each file as it ran
//! DIR/histories/NAME/real-SEED.jsonl.gz   every real history, as JSON lines
//! DIR/reports/NAME-real-SEED.html         the first real run that showed it
//! ```

use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::ExitCode,
    time::{Duration, SystemTime},
};

use flate2::{Compression, read::GzDecoder, write::GzEncoder};
use serde::{Deserialize, Serialize};

use super::{
    row::{Row, Tally, simulate},
    table::Header,
};
use crate::{
    chaos::REAL_SLACK,
    checker,
    config::Scenario,
    history::{Entry, History},
    outcome::SeedOutcome,
    report,
    runner::{RunFile, Shard, Summary, output::emit},
    scenario,
    schedule::draw_schedule,
};

/// Why an archive could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// The directory exists and holds files: an archive is never
    /// overwritten.
    #[error(
        "{0} exists and is not empty: an archive is never overwritten (give --archive a new directory)"
    )]
    Exists(PathBuf),
    /// A file could not be written or read.
    #[error("{what}: {source}")]
    Io {
        /// Which file, doing what.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    /// A kept file does not parse.
    #[error("{what}: {message}")]
    Bad {
        /// Which file.
        what: String,
        /// What is wrong with it.
        message: String,
    },
}

fn io(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> ArchiveError {
    let what = what.to_string();
    move |source| ArchiveError::Io { what, source }
}

/// What `table.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Kept {
    header: Header,
    rows: Vec<Row>,
}

/// The header and rows of the table kept in the archive `dir`
/// (`table.json`).
pub(super) fn load_table(dir: &Path) -> Result<(Header, Vec<Row>), ArchiveError> {
    let path = dir.join("table.json");
    let text = std::fs::read_to_string(&path).map_err(io(format!("reading {}", path.display())))?;
    let kept: Kept = serde_json::from_str(&text).map_err(|error| ArchiveError::Bad {
        what: path.display().to_string(),
        message: error.to_string(),
    })?;
    Ok((kept.header, kept.rows))
}

/// An archive being written.
pub(super) struct Archive {
    dir: PathBuf,
    command: String,
    started: SystemTime,
    /// The commit and the machine when the run started (read then: the
    /// tree may change while it runs).
    commit: String,
    machine: String,
    real: Vec<Summary>,
    simulated: Vec<Summary>,
}

impl Archive {
    /// Creates `dir` (new or empty) and its folders.
    pub(super) fn create(dir: &Path, command: &str) -> Result<Self, ArchiveError> {
        if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
            return Err(ArchiveError::Exists(dir.to_owned()));
        }
        for sub in ["histories", "reports", "scenarios"] {
            let path = dir.join(sub);
            std::fs::create_dir_all(&path).map_err(io(format!("creating {}", path.display())))?;
        }
        Ok(Self {
            dir: dir.to_owned(),
            command: command.to_owned(),
            started: SystemTime::now(),
            commit: commit(),
            machine: machine(),
            real: Vec::new(),
            simulated: Vec::new(),
        })
    }

    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `outcome`'s history as `histories/NAME/real-SEED.jsonl.gz`.
    pub(super) fn keep_history(
        &self,
        scenario: &Scenario,
        outcome: &SeedOutcome,
    ) -> Result<(), ArchiveError> {
        let dir = self.dir.join("histories").join(&scenario.name);
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        let path = history_path(&self.dir, &scenario.name, outcome.seed);
        let file =
            std::fs::File::create(&path).map_err(io(format!("creating {}", path.display())))?;
        let mut gz = GzEncoder::new(file, Compression::default());
        gz.write_all(outcome.history.to_json_lines().as_bytes())
            .and_then(|()| gz.finish().map(drop))
            .map_err(io(format!("writing {}", path.display())))
    }

    /// Writes the timeline report of the first of `outcomes` that showed
    /// what the file is about (a warning if it cannot: the histories are
    /// the record).
    pub(super) fn keep_report(&self, scenario: &Scenario, outcomes: &[SeedOutcome]) {
        let Some(first) = outcomes
            .iter()
            .find(|o| crate::runner::counts(scenario, &o.verdict))
        else {
            return;
        };
        let path = self
            .dir
            .join("reports")
            .join(format!("{}-real-{}.html", scenario.name, first.seed));
        if let Err(error) = std::fs::write(&path, report::render_html(scenario, first, None)) {
            eprintln!("warning: cannot write {}: {error}", path.display());
        }
    }

    pub(super) fn add_summary(&mut self, summary: Summary) {
        self.real.push(summary);
    }

    pub(super) fn add_simulated(&mut self, summary: Summary) {
        self.simulated.push(summary);
    }

    /// The table's account of how it was made.
    pub(super) fn header(
        &self,
        sim_seeds: u64,
        budget: Duration,
        sim_time: Duration,
        partitions: String,
    ) -> Header {
        Header {
            date: humantime::format_rfc3339_seconds(self.started).to_string(),
            commit: self.commit.clone(),
            command: self.command.clone(),
            machine: self.machine.clone(),
            sim_seeds,
            budget_s: budget.as_secs(),
            sim_s: sim_time.as_secs(),
            partitions,
        }
    }

    /// Writes the table, its data, both summaries, the scenario files and
    /// the archive's README.
    pub(super) fn finish(
        &mut self,
        rows: &[Row],
        header: &Header,
        text: &str,
        jobs: &[crate::runner::Job],
    ) -> Result<(), ArchiveError> {
        let kept = Kept {
            header: header.clone(),
            rows: rows.to_vec(),
        };
        for job in jobs {
            let to = scenario_path(&self.dir, &job.scenario.name);
            std::fs::copy(&job.file, &to).map_err(io(format!("copying {}", job.file)))?;
        }
        let real = RunFile {
            shard: Shard::WHOLE,
            scenarios: std::mem::take(&mut self.real),
        };
        let simulated = RunFile {
            shard: Shard::WHOLE,
            scenarios: std::mem::take(&mut self.simulated),
        };
        for (name, contents) in [
            ("table.md", text.to_owned()),
            ("table.json", pretty(&kept)),
            ("real.json", pretty(&real)),
            ("simulated.json", pretty(&simulated)),
            ("README.md", readme()),
        ] {
            let path = self.dir.join(name);
            std::fs::write(&path, contents).map_err(io(format!("writing {}", path.display())))?;
        }
        Ok(())
    }
}

/// `value` as pretty JSON (plain data with derived impls: cannot fail).
fn pretty<T: Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

fn history_path(dir: &Path, name: &str, seed: u64) -> PathBuf {
    dir.join("histories")
        .join(name)
        .join(format!("real-{seed}.jsonl.gz"))
}

fn scenario_path(dir: &Path, name: &str) -> PathBuf {
    dir.join("scenarios").join(format!("{name}.toml"))
}

/// The commit the run is on, and whether the tree had changes.
fn commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    match git(&["rev-parse", "HEAD"]) {
        Some(head) => match git(&["status", "--porcelain", "--untracked-files=no"]) {
            Some(changes) if changes.is_empty() => head,
            _ => format!("{head} with uncommitted changes"),
        },
        None => "unknown (not a git checkout)".to_owned(),
    }
}

/// The machine's cores and load average now.
fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned());
    format!("{cores} cores, load average {load} at the start")
}

fn readme() -> String {
    "# A `sim agree` archive\n\n\
     - `table.md`: the agreement table; `table.json`: its header and rows as data.\n\
     - `real.json`, `simulated.json`: both sides' summaries, in `sim run --json`'s schema.\n\
     - `scenarios/NAME.toml`: each file as it ran.\n\
     - `histories/NAME/real-SEED.jsonl.gz`: every real run's history (JSON lines, gzipped).\n\
     - `reports/`: the timeline of each file's first real run that showed its violation.\n\n\
     Recompute the table from this directory alone (the real verdicts from the histories, \
     the simulated ones from their seeds) with `sim agree --recheck DIR`; it says whether \
     the result matches `table.json`.\n"
        .to_owned()
}

/// Reads history `seed` of `name` back.
fn read_history(dir: &Path, name: &str, seed: u64) -> Result<History, ArchiveError> {
    let path = history_path(dir, name, seed);
    let file = std::fs::File::open(&path).map_err(io(format!("opening {}", path.display())))?;
    let mut entries = Vec::new();
    for (number, line) in BufReader::new(GzDecoder::new(file)).lines().enumerate() {
        let line = line.map_err(io(format!("reading {}", path.display())))?;
        let entry: Entry = serde_json::from_str(&line).map_err(|error| ArchiveError::Bad {
            what: format!("{}:{}", path.display(), number + 1),
            message: error.to_string(),
        })?;
        entries.push(entry);
    }
    Ok(History { entries })
}

/// One row recomputed from the archive: the real tally from the kept
/// histories, the simulated one from its seeds.
fn recompute(dir: &Path, row: &Row, sim_seeds: u64, jobs: usize) -> Result<Row, ArchiveError> {
    let scenario: Scenario =
        scenario::load(&scenario_path(dir, &row.name)).map_err(|error| ArchiveError::Bad {
            what: scenario_path(dir, &row.name).display().to_string(),
            message: error.to_string(),
        })?;
    let mut again = row.clone();
    again.simulated = simulate(&scenario, sim_seeds, jobs).0;
    if row.not_run.is_none() {
        let mut real = Tally::default();
        for seed in 0..row.real.seeds {
            let history = read_history(dir, &row.name, seed)?;
            let schedule = draw_schedule(&scenario, seed);
            let verdict = checker::check_real(&scenario, &schedule, &history, REAL_SLACK);
            real.add(&scenario, &verdict);
        }
        again.real = real;
        again.test();
    }
    Ok(again)
}

/// `sim agree --recheck DIR`: recomputes every row of the archive in `dir`
/// and prints the table; exit 0 when it matches the kept one, 1 when a row
/// differs (named), 2 when the archive cannot be read.
pub fn recheck(dir: &Path, jobs: usize) -> ExitCode {
    let kept = match load_table(dir) {
        Ok((header, rows)) => Kept { header, rows },
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let mut rows = Vec::new();
    let mut differ = Vec::new();
    for row in &kept.rows {
        match recompute(dir, row, kept.header.sim_seeds, jobs) {
            Ok(again) => {
                if again.simulated != row.simulated || again.real != row.real {
                    differ.push(format!(
                        "{}: kept simulator {:?} and real {:?}, recomputed {:?} and {:?}",
                        row.name, row.simulated, row.real, again.simulated, again.real
                    ));
                }
                rows.push(again);
            }
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(2);
            }
        }
    }
    emit(&super::table::markdown(&rows, &kept.header));
    if differ.is_empty() {
        emit(&format!(
            "recheck: every row matches the archive's table ({} rows)\n",
            rows.len()
        ));
        ExitCode::SUCCESS
    } else {
        let lines: String = differ
            .iter()
            .map(|line| format!("recheck: differs: {line}\n"))
            .collect();
        emit(&lines);
        ExitCode::FAILURE
    }
}
