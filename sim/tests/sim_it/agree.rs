//! `sim agree` on real processes: the table, the archive it leaves, and
//! the recheck that recomputes the table from the archive alone (and
//! catches an archive that does not match).

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

const SIM: &str = env!("CARGO_BIN_EXE_sim");

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("agree-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory under the target dir");
    dir
}

fn sim(args: &[&str]) -> Output {
    Command::new(SIM).args(args).output().expect("sim runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn an_agreement_run_archives_what_recomputes_its_table() {
    let dir = scratch("archive");
    let archive = dir.join("archive");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/chaos/tiny-pause.toml");
    let path = |p: &Path| p.to_str().expect("a utf-8 path").to_owned();
    // A safe 3 s file: each run planned at 4 s, so a budget of 8 s gives
    // it 2 real runs.
    let output = sim(&[
        "agree",
        &path(&file),
        "--budget",
        "8s",
        "--sim-seeds",
        "20",
        "--archive",
        &path(&archive),
        "--work-dir",
        &path(&dir.join("work")),
    ]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(
        out.contains("| `tiny-pause` | single | redis-7.0 | safe | 0 of 20: 0.0 % (0.0–16.1 %) | 0 of 2: 0.0 % (0.0–65.8 %) | 1.000 | yes | 2: what the budget left"),
        "{out}"
    );
    for kept in [
        "table.md",
        "table.json",
        "real.json",
        "simulated.json",
        "README.md",
        "scenarios/tiny-pause.toml",
        "histories/tiny-pause/real-0.jsonl.gz",
        "histories/tiny-pause/real-1.jsonl.gz",
    ] {
        assert!(archive.join(kept).is_file(), "{kept} is not in the archive");
    }
    let table = std::fs::read_to_string(archive.join("table.md")).expect("the table");
    assert!(
        table.contains("commit ") && table.contains("--budget 8s"),
        "{table}"
    );

    // The archive alone recomputes the same table.
    let recheck = sim(&["agree", "--recheck", &path(&archive)]);
    let out = text(&recheck);
    assert_eq!(recheck.status.code(), Some(0), "{out}");
    assert!(out.contains("every row matches"), "{out}");

    // A kept table that the histories do not bear out is caught, by row.
    let json = archive.join("table.json");
    let kept = std::fs::read_to_string(&json).expect("table.json");
    let tampered = kept.replacen("\"showing\": 0", "\"showing\": 1", 2);
    assert_ne!(kept, tampered, "the tally is where the test expects it");
    std::fs::write(&json, tampered).expect("rewrite table.json");
    let recheck = sim(&["agree", "--recheck", &path(&archive)]);
    let out = text(&recheck);
    assert_eq!(recheck.status.code(), Some(1), "{out}");
    assert!(out.contains("differs: tiny-pause"), "{out}");

    // A history gone is named, not skipped.
    std::fs::write(&json, kept).expect("restore table.json");
    std::fs::remove_file(archive.join("histories/tiny-pause/real-1.jsonl.gz")).expect("remove");
    let recheck = sim(&["agree", "--recheck", &path(&archive)]);
    let out = text(&recheck);
    assert_eq!(recheck.status.code(), Some(2), "{out}");
    assert!(out.contains("real-1.jsonl.gz"), "{out}");

    // An archive is never overwritten.
    let again = sim(&[
        "agree",
        &path(&file),
        "--budget",
        "8s",
        "--archive",
        &path(&archive),
    ]);
    let out = text(&again);
    assert_eq!(again.status.code(), Some(2), "{out}");
    assert!(out.contains("is never overwritten"), "{out}");
}

/// The README's guarantees table: its last column is what the archive its
/// marker line names says (`sim agree --readme README.md --check`), so a
/// hand edit of a real-process result fails CI.
#[test]
fn the_readmes_real_process_column_is_what_its_archive_says() {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let output = sim(&[
        "agree",
        "--readme",
        readme.to_str().expect("a utf-8 path"),
        "--check",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
}

/// A cell edited by hand is caught, at its line, with the command that
/// writes it again; writing it brings back what the archive says.
#[test]
fn a_hand_edited_real_process_cell_is_caught_and_written_again() {
    let dir = scratch("readme");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let original = std::fs::read_to_string(root.join("README.md")).expect("the README");
    let archive = original
        .lines()
        .find_map(|line| line.strip_prefix("<!-- agreement: "))
        .and_then(|rest| rest.strip_suffix(" -->"))
        .expect("the README's marker line");
    // The archive's table alone is what the column is made from.
    std::fs::create_dir_all(dir.join(archive)).expect("the archive's directory");
    std::fs::copy(
        root.join(archive).join("table.json"),
        dir.join(archive).join("table.json"),
    )
    .expect("the archive's table");
    let (line, cell) = original
        .lines()
        .enumerate()
        .find_map(|(at, line)| {
            let cell = line.strip_prefix("| Eviction")?.rsplit('|').nth(1)?;
            Some((at + 1, cell.trim().to_owned()))
        })
        .expect("the eviction row");
    let edited = original.replacen(&format!("| {cell} |"), "| safe, 100 of 100 |", 1);
    let readme = dir.join("README.md");
    std::fs::write(&readme, &edited).expect("a scratch README");
    let path = readme.to_str().expect("a utf-8 path");
    let output = sim(&["agree", "--readme", path, "--check"]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        text(&output).contains(&format!(
            "README.md:{line}: the agreement column is not what"
        )),
        "{}",
        text(&output)
    );
    let output = sim(&["agree", "--readme", path]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(
        std::fs::read_to_string(&readme).expect("the README written"),
        original
    );
}
