//! What the machine tells its driver and, through it, the lock's user.

use std::{fmt, time::Instant};

use crate::{AofCounts, Failure};

/// Something the lock's user should learn, polled with
/// [`Machine::poll_event`](crate::Machine::poll_event).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The lock is ours until `valid_until` unless renewed.
    Acquired {
        /// The fencing token to attach to every write the lock guards.
        fence: u64,
        /// The first instant at which the lock is no longer held.
        valid_until: Instant,
    },
    /// A renewal succeeded and moved the deadline.
    Renewed {
        /// The new deadline.
        valid_until: Instant,
    },
    /// A renewal did not extend validity (answered or timed out). The
    /// machine retries while validity remains; if the failure ends the
    /// hold, `Lost` follows at once.
    RenewFailed(RenewFailure),
    /// Another owner holds the lock; the next attempt is at `retry_at`.
    Contended {
        /// When the machine will try again (sooner on `handle_wakeup`).
        retry_at: Instant,
    },
    /// Acquisition ended without a grant.
    AcquireFailed(AcquireFailure),
    /// The lock was lost while held. Emitted at most once per machine.
    Lost {
        /// Why it was lost.
        reason: LostReason,
    },
    /// A release finished; the machine is done.
    Released {
        /// What the release script found.
        outcome: ReleaseOutcome,
    },
}

/// Why a held lock was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostReason {
    /// Validity ran out before a renewal succeeded.
    Expired,
    /// Redis reported that the key is missing or someone else's.
    NotOwner,
    /// The hold reached its `max_hold` cap.
    MaxHold,
    /// The node answered `READONLY`: it was demoted by a failover, and the
    /// key may not have reached the new primary.
    Failover,
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Expired => "validity expired before a renewal succeeded",
            Self::NotOwner => "the key is missing or held by another owner",
            Self::MaxHold => "the hold reached max_hold",
            Self::Failover => "the node was demoted by a failover",
        })
    }
}

/// Why an acquisition ended without a grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireFailure {
    /// The wait ran out; `last_failure` is the last error seen, if the last
    /// attempts failed rather than met contention.
    TimedOut {
        /// The error of the last failed attempt, if any.
        last_failure: Option<Failure>,
    },
    /// An error that retrying cannot fix, such as `WRONGTYPE`.
    Failed(Failure),
    /// Fewer replicas than required acknowledged the grant; it was released.
    NotReplicated {
        /// Replicas that acknowledged.
        acked: u32,
        /// Replicas required.
        wanted: u32,
    },
    /// `WAITAOF` counted fewer fsyncs than required (the local AOF, or
    /// replicas'); the grant was released.
    NotDurable {
        /// What `WAITAOF` counted.
        acked: AofCounts,
        /// What the options require.
        wanted: AofCounts,
    },
    /// `release` was called before the lock was granted.
    Cancelled,
}

impl fmt::Display for AcquireFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TimedOut { last_failure: None } => f.write_str("timed out waiting for the lock"),
            Self::TimedOut {
                last_failure: Some(failure),
            } => write!(f, "timed out waiting for the lock (last error: {failure})"),
            Self::Failed(failure) => write!(f, "{failure}"),
            Self::NotReplicated { acked, wanted } => {
                write!(f, "{acked} of {wanted} replicas acknowledged the grant")
            }
            Self::NotDurable { acked, wanted } => write!(
                f,
                "WAITAOF counted {}/{} local and {}/{} replica fsyncs of the grant",
                acked.local, wanted.local, acked.replicas, wanted.replicas
            ),
            Self::Cancelled => f.write_str("cancelled by release"),
        }
    }
}

/// Why a renewal did not extend validity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RenewFailure {
    /// The key was missing or held by another owner (the hold is lost).
    NotOwner,
    /// Fewer replicas than `wait_replicas` asked for acknowledged it.
    NotReplicated {
        /// Replicas that acknowledged.
        acked: u32,
        /// Replicas required.
        wanted: u32,
    },
    /// `WAITAOF` counted fewer fsyncs than `wait_aof` asked for.
    NotDurable {
        /// What `WAITAOF` counted.
        acked: AofCounts,
        /// What the options require.
        wanted: AofCounts,
    },
    /// The command failed or went unanswered.
    Failed(Failure),
}

impl fmt::Display for RenewFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotOwner => f.write_str("the key is missing or held by another owner"),
            Self::NotReplicated { acked, wanted } => {
                write!(f, "{acked} of {wanted} replicas acknowledged the renewal")
            }
            Self::NotDurable { acked, wanted } => write!(
                f,
                "WAITAOF counted {}/{} local and {}/{} replica fsyncs of the renewal",
                acked.local, wanted.local, acked.replicas, wanted.replicas
            ),
            Self::Failed(failure) => write!(f, "{failure}"),
        }
    }
}

/// What a release found on the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReleaseOutcome {
    /// Our key was deleted.
    Deleted,
    /// The key was missing or another owner's, and was left alone.
    NotOwner,
    /// No answer came; the key expires by itself at the latest after one ttl.
    Unknown,
}
