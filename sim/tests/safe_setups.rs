//! Safe setups stay safe: single Redis under bounded client pauses,
//! partitions, latency and client clock drift within the drift factor.
//! proptest generates the fault schedules and would shrink any failure to
//! the smallest schedule, printed in scenario-file form.

mod common;

use proptest::{prelude::*, test_runner::Config};
use sim::{
    config::{FaultKind, Property, Scenario},
    outcome::ConcreteFault,
    world,
};

/// The properties a safe single-Redis setup must never violate.
const MUST_HOLD: [Property; 5] = [
    Property::LeaseExclusion,
    Property::Tokens,
    Property::FencedWrites,
    Property::OwnerOnly,
    Property::TimelyLoss,
];

/// A fixed base seed: proptest shrinks the fault list, never the seed.
const BASE_SEED: u64 = 0x5AFE;

fn cases() -> u32 {
    std::env::var("SIM_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

fn target() -> impl Strategy<Value = String> {
    prop_oneof![
        (0usize..3).prop_map(|n| format!("client:{n}")),
        Just("redis:0".to_owned()),
        Just("storage".to_owned()),
    ]
}

fn timed(kind: FaultKind, max_ms: u64) -> impl Strategy<Value = ConcreteFault> {
    (500u64..7_000, target(), 1u64..max_ms)
        .prop_map(move |(at, target, duration)| common::fault(kind, at, &target, Some(duration)))
}

/// A client pause shorter than the renewal margin: ttl 1 s renews every
/// 333 ms, so a 300 ms pause never lets validity lapse.
fn short_pause() -> impl Strategy<Value = ConcreteFault> {
    (500u64..7_000, 0usize..3, 1u64..300)
        .prop_map(|(at, n, d)| common::fault(FaultKind::Pause, at, &format!("client:{n}"), Some(d)))
}

fn latency() -> impl Strategy<Value = ConcreteFault> {
    (timed(FaultKind::Latency, 3_000), 1u64..250).prop_map(|(mut fault, delay)| {
        fault.delay = Some(common::ms(delay));
        fault
    })
}

/// Client clock drift within ±0.4 %, under the 1 % drift factor.
fn drift() -> impl Strategy<Value = ConcreteFault> {
    (500u64..7_000, 0usize..3, -40i32..40).prop_map(|(at, n, permille_tenths)| {
        let mut fault = common::fault(FaultKind::ClockDrift, at, &format!("client:{n}"), None);
        fault.rate = Some(f64::from(permille_tenths) / 10_000.0);
        fault
    })
}

fn any_safe_fault() -> impl Strategy<Value = ConcreteFault> {
    prop_oneof![
        short_pause(),
        timed(FaultKind::Partition, 3_000),
        timed(FaultKind::PartitionOneway, 3_000),
        latency(),
        drift(),
        timed(FaultKind::Busy, 800),
    ]
}

fn check(scenario: &Scenario, schedule: Vec<ConcreteFault>) -> Result<(), TestCaseError> {
    let outcome = world::run_schedule(scenario, BASE_SEED, &schedule);
    let broken: Vec<_> = outcome
        .verdict
        .violations
        .iter()
        .filter(|v| MUST_HOLD.contains(&v.property))
        .collect();
    prop_assert!(
        broken.is_empty(),
        "violations {:#?}\nschedule (scenario form):\n{}",
        broken,
        common::as_toml(&schedule)
    );
    Ok(())
}

proptest! {
    #![proptest_config(Config { cases: cases(), failure_persistence: None, ..Config::default() })]

    #[test]
    fn single_redis_stays_safe_under_mixed_faults(schedule in prop::collection::vec(any_safe_fault(), 0..6)) {
        check(&common::single("safe-mixed"), schedule)?;
    }

    #[test]
    fn single_redis_stays_safe_under_partitions(schedule in prop::collection::vec(timed(FaultKind::Partition, 4_000), 1..4)) {
        check(&common::single("safe-partitions"), schedule)?;
    }

    #[test]
    fn single_redis_stays_safe_under_pauses_and_drift(
        schedule in prop::collection::vec(prop_oneof![short_pause(), drift()], 1..6)
    ) {
        check(&common::single("safe-pauses-drift"), schedule)?;
    }

    #[test]
    fn single_redis_stays_safe_under_latency(schedule in prop::collection::vec(latency(), 1..4)) {
        check(&common::single("safe-latency"), schedule)?;
    }
}

#[test]
fn a_replayed_schedule_hashes_the_same() {
    let schedule = vec![
        common::fault(FaultKind::Partition, 1_000, "client:0", Some(2_000)),
        common::fault(FaultKind::Pause, 4_000, "client:1", Some(250)),
    ];
    let mut scenario = common::single("replay");
    // Long holds, so the partition surely cuts a holder off from Redis.
    scenario.clients.hold = common::range(1_500, 2_500);
    let first = world::run_schedule(&scenario, BASE_SEED, &schedule);
    let second = world::run_schedule(&scenario, BASE_SEED, &schedule);
    assert_eq!(first.history.hash(), second.history.hash());
    assert!(
        first.verdict.facts.contains("lock-lost-while-held"),
        "the partition bit: {:?}",
        first.verdict.facts
    );
}
