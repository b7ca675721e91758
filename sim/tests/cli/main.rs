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
