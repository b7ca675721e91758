//! Positive controls on real processes: each bug `sim chaos --plant`
//! plants makes the property it breaks fire in the real history (a checker
//! that cannot fire proves nothing), while the same file without it stays
//! safe; and a plant whose bug cannot show in a file is refused.

use std::collections::BTreeMap;

use super::{assert_all_gone, chaos, scratch, stderr, tests_dir};

/// What one real run of a file said.
struct Run {
    code: Option<i32>,
    /// Seeds that violated each property, from `--json`.
    violations: BTreeMap<String, u64>,
    facts: Vec<String>,
    /// stdout and stderr, for failure messages.
    text: String,
}

impl Run {
    fn fired(&self, property: &str) -> bool {
        self.violations
            .get(property)
            .is_some_and(|seeds| *seeds > 0)
    }
}

/// One real run of `file` (under `sim/tests/chaos/`) with `plants`.
fn run(name: &str, file: &str, plants: &[&str]) -> Run {
    let dir = scratch(name);
    let json = dir.join("out.json");
    let file = tests_dir().join(file);
    let mut args = vec![
        file.to_str().expect("a utf-8 path").to_owned(),
        "--runs".to_owned(),
        "1".to_owned(),
        "--json".to_owned(),
        json.to_str().expect("a utf-8 path").to_owned(),
    ];
    for plant in plants {
        args.extend(["--plant".to_owned(), (*plant).to_owned()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = chaos(&dir, &args).output().expect("sim runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        stderr(&output)
    );
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&json)
            .unwrap_or_else(|e| panic!("no --json output ({e}): {text}")),
    )
    .expect("sim's JSON");
    let scenario = &json["scenarios"][0];
    let violations = scenario["violations"]
        .as_object()
        .map(|map| {
            map.iter()
                .map(|(property, seeds)| (property.clone(), seeds.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default();
    let facts = scenario["facts"]
        .as_array()
        .map(|facts| {
            facts
                .iter()
                .filter_map(|fact| fact.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    for plant in plants {
        assert!(
            text.contains(&format!("planted bug {plant}:")),
            "the summary must name the plant {plant}: {text}"
        );
    }
    assert_all_gone(&dir, std::time::Duration::from_secs(2));
    Run {
        code: output.status.code(),
        violations,
        facts,
        text,
    }
}

/// S4: a client that writes with its old fence after releasing is
/// refused by the fenced storage (the run is safe, and says the storage
/// refused a write); against a storage that ignores fences, the stale
/// write is accepted and S4 fires.
#[test]
fn zombie_writes_are_refused_by_fences_and_accepted_by_a_storage_that_ignores_them() {
    let fenced = run("zombie-fenced", "plant-mutex.toml", &["zombie-writes"]);
    assert_eq!(fenced.code, Some(0), "{}", fenced.text);
    assert!(fenced.violations.is_empty(), "{}", fenced.text);
    assert!(
        fenced.facts.iter().any(|f| f == "fenced-write-rejected"),
        "no zombie write was refused: {}",
        fenced.text
    );
    let unfenced = run(
        "zombie-unfenced",
        "plant-mutex.toml",
        &["zombie-writes", "storage-ignores-fences"],
    );
    assert!(unfenced.fired("fenced-writes"), "{}", unfenced.text);
    assert_eq!(unfenced.code, Some(1), "{}", unfenced.text);
}

/// S3: the fence counter deleted under `Fencing::Counter` issues a fence
/// lower than one already issued.
#[test]
fn a_fence_counter_deleted_under_the_lock_issues_a_lower_fence_and_s3_fires() {
    let run = run(
        "counter-reset",
        "plant-mutex.toml",
        &["fence-counter-reset"],
    );
    assert!(run.fired("tokens"), "{}", run.text);
    assert_eq!(run.code, Some(1), "{}", run.text);
}

/// A1: a client that says it is done and never releases leaves its key
/// renewed on the server (the same file without the plant: the first
/// test's fenced run, no violation).
#[test]
fn a_client_that_never_releases_leaves_an_orphan_key_and_a1_fires() {
    let run = run("never-release", "plant-mutex.toml", &["never-release"]);
    assert!(run.fired("no-orphans"), "{}", run.text);
}

/// F1: writers that take read locks hold beside each other and beside
/// readers (the same file without the plant:
/// `a_read_write_scenario_records_shared_and_exclusive_holds_and_waits`).
#[test]
fn writers_that_take_read_locks_overlap_and_f1_fires() {
    let run = run("write-as-read", "rw-tiny.toml", &["write-as-read"]);
    assert!(run.fired("writer-exclusion"), "{}", run.text);
    assert_eq!(run.code, Some(1), "{}", run.text);
}

/// The file `file` is safe unplanted, and with `plant` its property
/// `property` fires (a run each).
fn safe_until_planted(name: &str, file: &str, plant: &str, property: &str) {
    let honest = run(&format!("{name}-honest"), file, &[]);
    assert_eq!(honest.code, Some(0), "{}", honest.text);
    assert!(honest.violations.is_empty(), "{}", honest.text);
    let planted = run(&format!("{name}-planted"), file, &[plant]);
    assert!(planted.fired(property), "{}", planted.text);
    assert_eq!(planted.code, Some(1), "{}", planted.text);
}

/// F2: clients that count one permit more than the file's put three
/// holders on a two-permit semaphore; the honest clients never do.
#[test]
fn one_permit_too_many_exceeds_the_semaphore_and_f2_fires() {
    safe_until_planted(
        "permits",
        "plant-semaphore.toml",
        "extra-permit",
        "capacity",
    );
}

/// F3: fair-mode clients on the plain lock let a client that has just
/// released take the lock ahead of a live waiter; the fair lock's queue
/// never does.
#[test]
fn fair_clients_on_the_plain_lock_overtake_a_waiter_and_f3_fires() {
    safe_until_planted("fair", "plant-fair.toml", "unfair", "fair-order");
}

/// S6: a client cut off from the server past its ttl is told `Lost` at
/// its deadline while it runs; one that records it a ttl late breaks S6.
#[test]
fn a_lost_recorded_a_ttl_late_breaks_s6() {
    safe_until_planted("late-lost", "plant-lost.toml", "late-lost", "timely-loss");
}

/// S2: a client that records its release 100 ms after the release deleted
/// its key believes it holds while the oracle reads the key absent, or
/// another client's.
#[test]
fn a_release_recorded_after_the_key_is_gone_breaks_s2() {
    safe_until_planted(
        "late-release",
        "plant-mutex.toml",
        "late-release",
        "server-oracle",
    );
}

/// S5, checked on real runs from the primary's replication stream: a
/// holder stopped past its ttl wakes after the other client took the
/// lock; its honest release leaves that key alone, its plain `DEL`
/// deletes it. Both runs say S5 was checked (the honest one, all of it).
#[test]
fn a_release_that_deletes_another_clients_key_breaks_s5() {
    let honest = run("skip-owner-honest", "plant-owner.toml", &[]);
    assert_eq!(honest.code, Some(0), "{}", honest.text);
    assert!(honest.violations.is_empty(), "{}", honest.text);
    let planted = run(
        "skip-owner-planted",
        "plant-owner.toml",
        &["skip-owner-check"],
    );
    assert!(planted.fired("owner-only"), "{}", planted.text);
    assert_eq!(planted.code, Some(1), "{}", planted.text);
    for run in [&honest, &planted] {
        assert!(
            run.facts.iter().any(|f| f == "owner-only-checked"),
            "S5 was not checked: {}",
            run.text
        );
    }
    // One node, followed the whole run: nothing left unchecked.
    assert!(
        !honest.facts.iter().any(|f| f == "owner-only-unchecked"),
        "{}",
        honest.text
    );
}

/// L1 and L2: every client cut off from the server for 2 s has its
/// acquire under way fail; honest clients acquire again after the heal,
/// clients that never try again after a failed acquire leave the lock
/// unheld for the rest of the run: nobody acquires within L1's bound after
/// the heal, and the stretch after that bound outlasts L2's.
#[test]
fn clients_that_give_up_after_a_failed_acquire_break_l1_and_l2() {
    let honest = run("give-up-honest", "plant-stall.toml", &[]);
    assert_eq!(honest.code, Some(0), "{}", honest.text);
    assert!(honest.violations.is_empty(), "{}", honest.text);
    let planted = run(
        "give-up-planted",
        "plant-stall.toml",
        &["give-up-on-failure"],
    );
    assert!(planted.fired("liveness"), "{}", planted.text);
    assert!(planted.fired("availability"), "{}", planted.text);
    assert_eq!(planted.code, Some(1), "{}", planted.text);
}

/// L3: with one Redlock node of three cut off, the majority keeps the lock
/// going from one holder to the next; clients that acquire only while
/// every node answers leave it unheld through the cut (L2 excuses the
/// fault, L3 does not).
#[test]
fn redlock_clients_that_demand_every_node_break_l3() {
    safe_until_planted(
        "every-node",
        "plant-quorum.toml",
        "redlock-every-node",
        "quorum-availability",
    );
}

/// F4: a fair waiter killed in the queue loses its place one waiter ttl
/// after its last renewal, and the live waiters behind it are granted; a
/// place that lasts ten waiter ttls holds them up past their bound (here,
/// most often, to the end of the run).
#[test]
fn a_queue_place_that_outlives_the_waiter_ttl_breaks_f4() {
    safe_until_planted(
        "dead-waiter",
        "plant-dead-waiter.toml",
        "stretched-waiter-ttl",
        "dead-waiter",
    );
}

/// A plant whose bug cannot show in the file (fair clients taking the
/// plain lock, in a file of the plain lock) would pass for nothing: it is
/// refused before anything starts.
#[test]
fn a_plant_whose_bug_cannot_show_in_the_file_is_refused() {
    let dir = scratch("plant-refused");
    let file = tests_dir().join("plant-mutex.toml");
    let output = chaos(
        &dir,
        &[
            file.to_str().expect("a utf-8 path"),
            "--runs",
            "1",
            "--plant",
            "unfair",
        ],
    )
    .output()
    .expect("sim runs");
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(
        text.contains("plant-mutex.toml: --plant unfair needs a fair workload"),
        "{text}"
    );
    assert!(super::pids(&dir).is_empty(), "{:?}", super::pids(&dir));
}
