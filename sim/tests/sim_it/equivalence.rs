//! Idle skipping is exact: for every scenario file, the same seeds with
//! skipping off and on give byte-identical histories. This is what guards
//! the skip limit: anything the world samples without waking a host (a
//! key's expiry, the next fault) must stop a jump, or the histories part.
//!
//! `SIM_EQUIVALENCE_SEEDS` sets the seeds per scenario (default 3).

use crate::common;

use std::path::Path;

use sim::{
    config::FaultKind,
    history::Op,
    runner, scenario,
    world::{self, WorldOptions},
};

fn seeds() -> u64 {
    std::env::var("SIM_EQUIVALENCE_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

#[test]
fn every_scenario_gives_the_same_history_with_skipping_off_and_on() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the scenarios directory")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(
        files.len() > 10,
        "found only {} scenario files",
        files.len()
    );
    let seeds: Vec<u64> = (0..seeds()).collect();
    let jobs = runner::available_jobs();
    let mut differing = Vec::new();
    for file in &files {
        let scenario = scenario::load(file).expect("a valid scenario");
        // Each seed with skipping off, then on, on every core: the runs
        // are independent, and each is deterministic on its own thread.
        let run = |skip_idle| {
            let options = WorldOptions {
                skip_idle,
                ..WorldOptions::default()
            };
            runner::map_seeds(&scenario, &seeds, jobs, options, |outcome| outcome)
        };
        let (stepped_runs, skipped_runs) = (run(false), run(true));
        for (stepped, skipped) in stepped_runs.iter().zip(&skipped_runs) {
            let seed = stepped.seed;
            assert!(
                stepped.history.entries.len() > 20,
                "{} seed {seed}: the run did little",
                scenario.name
            );
            if stepped.history.hash() != skipped.history.hash() {
                let first = stepped
                    .history
                    .entries
                    .iter()
                    .zip(&skipped.history.entries)
                    .position(|(a, b)| a != b);
                differing.push(format!(
                    "{} seed {seed}: histories part at entry {first:?} ({} vs {} entries)",
                    scenario.name,
                    stepped.history.entries.len(),
                    skipped.history.entries.len()
                ));
            }
            assert_eq!(
                stepped.verdict, skipped.verdict,
                "{} seed {seed}",
                scenario.name
            );
        }
    }
    assert!(differing.is_empty(), "{differing:#?}");
}

#[test]
fn a_key_expiring_while_every_host_is_idle_is_sampled_on_time() {
    // One client holds for seconds and crashes: nothing runs anywhere
    // until its key expires on the node. Only the world's skip limit
    // (the next key expiry) makes the jump stop there.
    let mut scenario = common::single("idle-expiry");
    scenario.clients.count = 1;
    scenario.clients.hold = common::range(5_000, 6_000);
    let schedule = vec![common::fault(FaultKind::Crash, 2_000, "client:0", None)];
    let run = |skip_idle| {
        let options = WorldOptions {
            skip_idle,
            ..WorldOptions::default()
        };
        world::run_with(&scenario, 1, &schedule, options)
    };
    let (stepped, skipped) = (run(false), run(true));
    let expired = |outcome: &sim::outcome::SeedOutcome| {
        outcome
            .history
            .entries
            .iter()
            .find_map(|entry| match &entry.op {
                Op::Oracle { owner: None, .. } if entry.at > common::ms(2_000) => Some(entry.at),
                _ => None,
            })
    };
    let at = expired(&stepped).expect("the crashed holder's key expires");
    assert!(at < common::ms(3_100), "expired at {at:?}");
    assert_eq!(expired(&skipped), Some(at));
    assert_eq!(stepped.history.hash(), skipped.history.hash());
}
