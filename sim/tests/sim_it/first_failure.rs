//! `sim run --stop-at-first-failure` ([`Until::FirstFailure`]): each
//! scenario stops at its lowest failing seed, with the same verdict and
//! first failing seed as a run of every seed, and a summary that does not
//! depend on how many threads ran it or how far they got.

use crate::common;

use sim::runner::{self, Job, RunOptions, Summary, Until};

/// Seeds per scenario. The unsafe mix fails from seed 0 on, so a stopped
/// run skips the rest of the budget, and with 2 or more threads drops the
/// seeds above 0 that had already started (the fold must leave them out).
const SEEDS: u64 = 40;

fn run(jobs: &[Job], until: Until, threads: usize) -> Vec<Summary> {
    let options = RunOptions {
        seeds: Some(SEEDS),
        jobs: threads,
        until,
        ..RunOptions::default()
    };
    runner::run(jobs, &options, &|_| {})
        .summaries
        .into_iter()
        // Wall time is for people; everything else must match.
        .map(|summary| Summary {
            wall_ms: 0,
            ..summary
        })
        .collect()
}

#[test]
fn a_scenario_stops_at_its_first_failing_seed_and_says_so() {
    let jobs: Vec<Job> = ["mix-single-unsafe", "mix-single-safe"]
        .into_iter()
        .map(common::job)
        .collect();
    let every = run(&jobs, Until::EverySeed, 2);
    let (unsafe_every, safe_every) = (&every[0], &every[1]);
    let first = unsafe_every
        .first_failing_seed
        .expect("the unsafe mix fails on some seed of the budget");
    assert!(unsafe_every.met && safe_every.met, "{every:#?}");

    let stopped = run(&jobs, Until::FirstFailure, 2);
    let (unsafe_stopped, safe_stopped) = (&stopped[0], &stopped[1]);
    assert_eq!(unsafe_stopped.first_failing_seed, Some(first));
    assert!(unsafe_stopped.met, "{unsafe_stopped:#?}");
    assert_eq!(
        unsafe_stopped.seeds,
        first + 1,
        "the seeds up to the first failing one, and none above"
    );
    assert_eq!(unsafe_stopped.stopped, first + 1 < SEEDS);
    for (property, count) in &unsafe_stopped.violations {
        assert!(count <= &unsafe_every.violations[property], "{property}");
    }
    // A safe scenario has no failing seed to stop at: every seed runs.
    assert_eq!(safe_stopped, safe_every);
    assert!(!safe_stopped.stopped);

    // However many threads ran, and however far past the first failure
    // they had got, the summaries are the same.
    for threads in [1, 3, 8] {
        assert_eq!(
            run(&jobs, Until::FirstFailure, threads),
            stopped,
            "{threads} threads"
        );
    }
}
