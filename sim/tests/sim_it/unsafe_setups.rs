//! Known-unsafe setups are caught: each test searches fault schedules for
//! the violation the fault table predicts, and proptest shrinks the first
//! one found to at most three faults.

use crate::common;

use proptest::prelude::*;
use sim::{
    config::{FaultKind, FencingMode, Property, SignedDuration},
    outcome::ConcreteFault,
    world::{self, WorldOptions},
};

const SEED: u64 = 0xBAD;

/// A client paused for 1-200 ms, somewhere in 0.5-7 s.
fn short_client_pause() -> impl Strategy<Value = ConcreteFault> {
    (500u64..7_000, 0usize..3, 1u64..200)
        .prop_map(|(at, n, d)| common::fault(FaultKind::Pause, at, &format!("client:{n}"), Some(d)))
}

/// Noise that is harmless to the lease on its own: short client pauses
/// and client partitions (not to unfenced writes: see [`write_noise`]).
fn noise() -> impl Strategy<Value = ConcreteFault> {
    prop_oneof![
        short_client_pause(),
        (500u64..7_000, 0usize..3, 1u64..1_500).prop_map(|(at, n, d)| common::fault(
            FaultKind::Partition,
            at,
            &format!("client:{n}"),
            Some(d)
        )),
    ]
}

/// Noise that is harmless to a client's writes even without fencing:
/// short client pauses, and partitions of the Redis node. A client cut
/// off from everything is not: a storage write sent into the cut lands
/// after the heal (TCP retransmits it), the delayed write that fencing
/// exists for, which a search for the long pause's stale write would
/// otherwise find and shrink to instead.
fn write_noise() -> impl Strategy<Value = ConcreteFault> {
    prop_oneof![
        short_client_pause(),
        (500u64..7_000, 1u64..1_500).prop_map(|(at, d)| common::fault(
            FaultKind::Partition,
            at,
            "redis:0",
            Some(d)
        )),
    ]
}

fn with_noise(
    bad: impl Strategy<Value = ConcreteFault>,
) -> impl Strategy<Value = Vec<ConcreteFault>> {
    with_noise_of(bad, noise())
}

fn with_noise_of(
    bad: impl Strategy<Value = ConcreteFault>,
    noise: impl Strategy<Value = ConcreteFault>,
) -> impl Strategy<Value = Vec<ConcreteFault>> {
    (bad, prop::collection::vec(noise, 0..4)).prop_map(|(bad, mut rest)| {
        rest.push(bad);
        rest.sort_by_key(|f| f.at);
        rest
    })
}

fn assert_small(schedule: &[ConcreteFault]) {
    assert!(
        !schedule.is_empty() && schedule.len() <= 3,
        "shrunk to {} faults:\n{}",
        schedule.len(),
        common::as_toml(schedule)
    );
}

#[test]
fn failover_without_wait_breaks_lease_exclusion() {
    let scenario = common::primary_replica("failover-without-wait");
    let failover = (1_000u64..7_000)
        .prop_map(|at| common::fault(FaultKind::Failover, at, "redis:primary", None));
    // Any world seed shows it; with this one the first failing schedule
    // proptest finds shrinks to the failover alone. (With 0xBAD the
    // failing window depends on all four faults' timing and cannot shrink.)
    let (schedule, outcome) = common::find_violation(
        &scenario,
        1,
        with_noise(failover),
        Property::LeaseExclusion,
        300,
    );
    assert_small(&schedule);
    assert!(schedule.iter().any(|f| f.kind == FaultKind::Failover));
    assert!(
        outcome.verdict.facts.contains("failover-lost-lock-key"),
        "{:?}",
        outcome.verdict.facts
    );
}

#[test]
fn long_pause_without_fencing_writes_stale_but_fencing_refuses_it() {
    let scenario = common::single("long-pause");
    let pause = (1_000u64..6_000, 0usize..3, 1_500u64..3_000).prop_map(|(at, n, d)| {
        common::fault(FaultKind::Pause, at, &format!("client:{n}"), Some(d))
    });
    // Without fencing the storage takes the stale write: S4 breaks.
    let unfenced = sim::config::Scenario {
        lock: sim::config::LockConfig {
            fencing: FencingMode::None,
            ..scenario.lock.clone()
        },
        ..scenario.clone()
    };
    let (schedule, outcome) = common::find_violation(
        &unfenced,
        SEED,
        with_noise_of(pause, write_noise()),
        Property::FencedWrites,
        300,
    );
    assert_small(&schedule);
    assert!(
        outcome.verdict.facts.contains("pause-outlived-ttl"),
        "{schedule:?}: {:?}",
        outcome.verdict.facts
    );
    assert!(
        outcome
            .verdict
            .facts
            .contains("unfenced-register-stale-write")
    );

    // The same schedule with fencing: the stale write is refused, S4 holds,
    // and the lease itself was never shared (S1 holds: the deadline ended
    // the paused client's belief).
    let fenced = world::run_schedule(&scenario, SEED, &schedule);
    common::assert_only(&fenced, &[Property::Liveness, Property::ServerOracle]);
    assert!(
        fenced.verdict.facts.contains("fenced-write-rejected"),
        "{:?}",
        fenced.verdict.facts
    );
    assert!(
        fenced
            .verdict
            .facts
            .contains("unfenced-register-stale-write")
    );
}

#[test]
fn server_clock_jump_forward_breaks_lease_exclusion() {
    let scenario = common::single("clock-jump");
    let jump = (1_000u64..7_000, 1_500u64..5_000).prop_map(|(at, jump)| {
        let mut fault = common::fault(FaultKind::ClockJump, at, "redis:0", None);
        fault.offset = Some(SignedDuration {
            negative: false,
            magnitude: common::ms(jump),
        });
        fault
    });
    let (schedule, _) = common::find_violation(
        &scenario,
        SEED,
        with_noise(jump),
        Property::LeaseExclusion,
        300,
    );
    assert_small(&schedule);
}

#[test]
fn restart_without_persistence_breaks_lease_exclusion() {
    let scenario = common::single("restart");
    let restart = (1_000u64..7_000, 1u64..300)
        .prop_map(|(at, down)| common::fault(FaultKind::Restart, at, "redis:0", Some(down)));
    let (schedule, _) = common::find_violation(
        &scenario,
        SEED,
        with_noise(restart),
        Property::LeaseExclusion,
        300,
    );
    assert_small(&schedule);
}

#[test]
fn plain_counter_fencing_goes_backwards_under_failover() {
    let mut scenario = common::primary_replica("counter-failover");
    scenario.lock.fencing = FencingMode::Counter;
    let failover = (1_000u64..7_000)
        .prop_map(|at| common::fault(FaultKind::Failover, at, "redis:primary", None));
    let (schedule, _) =
        common::find_violation(&scenario, SEED, with_noise(failover), Property::Tokens, 300);
    assert_small(&schedule);
}

#[test]
fn time_mixed_fencing_holds_within_its_skew_bound_and_fails_beyond() {
    let scenario = common::primary_replica("time-mixed-failover");
    // Within the bound (clocks agree): many failovers, no token regression.
    for at in (1_000..7_000).step_by(250) {
        let schedule = vec![common::fault(
            FaultKind::Failover,
            at,
            "redis:primary",
            None,
        )];
        let outcome = world::run_schedule(&scenario, SEED + at, &schedule);
        assert!(
            !outcome.verdict.violated().contains(&Property::Tokens),
            "failover at {at} ms: {:#?}",
            outcome.verdict.violations
        );
    }
    // Beyond it: the replica's clock is 5 s behind, more than the failover
    // takes, so the new primary issues fences below ones already granted.
    let behind = (1_000u64..7_000).prop_map(|at| {
        let mut skew = common::fault(FaultKind::ClockJump, 100, "redis:1", None);
        skew.offset = Some(SignedDuration {
            negative: true,
            magnitude: common::ms(5_000),
        });
        vec![
            skew,
            common::fault(FaultKind::Failover, at, "redis:primary", None),
        ]
    });
    let (schedule, _) = common::find_violation(&scenario, SEED, behind, Property::Tokens, 300);
    assert_small(&schedule);
}

#[test]
fn a_deliberately_broken_core_is_caught() {
    // Validity counted from the reply: with slow replies the client's
    // deadline outlives the server's key. S1, S2 or S6 must notice.
    let mut scenario = common::single("broken-core");
    // Holders keep the lock for seconds, so partitions cut holders off.
    scenario.clients.hold = common::range(4_000, 6_000);
    let mut slow = common::fault(FaultKind::Latency, 200, "redis:0", Some(7_500));
    slow.delay = Some(common::ms(60));
    let mut schedule = vec![slow];
    for (at, client) in [(1_000u64, 0usize), (2_500, 1), (4_000, 2), (5_500, 0)] {
        schedule.push(common::fault(
            FaultKind::Partition,
            at,
            &format!("client:{client}"),
            Some(1_500),
        ));
    }
    let honest = world::run_schedule(&scenario, SEED, &schedule);
    common::assert_only(&honest, &[Property::Liveness]);
    let broken = world::run_with(
        &scenario,
        SEED,
        &schedule,
        WorldOptions {
            broken_validity: true,
            ..WorldOptions::default()
        },
    );
    let caught = broken.verdict.violated();
    assert!(
        caught.contains(&Property::LeaseExclusion)
            || caught.contains(&Property::ServerOracle)
            || caught.contains(&Property::TimelyLoss),
        "the broken rule went unnoticed: {:?}",
        broken.verdict
    );
}
