//! The one table of names and rules for scenario files: every fault kind
//! (its name, whom it may hit, which parameters it takes, which topologies
//! it applies to), every property, every topology kind. The parser, the
//! writer, the world, the fault mixes and the reports all read these, so
//! adding a fault kind or a topology kind is a row here plus the code that
//! makes it happen.

use crate::config::{
    Expect, FaultKind, FencingMode, Persistence, Property, ServerFlavour, Topology, WorkloadKind,
};

/// Which hosts a fault kind may hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hosts {
    /// `client:N` or `client:any`.
    Clients,
    /// `redis:N` or `redis:primary`.
    RedisNodes,
    /// A client or a Redis node (something with a clock).
    ClientsOrRedis,
    /// Any host, storage included.
    Any,
}

impl Hosts {
    /// How a scenario file should name such a target, for error messages.
    pub fn wanted(self) -> &'static str {
        match self {
            Self::Clients => "a client (client:N or client:any)",
            Self::RedisNodes => "a Redis node (redis:N or redis:primary)",
            Self::ClientsOrRedis => "a client or a Redis node (storage has no clock)",
            Self::Any => "any host",
        }
    }
}

/// Whether a fault kind takes a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// It must be given.
    Required,
    /// It may be given.
    Optional,
    /// Giving it is a mistake.
    Never,
}

/// Everything the harness knows about one fault kind.
#[derive(Debug, Clone, Copy)]
pub struct FaultKindInfo {
    /// The kind.
    pub kind: FaultKind,
    /// Its name in scenario files and histories.
    pub name: &'static str,
    /// Whom it may hit.
    pub hosts: Hosts,
    /// Its `duration` (a fault with one has an end).
    pub duration: Use,
    /// Its `rate` (clock drift).
    pub rate: Use,
    /// Its `offset` (clock jump).
    pub offset: Use,
    /// Its `delay` (latency).
    pub delay: Use,
    /// Whether it applies to a topology at all.
    pub applies: fn(&Topology) -> bool,
    /// Whether it must target `redis:primary` (the node that is primary
    /// when it fires), rather than a node by number.
    pub primary_only: bool,
    /// Whether a server of this flavour has what it models (most faults
    /// happen to any server).
    pub serves: fn(ServerFlavour) -> bool,
}

impl FaultKindInfo {
    /// Whether the fault has an end, `duration` after it begins.
    pub fn lasts(&self) -> bool {
        self.duration != Use::Never
    }

    /// Why a scenario on servers of `flavour` cannot have this fault, if
    /// it models what only other servers do.
    pub fn refusal_on(&self, flavour: ServerFlavour) -> Option<String> {
        if (self.serves)(flavour) {
            return None;
        }
        let serving: Vec<&str> = FLAVOURS
            .iter()
            .filter(|(_, other)| (self.serves)(*other))
            .map(|(name, _)| *name)
            .collect();
        let given = FLAVOURS
            .iter()
            .find(|(_, other)| *other == flavour)
            .map_or("the flavour given", |(name, _)| *name);
        Some(format!(
            "a {} fault needs a [server] flavour that has it ({}); {given} has not",
            self.name,
            serving.join(", ")
        ))
    }
}

fn any_topology(_: &Topology) -> bool {
    true
}

fn any_flavour(_: ServerFlavour) -> bool {
    true
}

/// Every fault kind, in the order `docs/scenarios.md` lists them.
pub const FAULT_KINDS: [FaultKindInfo; 14] = [
    FaultKindInfo {
        kind: FaultKind::Pause,
        name: "pause",
        hosts: Hosts::Clients,
        duration: Use::Required,
        rate: Use::Never,
        offset: Use::Never,
        delay: Use::Never,
        applies: any_topology,
        primary_only: false,
        serves: any_flavour,
    },
    FaultKindInfo {
        kind: FaultKind::Partition,
        name: "partition",
        hosts: Hosts::Any,
        duration: Use::Required,
        rate: Use::Never,
        offset: Use::Never,
        delay: Use::Never,
        applies: any_topology,
        primary_only: false,
        serves: any_flavour,
    },
    FaultKindInfo {
        kind: FaultKind::PartitionOneway,
        name: "partition-oneway",
        hosts: Hosts::Any,
        duration: Use::Required,
        rate: Use::Never,
        offset: Use::Never,
        delay: Use::Never,
        applies: any_topology,
        primary_only: false,
        serves: any_flavour,
    },
    FaultKindInfo {
        kind: FaultKind::Latency,
        name: "latency",
        hosts: Hosts::Any,
        duration: Use::Required,
        rate: Use::Never,
        offset: Use::Never,
        delay: Use::Required,
        applies: any_topology,
        primary_only: false,
        serves: any_flavour,
    },
    // Without a duration the old primary dies; with one, that is its stale
    // window: up, writable and serving its clients, until it is demoted.
    FaultKindInfo {
        kind: FaultKind::Failover,
        name: "failover",
        hosts: Hosts::RedisNodes,
        duration: Use::Optional,
        rate: Use::Never,
        offset: Use::Never,
        delay: Use::Never,
        applies: Topology::can_fail_over,
        primary_only: true,
        serves: any_flavour,
    },
    FaultKindInfo {
        kind: FaultKind::Restart,
        name: "restart",
        hosts: Hosts::RedisNodes,
        duration: Use::Optional,
        rate: Use::Never,
        offset: Use::Never,
        delay: Use::Never,
        applies: any_topology,
        primary_only: false,
        serves: any_flavour,
    },
    FaultKindInfo {
        kind: FaultKind::ClockDrift,
        name: "clock-drift",
        hosts: Hosts::ClientsOrRedis,
        duration: Use::Optional,
        rate: Use::Required,
        offset: Use::Never,
        delay: Use::Never,
        applies: any_topology,
        primary_only: false,
        serves: any_flavour,
    },
    // A client reads a monotonic clock, which never steps: Redis only.
    FaultKindInfo {
        kind: FaultKind::ClockJump,
        name: "clock-jump",
        hosts: Hosts::RedisNodes,
        duration: Use::Never,
        rate: Use::Never,
        offset: Use::Required,
        delay: Use::Never,
        applies: any_topology,
        primary_only: false,
        serves: any_flavour,
    },
    FaultKindInfo {
        kind: FaultKind::Busy,
        name: "busy",
        hosts: Hosts::RedisNodes,
        duration: Use::Required,
        rate: Use::Never,
        offset: Use::Never,
        delay: Use::Never,
        applies: any_topology,
        primary_only: false,
        serves: any_flavour,
    },
    FaultKindInfo {
        kind: FaultKind::Crash,
        name: "crash",
        hosts: Hosts::Any,
        duration: Use::Never,
        rate: Use::Never,
        offset: Use::Never,
        delay: Use::Never,
        applies: any_topology,
        primary_only: false,
        serves: any_flavour,
    },
    // Instantaneous: one key per firing (`every` repeats it for sustained
    // memory pressure). Redis's rule is `volatile-ttl`; see
    // `server::db::Db::evict_volatile_ttl`.
    FaultKindInfo {
        kind: FaultKind::Evict,
        name: "evict",
        hosts: Hosts::RedisNodes,
        duration: Use::Never,
        rate: Use::Never,
        offset: Use::Never,
        delay: Use::Never,
        applies: any_topology,
        primary_only: false,
        serves: any_flavour,
    },
    // Any node names its shard (`redis:primary`: the lock key's). Without
    // a duration the old primary is demoted at once; with one, that is its
    // stale window.
    FaultKindInfo {
        kind: FaultKind::ShardFailover,
        name: "shard-failover",
        hosts: Hosts::RedisNodes,
        duration: Use::Optional,
        rate: Use::Never,
        offset: Use::Never,
        delay: Use::Never,
        applies: Topology::can_fail_over_shard,
        primary_only: false,
        serves: any_flavour,
    },
    // The lock key's slot leaves the primary that owns it when the fault
    // fires; the migration takes `duration`.
    FaultKindInfo {
        kind: FaultKind::SlotMigration,
        name: "slot-migration",
        hosts: Hosts::RedisNodes,
        duration: Use::Required,
        rate: Use::Never,
        offset: Use::Never,
        delay: Use::Never,
        applies: Topology::can_migrate_slots,
        primary_only: true,
        serves: any_flavour,
    },
    // The same slot, moved as Valkey 9's `CLUSTER MIGRATESLOTS` moves it:
    // `duration` is the snapshot and the stream, the cut-over follows.
    FaultKindInfo {
        kind: FaultKind::AtomicSlotMigration,
        name: "atomic-slot-migration",
        hosts: Hosts::RedisNodes,
        duration: Use::Required,
        rate: Use::Never,
        offset: Use::Never,
        delay: Use::Never,
        applies: Topology::can_migrate_slots,
        primary_only: true,
        serves: ServerFlavour::has_atomic_slot_migration,
    },
];

/// What the harness knows about `kind`.
pub fn fault_kind(kind: FaultKind) -> &'static FaultKindInfo {
    FAULT_KINDS
        .iter()
        .find(|info| info.kind == kind)
        // Every FaultKind has its row: `every_kind_has_one_row` checks it.
        .expect("every fault kind is in FAULT_KINDS")
}

/// The name a fault kind has in scenario files and histories.
pub fn kind_name(kind: FaultKind) -> &'static str {
    fault_kind(kind).name
}

/// Every property: its name in scenario files and reports, and what it
/// means.
pub const PROPERTIES: [(&str, Property, &str); 14] = [
    (
        "lease-exclusion",
        Property::LeaseExclusion,
        "S1: no two clients believe they hold at the same true instant",
    ),
    (
        "server-oracle",
        Property::ServerOracle,
        "S2: a believed holder's key is on the authoritative primary",
    ),
    (
        "tokens",
        Property::Tokens,
        "S3: fences unique and increasing in grant order",
    ),
    (
        "fenced-writes",
        Property::FencedWrites,
        "S4: storage never accepts a write from a holder older than one it already accepted",
    ),
    (
        "owner-only",
        Property::OwnerOnly,
        "S5: a release only deletes, and a renewal only extends, the caller's own key",
    ),
    (
        "timely-loss",
        Property::TimelyLoss,
        "S6: Lost arrives by the holder's deadline unless the client was frozen, and at once when a renewal finds the key gone or the node demoted (READONLY)",
    ),
    (
        "liveness",
        Property::Liveness,
        "L1: after the faults heal, some client acquires within 2 x ttl + 1 s",
    ),
    (
        "no-orphans",
        Property::NoOrphans,
        "A1: no key its client no longer wants sits on the primary for longer than a command timeout plus a round trip",
    ),
    (
        "availability",
        Property::Availability,
        "L2: outside faults (a slot migration is not one) and 2 x ttl + 1 s after each, the lock is never unheld for longer than 2 x ttl + 1 s",
    ),
    (
        "quorum-availability",
        Property::QuorumAvailability,
        "L3 (Redlock): while fewer than a majority of the nodes are under a fault, and outside client and storage faults (and 2 x ttl + 1 s after each), the lock is never unheld for longer than ttl / 2, from the start on",
    ),
    (
        "writer-exclusion",
        Property::WriterExclusion,
        "F1 (read-write): no writer's hold overlaps any other holder's, reader or writer",
    ),
    (
        "capacity",
        Property::Capacity,
        "F2 (semaphore): never more holders than permits at one instant",
    ),
    (
        "fair-order",
        Property::FairOrder,
        "F3 (fair mode): no live waiter is overtaken by a client that started waiting after it",
    ),
    (
        "dead-waiter",
        Property::DeadWaiter,
        "F4 (fair mode): a waiter that dies or pauses in the queue delays the next grant by at most its waiter ttl (and a retry)",
    ),
];

/// The workload kinds by name (`[workload] kind`).
pub const WORKLOAD_KINDS: [(&str, WorkloadKind); 4] = [
    ("mutex", WorkloadKind::Mutex),
    ("fair", WorkloadKind::Fair),
    ("read-write", WorkloadKind::ReadWrite),
    ("semaphore", WorkloadKind::Semaphore),
];

/// The name a property has in scenario files and reports.
pub fn property_name(property: Property) -> &'static str {
    PROPERTIES
        .iter()
        .find(|(_, p, _)| *p == property)
        .map_or("unknown", |(name, _, _)| name)
}

/// The topology kinds, with the `[topology]` keys each takes besides
/// `kind`.
pub const TOPOLOGY_KINDS: [(&str, &[&str]); 5] = [
    ("single", &[]),
    ("primary-replica", &["replicas", "replication_lag"]),
    ("redlock", &["nodes"]),
    (
        "sentinel",
        &["replicas", "sentinels", "replication_lag", "sentinel_lag"],
    ),
    (
        "cluster",
        &["shards", "replicas", "replication_lag", "node_timeout"],
    ),
];

/// The server flavours by name (`[server] flavour`).
pub const FLAVOURS: [(&str, ServerFlavour); 5] = [
    ("redis-7.0", ServerFlavour::Redis70),
    ("redis-8.2", ServerFlavour::Redis82),
    ("valkey-8.1", ServerFlavour::Valkey81),
    ("valkey-9.1", ServerFlavour::Valkey91),
    ("redis-8.4", ServerFlavour::Redis84),
];

/// The persistence settings by name (`[server] persistence`).
pub const PERSISTENCES: [(&str, Persistence); 3] = [
    ("none", Persistence::None),
    ("aof-everysec", Persistence::AofEverysec),
    ("aof-always", Persistence::AofAlways),
];

/// The fencing modes by name.
pub const FENCINGS: [(&str, FencingMode); 3] = [
    ("none", FencingMode::None),
    ("counter", FencingMode::Counter),
    ("time-mixed", FencingMode::TimeMixed),
];

/// The expectations by name.
pub const EXPECTS: [(&str, Expect); 2] = [("safe", Expect::Safe), ("violation", Expect::Violation)];

/// The name of a choice in one of the tables above.
pub fn name_of<T: PartialEq + Copy>(table: &[(&'static str, T)], value: T) -> &'static str {
    table
        .iter()
        .find(|(_, v)| *v == value)
        .map_or("unknown", |(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_row_and_every_name_one_kind() {
        for info in &FAULT_KINDS {
            assert_eq!(fault_kind(info.kind).name, info.name);
            assert_eq!(
                FAULT_KINDS.iter().filter(|i| i.name == info.name).count(),
                1
            );
        }
        for (name, property, _) in PROPERTIES {
            assert_eq!(property_name(property), name);
        }
    }
}
