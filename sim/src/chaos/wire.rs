//! What the controller and its client processes say to each other, and the
//! clock they share.
//!
//! Every process on one machine reads the same `CLOCK_MONOTONIC`, so an
//! event is stamped where and when it happens (in the client process, at
//! the observer callback) and the controller orders the one history by
//! those stamps, never by when it read a line.

use std::{collections::BTreeMap, time::Duration};

use serde::{Deserialize, Serialize};

use crate::{config::Scenario, history::Op};

/// Nanoseconds of `CLOCK_MONOTONIC`: the machine-wide clock the history is
/// ordered by.
pub fn mono_ns() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    // The monotonic clock counts from boot: both fields are non-negative.
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// `mono` as time since the run's epoch (zero before it).
pub fn since(epoch_ns: u64, mono: u64) -> Duration {
    Duration::from_nanos(mono.saturating_sub(epoch_ns))
}

/// How a client process reaches the deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Reach {
    /// One primary at a time (single, primary-replica): the controller
    /// names it (`primary N` on stdin) after a failover.
    Primary {
        /// Each node's client port, by index.
        nodes: Vec<u16>,
        /// The node that is primary at start.
        primary: usize,
    },
    /// Every node, Redlock.
    Redlock {
        /// Each node's client port.
        nodes: Vec<u16>,
    },
    /// lock-core's Sentinel mode, asking these sentinels.
    Sentinel {
        /// The sentinels' ports.
        sentinels: Vec<u16>,
        /// The master name they watch.
        master: String,
    },
    /// lock-core's Cluster mode, seeded with every node.
    Cluster {
        /// Each node's client port.
        nodes: Vec<u16>,
    },
}

/// Everything a client process needs, passed as one JSON argument.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientArgs {
    /// The scenario.
    pub scenario: Scenario,
    /// The client's index.
    pub index: usize,
    /// Its randomness.
    pub seed: u64,
    /// `CLOCK_MONOTONIC` at the run's start, in ns.
    pub epoch_ns: u64,
    /// Where it reaches Redis.
    pub reach: Reach,
    /// Real port → the port of this client's proxy to it (every Redis node
    /// and the storage): whatever address a server names is dialled
    /// through the client's own link.
    pub links: BTreeMap<u16, u16>,
    /// The storage's real port.
    pub storage: u16,
    /// The bugs planted in this client (`sim chaos --plant`), if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plants: Vec<super::plant::Plant>,
}

/// One line a client process writes on its stdout.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientLine {
    /// `CLOCK_MONOTONIC` when it happened, in ns.
    pub mono: u64,
    /// The client's own clock reading, as an offset from the epoch.
    pub local: Duration,
    /// What happened.
    #[serde(flatten)]
    pub op: Op,
}

/// A command the controller writes on a client's stdin.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case")]
pub enum ClientCommand {
    /// Dial node `node` as the primary from the next connection on.
    Primary {
        /// The node's index.
        node: usize,
    },
    /// From now on, the client's clock runs `rate` fast (negative: slow).
    Drift {
        /// The relative rate error.
        rate: f64,
    },
    /// Step the client's clock by `ns` (negative: back).
    Jump {
        /// The step, in ns.
        ns: i64,
    },
}
