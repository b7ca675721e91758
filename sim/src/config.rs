//! What one simulated scenario is made of: topology, lock options, workload
//! and fault schedule. Scenario files parse into these types; the world
//! draws every range from the seed.

use std::{fmt, str::FromStr, time::Duration};

use serde::{Deserialize, Serialize};

/// A closed range of durations, drawn uniformly per use. `min == max` is a
/// fixed value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DurationRange {
    /// The smallest value drawn.
    pub min: Duration,
    /// The largest value drawn.
    pub max: Duration,
}

impl DurationRange {
    /// A range holding one value.
    pub const fn fixed(value: Duration) -> Self {
        Self {
            min: value,
            max: value,
        }
    }
}

/// A signed duration, for clock jumps (`offset = "-3s"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedDuration {
    /// True for a backward jump.
    pub negative: bool,
    /// The size of the jump.
    pub magnitude: Duration,
}

/// What the scenario expects of its checkers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expect {
    /// No property is violated on any seed.
    Safe,
    /// Some seed violates `property` (or any property when none is named).
    Violation,
}

/// The properties the checkers verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Property {
    /// S1: no two clients believe they hold at the same true instant.
    LeaseExclusion,
    /// S2: a believed holder's key is on the authoritative primary.
    ServerOracle,
    /// S3: fences are unique and increase in grant order.
    Tokens,
    /// S4: accepted writes never go backwards; no acknowledged write lost.
    FencedWrites,
    /// S5: no release or renew touches another owner's key.
    OwnerOnly,
    /// S6: Lost is delivered no later than the holder's deadline.
    TimelyLoss,
    /// L1: after faults heal, some waiter acquires in bounded time.
    Liveness,
    /// A1: no key outlives its client's interest in it on the primary
    /// (an orphan costs availability until it expires).
    NoOrphans,
    /// L2: outside faults (a slot migration is not one), the lock never
    /// goes unheld for longer than the liveness bound.
    Availability,
    /// L3 (Redlock): under faults of fewer than a majority of the nodes,
    /// from the start on, the lock never goes unheld for longer than half
    /// the ttl.
    QuorumAvailability,
    /// F1 (read-write): no writer's hold overlaps any other holder's.
    WriterExclusion,
    /// F2 (semaphore): never more holders than permits at one instant.
    Capacity,
    /// F3 (fair mode): no live waiter is overtaken by a client that
    /// started waiting after it.
    FairOrder,
    /// F4 (fair mode): a waiter that dies or pauses in the queue delays
    /// the next grant by at most its waiter ttl.
    DeadWaiter,
}

impl Property {
    /// Whether a scenario that names no property expects this one to hold:
    /// all but A1, L2 and L3, availability findings that tables report
    /// beside them.
    pub fn expected_by_default(self) -> bool {
        !matches!(
            self,
            Self::NoOrphans | Self::Availability | Self::QuorumAvailability
        )
    }
}

/// The server every node of a scenario runs, and its persistence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerConfig {
    /// The server it presents as (`INFO server`, and the commands it knows).
    pub flavour: ServerFlavour,
    /// How it persists: what a restart keeps.
    pub persistence: Persistence,
}

/// The servers a simulated node can present as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerFlavour {
    /// Redis 7.0.15 (no `WAITAOF`, no `SET … IFEQ`).
    #[default]
    Redis70,
    /// Valkey 8.1.8 (`WAITAOF`, `SET … IFEQ`).
    Valkey81,
    /// Valkey 9.1.2 (Valkey 8.1's commands and `DELIFEQ`).
    Valkey91,
    /// Redis 8.2.3 (`WAITAOF`, which waits for the fsync; no `SET … IFEQ`).
    Redis82,
    /// Redis 8.4 (`WAITAOF`, `SET … IFEQ`, `DELEX … IFEQ`), known from its
    /// documentation only: no Redis 8.4 is reachable to compare with.
    Redis84,
}

impl ServerFlavour {
    /// Whether it has atomic slot migration (`CLUSTER MIGRATESLOTS`,
    /// Valkey 9.0 on). Redis 8.4's `CLUSTER MIGRATION IMPORT` is another
    /// design, not modelled.
    pub fn has_atomic_slot_migration(self) -> bool {
        self == Self::Valkey91
    }
}

/// What a node writes to disk, and so what a restart keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Persistence {
    /// `appendonly no`, no snapshots: a restart comes back empty.
    #[default]
    None,
    /// `appendonly yes`, `appendfsync everysec`: the AOF is fsynced once a
    /// second, and a restart keeps what was fsynced. A restart here is a
    /// machine crash: what the OS had not written to disk is gone. (A
    /// Valkey acknowledges a `WAITAOF 1` without waiting for the fsync.)
    AofEverysec,
    /// `appendonly yes`, `appendfsync always`: every write is on disk
    /// before its reply, and a restart loses nothing.
    AofAlways,
}

/// The Redis deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Topology {
    /// One primary, `redis-0`.
    Single,
    /// `redis-0` primary plus replicas with asynchronous replication.
    PrimaryReplica {
        /// How many replicas (`redis-1` ...).
        replicas: usize,
        /// The delay before a replica applies a write.
        replication_lag: DurationRange,
    },
    /// Independent primaries for Redlock.
    Redlock {
        /// How many nodes.
        nodes: usize,
    },
    /// `redis-0` primary plus replicas, watched by `sentinel-0` … which
    /// name the primary to clients (`SENTINEL GET-MASTER-ADDR-BY-NAME`)
    /// and announce failovers (`+switch-master`); clients run lock-core's
    /// Sentinel mode.
    Sentinel {
        /// How many replicas (`redis-1` ...).
        replicas: usize,
        /// How many sentinels (`sentinel-0` ...).
        sentinels: usize,
        /// The delay before a replica applies a write.
        replication_lag: DurationRange,
        /// How long after a failover's leader each other sentinel adopts
        /// the new primary (real sentinels learn it from each other's
        /// hello messages, sent every 2 s), drawn per sentinel and
        /// failover. Until then it still names the old primary.
        sentinel_lag: DurationRange,
    },
    /// A Redis Cluster: `shards` shards, each a primary with `replicas`
    /// replicas (asynchronous replication), the 16384 slots split into
    /// contiguous ranges as `redis-cli --cluster create` splits them.
    /// Shard `s` is `redis-{s × (1 + replicas)}` (its first primary) and
    /// the replicas after it; clients run lock-core's Cluster mode.
    Cluster {
        /// How many shards.
        shards: usize,
        /// Replicas per shard.
        replicas: usize,
        /// The delay before a replica applies a write.
        replication_lag: DurationRange,
        /// `cluster-node-timeout`: how long a primary stays unreachable
        /// (down or partitioned) before the others mark it failed. While a
        /// failed primary still owns slots, the cluster is down: every node
        /// answers `CLUSTERDOWN` (`cluster-require-full-coverage yes`).
        node_timeout: Duration,
    },
}

impl Topology {
    /// The kind's name in scenario files (see `scenario::names::TOPOLOGY_KINDS`).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::Single => "single",
            Self::PrimaryReplica { .. } => "primary-replica",
            Self::Redlock { .. } => "redlock",
            Self::Sentinel { .. } => "sentinel",
            Self::Cluster { .. } => "cluster",
        }
    }

    /// Whether one node is the primary (`redis:primary` names it); in a
    /// Redlock every node is. In a cluster it is the primary that owns the
    /// lock key's slot.
    pub fn has_primary(&self) -> bool {
        !matches!(self, Self::Redlock { .. })
    }

    /// Whether a replica can take over from a failed primary.
    pub fn can_fail_over(&self) -> bool {
        matches!(self, Self::PrimaryReplica { .. } | Self::Sentinel { .. })
    }

    /// Whether a replica of a cluster shard can take over its primary.
    pub fn can_fail_over_shard(&self) -> bool {
        matches!(self, Self::Cluster { replicas, .. } if *replicas > 0)
    }

    /// Whether a cluster has another shard to move a slot to.
    pub fn can_migrate_slots(&self) -> bool {
        matches!(self, Self::Cluster { shards, .. } if *shards > 1)
    }

    /// How many replicas the primary starts with (in a cluster, each
    /// shard's primary).
    pub fn replicas(&self) -> usize {
        match self {
            Self::PrimaryReplica { replicas, .. }
            | Self::Sentinel { replicas, .. }
            | Self::Cluster { replicas, .. } => *replicas,
            Self::Single | Self::Redlock { .. } => 0,
        }
    }

    /// The replicas' lag, where there are replicas.
    pub fn replication_lag(&self) -> Option<DurationRange> {
        match self {
            Self::PrimaryReplica {
                replication_lag, ..
            }
            | Self::Sentinel {
                replication_lag, ..
            }
            | Self::Cluster {
                replication_lag, ..
            } => Some(*replication_lag),
            Self::Single | Self::Redlock { .. } => None,
        }
    }

    /// How many sentinels watch the primary (0 outside Sentinel).
    pub fn sentinel_count(&self) -> usize {
        match self {
            Self::Sentinel { sentinels, .. } => *sentinels,
            _ => 0,
        }
    }

    /// How many Redis hosts the topology has.
    pub fn node_count(&self) -> usize {
        match self {
            Self::Single => 1,
            Self::PrimaryReplica { replicas, .. } | Self::Sentinel { replicas, .. } => 1 + replicas,
            Self::Redlock { nodes } => *nodes,
            Self::Cluster {
                shards, replicas, ..
            } => shards * (1 + replicas),
        }
    }

    /// The cluster's node timeout (`None` outside a cluster).
    pub fn node_timeout(&self) -> Option<Duration> {
        match self {
            Self::Cluster { node_timeout, .. } => Some(*node_timeout),
            _ => None,
        }
    }

    /// The cluster's shards and replicas per shard (`None` outside a
    /// cluster).
    pub fn cluster_shape(&self) -> Option<(usize, usize)> {
        match self {
            Self::Cluster {
                shards, replicas, ..
            } => Some((*shards, *replicas)),
            _ => None,
        }
    }
}

/// How fencing tokens are issued (mirrors `lock_core::Fencing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FencingMode {
    /// No tokens; storage then accepts every write.
    None,
    /// Plain `INCR`.
    Counter,
    /// `max(stored + 1, server time in µs)`.
    TimeMixed,
}

/// The lock options under test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockConfig {
    /// The key's ttl.
    pub ttl: Duration,
    /// The renewal period (ttl/3 when absent).
    pub renew_every: Option<Duration>,
    /// The drift factor.
    pub drift_factor: f64,
    /// How tokens are issued.
    pub fencing: FencingMode,
    /// Replicas `WAIT` must reach after acquire and renew (0 = no `WAIT`).
    pub wait_replicas: u32,
    /// `WAITAOF local replicas` after acquire and renew, if any.
    pub wait_aof: Option<(u32, u32)>,
    /// How long `acquire` waits.
    pub wait: Option<Duration>,
}

/// What the clients do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientsConfig {
    /// How many clients.
    pub count: usize,
    /// Critical-section length, drawn per acquisition.
    pub hold: DurationRange,
    /// Pause between a release and the next acquire, drawn per cycle.
    pub think: DurationRange,
    /// Whether each critical section also writes the unfenced register.
    pub unfenced_register: bool,
    /// Locks each client holds at once: the contended one, plus `locks - 1`
    /// of its own in the same hash slot, cycled by concurrent tasks of the
    /// same locker, so that their operations share script calls (group
    /// commit) and a slot migration has more than the lock's keys to move.
    pub locks: usize,
    /// The chance that a client drops its guard instead of releasing it
    /// (the adapter then releases in the background).
    pub drop_guard: f64,
    /// The chance that a client cancels an acquire (drops its future)
    /// after a delay drawn below the ttl.
    pub cancel: f64,
    /// Which kind of lock the clients take (`[workload]` in scenario
    /// files).
    pub workload: WorkloadConfig,
}

/// Which member of the lock family the clients use, and how.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WorkloadConfig {
    /// The kind.
    pub kind: WorkloadKind,
    /// A semaphore's permits (`kind = "semaphore"` only).
    pub permits: u32,
    /// The chance that an acquire of a read-write lock is a read
    /// (`kind = "read-write"` only).
    pub read_share: f64,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        Self {
            kind: WorkloadKind::Mutex,
            permits: 2,
            read_share: 0.7,
        }
    }
}

/// The lock family's kinds, as clients use them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// The plain lock (`Locker::acquire`).
    Mutex,
    /// The plain lock in fair mode (`LockOptions::fair`).
    Fair,
    /// A read-write lock (`acquire_read` or `acquire_write`).
    ReadWrite,
    /// A counting semaphore (`acquire_permit`).
    Semaphore,
}

/// A fault kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// Freeze a client's whole task tree.
    Pause,
    /// Cut the target off from every other host, both ways.
    Partition,
    /// Drop what the target sends, keep what it receives.
    PartitionOneway,
    /// Add latency to the target's links.
    Latency,
    /// Promote the most up-to-date replica. Without a duration the old
    /// primary dies at that instant; with one, it stays up, writable and
    /// connected to its clients for that long (the stale window), then is
    /// demoted: it resyncs from the new primary, losing what it had not
    /// replicated, and closes its client connections.
    Failover,
    /// Restart a Redis node (a machine crash): it comes back with what its
    /// `[server] persistence` kept, empty without.
    Restart,
    /// Change a node's clock rate.
    ClockDrift,
    /// Step a node's clock.
    ClockJump,
    /// Make a Redis node answer BUSY.
    Busy,
    /// Crash a host (a client stops for good; a Redis node stays down).
    Crash,
    /// Evict one key with a ttl from a Redis node, as `maxmemory` with a
    /// `volatile-*` policy does under memory pressure.
    Evict,
    /// Redis Cluster: promote the most up-to-date replica of the target's
    /// shard, which takes over its primary's slots. Without a duration the
    /// old primary is demoted at once (a forced failover: it resyncs from
    /// the new one, losing what it had not replicated, and answers `MOVED`);
    /// with one, it stays up, writable and believing it owns its slots for
    /// that long (the stale window), then is demoted.
    ShardFailover,
    /// Redis Cluster: move the lock key's slot from the shard that owns it
    /// to another, drawn per firing: `MIGRATING`/`IMPORTING` at the start,
    /// one key at a time over the duration, `CLUSTER SETSLOT … NODE` at
    /// the end.
    SlotMigration,
    /// Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`): the lock
    /// key's slot moves to another shard, drawn per firing, as a
    /// replication stream. The source keeps serving the slot and forwards
    /// its writes to the target for the duration; then it pauses writes
    /// for the cut-over, the target takes the slot, and the source answers
    /// `MOVED`. No `ASK` or `TRYAGAIN` phase.
    AtomicSlotMigration,
}

/// Who a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// `client:N`.
    Client(usize),
    /// `client:any`: drawn per firing.
    AnyClient,
    /// `redis:primary`: whichever node is primary when it fires.
    Primary,
    /// `redis:N`.
    Redis(usize),
    /// `storage`.
    Storage,
}

impl fmt::Display for Target {
    /// The scenario-file spelling: `client:2`, `client:any`, `redis:primary`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Client(n) => write!(f, "client:{n}"),
            Self::AnyClient => f.write_str("client:any"),
            Self::Primary => f.write_str("redis:primary"),
            Self::Redis(n) => write!(f, "redis:{n}"),
            Self::Storage => f.write_str("storage"),
        }
    }
}

/// Whom one drawn fault hits: a host, or whichever node is primary when it
/// fires. Written as in scenario files (`client:2`, `redis:primary`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum FaultTarget {
    /// `client:N`.
    Client(usize),
    /// `redis:N`.
    Redis(usize),
    /// `redis:primary`, resolved when the fault fires.
    Primary,
    /// `storage`.
    Storage,
}

impl fmt::Display for FaultTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Client(n) => write!(f, "client:{n}"),
            Self::Redis(n) => write!(f, "redis:{n}"),
            Self::Primary => f.write_str("redis:primary"),
            Self::Storage => f.write_str("storage"),
        }
    }
}

/// A fault target that is not `client:N`, `redis:N`, `redis:primary` or
/// `storage`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTarget(pub String);

impl fmt::Display for BadTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad fault target {:?}: expected client:N, redis:N, redis:primary or storage",
            self.0
        )
    }
}

impl std::error::Error for BadTarget {}

impl FromStr for FaultTarget {
    type Err = BadTarget;

    fn from_str(text: &str) -> Result<Self, BadTarget> {
        let bad = || BadTarget(text.to_owned());
        match text.split_once(':') {
            None if text == "storage" => Ok(Self::Storage),
            Some(("redis", "primary")) => Ok(Self::Primary),
            Some(("client", n)) => n.parse().map(Self::Client).map_err(|_| bad()),
            Some(("redis", n)) => n.parse().map(Self::Redis).map_err(|_| bad()),
            _ => Err(bad()),
        }
    }
}

impl From<FaultTarget> for String {
    fn from(target: FaultTarget) -> Self {
        target.to_string()
    }
}

impl TryFrom<String> for FaultTarget {
    type Error = BadTarget;

    fn try_from(text: String) -> Result<Self, BadTarget> {
        text.parse()
    }
}

/// One entry of the fault schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultSpec {
    /// What to do.
    pub kind: FaultKind,
    /// When (drawn per seed).
    pub at: DurationRange,
    /// To whom.
    pub target: Target,
    /// How long, for faults that last (a failover: its stale window).
    pub duration: Option<DurationRange>,
    /// Repeat period, if it repeats.
    pub every: Option<DurationRange>,
    /// Clock-drift rate error (e.g. 0.01 = 1 % fast).
    pub rate: Option<f64>,
    /// Clock-jump offset.
    pub offset: Option<SignedDuration>,
    /// Latency faults: the extra one-way delay of the target's links, drawn
    /// per firing (key `delay`).
    pub delay: Option<DurationRange>,
}

/// A fault mix (swarm testing): instead of a fixed schedule, each seed
/// draws its own subset of `kinds`, a rate for each, and episodes of them,
/// some in pairs (a second fault striking inside the first's window:
/// latency then a partition, a pause across a renewal, drift around a
/// failover). Durations and sizes scale with the lock's ttl.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MixSpec {
    /// The fault kinds a seed draws from (each seed enables a random,
    /// non-empty subset of them).
    pub kinds: Vec<FaultKind>,
    /// How many episodes a seed draws (inclusive).
    pub episodes: (u64, u64),
    /// The largest clock-drift rate drawn, either way.
    pub drift: f64,
    /// The largest clock-jump offset drawn, either way.
    pub jump: Duration,
    /// The chance that an episode is a pair.
    pub pairs: f64,
}

/// A whole scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// Short name, used in reports and file names.
    pub name: String,
    /// Why it is safe or unsafe.
    pub description: String,
    /// Seeds `run` tries by default.
    pub seeds: u64,
    /// Simulated time per seed.
    pub duration: Duration,
    /// The expected outcome.
    pub expect: Expect,
    /// The property the expectation is about, if one.
    pub property: Option<Property>,
    /// The fewest grants a seed must see to prove anything: a seed with
    /// fewer is inconclusive, never safe (default 1).
    pub min_grants: u64,
    /// The longest a real run's controller may stall (its one thread held
    /// up: a blocking call, a starved machine) before the run proves
    /// nothing: faults and oracle samples wait while it does (default
    /// 500 ms; the simulator never stalls).
    pub max_stall: Duration,
    /// The Redis deployment.
    pub topology: Topology,
    /// What every node presents as, and how it persists.
    pub server: ServerConfig,
    /// The lock under test.
    pub lock: LockConfig,
    /// The workload.
    pub clients: ClientsConfig,
    /// The fault schedule.
    pub faults: Vec<FaultSpec>,
    /// The fault mix each seed draws, besides `faults`.
    pub mix: Option<MixSpec>,
}
