//! The contract every lock machine keeps with its driver.
//!
//! [`LockMachine`](crate::LockMachine) (one node) and
//! [`RedlockMachine`](crate::RedlockMachine) (a quorum over many) both
//! implement [`Machine`], so a driver moves commands and replies for either
//! through the one trait. Their state stays private: a driver reads it
//! through the queries here ([`Machine::phase`], [`Machine::is_held`],
//! [`Machine::fence`], [`Machine::valid_until`], ...).

use std::time::Instant;

use crate::{Command, CommandId, Event, Reply, scripts::KeyNames};

/// Where a lock machine is in its lifecycle, as a driver or a test sees it.
///
/// A phase ignores time: a hold whose deadline has passed is still
/// [`Held`](Self::Held) until the machine is told so (`handle_timeout`,
/// `release`); [`Machine::is_held`] answers for a given instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Created; `acquire` not called yet.
    Idle,
    /// Acquiring, its outcome not reported yet: an attempt in flight, a
    /// retry scheduled, or a failed attempt being undone.
    Acquiring,
    /// Held (a renewal may be in flight).
    Held,
    /// Releasing (or cancelling an acquisition): a release in flight or
    /// scheduled.
    Releasing,
    /// The lock was lost while held; only a release may follow.
    Lost,
    /// Done: nothing is held and the outcome was reported. A release left
    /// unknown may still be retried in the background until the key has
    /// expired; [`Machine::is_released`] says when nothing more will be sent.
    Released,
}

/// Misuse of a machine by its driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// `acquire` was called on a machine that already started.
    #[error("acquire called twice on the same lock machine")]
    AlreadyStarted,
}

/// A sans-IO lock machine as its driver drives it: inputs carry `now`,
/// outputs are polled.
///
/// The drain rule holds for every implementation: after **every** input
/// (`acquire`, `release`, `handle_reply`, `handle_timeout`,
/// `handle_wakeup`, `renew_early`), send every command from
/// [`poll_command`](Self::poll_command), deliver every event from
/// [`poll_event`](Self::poll_event), and re-arm the timer to
/// [`poll_timeout`](Self::poll_timeout).
///
/// Commands and replies are addressed to a node: a quorum machine has
/// one per Redis primary; a single-node machine has only node 0 and
/// ignores the index it is given.
pub trait Machine {
    /// Starts acquiring; the first attempt is sent at once. Fails if the
    /// machine already started.
    fn acquire(&mut self, now: Instant) -> Result<(), UsageError>;

    /// Releases the lock (owner-checked), or cancels an acquisition.
    /// Harmless in any state.
    fn release(&mut self, now: Instant);

    /// Tells the machine a release of the key was announced (a waiter may
    /// retry at once).
    fn handle_wakeup(&mut self, now: Instant);

    /// Tells the machine a connection to `node` was just (re)opened: a
    /// release retrying in the background (timing rule 9) is sent at once
    /// instead of at its backoff, while the key may still stand.
    /// Harmless in any state.
    fn handle_reconnected(&mut self, now: Instant, node: usize);

    /// Feeds `node`'s answer to command `id`; answers to anything but a
    /// command the machine waits for are ignored.
    fn handle_reply(&mut self, now: Instant, node: usize, id: CommandId, reply: Reply);

    /// Fires every timer due at `now`.
    fn handle_timeout(&mut self, now: Instant);

    /// Returns the next command to send: the node it goes to, the id its
    /// reply must carry, and the command.
    #[must_use]
    fn poll_command(&mut self) -> Option<(usize, CommandId, Command)>;

    /// Returns the next event for the lock's user.
    #[must_use]
    fn poll_event(&mut self) -> Option<Event>;

    /// Returns the next time at which `handle_timeout` should be called.
    #[must_use]
    fn poll_timeout(&self) -> Option<Instant>;

    /// Returns true if the machine still waits for `node`'s reply to
    /// command `id` (a driver drops a call the machine gave up on).
    fn awaits(&self, node: usize, id: CommandId) -> bool;

    /// When the next renewal is scheduled, if the lock is held and no
    /// renewal is in flight (a driver that batches renewals reads it).
    fn renewal_due(&self) -> Option<Instant>;

    /// Sends the scheduled renewal now instead of at its timer. Always
    /// safe: validity still counts from the renewal's own send.
    fn renew_early(&mut self, now: Instant);

    /// Where the machine is in its lifecycle (ignoring time).
    fn phase(&self) -> Phase;

    /// Returns true iff the lock is held and `now` is before its deadline.
    fn is_held(&self, now: Instant) -> bool;

    /// The deadline of the current hold, if the lock is held.
    fn valid_until(&self) -> Option<Instant>;

    /// The fencing token of the current hold, if the lock is held.
    fn fence(&self) -> Option<u64>;

    /// The Redis names this lock uses.
    fn keys(&self) -> &KeyNames;

    /// The owner token stored as the lock key's value.
    fn token(&self) -> &str;

    /// Returns true once the machine will never send anything again.
    fn is_released(&self) -> bool {
        self.phase() == Phase::Released
    }
}
