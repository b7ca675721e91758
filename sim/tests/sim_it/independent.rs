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
    let mut child = Command::new("python3")
        .arg(repo().join("scripts/check_history.py"))
        .args(["--workload", workload, "-"])
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
        let workload = match scenario.clients.workload.kind {
            WorkloadKind::Mutex => "plain",
            WorkloadKind::Fair => "fair",
            WorkloadKind::ReadWrite => "read-write",
            WorkloadKind::Semaphore => "semaphore",
        };
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
