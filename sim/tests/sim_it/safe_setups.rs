//! Safe setups stay safe: single Redis under bounded client pauses,
//! partitions, latency and client clock drift within the drift factor;
//! Redlock under faults that leave a majority of its nodes alone.
//! proptest generates the fault schedules and would shrink any failure to
//! the smallest schedule, printed in scenario-file form.

use crate::common;

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
    check_holds(scenario, schedule, &MUST_HOLD)
}

/// Runs `schedule` and fails, printing the schedule in scenario form, if
/// any of `must_hold` is violated.
fn check_holds(
    scenario: &Scenario,
    schedule: Vec<ConcreteFault>,
    must_hold: &[Property],
) -> Result<(), TestCaseError> {
    let outcome = world::run_schedule(scenario, BASE_SEED, &schedule);
    let broken: Vec<_> = outcome
        .verdict
        .violations
        .iter()
        .filter(|v| must_hold.contains(&v.property))
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

/// One fault on one Redlock node at a time (a partition, slow links, a
/// crash for good, or a restart that stays down longer than the ttl), so a
/// majority of the three nodes is always left untouched.
fn one_redlock_node_at_a_time() -> impl Strategy<Value = Vec<ConcreteFault>> {
    let one = (0usize..4, 0usize..3, 1u64..2_000, 1u64..120).prop_map(|(kind, node, d, delay)| {
        let target = format!("redis:{node}");
        match kind {
            0 => (FaultKind::Partition, target, Some(d), None),
            1 => (FaultKind::Latency, target, Some(d), Some(delay)),
            2 => (FaultKind::Restart, target, Some(1_100 + d), None),
            _ => (FaultKind::Crash, target, None, None),
        }
    });
    prop::collection::vec(one, 1..4).prop_map(|faults| {
        // Back to back, so no two overlap: each starts after the last healed.
        let mut at = 500;
        let mut schedule = Vec::new();
        let mut crashed = false;
        for (kind, target, duration, delay) in faults {
            if crashed {
                break;
            }
            let mut fault = common::fault(kind, at, &target, duration);
            fault.delay = delay.map(common::ms);
            crashed = kind == FaultKind::Crash;
            at += duration.unwrap_or(0) + 100;
            schedule.push(fault);
        }
        schedule
    })
}

proptest! {
    #![proptest_config(Config { cases: cases() / 5, failure_persistence: None, ..Config::default() })]

    #[test]
    fn redlock_stays_safe_while_a_majority_is_untouched(schedule in one_redlock_node_at_a_time()) {
        // Per-node fences are not globally ordered: S3 and S4 do not apply.
        check_holds(
            &common::redlock("redlock-minority", 3),
            schedule,
            &[Property::LeaseExclusion, Property::ServerOracle, Property::OwnerOnly, Property::TimelyLoss],
        )?;
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

/// A Redlock node's release (unannounced: nobody subscribes there) goes as
/// `DELIFEQ` on Valkey 9.1 and `DELEX … IFEQ` on Redis 8.4, chosen from
/// `INFO server` at connect time, and releases as the script does: a
/// fault-free run breaks nothing, no-orphans included (every released key
/// is gone). Older servers keep the script.
#[test]
fn redlock_releases_natively_on_valkey_9_and_redis_8_4() {
    use sim::config::ServerFlavour;
    for (flavour, native) in [
        (ServerFlavour::Valkey91, true),
        (ServerFlavour::Redis84, true),
        (ServerFlavour::Valkey81, false),
        (ServerFlavour::Redis70, false),
    ] {
        let mut scenario = common::redlock("native-release", 3);
        scenario.server.flavour = flavour;
        scenario.duration = common::ms(6_000);
        let outcome = world::run_schedule(&scenario, BASE_SEED, &[]);
        assert_eq!(
            outcome.verdict.facts.contains("native-release"),
            native,
            "{flavour:?}: facts {:?}",
            outcome.verdict.facts
        );
        assert!(
            outcome.verdict.violations.is_empty(),
            "{flavour:?}: {:#?}",
            outcome.verdict.violations
        );
        // Releases ran, and each deleted its own key.
        let releases: Vec<&str> = outcome
            .history
            .entries
            .iter()
            .filter_map(|entry| match &entry.op {
                sim::history::Op::ReleaseOk { outcome, .. } => Some(outcome.as_str()),
                _ => None,
            })
            .collect();
        assert!(releases.len() >= 3, "{flavour:?}: {releases:?}");
        assert!(
            releases.iter().all(|outcome| *outcome == "Deleted"),
            "{flavour:?}: {releases:?}"
        );
    }
}
