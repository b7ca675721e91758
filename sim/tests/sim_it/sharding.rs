//! Sharding: `sim run --shard 1/3`, `2/3` and `3/3`, merged by `sim merge`,
//! give the table and the exit code of one whole run, shrunk report
//! included; a missing or repeated shard is an error.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

fn sim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sim"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sim-shard-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn scenarios() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    // One safe scenario and one that must be caught (with a shrunk report).
    ["pauses-under-margin.toml", "long-pause-unfenced.toml"]
        .iter()
        .map(|file| dir.join(file))
        .collect()
}

fn run(dir: &Path, extra: &[&str]) -> Output {
    sim()
        .args(["run", "--seeds", "7", "--jobs", "2", "--report-dir"])
        .arg(dir.join("reports"))
        .args(extra)
        .args(scenarios())
        .output()
        .expect("run sim")
}

/// The table and verdict, without the wall-clock line.
fn table(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| !line.starts_with("ran in "))
        .map(|line| format!("{line}\n"))
        .collect()
}

#[test]
fn three_shards_merged_give_the_table_of_one_run() {
    let dir = scratch("merge");
    let whole_json = dir.join("whole.json");
    let whole = run(&dir, &["--json", whole_json.to_str().expect("utf-8 path")]);
    assert!(whole.status.success(), "{}", table(&whole));
    let mut shard_files = Vec::new();
    for index in 1..=3 {
        let json = dir.join(format!("shard-{index}.json"));
        let shard = format!("{index}/3");
        let output = run(
            &dir,
            &[
                "--shard",
                &shard,
                "--json",
                json.to_str().expect("utf-8 path"),
            ],
        );
        assert!(
            table(&output).contains(&format!("shard {shard}")),
            "{}",
            table(&output)
        );
        shard_files.push(json);
    }
    // Shard 3/3 runs seeds 2 and 5 only.
    let third: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&shard_files[2]).expect("json"))
            .expect("valid json");
    assert_eq!(third["scenarios"][0]["seeds"], 2);

    let merged = sim()
        .arg("merge")
        .args(&shard_files)
        .output()
        .expect("merge");
    assert_eq!(merged.status.code(), whole.status.code());
    assert_eq!(table(&merged), table(&whole));
    assert!(
        table(&whole).contains("report: "),
        "the violation is reported: {}",
        table(&whole)
    );

    // Reordered shards merge the same; a missing or doubled one does not.
    let reordered = sim()
        .arg("merge")
        .args(shard_files.iter().rev())
        .output()
        .expect("merge");
    assert_eq!(table(&reordered), table(&whole));
    for bad in [
        vec![&shard_files[0], &shard_files[1]],
        vec![&shard_files[0], &shard_files[1], &shard_files[1]],
    ] {
        let output = sim().arg("merge").args(bad).output().expect("merge");
        assert_eq!(output.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("missing") || stderr.contains("twice"),
            "{stderr}"
        );
    }
}
