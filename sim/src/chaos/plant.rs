//! Planted bugs: positive controls for the checkers on real processes.
//!
//! A checker that never fires proves nothing. `sim chaos --plant BUG` runs
//! a file with one deliberate bug in the client, the storage or the
//! server's state, and the property the bug breaks must then show in the
//! real history; `sim/tests/sim_it/chaos/plant.rs` runs each. A planted run is
//! never evidence for the lock: the summary names every plant, and
//! `sim agree` takes none.

use serde::{Deserialize, Serialize};

use crate::config::{FaultKind, FencingMode, Property, Scenario, Target, Topology, WorkloadKind};

/// One deliberate bug.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Plant {
    /// The storage accepts every write whatever its fence (a resource that
    /// does not check fences). With `zombie-writes` it breaks S4.
    StorageIgnoresFences,
    /// Each client writes once more with its old fence 50 ms after it
    /// released (a task that outlived its lock). An honest storage refuses
    /// those writes once a newer holder has written; beside
    /// `storage-ignores-fences`, S4 must fire.
    ZombieWrites,
    /// The namespace's fence counter is deleted every 200 ms (`DEL` on
    /// every node, as an eviction would), so `Fencing::Counter` issues a
    /// fence lower than one already issued: S3 must fire.
    FenceCounterReset,
    /// A client never releases: it records the release and forgets the
    /// guard, whose renewals go on. The key outlives its client's
    /// interest: A1 must fire.
    NeverRelease,
    /// A read-write client that means to write takes a read lock and
    /// believes it exclusive: F1 must fire.
    WriteAsRead,
    /// Semaphore clients count one permit more than the file's: F2 must
    /// fire.
    ExtraPermit,
    /// Fair-mode clients take the plain lock, which lets a newcomer
    /// overtake a live waiter: F3 must fire.
    Unfair,
    /// A client records the `Lost` lock-core delivers one ttl late (a
    /// holder that learns of its loss long after its lease ran out): where
    /// a fault ends a hold while its client runs, S6 must fire.
    LateLost,
    /// A client records its release 100 ms after the release deleted its
    /// key (work that goes on after the key is gone): S2 must fire.
    LateRelease,
    /// A client releases with a plain `DEL` of the lock key, without
    /// checking the key is its own: where its key can expire under it (a
    /// pause past the ttl) and another client take the lock, it deletes
    /// that client's key, and S5 (checked from the journal) must fire.
    SkipOwnerCheck,
    /// A client whose acquire fails (its wait ran out, or the server did
    /// not answer) never tries again, as a worker whose loop ends at the
    /// first failed acquire (`acquire()?` at its top) does. Where a fault
    /// fails every client's acquire, nobody acquires after it heals: L1
    /// must fire, and L2 where the run goes on a bound after that.
    GiveUpOnFailure,
    /// Redlock clients acquire only while every node answers a `PING` (a
    /// health check that demands every node, not a majority): one node of
    /// three cut off leaves the lock unheld, and L3 must fire.
    RedlockEveryNode,
    /// Fair clients keep their place in the queue ten times the waiter
    /// ttl the file's lock has (as the simulator's `stretched_waiter_ttl`):
    /// a waiter that dies in the queue holds the live waiters behind it up
    /// ten times as long as F4 allows, and F4 must fire.
    StretchedWaiterTtl,
}

impl Plant {
    /// Every plant, in the order `--plant` lists them.
    pub const ALL: [Self; 13] = [
        Self::StorageIgnoresFences,
        Self::ZombieWrites,
        Self::FenceCounterReset,
        Self::NeverRelease,
        Self::WriteAsRead,
        Self::ExtraPermit,
        Self::Unfair,
        Self::LateLost,
        Self::LateRelease,
        Self::SkipOwnerCheck,
        Self::GiveUpOnFailure,
        Self::RedlockEveryNode,
        Self::StretchedWaiterTtl,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::StorageIgnoresFences => "storage-ignores-fences",
            Self::ZombieWrites => "zombie-writes",
            Self::FenceCounterReset => "fence-counter-reset",
            Self::NeverRelease => "never-release",
            Self::WriteAsRead => "write-as-read",
            Self::ExtraPermit => "extra-permit",
            Self::Unfair => "unfair",
            Self::LateLost => "late-lost",
            Self::LateRelease => "late-release",
            Self::SkipOwnerCheck => "skip-owner-check",
            Self::GiveUpOnFailure => "give-up-on-failure",
            Self::RedlockEveryNode => "redlock-every-node",
            Self::StretchedWaiterTtl => "stretched-waiter-ttl",
        }
    }

    /// The property its bug breaks (for `storage-ignores-fences` and
    /// `zombie-writes`, the two together; `give-up-on-failure` breaks L2
    /// too, where the run goes on long enough).
    pub fn breaks(self) -> Property {
        match self {
            Self::StorageIgnoresFences | Self::ZombieWrites => Property::FencedWrites,
            Self::FenceCounterReset => Property::Tokens,
            Self::NeverRelease => Property::NoOrphans,
            Self::WriteAsRead => Property::WriterExclusion,
            Self::ExtraPermit => Property::Capacity,
            Self::Unfair => Property::FairOrder,
            Self::LateLost => Property::TimelyLoss,
            Self::LateRelease => Property::ServerOracle,
            Self::SkipOwnerCheck => Property::OwnerOnly,
            Self::GiveUpOnFailure => Property::Liveness,
            Self::RedlockEveryNode => Property::QuorumAvailability,
            Self::StretchedWaiterTtl => Property::DeadWaiter,
        }
    }

    /// Why it cannot be planted in `scenario`, if it cannot: the bug
    /// needs a workload, fences or a fault that the file does not have.
    pub fn refusal(self, scenario: &Scenario) -> Option<String> {
        let kind = scenario.clients.workload.kind;
        let fencing = scenario.lock.fencing;
        let need = |what: &str| Some(format!("--plant {} needs {what}", self.name()));
        match self {
            Self::StorageIgnoresFences | Self::ZombieWrites
                if kind == WorkloadKind::Semaphore || fencing == FencingMode::None =>
            {
                need("fenced writes: an exclusive workload and `fencing` other than none")
            }
            Self::FenceCounterReset
                if kind == WorkloadKind::Semaphore || fencing != FencingMode::Counter =>
            {
                need("`fencing = \"counter\"` and an exclusive workload")
            }
            Self::NeverRelease if !matches!(kind, WorkloadKind::Mutex | WorkloadKind::Fair) => {
                need("a mutex or fair workload (A1 reads the one lock key)")
            }
            Self::WriteAsRead if kind != WorkloadKind::ReadWrite => need("a read-write workload"),
            Self::ExtraPermit if kind != WorkloadKind::Semaphore => need("a semaphore workload"),
            Self::Unfair if kind != WorkloadKind::Fair => need("a fair workload"),
            Self::LateLost if !loses_holds(scenario) => need(
                "a fault that can end a hold while its client runs (a client pause or crash exempts the loss, and without a fault there is none)",
            ),
            Self::LateRelease if !matches!(kind, WorkloadKind::Mutex | WorkloadKind::Fair) => {
                need("a mutex or fair workload (S2 reads the one lock key)")
            }
            Self::SkipOwnerCheck
                if !matches!(kind, WorkloadKind::Mutex | WorkloadKind::Fair)
                    || !matches!(
                        scenario.topology,
                        Topology::Single | Topology::PrimaryReplica { .. }
                    ) =>
            {
                need(
                    "a mutex or fair workload on a single node or primary-replica (S5 is checked on real runs from the primary's replication stream, there alone)",
                )
            }
            Self::GiveUpOnFailure if scenario.faults.is_empty() && scenario.mix.is_none() => need(
                "a fault (without one, only a waiter whose wait runs out fails, and the holder of the moment goes on)",
            ),
            Self::RedlockEveryNode
                if !matches!(scenario.topology, Topology::Redlock { .. })
                    || !(scenario.mix.is_some()
                        || scenario
                            .faults
                            .iter()
                            .any(|fault| matches!(fault.target, Target::Redis(_)))) =>
            {
                need("a Redlock topology and a fault on one of its nodes")
            }
            Self::StretchedWaiterTtl if kind != WorkloadKind::Fair || !waiters_absent(scenario) => {
                need(
                    "a fair workload whose faults are all a client's pause, crash or partition, at least one (F4 judges a run under those alone)",
                )
            }
            _ => None,
        }
    }

    /// The summary's line for it.
    pub fn describe(self) -> String {
        let what = match self {
            Self::StorageIgnoresFences => "the storage accepts every fence",
            Self::ZombieWrites => "each client writes with its old fence 50 ms after releasing",
            Self::FenceCounterReset => "the fence counter is deleted every 200 ms",
            Self::NeverRelease => "clients forget their guards instead of releasing",
            Self::WriteAsRead => "writers take read locks",
            Self::ExtraPermit => "clients count one permit more",
            Self::Unfair => "fair clients take the plain lock",
            Self::LateLost => "clients record each Lost one ttl late",
            Self::LateRelease => "clients record each release 100 ms after it deleted the key",
            Self::SkipOwnerCheck => "clients release with a plain DEL, whoever owns the key",
            Self::GiveUpOnFailure => "clients stop for good after a failed acquire",
            Self::RedlockEveryNode => "Redlock clients acquire only while every node answers",
            Self::StretchedWaiterTtl => "fair clients keep their queue place ten waiter ttls",
        };
        let property = crate::scenario::property_name(self.breaks());
        let control = match self {
            Self::StorageIgnoresFences => format!("with zombie-writes, {property} must fire"),
            Self::ZombieWrites => format!(
                "alone, the fenced storage refuses them (fact fenced-write-rejected); with storage-ignores-fences, {property} must fire"
            ),
            Self::GiveUpOnFailure => format!(
                "{property} must fire, and {} where the run goes on a bound after it",
                crate::scenario::property_name(Property::Availability)
            ),
            _ => format!("{property} must fire"),
        };
        format!(
            "planted bug {}: {what} (a positive control: {control}; not evidence for the lock)",
            self.name()
        )
    }
}

/// Whether a fault of `scenario` can end a hold while its client runs: any
/// but a client's pause or crash (S6 exempts a loss its client could not
/// see), fixed or in the mix.
fn loses_holds(scenario: &Scenario) -> bool {
    let can = |kind: FaultKind| !matches!(kind, FaultKind::Pause | FaultKind::Crash);
    scenario.faults.iter().any(|fault| {
        can(fault.kind) || !matches!(fault.target, Target::Client(_) | Target::AnyClient)
    }) || scenario
        .mix
        .as_ref()
        .is_some_and(|mix| mix.kinds.iter().copied().any(can))
}

/// Whether `scenario`'s faults make a waiter absent and are all of the
/// kinds F4 judges a run under: a client's pause, crash or partition (a
/// fault mix is not, whatever it draws).
fn waiters_absent(scenario: &Scenario) -> bool {
    scenario.mix.is_none()
        && !scenario.faults.is_empty()
        && scenario.faults.iter().all(|fault| {
            matches!(
                fault.kind,
                FaultKind::Pause | FaultKind::Crash | FaultKind::Partition
            ) && matches!(fault.target, Target::Client(_) | Target::AnyClient)
        })
}

/// The scenario a planted client runs: `extra-permit` counts one permit
/// more, `unfair` takes the plain lock. The controller's checkers keep
/// the file's own.
pub(crate) fn client_scenario(scenario: &Scenario, plants: &[Plant]) -> Scenario {
    let mut scenario = scenario.clone();
    let workload = &mut scenario.clients.workload;
    if plants.contains(&Plant::ExtraPermit) {
        workload.permits += 1;
    }
    if plants.contains(&Plant::Unfair) && workload.kind == WorkloadKind::Fair {
        workload.kind = WorkloadKind::Mutex;
    }
    scenario
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(workload: &str, fencing: &str) -> Scenario {
        let text = format!(
            "name = \"p\"\ndescription = \"\"\nduration = \"1s\"\nexpect = \"safe\"\n[lock]\nttl = \"1s\"\nfencing = \"{fencing}\"\n\
             [clients]\ncount = 2\n[workload]\nkind = \"{workload}\"\n"
        );
        crate::scenario::parse_scenario("p.toml", &text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn each_plant_is_refused_where_its_bug_cannot_show_and_accepted_where_it_can() {
        let cases = [
            (
                Plant::StorageIgnoresFences,
                "mutex",
                "time-mixed",
                "mutex",
                "none",
            ),
            (
                Plant::ZombieWrites,
                "read-write",
                "time-mixed",
                "semaphore",
                "time-mixed",
            ),
            (
                Plant::FenceCounterReset,
                "mutex",
                "counter",
                "mutex",
                "time-mixed",
            ),
            (
                Plant::NeverRelease,
                "fair",
                "time-mixed",
                "read-write",
                "time-mixed",
            ),
            (Plant::WriteAsRead, "read-write", "none", "mutex", "none"),
            (Plant::ExtraPermit, "semaphore", "none", "fair", "none"),
            (Plant::Unfair, "fair", "none", "mutex", "none"),
            (Plant::LateRelease, "fair", "none", "semaphore", "none"),
            (Plant::SkipOwnerCheck, "mutex", "none", "read-write", "none"),
        ];
        for (plant, ok_kind, ok_fencing, bad_kind, bad_fencing) in cases {
            assert_eq!(
                plant.refusal(&scenario(ok_kind, ok_fencing)),
                None,
                "{plant:?}"
            );
            let refusal = plant.refusal(&scenario(bad_kind, bad_fencing));
            assert!(
                refusal.is_some_and(|why| why.contains(plant.name())),
                "{plant:?} on {bad_kind}/{bad_fencing}"
            );
        }
    }

    #[test]
    fn late_lost_needs_a_fault_that_ends_a_hold_while_its_client_runs() {
        let fault = |kind: &str, target: &str| {
            let text = format!(
                "name = \"p\"\ndescription = \"\"\nduration = \"1s\"\nexpect = \"safe\"\n[lock]\nttl = \"1s\"\n\
                 [[fault]]\nkind = \"{kind}\"\nat = \"100ms\"\ntarget = \"{target}\"\nduration = \"100ms\"\n"
            );
            crate::scenario::parse_scenario("p.toml", &text).unwrap_or_else(|e| panic!("{e}"))
        };
        let refused = |scenario: &Scenario| Plant::LateLost.refusal(scenario).is_some();
        assert!(refused(&scenario("mutex", "none")), "no fault, no loss");
        assert!(
            refused(&fault("pause", "client:0")),
            "a paused client is exempt"
        );
        assert!(!refused(&fault("busy", "redis:0")), "a busy server");
        assert!(!refused(&fault("partition", "client:0")));
    }

    #[test]
    fn the_progress_plants_need_the_topology_and_the_faults_their_bug_shows_under() {
        // `faults`: (kind, target) pairs, each from 100 ms (for 100 ms, but
        // a crash).
        let file = |topology: &str, workload: &str, faults: &[(&str, &str)]| {
            let mut text = format!(
                "name = \"p\"\ndescription = \"\"\nduration = \"1s\"\nexpect = \"safe\"\n{topology}\
                 [lock]\nttl = \"1s\"\nfencing = \"none\"\n[clients]\ncount = 2\n[workload]\nkind = \"{workload}\"\n"
            );
            for (kind, target) in faults {
                text.push_str(&format!(
                    "[[fault]]\nkind = \"{kind}\"\nat = \"100ms\"\ntarget = \"{target}\"\n"
                ));
                if *kind != "crash" {
                    text.push_str("duration = \"100ms\"\n");
                }
            }
            crate::scenario::parse_scenario("p.toml", &text).unwrap_or_else(|e| panic!("{e}"))
        };
        let single = "";
        let redlock = "[topology]\nkind = \"redlock\"\nnodes = 3\n";
        let cases = [
            (Plant::GiveUpOnFailure, single, "mutex", &[][..], false),
            (
                Plant::GiveUpOnFailure,
                single,
                "mutex",
                &[("partition", "client:0")][..],
                true,
            ),
            (
                Plant::RedlockEveryNode,
                single,
                "mutex",
                &[("partition", "redis:0")][..],
                false,
            ),
            (
                Plant::RedlockEveryNode,
                redlock,
                "mutex",
                &[("partition", "client:0")][..],
                false,
            ),
            (
                Plant::RedlockEveryNode,
                redlock,
                "mutex",
                &[("partition", "redis:0")][..],
                true,
            ),
            (
                Plant::StretchedWaiterTtl,
                single,
                "mutex",
                &[("pause", "client:any")][..],
                false,
            ),
            (Plant::StretchedWaiterTtl, single, "fair", &[][..], false),
            (
                Plant::StretchedWaiterTtl,
                single,
                "fair",
                &[("pause", "client:any"), ("partition", "redis:0")][..],
                false,
            ),
            (
                Plant::StretchedWaiterTtl,
                single,
                "fair",
                &[("pause", "client:any"), ("crash", "client:1")][..],
                true,
            ),
        ];
        for (plant, topology, workload, faults, accepted) in cases {
            let refusal = plant.refusal(&file(topology, workload, faults));
            assert_eq!(
                refusal.is_none(),
                accepted,
                "{plant:?} on {topology:?} {workload} {faults:?}: {refusal:?}"
            );
            assert!(
                refusal.is_none_or(|why| why.contains(plant.name())),
                "{plant:?}"
            );
        }
    }

    #[test]
    fn a_planted_client_counts_one_permit_more_or_takes_the_plain_lock() {
        let semaphore = scenario("semaphore", "none");
        let planted = client_scenario(&semaphore, &[Plant::ExtraPermit]);
        assert_eq!(
            planted.clients.workload.permits,
            semaphore.clients.workload.permits + 1
        );
        let fair = scenario("fair", "none");
        let planted = client_scenario(&fair, &[Plant::Unfair]);
        assert_eq!(planted.clients.workload.kind, WorkloadKind::Mutex);
        assert_eq!(
            client_scenario(&fair, &[]).clients.workload,
            fair.clients.workload
        );
    }
}
