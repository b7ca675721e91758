//! The independent checker (`scripts/check_history.py`, written from the
//! definitions of S1 and S4 without this project's checkers) agrees with the
//! simulator's checkers on every history of a sample of files and seeds,
//! safe and unsafe ones. A disagreement is a finding in one of the two.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use sim::{
    config::{Property, WorkloadKind},
    scenario, world,
};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("sim sits in the workspace")
        .to_path_buf()
}

/// The script's verdicts on `history` (JSON lines): S1 (None where it does
/// not apply) and S4, violated or not.
fn independent(history: &str, workload: &str) -> (Option<bool>, bool) {
    script_verdict(history, workload, "-")
}

/// The script's verdicts on the history at `path` (read by the script
/// itself, gzipped or not), or on `history` given on its standard input
/// when `path` is `-`.
fn script_verdict(history: &str, workload: &str, path: &str) -> (Option<bool>, bool) {
    let mut child = Command::new("python3")
        .arg(repo().join("scripts/check_history.py"))
        .args(["--workload", workload, path])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs scripts/check_history.py (install Python 3.11 or newer)");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(history.as_bytes())
        .expect("the history is written");
    let output = child.wait_with_output().expect("the checker ends");
    assert!(
        output.status.success(),
        "check_history.py failed: {output:?}"
    );
    let verdict: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("one JSON object");
    (
        verdict["lease-exclusion"].as_bool(),
        verdict["fenced-writes"]
            .as_bool()
            .expect("fenced-writes is a bool"),
    )
}

/// The independent checker's S1 and S4 verdicts on the history files
/// `paths`, in one process, in their order.
fn script_verdicts(workload: &str, paths: &[&str]) -> Vec<(Option<bool>, bool)> {
    let output = Command::new("python3")
        .arg(repo().join("scripts/check_history.py"))
        .args(["--workload", workload])
        .args(paths)
        .output()
        .expect("python3 runs scripts/check_history.py (install Python 3.11 or newer)");
    assert!(
        output.status.success(),
        "check_history.py failed: {output:?}"
    );
    let verdicts: Vec<(Option<bool>, bool)> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            let verdict: serde_json::Value = serde_json::from_str(line).expect("one JSON object");
            (
                verdict["lease-exclusion"].as_bool(),
                verdict["fenced-writes"]
                    .as_bool()
                    .expect("fenced-writes is a bool"),
            )
        })
        .collect();
    assert_eq!(verdicts.len(), paths.len(), "a verdict per history");
    verdicts
}

#[test]
fn the_independent_checker_agrees_on_s1_and_s4() {
    let files = [
        ("failover-without-wait", 24),
        ("long-pause-unfenced", 24),
        ("mix-single-unsafe", 16),
        ("fair-failover-without-wait", 16),
        ("mix-redlock-unsafe", 16),
        ("owner-checks", 8),
        ("semaphore-failover-without-wait", 8),
        ("rw-long-pause-unfenced", 8),
    ];
    let (mut s1_seen, mut s4_seen, mut disagreements) = (0, 0, Vec::new());
    for (file, seeds) in files {
        let path = repo().join("scenarios").join(format!("{file}.toml"));
        let scenario = scenario::load(&path).expect("a scenario file");
        let workload = workload_name(scenario.clients.workload.kind);
        for seed in 0..seeds {
            let outcome = world::run_seed(&scenario, seed);
            let violated = outcome.verdict.violated();
            let ours = (
                violated.contains(&Property::LeaseExclusion),
                violated.contains(&Property::FencedWrites),
            );
            let (s1, s4) = independent(&outcome.history.to_json_lines(), workload);
            s1_seen += usize::from(ours.0);
            s4_seen += usize::from(ours.1);
            if s1.is_some_and(|s1| s1 != ours.0) || s4 != ours.1 {
                disagreements.push(format!(
                    "{file} seed {seed}: S1 ours {} theirs {s1:?}, S4 ours {} theirs {s4}",
                    ours.0, ours.1
                ));
            }
        }
    }
    // Not vacuous: both properties are violated somewhere in the sample.
    assert!(
        s1_seen >= 5 && s4_seen >= 5,
        "S1 on {s1_seen}, S4 on {s4_seen}"
    );
    assert!(disagreements.is_empty(), "{disagreements:#?}");
}

/// The script's name for a workload kind.
fn workload_name(kind: WorkloadKind) -> &'static str {
    match kind {
        WorkloadKind::Mutex => "plain",
        WorkloadKind::Fair => "fair",
        WorkloadKind::ReadWrite => "read-write",
        WorkloadKind::Semaphore => "semaphore",
    }
}

/// Every real history kept in an agreement archive (`docs/agreement/*/`,
/// written by `sim agree`): the independent checker and `check_real` (with
/// the schedule drawn again for the seed, as `sim agree --recheck` does)
/// give the same S1 and S4 verdicts. Real histories carry real timing, so
/// this is where the two definitions' edges (instants of zero length,
/// holds ended by their deadline) meet what a machine recorded.
#[test]
fn the_independent_checker_agrees_on_every_archived_real_history() {
    let archives = repo().join("docs/agreement");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&archives)
        .expect("docs/agreement holds the archives sim agree wrote")
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| path.join("histories").is_dir())
        .collect();
    dirs.sort();
    let (mut checked, mut s1_seen, mut disagreements) = (0, 0, Vec::new());
    for dir in &dirs {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("histories"))
            .expect("a histories directory")
            .filter_map(|entry| Some(entry.ok()?.path()))
            .collect();
        files.sort();
        for name_dir in files {
            let name = name_dir
                .file_name()
                .and_then(|name| name.to_str())
                .expect("a file name")
                .to_owned();
            let scenario = scenario::load(&dir.join("scenarios").join(format!("{name}.toml")))
                .expect("the archive keeps each scenario file as it ran");
            let workload = workload_name(scenario.clients.workload.kind);
            let mut histories: Vec<PathBuf> = std::fs::read_dir(&name_dir)
                .expect("a scenario's histories")
                .filter_map(|entry| Some(entry.ok()?.path()))
                .collect();
            histories.sort();
            // One checker process per scenario, over all its histories.
            let paths: Vec<&str> = histories
                .iter()
                .map(|path| path.to_str().expect("a utf-8 path"))
                .collect();
            let theirs = script_verdicts(workload, &paths);
            for (path, (s1, s4)) in histories.iter().zip(theirs) {
                let seed: u64 = path
                    .file_name()
                    .and_then(|name| name.to_str())
                    .and_then(|name| name.strip_prefix("real-")?.strip_suffix(".jsonl.gz"))
                    .and_then(|seed| seed.parse().ok())
                    .unwrap_or_else(|| panic!("{} is not real-SEED.jsonl.gz", path.display()));
                let history = read_gz(path);
                let schedule = sim::schedule::draw_schedule(&scenario, seed);
                let verdict = sim::checker::check_real(
                    &scenario,
                    &schedule,
                    &history,
                    sim::chaos::REAL_SLACK,
                );
                let violated = verdict.violated();
                let ours = (
                    violated.contains(&Property::LeaseExclusion),
                    violated.contains(&Property::FencedWrites),
                );
                checked += 1;
                s1_seen += usize::from(ours.0);
                if s1.is_some_and(|s1| s1 != ours.0) || s4 != ours.1 {
                    disagreements.push(format!(
                        "{}: S1 ours {} theirs {s1:?}, S4 ours {} theirs {s4}",
                        path.display(),
                        ours.0,
                        ours.1
                    ));
                }
            }
        }
    }
    // Not vacuous: histories were read, and some show S1.
    assert!(
        checked >= 50 && s1_seen >= 1,
        "{checked} histories, S1 on {s1_seen}"
    );
    assert!(disagreements.is_empty(), "{disagreements:#?}");
}

/// A gzipped JSON-lines history.
fn read_gz(path: &Path) -> sim::history::History {
    use std::io::BufRead as _;
    let file = std::fs::File::open(path).expect("an archived history");
    let entries = std::io::BufReader::new(flate2::read::GzDecoder::new(file))
        .lines()
        .map(|line| serde_json::from_str(&line.expect("a line")).expect("a history entry"))
        .collect();
    sim::history::History { entries }
}
