//! What one simulated scenario is made of: topology, lock options, workload
//! and fault schedule. Scenario files parse into these types; the world
//! draws every range from the seed.

use std::time::Duration;

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
}

impl Topology {
    /// How many Redis hosts the topology has.
    pub fn node_count(&self) -> usize {
        match self {
            Self::Single => 1,
            Self::PrimaryReplica { replicas, .. } => 1 + replicas,
            Self::Redlock { nodes } => *nodes,
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
    /// Promote a replica after the primary dies.
    Failover,
    /// Restart a Redis node without persistence.
    Restart,
    /// Change a node's clock rate.
    ClockDrift,
    /// Step a node's clock.
    ClockJump,
    /// Make a Redis node answer BUSY.
    Busy,
    /// Crash a host (a client stops for good; a Redis node stays down).
    Crash,
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

/// One entry of the fault schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultSpec {
    /// What to do.
    pub kind: FaultKind,
    /// When (drawn per seed).
    pub at: DurationRange,
    /// To whom.
    pub target: Target,
    /// How long, for faults that last.
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
    /// The Redis deployment.
    pub topology: Topology,
    /// The lock under test.
    pub lock: LockConfig,
    /// The workload.
    pub clients: ClientsConfig,
    /// The fault schedule.
    pub faults: Vec<FaultSpec>,
}
