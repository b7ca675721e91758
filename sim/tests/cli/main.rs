//! The `sim` binary: bad files give one located error and a non-zero exit;
//! a good run prints the table, writes JSON, and exits by the expectation;
//! and what it writes for CI systems and editors (`outputs`), and the
//! scenario file reference it prints (`reference`).
#![warn(clippy::too_many_lines)]

mod outputs;
mod reference;

use std::{path::PathBuf, process::Command};

fn sim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sim"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sim-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

const GOOD: &str = r#"name = "tiny"
description = "a short safe run"
seeds = 2
duration = "2s"
expect = "safe"

[lock]
ttl = "1s"

[[fault]]
kind = "partition"
at = "500ms"
target = "client:any"
duration = "300ms"
"#;

#[test]
fn a_malformed_file_fails_with_its_location() {
    let dir = scratch("bad");
    let file = dir.join("bad.toml");
    std::fs::write(
        &file,
        GOOD.replace("target = \"client:any\"", "target = \"client:9\""),
    )
    .expect("write");
    let output = sim().arg("run").arg(&file).output().expect("run sim");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let expected = format!("{}:13:10: target client:9 does not exist", file.display());
    assert!(stderr.contains(&expected), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_run_prints_the_table_and_writes_json() {
    let dir = scratch("good");
    let file = dir.join("tiny.toml");
    std::fs::write(&file, GOOD).expect("write");
    let json = dir.join("summary.json");
    let output = sim()
        .args(["run", "--jobs", "2", "--json"])
        .arg(&json)
        .arg("--report-dir")
        .arg(dir.join("reports"))
        .arg(&file)
        .output()
        .expect("run sim");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("scenario") && stdout.contains("tiny"),
        "{stdout}"
    );
    assert!(
        stdout.contains("1 of 1 scenarios met their expectation"),
        "{stdout}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written"))
            .expect("valid json");
    let tiny = &summary["scenarios"][0];
    assert_eq!(tiny["name"], "tiny");
    assert_eq!(tiny["seeds"], 2);
    assert_eq!(tiny["met"], true);
    assert_eq!(tiny["status"], "met");
}

/// A safe file whose client never reaches the server (it is cut off for
/// the whole run): no violation, because nothing was tested. The run is
/// inconclusive, never safe: its word in the table, the JSON and the
/// report, and exit status 3.
#[test]
fn a_run_that_proves_nothing_is_inconclusive_with_exit_status_3() {
    let dir = scratch("never-reached");
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/chaos/never-reached.toml");
    let json = dir.join("summary.json");
    let reports = dir.join("reports");
    let output = sim()
        .args(["run", "--json"])
        .arg(&json)
        .arg("--report-dir")
        .arg(&reports)
        .arg(&file)
        .output()
        .expect("run sim");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("? INCONCLUSIVE (2 seeds)"), "{stdout}");
    assert!(
        stdout.contains("seed 0: 0 grants, fewer than the 1 the file asks for (min_grants)"),
        "{stdout}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written"))
            .expect("valid json");
    let run = &summary["scenarios"][0];
    assert_eq!(run["status"], "inconclusive");
    assert_eq!(run["met"], false);
    assert_eq!(run["inconclusive"], 2);
    let report = std::fs::read_to_string(reports.join("never-reached-0.html")).expect("a report");
    assert!(report.contains("<b>inconclusive</b>"), "{report}");
    // With one grant asked of nobody, the same run is valid and safe.
    let lenient = dir.join("lenient.toml");
    let text = std::fs::read_to_string(&file).expect("read");
    std::fs::write(
        &lenient,
        text.replace("seeds = 2", "seeds = 2\nmin_grants = 0"),
    )
    .expect("write");
    let output = sim().arg("run").arg(&lenient).output().expect("run sim");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
}

/// `sim replay --history | head`: a reader that stops after its first
/// line ends the output, not the program (it once panicked on the broken
/// pipe).
#[test]
fn a_replay_read_by_a_reader_that_stops_early_does_not_panic() {
    use std::io::{BufRead as _, BufReader};
    let dir = scratch("replay-head");
    let file = dir.join("long.toml");
    // About 250 KB of history: more than a pipe holds, so the replay is
    // still writing it when the reader goes.
    std::fs::write(
        &file,
        "name = \"long\"\ndescription = \"d\"\nseeds = 1\nduration = \"20s\"\n\
         expect = \"safe\"\n[lock]\nttl = \"1s\"\n[clients]\ncount = 4\n",
    )
    .expect("write");
    let mut child = sim()
        .args(["replay", "--seed", "0", "--history", "--report-dir"])
        .arg(dir.join("reports"))
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("replay");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut first)
        .expect("a first line");
    // The reader is gone: the rest of the history meets a closed pipe.
    let output = child.wait_with_output().expect("replay ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(first.starts_with('{'), "{first}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}

/// `sim run | head -0`: a reader gone before the table is written ends
/// the output, not the program (`print!` panicked on the broken pipe).
#[test]
fn a_run_whose_reader_is_gone_does_not_panic() {
    let dir = scratch("run-closed");
    let file = dir.join("tiny.toml");
    std::fs::write(&file, GOOD).expect("write");
    let mut child = sim()
        .args(["run", "--seeds", "2", "--report-dir"])
        .arg(dir.join("reports"))
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run");
    // The read end closed at once: the table meets a closed pipe.
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("run ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}

#[test]
fn replay_twice_gives_the_same_hash() {
    let dir = scratch("replay");
    let file = dir.join("tiny.toml");
    std::fs::write(&file, GOOD).expect("write");
    let hash = || {
        let output = sim()
            .args(["replay", "--seed", "1", "--report-dir"])
            .arg(dir.join("reports"))
            .arg(&file)
            .output()
            .expect("replay");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        stdout
            .lines()
            .find(|line| line.starts_with("history:"))
            .map(str::to_owned)
            .expect("a history line")
    };
    assert_eq!(hash(), hash());
}
