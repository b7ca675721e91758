//! The single-node machine's state: private to [`machine`](super), which
//! makes every transition; the outside reads it through
//! [`Machine`](crate::Machine)'s queries ([`State::phase`] and friends).

use std::time::Instant;

use crate::{AcquireFailure, Failure, LostReason, Phase};

/// The lock's lifecycle, each state carrying what it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum State {
    /// Created; `acquire` not called yet.
    Idle,
    /// Trying to get the key: an attempt in flight or a retry scheduled.
    Acquiring(Acquiring),
    /// Held, no renewal in flight.
    Held(Hold),
    /// Held, a renewal in flight.
    Renewing(Hold),
    /// An owner-checked release is in flight or scheduled.
    Releasing(Releasing),
    /// Done for the user (the release's outcome, unknown, was reported),
    /// but the owner-checked release is still retried in the background
    /// until the key has surely expired.
    CleaningUp(CleaningUp),
    /// Done: nothing is held and nothing more will be sent.
    Released,
    /// The lock was lost while held; only a release may follow.
    Lost {
        /// Why it was lost.
        reason: LostReason,
    },
}

impl State {
    /// The public phase this state is in.
    pub(super) fn phase(&self) -> Phase {
        match self {
            Self::Idle => Phase::Idle,
            Self::Acquiring(_) => Phase::Acquiring,
            Self::Held(_) | Self::Renewing(_) => Phase::Held,
            // A release that undoes an attempt belongs to the acquisition,
            // whose outcome is reported once the release is done; so does
            // one that undoes a grant to retry it.
            Self::Releasing(Releasing {
                then: AfterRelease::Retry(_),
                ..
            }) => Phase::Acquiring,
            Self::Releasing(Releasing {
                then: AfterRelease::Fail(failure),
                ..
            }) if *failure != AcquireFailure::Cancelled => Phase::Acquiring,
            Self::Releasing(_) => Phase::Releasing,
            Self::Lost { .. } => Phase::Lost,
            // The user has its answer; what is left is the machine's own.
            Self::CleaningUp(_) | Self::Released => Phase::Released,
        }
    }
}

/// Progress of an acquisition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Acquiring {
    /// After this instant no new attempt starts.
    pub(super) give_up_at: Instant,
    /// Attempts answered so far (contended or failed).
    pub(super) attempts: u32,
    /// True if an attempt's outcome is unknown, so the key may be ours.
    pub(super) maybe_set: bool,
    /// The last error seen, cleared by a contended answer.
    pub(super) last_failure: Option<Failure>,
    /// A contended answer put us in a queue in Redis (a fair lock's place,
    /// a writer's intent): giving up must send the release, which takes
    /// it back.
    pub(super) queued: bool,
}

/// A held lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Hold {
    /// The fencing token of this grant.
    pub(super) fence: u64,
    /// The send instant of the granted acquire.
    pub(super) acquired_at: Instant,
    /// The first instant at which the lock is no longer held.
    pub(super) valid_until: Instant,
    /// `acquired_at + max_hold`, if capped.
    pub(super) cap: Option<Instant>,
    /// Renewals failed since the last success.
    pub(super) renew_failures: u32,
}

/// Progress of a release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Releasing {
    /// Releases sent so far.
    pub(super) attempts: u32,
    /// What happens once the release is done.
    pub(super) then: AfterRelease,
    /// Whether the release began from a hold whose loss was never reported.
    pub(super) from_hold: bool,
}

/// What a release leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum AfterRelease {
    /// The user released: report `Released`.
    Finish,
    /// A grant was refused (its reply came too late): try again.
    Retry(Acquiring),
    /// A grant or attempt is being undone: report this failure.
    Fail(AcquireFailure),
}

/// A release whose outcome was reported unknown, retried in the background.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CleaningUp {
    /// Releases sent so far, the reported tries included (the backoff's
    /// exponent).
    pub(super) attempts: u32,
}
