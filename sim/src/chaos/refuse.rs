//! What real processes cannot take, refused by name and by where the file
//! writes it, before anything starts.

use std::time::Duration;

use super::{ChaosError, fake_clock, target::Target};
use crate::{
    config::{FaultKind, FaultTarget, Scenario, Topology},
    outcome::ConcreteFault,
    scenario::{line_column, names::fault_kind},
    schedule::draw_schedule,
};

/// Why fault `kind` on `target` cannot run on real processes, or `None`.
pub fn refusal(
    kind: FaultKind,
    target: FaultTarget,
    topology: &Topology,
    own: bool,
) -> Option<&'static str> {
    let server = matches!(target, FaultTarget::Redis(_) | FaultTarget::Primary);
    if !own && server {
        return Some(
            "--target runs against a Redis the harness did not start: only client-side faults (pause, crash, partition, latency, clock faults of a client) can be applied",
        );
    }
    if !own
        && matches!(
            kind,
            FaultKind::Failover
                | FaultKind::ShardFailover
                | FaultKind::SlotMigration
                | FaultKind::AtomicSlotMigration
                | FaultKind::Restart
                | FaultKind::Busy
                | FaultKind::Evict
        )
    {
        return Some(
            "--target runs against a Redis the harness did not start: server-side faults cannot be applied",
        );
    }
    match kind {
        FaultKind::Pause | FaultKind::Crash if target == FaultTarget::Storage => {
            Some("the storage runs inside the controller and cannot be stopped apart from it")
        }
        FaultKind::Failover if !topology.can_fail_over() => Some("no replica to promote"),
        FaultKind::SlotMigration if !matches!(topology, Topology::Cluster { .. }) => {
            Some("only a Redis Cluster migrates slots")
        }
        FaultKind::AtomicSlotMigration if !matches!(topology, Topology::Cluster { .. }) => {
            Some("only a Redis Cluster migrates slots")
        }
        FaultKind::Restart | FaultKind::Busy | FaultKind::Evict if !server => {
            Some("only a Redis node can be restarted, made busy or evict")
        }
        _ => None,
    }
}

/// Why a Sentinel failover cannot run as the simulator runs it while a
/// server partition is in effect.
const SENTINEL_PICK: &str = "under Sentinel, a failover while a node other than the primary may be cut off both ways: the simulator promotes no node it cannot reach, but real Sentinel picks the replica it promotes from the INFO it polls every 10 s, and a partition must spare the sentinels' own links (or they would fail the primary over by themselves), so nothing keeps the cut replica from being picked";

/// Under Sentinel, the first failover of `schedule` (sorted by start)
/// that begins while a partition (both ways) of a server is in effect
/// that does not surely cut off the primary of that moment (the node the
/// failover replaces, which neither side promotes): the failover and that
/// partition. A partition of `redis:primary` surely does when no failover
/// began between the two; one of `redis:0`, when none began before.
fn failover_beside_a_cut(schedule: &[ConcreteFault]) -> Option<(&ConcreteFault, &ConcreteFault)> {
    let failovers: Vec<Duration> = schedule
        .iter()
        .filter(|fault| fault.kind == FaultKind::Failover)
        .map(|fault| fault.at)
        .collect();
    let began_between =
        |from: Duration, to: Duration| failovers.iter().any(|at| from < *at && *at < to);
    let failover = |fault: &&ConcreteFault| fault.kind == FaultKind::Failover;
    schedule.iter().filter(failover).find_map(|failover| {
        schedule
            .iter()
            .filter(|cut| {
                cut.kind == FaultKind::Partition
                    && matches!(cut.target, FaultTarget::Redis(_) | FaultTarget::Primary)
                    && cut.at <= failover.at
                    && cut
                        .duration
                        .is_none_or(|duration| failover.at < cut.at + duration)
            })
            .find(|cut| {
                let old_primary = match cut.target {
                    FaultTarget::Primary => !began_between(cut.at, failover.at),
                    FaultTarget::Redis(0) => failovers.first() == Some(&failover.at),
                    _ => false,
                };
                !old_primary
            })
            .map(|cut| (failover, cut))
    })
}

/// Where fault number `index` of `file`'s text is written (its `kind`),
/// or the `[mix]` table's `kinds` for a drawn fault.
fn locate(text: &str, index: Option<usize>) -> (usize, usize) {
    let offset = match index {
        Some(index) => text.match_indices("[[fault]]").nth(index).map(|(at, _)| {
            let block = &text[at..];
            block.find("kind").map_or(at, |k| at + k)
        }),
        None => text
            .find("[mix]")
            .map(|at| text[at..].find("kinds").map_or(at, |k| at + k)),
    }
    .unwrap_or(0);
    line_column(text, offset)
}

/// The target a file's `target` names, as a fault's (any client: the
/// first).
fn fault_target(target: crate::config::Target) -> FaultTarget {
    match target {
        crate::config::Target::Client(n) => FaultTarget::Client(n),
        crate::config::Target::AnyClient => FaultTarget::Client(0),
        crate::config::Target::Primary => FaultTarget::Primary,
        crate::config::Target::Redis(n) => FaultTarget::Redis(n),
        crate::config::Target::Storage => FaultTarget::Storage,
    }
}

/// The refusal of `fault` (its kind and target) in `file`, whose text is
/// `text`, at fault number `index` (or the `[mix]` table's kinds).
fn refused(
    file: &str,
    text: &str,
    (kind, target): (FaultKind, FaultTarget),
    why: &'static str,
    index: Option<usize>,
) -> ChaosError {
    let (line, column) = locate(text, index);
    ChaosError::Refused {
        file: file.to_owned(),
        line,
        column,
        kind: fault_kind(kind).name,
        target: target.to_string(),
        why,
    }
}

/// Checks every fault the given seeds of `scenario` would apply; the first
/// that real processes cannot take is refused with where it is written.
pub fn check_faults(
    file: &str,
    scenario: &Scenario,
    seeds: &[u64],
    target: &Target,
) -> Result<(), ChaosError> {
    let own = *target == Target::Started;
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let refuse = |kind: FaultKind, target: FaultTarget, why: &'static str, index: Option<usize>| {
        refused(file, &text, (kind, target), why, index)
    };
    for (index, spec) in scenario.faults.iter().enumerate() {
        let target = fault_target(spec.target);
        if let Some(why) = refusal(spec.kind, target, &scenario.topology, own) {
            return Err(refuse(spec.kind, target, why, Some(index)));
        }
    }
    if matches!(scenario.topology, Topology::Sentinel { .. }) {
        for &seed in seeds {
            if let Some((failover, cut)) = failover_beside_a_cut(&draw_schedule(scenario, seed)) {
                let index = scenario
                    .faults
                    .iter()
                    .position(|spec| spec.kind == FaultKind::Failover)
                    .filter(|_| scenario.mix.is_none());
                return Err(refuse(failover.kind, cut.target, SENTINEL_PICK, index));
            }
        }
    }
    if scenario.mix.is_some() {
        for &seed in seeds {
            for fault in draw_schedule(scenario, seed) {
                if let Some(why) = refusal(fault.kind, fault.target, &scenario.topology, own) {
                    return Err(refuse(fault.kind, fault.target, why, None));
                }
            }
        }
    }
    Ok(())
}

/// The binaries a real run of `scenario` needs, checked before anything
/// starts: the server of its `[server] flavour` (`super::flavour`), which
/// also runs the sentinels (`--sentinel`); a cluster is made without
/// `redis-cli`. A file with a server clock fault needs a server that can
/// take the preloaded clock library (`super::fake_clock`): a statically
/// linked one is refused at that fault. `None` against a server the
/// harness did not start.
pub fn check_binaries(
    file: &str,
    scenario: &Scenario,
    options: &super::RealOptions,
) -> Result<Option<servers::Binaries>, ChaosError> {
    if options.target != Target::Started {
        return Ok(None);
    }
    let found = super::flavour::check(file, scenario, &options.servers)?;
    if let Some(index) = fake_clock::written_at(scenario)
        && let Some(why) = fake_clock::not_preloadable(found.server())
    {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let fault = index
            .and_then(|index| scenario.faults.get(index))
            .map_or((FaultKind::ClockJump, FaultTarget::Primary), |spec| {
                (spec.kind, fault_target(spec.target))
            });
        return Err(refused(file, &text, fault, why, index));
    }
    Ok(Some(found))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(
        kind: FaultKind,
        target: FaultTarget,
        at: u64,
        duration: Option<u64>,
    ) -> ConcreteFault {
        ConcreteFault {
            kind,
            at: Duration::from_secs(at),
            target,
            duration: duration.map(Duration::from_secs),
            rate: None,
            offset: None,
            delay: None,
        }
    }

    #[test]
    fn a_sentinel_failover_is_refused_only_beside_a_cut_that_may_hold_a_replica() {
        let failover = |at| fault(FaultKind::Failover, FaultTarget::Primary, at, Some(1));
        let cut = |target, at, duration| fault(FaultKind::Partition, target, at, duration);
        // The primary cut off, failed over: nobody promotes it.
        for target in [FaultTarget::Primary, FaultTarget::Redis(0)] {
            assert_eq!(
                failover_beside_a_cut(&[cut(target, 1, Some(5)), failover(3)]),
                None
            );
        }
        // A replica cut off at the failover.
        let schedule = [cut(FaultTarget::Redis(1), 1, Some(5)), failover(3)];
        let found = failover_beside_a_cut(&schedule);
        assert_eq!(found, Some((&schedule[1], &schedule[0])));
        // Healed before, begun after, one way, or latency: no refusal.
        assert_eq!(
            failover_beside_a_cut(&[cut(FaultTarget::Redis(1), 1, Some(2)), failover(3)]),
            None
        );
        assert_eq!(
            failover_beside_a_cut(&[failover(3), cut(FaultTarget::Redis(1), 4, None)]),
            None
        );
        for kind in [FaultKind::PartitionOneway, FaultKind::Latency] {
            let schedule = [fault(kind, FaultTarget::Redis(1), 1, Some(5)), failover(3)];
            assert_eq!(failover_beside_a_cut(&schedule), None);
        }
        // Never healed: still cut at a failover long after.
        let schedule = [cut(FaultTarget::Redis(2), 1, None), failover(30)];
        assert!(failover_beside_a_cut(&schedule).is_some());
        // After a failover, redis-0 may be a replica, and the primary cut
        // before it is the deposed one.
        let schedule = [
            failover(1),
            cut(FaultTarget::Redis(0), 2, Some(5)),
            failover(4),
        ];
        assert!(failover_beside_a_cut(&schedule).is_some());
        let schedule = [
            cut(FaultTarget::Primary, 1, Some(9)),
            failover(2),
            failover(4),
        ];
        assert!(failover_beside_a_cut(&schedule).is_some());
        let schedule = [
            failover(1),
            cut(FaultTarget::Primary, 2, Some(5)),
            failover(4),
        ];
        assert_eq!(failover_beside_a_cut(&schedule), None);
    }

    #[test]
    fn an_atomic_slot_migration_runs_only_on_a_cluster() {
        let cluster = Topology::Cluster {
            shards: 3,
            replicas: 1,
            replication_lag: crate::config::DurationRange {
                min: Duration::from_millis(1),
                max: Duration::from_millis(20),
            },
            node_timeout: Duration::from_secs(15),
        };
        for kind in [FaultKind::AtomicSlotMigration, FaultKind::SlotMigration] {
            assert_eq!(
                refusal(kind, FaultTarget::Primary, &cluster, true),
                None,
                "the harness drives it"
            );
            let why = refusal(kind, FaultTarget::Primary, &Topology::Single, true);
            assert!(why.is_some_and(|why| why.contains("Cluster")), "{why:?}");
        }
    }
}
