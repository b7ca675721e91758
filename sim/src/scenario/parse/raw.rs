//! A scenario file's shape, as serde reads it: every table and key with its
//! TOML type, each value kept with its position for the checks that follow.
//! The same types derive the file format's JSON Schema (`sim schema`), so
//! the schema's keys are the parser's; their doc lines are its
//! descriptions, and the names tables give its enumerations.

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::super::{
    mix::RawMix,
    schema_names::{
        ExpectName, FaultKindName, FencingName, FlavourName, PersistenceName, PropertyName,
        TopologyKindName, WorkloadKindName,
    },
};

/// A scenario: one fault schedule and the outcome it expects, across seeds.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScenario {
    /// Letters, digits, `-` and `_`: names the report files.
    #[schemars(with = "String")]
    pub(crate) name: Spanned<String>,
    /// Why the setup is safe or unsafe, citing the timing rule or the fault.
    pub(crate) description: String,
    /// Seeds `sim run` tries unless `--seeds` is given (at least 1).
    #[schemars(with = "Option<u64>")]
    pub(crate) seeds: Option<Spanned<u64>>,
    /// Simulated time per seed, at least 1s (a duration: "10s").
    #[schemars(with = "String")]
    pub(crate) duration: Spanned<String>,
    /// Whether the seeds must all keep the property, or one must break it.
    #[schemars(with = "ExpectName")]
    pub(crate) expect: Spanned<String>,
    /// Which checker the expectation is about.
    #[schemars(with = "Option<PropertyName>")]
    pub(crate) property: Option<Spanned<String>>,
    /// The fewest grants (of any client, any lock) a seed must see to prove
    /// anything; a seed with fewer is `inconclusive` (default 1).
    pub(crate) min_grants: Option<u64>,
    /// On real processes, the longest the controller may stall before a
    /// run proves nothing, a duration ("500ms", the default).
    #[schemars(with = "Option<String>")]
    pub(crate) max_stall: Option<Spanned<String>>,
    /// The Redis deployment (one node when absent).
    #[serde(default)]
    #[schemars(with = "Option<RawTopology>")]
    pub(crate) topology: Option<Spanned<RawTopology>>,
    /// What every node presents as, and how it persists.
    #[serde(default)]
    pub(crate) server: Option<RawServer>,
    /// The lock under test.
    #[schemars(with = "RawLock")]
    pub(crate) lock: Spanned<RawLock>,
    /// The clients that contend for the lock.
    #[serde(default)]
    pub(crate) clients: Option<RawClients>,
    /// Which member of the lock family the clients take (the plain lock when
    /// absent).
    #[serde(default)]
    #[schemars(with = "Option<RawWorkload>")]
    pub(crate) workload: Option<Spanned<RawWorkload>>,
    /// The fault schedule: one table per fault.
    #[serde(default)]
    #[schemars(with = "Vec<RawFault>")]
    pub(crate) fault: Vec<Spanned<RawFault>>,
    /// A fault mix each seed draws from (swarm testing).
    #[schemars(with = "Option<RawMix>")]
    pub(crate) mix: Option<Spanned<RawMix>>,
}

/// The Redis deployment; each key applies to the kinds named.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTopology {
    /// The kind of deployment.
    #[schemars(with = "TopologyKindName")]
    pub(crate) kind: Spanned<String>,
    /// primary-replica, sentinel: how many replicas; cluster: replicas per
    /// shard.
    #[schemars(with = "Option<usize>")]
    pub(crate) replicas: Option<Spanned<usize>>,
    /// redlock: how many independent primaries.
    #[schemars(with = "Option<usize>")]
    pub(crate) nodes: Option<Spanned<usize>>,
    /// primary-replica, sentinel, cluster: delay before a replica applies
    /// each write, drawn per write (a duration or a range: "1ms..20ms").
    #[schemars(with = "Option<String>")]
    pub(crate) replication_lag: Option<Spanned<String>>,
    /// sentinel: how many sentinels.
    #[schemars(with = "Option<usize>")]
    pub(crate) sentinels: Option<Spanned<usize>>,
    /// sentinel: how long after the failover's leader each other sentinel
    /// adopts it (a duration or a range: "0s..2s").
    #[schemars(with = "Option<String>")]
    pub(crate) sentinel_lag: Option<Spanned<String>>,
    /// cluster: how many shards.
    #[schemars(with = "Option<usize>")]
    pub(crate) shards: Option<Spanned<usize>>,
    /// cluster: `cluster-node-timeout` (a duration: "15s").
    #[schemars(with = "Option<String>")]
    pub(crate) node_timeout: Option<Spanned<String>>,
}

/// The server every node presents as.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawServer {
    /// The server and version every node behaves as.
    #[schemars(with = "Option<FlavourName>")]
    pub(crate) flavour: Option<Spanned<String>>,
    /// What a restart keeps.
    #[schemars(with = "Option<PersistenceName>")]
    pub(crate) persistence: Option<Spanned<String>>,
}

/// The lock's options.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLock {
    /// The key's ttl, whole milliseconds (a duration: "1s").
    #[schemars(with = "String")]
    pub(crate) ttl: Spanned<String>,
    /// Renewal period, below ttl - drift (a duration: "300ms").
    #[schemars(with = "Option<String>")]
    pub(crate) renew_every: Option<Spanned<String>>,
    /// The drift margin is ttl x drift_factor + 2 ms.
    #[schemars(with = "Option<f64>")]
    pub(crate) drift_factor: Option<Spanned<f64>>,
    /// The fence each grant carries.
    #[schemars(with = "Option<FencingName>")]
    pub(crate) fencing: Option<Spanned<String>>,
    /// `WAIT` for this many replicas after acquire and renew.
    #[schemars(with = "Option<u32>")]
    pub(crate) wait_replicas: Option<Spanned<u32>>,
    /// `[local, replicas]`: `WAITAOF local replicas` after acquire and
    /// renew.
    #[schemars(with = "Option<Vec<u32>>")]
    pub(crate) wait_aof: Option<Spanned<Vec<u32>>>,
    /// How long an acquire waits (a duration: "2s").
    #[schemars(with = "Option<String>")]
    pub(crate) wait: Option<Spanned<String>>,
}

/// The clients that contend for the lock.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClients {
    /// How many clients, `client-0` on.
    #[schemars(with = "Option<usize>")]
    pub(crate) count: Option<Spanned<usize>>,
    /// Critical-section length, drawn per acquisition (a duration or a
    /// range: "10ms..500ms").
    #[schemars(with = "Option<String>")]
    pub(crate) hold: Option<Spanned<String>>,
    /// Pause between a release and the next acquire (a duration or a range:
    /// "0ms..200ms").
    #[schemars(with = "Option<String>")]
    pub(crate) think: Option<Spanned<String>>,
    /// Also write a plain register in each critical section, to show what
    /// fencing prevents.
    pub(crate) unfenced_register: Option<bool>,
    /// Locks each client holds at once: the contended one and its own.
    #[schemars(with = "Option<usize>")]
    pub(crate) locks: Option<Spanned<usize>>,
    /// The chance (0 to 1) that a client drops its guard instead of
    /// releasing.
    #[schemars(with = "Option<f64>")]
    pub(crate) drop_guard: Option<Spanned<f64>>,
    /// The chance (0 to 1) that a client cancels an acquire by dropping its
    /// future.
    #[schemars(with = "Option<f64>")]
    pub(crate) cancel: Option<Spanned<f64>>,
}

/// Which member of the lock family the clients take.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWorkload {
    /// The kind of lock.
    #[schemars(with = "WorkloadKindName")]
    pub(crate) kind: Spanned<String>,
    /// semaphore: how many holders at once.
    #[schemars(with = "Option<u32>")]
    pub(crate) permits: Option<Spanned<u32>>,
    /// read-write: the chance (0 to 1) that an acquire is a read.
    #[schemars(with = "Option<f64>")]
    pub(crate) read_share: Option<Spanned<f64>>,
}

/// One fault of the schedule; which parameters apply depends on its kind.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFault {
    /// The kind of fault.
    #[schemars(with = "FaultKindName")]
    pub(crate) kind: Spanned<String>,
    /// When it starts: a time ("5s") or a range drawn per seed ("5s..20s").
    #[schemars(with = "String")]
    pub(crate) at: Spanned<String>,
    /// Whom it hits: "client:N", "client:any", "redis:N", "redis:primary"
    /// or "storage".
    #[schemars(with = "Option<String>")]
    pub(crate) target: Option<Spanned<String>>,
    /// How long it lasts (a duration or a range).
    #[schemars(with = "Option<String>")]
    pub(crate) duration: Option<Spanned<String>>,
    /// Repeat with this period until the run ends (a duration or a range).
    #[schemars(with = "Option<String>")]
    pub(crate) every: Option<Spanned<String>>,
    /// clock-drift: relative rate error (0.01 is 1 % fast).
    #[schemars(with = "Option<f64>")]
    pub(crate) rate: Option<Spanned<f64>>,
    /// clock-jump: signed step ("2s", "-3s").
    #[schemars(with = "Option<String>")]
    pub(crate) offset: Option<Spanned<String>>,
    /// latency: the one-way delay of the target's links (a duration or a
    /// range).
    #[schemars(with = "Option<String>")]
    pub(crate) delay: Option<Spanned<String>>,
}
