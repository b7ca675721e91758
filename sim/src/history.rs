//! The history of one simulated run: every operation the clients, the
//! storage and the fault controller performed, stamped with true sim time.
//!
//! Checkers read only this. It serialises to JSON lines, and its hash is
//! what "the same seed gives the same run" is tested against.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use serde::{Deserialize, Serialize};

/// Who did something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Process {
    /// `client-N`.
    Client(usize),
    /// `redis-N`.
    Redis(usize),
    /// The fenced storage host.
    Storage,
    /// The fault controller.
    Controller,
}

/// One step of an operation, in the Jepsen sense.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Op {
    /// A client starts acquiring.
    AcquireInvoke,
    /// The lock was granted: the client now believes it holds it.
    AcquireOk {
        /// The owner token (unique per grant).
        token: String,
        /// The fencing token.
        fence: u64,
        /// The deadline on the client's clock, mapped to true sim time.
        valid_until: Duration,
        /// A shared hold (a read-write lock's reader); every other hold
        /// (a plain or fair lock's, a writer's, a semaphore permit's) is
        /// exclusive of its kind.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        shared: bool,
    },
    /// The client's acquire was refused for the first time: from here it
    /// waits in line (the fairness checker's start of its wait).
    Waiting,
    /// The acquire gave up.
    AcquireFail {
        /// The error, as displayed.
        error: String,
    },
    /// The client stopped waiting for its acquire (it dropped the future):
    /// from here it wants no key, and the adapter undoes what an attempt
    /// may have set.
    AcquireCancel,
    /// A renewal moved the deadline (the client's `valid_until`, in true time).
    Renewed {
        /// The token of the hold.
        token: String,
        /// The new deadline.
        valid_until: Duration,
    },
    /// A renewal did not extend the deadline.
    RenewFailed {
        /// The token of the hold.
        token: String,
        /// Why, as the adapter reports it (`NotOwner`, `Failed(ReadOnly)`,
        /// `Failed(Timeout)`, ...).
        reason: String,
    },
    /// The client's clock changed rate or stepped while it held the lock:
    /// the deadline it holds, unchanged on its own clock, now falls at this
    /// true time (recorded by the world, which changed the clock).
    Deadline {
        /// The token of the hold.
        token: String,
        /// The deadline, in true time.
        valid_until: Duration,
    },
    /// The client learnt it lost the lock.
    Lost {
        /// The token of the hold.
        token: String,
        /// Why.
        reason: String,
        /// The deadline the client last knew.
        valid_until: Duration,
    },
    /// The client starts releasing (it no longer believes it holds the lock).
    ReleaseInvoke {
        /// The token of the hold.
        token: String,
    },
    /// The client dropped its guard instead of releasing it: it no longer
    /// believes it holds the lock, and the adapter releases in the
    /// background.
    GuardDropped {
        /// The token of the hold.
        token: String,
    },
    /// The release finished.
    ReleaseOk {
        /// The token of the hold.
        token: String,
        /// What the release reported, as displayed ("ok" or the error).
        outcome: String,
    },
    /// A client sends a fenced write to storage.
    WriteInvoke {
        /// The token of the hold that wrote.
        token: String,
        /// The fence attached.
        fence: u64,
        /// A value unique to this write.
        value: u64,
    },
    /// Storage answered a fenced write.
    WriteOk {
        /// The token of the hold that wrote.
        token: String,
        /// The fence attached.
        fence: u64,
        /// The value written.
        value: u64,
        /// Whether storage accepted it (fence ≥ the highest accepted).
        accepted: bool,
    },
    /// The write got no answer (partition, crash).
    WriteInfo {
        /// The token of the hold that wrote.
        token: String,
        /// The fence attached.
        fence: u64,
        /// The value written.
        value: u64,
    },
    /// A write to the unfenced register: what a lock without fencing
    /// protects. Records the writer's begin and end of the write.
    RegisterWrite {
        /// Which hold's critical section wrote.
        token: String,
        /// Begin or end of the write.
        phase: Phase,
    },
    /// A fault began or ended.
    Fault {
        /// The fault kind, as in scenario files.
        kind: String,
        /// The target, as in scenario files (`client:0`, `redis:1`, ...).
        target: String,
        /// Start or end.
        phase: Phase,
    },
    /// A partition made by the kernel (real runs whose partitions are
    /// iptables rules) ended: how many packets its rules dropped, the
    /// evidence that it cut something.
    Dropped {
        /// The fault kind, as in scenario files.
        kind: String,
        /// The target, as in scenario files.
        target: String,
        /// The packets its rules dropped.
        packets: u64,
    },
    /// The authoritative primary's view of the lock key, sampled when a
    /// client's belief changes (for the server-oracle checker).
    Oracle {
        /// Which node was the primary.
        primary: usize,
        /// The value of the lock key there, if any.
        owner: Option<String>,
        /// Its remaining ttl on the node's clock, in ms.
        pttl_ms: Option<u64>,
    },
    /// A real run's oracle went blind (no sample it could keep for a
    /// while: a slow or stopped node) or saw again. The simulator's oracle
    /// is told of every change and never records one.
    OracleBlind {
        /// Blind from here, or seeing again.
        phase: Phase,
    },
    /// A real run's journal (the primary's replication stream, read as a
    /// replica reads it) changed the lock key: `owner` set it, or `None`
    /// deleted it (a release, an expiry, an eviction). The first is the
    /// key as the journal began; from there on every owner the key ever
    /// had on that node is here, in order, until `JournalEnd`.
    Journal {
        /// The node followed.
        node: usize,
        /// The key's owner from here on, if any.
        owner: Option<String>,
    },
    /// A real run's journal stopped following the primary (its stream
    /// ended, or carried a command on the key it cannot read): it says
    /// nothing from here on.
    JournalEnd {
        /// Why, a sentence.
        why: String,
    },
    /// A real run's controller stalled: its one thread ran nothing for
    /// `lasted` (a blocking call, a starved machine), so faults and oracle
    /// samples waited. Recorded at the stall's start; the simulator never
    /// stalls.
    Stall {
        /// How long.
        lasted: Duration,
    },
    /// Memory pressure evicted a key from a Redis node (an `evict` fault).
    Evicted {
        /// The node.
        node: usize,
        /// The key.
        key: String,
        /// Its value, if it held a string (a lock key holds its owner's
        /// token).
        value: Option<String>,
    },
    /// A slot migration moved one key (`MIGRATE`) between two nodes.
    Migrated {
        /// The key.
        key: String,
        /// The node it left.
        from: usize,
        /// The node it went to.
        to: usize,
    },
    /// A failover found no replica it could promote (none live, reachable
    /// and in the old primary's stream): the fault happened and changed
    /// nothing; `primary` stays.
    NoFailover {
        /// The primary that stays.
        primary: usize,
    },
    /// A replica was promoted; `lost_key` says whether the lock key it had
    /// differs from the old primary's.
    Failover {
        /// The primary it replaced.
        old_primary: usize,
        /// The new primary.
        new_primary: usize,
        /// The key's owner on the old primary before the failover.
        old_owner: Option<String>,
        /// The key's owner on the new primary after it.
        new_owner: Option<String>,
    },
}

/// Start or end of something with a duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// It began.
    Start,
    /// It ended.
    End,
}

/// One line of the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// True sim time since the start of the run.
    pub at: Duration,
    /// The acting process's own clock reading, as an offset from its start
    /// (equal to `at` for a process without clock faults).
    pub local: Duration,
    /// Who acted.
    pub process: Process,
    /// What happened.
    #[serde(flatten)]
    pub op: Op,
}

/// The recorder the hosts of one world share. Turmoil runs every host on one
/// thread, so the mutex is never contended; it is there because the lock's
/// observer callback must be `Send + Sync`.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    entries: Arc<Mutex<Vec<Entry>>>,
}

impl Recorder {
    /// Appends one entry.
    pub fn record(&self, at: Duration, local: Duration, process: Process, op: Op) {
        lock(&self.entries).push(Entry {
            at,
            local,
            process,
            op,
        });
    }

    /// Takes a copy of everything recorded so far, in recording order.
    pub fn snapshot(&self) -> History {
        History {
            entries: lock(&self.entries).clone(),
        }
    }
}

/// Locks the entries; a poisoned lock still holds every entry recorded
/// before the panic, which is exactly what a failing run should report.
fn lock(entries: &Mutex<Vec<Entry>>) -> std::sync::MutexGuard<'_, Vec<Entry>> {
    entries
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A finished run's history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// Entries in the order they happened (true time, then recording order).
    pub entries: Vec<Entry>,
}

impl History {
    /// The history as JSON lines, one entry per line.
    pub fn to_json_lines(&self) -> String {
        let mut out = String::new();
        for entry in &self.entries {
            // Serialising plain data with derived impls cannot fail.
            out.push_str(&serde_json::to_string(entry).expect("history entries serialise"));
            out.push('\n');
        }
        out
    }

    /// The SHA1 of the JSON lines, in hex: equal histories, equal hashes, on
    /// every platform, run and toolchain (unlike `std`'s hashers).
    pub fn hash(&self) -> String {
        sha1_smol::Sha1::from(self.to_json_lines())
            .digest()
            .to_string()
    }
}
