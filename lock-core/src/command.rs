//! What the machine asks the driver to send, and what the driver reports back.

use std::{fmt, time::Duration};

/// Identifies one command handed out by a [`LockMachine`](crate::LockMachine).
///
/// Ids increase per machine. A reply carrying an id the machine no longer
/// waits for (a stale or duplicated reply) is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommandId(pub u64);

impl fmt::Display for CommandId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A request for Redis. The key names and the owner token are the machine's
/// own ([`Machine::keys`](crate::Machine::keys),
/// [`Machine::token`](crate::Machine::token)).
///
/// The variants below describe the plain lock. For a member of the lock
/// family ([`KeyNames::kind`](crate::scripts::KeyNames::kind) other than
/// [`LockKind::Plain`](crate::LockKind::Plain)) each command is the same
/// step — acquire, renew, release — as one operation of the kind's script
/// ([`LockKind::script`](crate::LockKind::script), with the keys of
/// [`KeyNames::script_keys`](crate::scripts::KeyNames::script_keys) and the
/// codes of [`family_op`](crate::scripts::family_op)), answered with the
/// same replies; `fencing` is ignored (the family always issues the
/// time-mixed fence), and a release also takes back a waiter's place or
/// a waiting writer's intent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Command {
    /// Set the key if free and issue a fence (the [`LOCK`](crate::scripts::LOCK)
    /// script's acquire, or `SET NX PX GET` without fencing); then, if
    /// `wait_replicas` is set and the key was granted, `WAIT replicas timeout`,
    /// and if `wait_aof` is, `WAITAOF local replicas timeout`.
    /// Answer with [`Reply::Granted`] or [`Reply::Contended`].
    Acquire {
        /// The key's ttl, a whole number of milliseconds.
        ttl: Duration,
        /// The fencing mode to pass to the script.
        fencing: crate::Fencing,
        /// `(replicas, timeout)` for a `WAIT` after a grant.
        wait_replicas: Option<(u32, Duration)>,
        /// A `WAITAOF` after a grant (after the `WAIT`, if both are set).
        wait_aof: Option<crate::WaitAof>,
    },
    /// Reset the key's ttl if it is ours (the script's renew); then, if set and renewed,
    /// `WAIT` and `WAITAOF`. Answer with [`Reply::Renewed`] or [`Reply::NotOwner`].
    Renew {
        /// The new ttl, a whole number of milliseconds.
        ttl: Duration,
        /// `(replicas, timeout)` for a `WAIT` after a renewal.
        wait_replicas: Option<(u32, Duration)>,
        /// A `WAITAOF` after a renewal (after the `WAIT`, if both are set).
        wait_aof: Option<crate::WaitAof>,
    },
    /// Delete the key if it is ours and wake the waiters (the script's
    /// release). Answer with
    /// [`Reply::Released`] or [`Reply::NotOwner`].
    Release,
}

/// What Redis answered to a [`Command`], as the driver understood it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reply {
    /// The acquire script granted the lock with this fencing token;
    /// `replicas` is what `WAIT` reported, if it was asked.
    Granted {
        /// The fencing token the script issued.
        fence: u64,
        /// Replicas that acknowledged, when `WAIT` was sent.
        replicas: Option<u32>,
        /// What `WAITAOF` counted, when it was sent.
        aof: Option<crate::AofCounts>,
    },
    /// Another owner holds the key; `pttl` is its remaining ttl if known.
    Contended {
        /// The holder's remaining ttl.
        pttl: Option<Duration>,
    },
    /// The renew script reset the ttl of our key.
    Renewed {
        /// Replicas that acknowledged, when `WAIT` was sent.
        replicas: Option<u32>,
        /// What `WAITAOF` counted, when it was sent.
        aof: Option<crate::AofCounts>,
    },
    /// The release script deleted our key.
    Released,
    /// The key is missing or belongs to another owner (renew or release).
    NotOwner,
    /// The command failed; see [`Failure`] for whether it may have run.
    Failed(Failure),
}

/// Why a command failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Failure {
    /// No reply within the timeout: the command may or may not have run.
    Timeout,
    /// The connection broke (reset, closed, refused): it may or may not have run.
    Connection,
    /// A reply of a shape the scripts never produce: treated as unknown.
    Protocol,
    /// `READONLY`: the node is a replica now, so a failover happened.
    ReadOnly,
    /// `LOADING`: the node is loading its dataset; nothing ran.
    Loading,
    /// `BUSY`: a slow script blocks the server; nothing ran.
    Busy,
    /// `NOSCRIPT` even after reloading the script; nothing ran.
    NoScript,
    /// `WRONGTYPE`: the lock key holds a non-string value; nothing ran.
    WrongType,
    /// `NOREPLICAS`: fewer replicas than the server's `min-replicas-to-write`
    /// are connected (a primary cut off from its replicas); nothing ran.
    NoReplicas,
    /// `MASTERDOWN`: a replica lost its primary and serves no data; nothing ran.
    MasterDown,
    /// `MOVED`: the key's cluster slot lives on another node (after a
    /// failover or a migration); nothing ran here.
    Moved,
    /// `ASK`: the key's slot is migrating and the key has left this node;
    /// nothing ran here.
    Ask,
    /// `TRYAGAIN`: the slot is migrating and the script's keys are split
    /// between two nodes for now; nothing ran.
    TryAgain,
    /// `CLUSTERDOWN`: the cluster cannot serve the slot; nothing ran.
    ClusterDown,
    /// `CROSSSLOT`: the keys of one call hash to different slots; nothing
    /// ran, and retrying cannot help.
    CrossSlot,
    /// The server lacks a command the lock's options need (`WAITAOF`
    /// before Redis 7.2, as its version or an `unknown command` answer
    /// says); nothing was sent. Retrying cannot help.
    Unsupported,
    /// Any other error reply; nothing ran.
    Other,
}

impl Failure {
    /// Returns true if the command may have taken effect despite the failure.
    ///
    /// A timeout or a broken connection says nothing about whether Redis ran
    /// the command; an error reply says it did not.
    pub fn outcome_unknown(self) -> bool {
        matches!(self, Self::Timeout | Self::Connection | Self::Protocol)
    }

    /// Returns true if retrying cannot help (the key itself is unusable).
    pub fn is_permanent(self) -> bool {
        matches!(self, Self::WrongType | Self::CrossSlot | Self::Unsupported)
    }

    /// Returns true if the reply says another node owns the key now (a
    /// cluster redirection): the adapter follows it, and a renewal that
    /// meets it never extends the lock.
    pub fn is_redirect(self) -> bool {
        matches!(self, Self::Moved | Self::Ask)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Timeout => "command timed out",
            Self::Connection => "connection lost",
            Self::Protocol => "unexpected reply",
            Self::ReadOnly => "node is read-only (failover)",
            Self::Loading => "node is loading its dataset",
            Self::Busy => "node is busy running a script",
            Self::NoScript => "script missing on the node",
            Self::WrongType => "lock key holds a value of the wrong type",
            Self::NoReplicas => "not enough replicas connected to the primary",
            Self::MasterDown => "replica lost its primary",
            Self::Moved => "key's slot moved to another node",
            Self::Ask => "key's slot is migrating to another node",
            Self::TryAgain => "slot migration in progress",
            Self::ClusterDown => "cluster is down",
            Self::CrossSlot => "keys hash to different cluster slots",
            Self::Unsupported => "the server lacks a command the lock's options need",
            Self::Other => "error reply",
        })
    }
}
