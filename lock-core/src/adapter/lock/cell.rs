//! One lock's shared state: its machine behind a mutex, and what its guard
//! and its waiters see.
//!
//! Whoever gives the machine an input — the task acquiring or releasing,
//! or the watchdog renewing — does so under the mutex and drains the
//! machine completely before letting go (the drain rule). The commands it
//! drains are its to send, and their replies come back through it. Timers
//! may be driven by both the caller and the watchdog: `handle_timeout` only
//! fires what is due, so a second call changes nothing.

use std::{
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant},
};

use tokio::sync::Notify;

use super::{
    error::{AcquireError, ReleaseError},
    machines::AnyMachine,
    metrics::LockTimes,
    shared::Shared,
};
use crate::adapter::connect::{connector::Observed, node::Live};
use crate::{
    AcquireFailure, Command, CommandId, Event, Failure, LostReason, ReleaseOutcome,
    scripts::KeyNames,
};

/// What a guard sees of its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Not granted yet.
    Pending,
    Held {
        valid_until: Instant,
    },
    Lost(LostReason),
    Released,
}

pub(crate) struct LockCell {
    pub(crate) id: u64,
    /// The key as given to `acquire`.
    pub(crate) key: String,
    /// How long a command may go unanswered before its connection is
    /// presumed wedged.
    pub(crate) command_timeout: Duration,
    /// How far ahead of its timer the watchdog may send a renewal, to
    /// batch it with others.
    pub(crate) renew_window: Duration,
    /// The options' wait, for the timeout error.
    pub(crate) wait: Duration,
    pub(crate) span: tracing::Span,
    /// The machine's key names and owner token, shared so that commands
    /// can be encoded without holding the machine.
    pub(crate) names: Arc<KeyNames>,
    pub(crate) token: Arc<str>,
    state: Mutex<CellState>,
    /// Woken on every change of `status`.
    pub(crate) changed: Notify,
}

pub(crate) struct CellState {
    pub(crate) machine: AnyMachine,
    pub(crate) status: Status,
    pub(crate) fence: u64,
    /// The loss, once the machine reported it.
    pub(crate) lost: Option<LostReason>,
    pub(crate) acquire_result: Option<Result<u64, AcquireError>>,
    pub(crate) release_result: Option<Result<(), ReleaseError>>,
    /// The last acquire attempt met another owner: wake-ups help.
    pub(crate) contended: bool,
    /// The watchdog drives this lock's timers (from the grant on, or from
    /// an abandoned acquire) until it is released.
    pub(crate) watched: bool,
    /// The deadline the watchdog's index holds for this lock.
    pub(crate) armed: Option<Instant>,
    /// What the lock's metrics remember between events.
    pub(crate) times: LockTimes,
}

/// A command drained from a machine, with the connection it goes on.
pub(crate) struct Outgoing {
    pub(crate) node: usize,
    pub(crate) id: CommandId,
    pub(crate) command: Command,
    /// The node's connection when the command was drained; `None` when it
    /// had none (the command then fails as a connection failure).
    pub(crate) live: Option<Live>,
}

impl LockCell {
    pub(crate) fn new(
        id: u64,
        key: String,
        machine: AnyMachine,
        opts: &crate::LockOptions,
        span: tracing::Span,
        now: Instant,
    ) -> Self {
        let renew_every = opts.effective_renew_every();
        let (names, token) = machine.shared_names();
        Self {
            id,
            names,
            token,
            key,
            command_timeout: opts.effective_command_timeout(),
            renew_window: renew_every / 8,
            wait: opts.effective_wait(),
            span,
            state: Mutex::new(CellState {
                machine,
                status: Status::Pending,
                fence: 0,
                lost: None,
                acquire_result: None,
                release_result: None,
                contended: false,
                watched: false,
                armed: None,
                times: LockTimes::new(now),
            }),
            changed: Notify::new(),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, CellState> {
        // A panic while holding this lock would be a bug in this crate;
        // the state stays usable for what follows.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The drain rule: takes every command (encoded for its node's current
    /// connection) and every event (applied to what the guard sees, and
    /// shown to the observer, at `now`, the pass's clock reading); returns
    /// the machine's next timeout.
    pub(crate) fn drain(
        &self,
        state: &mut CellState,
        session: &Shared,
        now: Instant,
        outgoing: &mut Vec<Outgoing>,
    ) -> Option<Instant> {
        while let Some((node, id, command)) = state.machine.poll_command() {
            session.metrics.on_command(&mut state.times, &command, now);
            let live = session.nodes.get(node).and_then(|slot| slot.live());
            outgoing.push(Outgoing {
                node,
                id,
                command,
                live,
            });
        }
        let mut changed = false;
        while let Some(event) = state.machine.poll_event() {
            if let Some(observer) = &session.observer {
                observer(&Observed {
                    key: &self.key,
                    token: &self.token,
                    event: &event,
                    at: now,
                });
            }
            session.metrics.on_event(&mut state.times, &event, now);
            if matches!(
                event,
                Event::Released {
                    outcome: ReleaseOutcome::Deleted
                }
            ) && !session.redlock
            {
                // A waiter of this locker need not wait for the
                // announcement to come back over pub/sub: wake it now.
                session.waiters.wake_named(|| self.names.channel());
            }
            changed |= self.apply(state, event);
        }
        if changed {
            self.changed.notify_waiters();
        }
        state.machine.poll_timeout()
    }

    /// Applies one event to what the guard and the acquiring task see.
    /// Returns true if the status changed.
    fn apply(&self, state: &mut CellState, event: Event) -> bool {
        let _entered = self.span.enter();
        match event {
            Event::Acquired { fence, valid_until } => {
                tracing::debug!(fence, "acquired");
                state.fence = fence;
                state.contended = false;
                state.status = Status::Held { valid_until };
                state.acquire_result = Some(Ok(fence));
                true
            }
            Event::Renewed { valid_until } => {
                tracing::trace!("renewed");
                state.status = Status::Held { valid_until };
                true
            }
            Event::RenewFailed(failure) => {
                tracing::debug!(%failure, "renewal failed");
                false
            }
            Event::Contended { .. } => {
                state.contended = true;
                false
            }
            Event::AcquireFailed(failure) => {
                tracing::debug!(%failure, "acquire failed");
                state.contended = false;
                state.acquire_result = Some(Err(acquire_error(failure, self.wait)));
                true
            }
            Event::Lost { reason } => {
                tracing::warn!(%reason, "lock lost");
                state.lost = Some(reason);
                state.status = Status::Lost(reason);
                true
            }
            Event::Released { outcome } => {
                tracing::debug!(?outcome, "released");
                // Any loss reported before this event ended the hold first:
                // before the release, as it started (the deadline had
                // passed), or by its own answer (the key was gone).
                let result = match (state.lost, outcome) {
                    (Some(reason), _) => Err(ReleaseError::AlreadyLost(reason)),
                    (None, ReleaseOutcome::Deleted) => Ok(()),
                    (None, ReleaseOutcome::NotOwner) => {
                        Err(ReleaseError::AlreadyLost(LostReason::NotOwner))
                    }
                    (None, ReleaseOutcome::Unknown) => Err(ReleaseError::Unconfirmed),
                };
                state.release_result = Some(result);
                if state.lost.is_none() {
                    state.status = Status::Released;
                }
                true
            }
        }
    }
}

fn acquire_error(failure: AcquireFailure, wait: Duration) -> AcquireError {
    match failure {
        AcquireFailure::TimedOut { last_failure: None } => AcquireError::Timeout { waited: wait },
        AcquireFailure::TimedOut {
            last_failure: Some(failure),
        } => AcquireError::Unavailable(failure),
        AcquireFailure::Failed(Failure::WrongType) => AcquireError::WrongType,
        AcquireFailure::Failed(Failure::Unsupported) => AcquireError::Unsupported,
        AcquireFailure::Failed(failure) => AcquireError::Unavailable(failure),
        AcquireFailure::NotReplicated { acked, wanted } => {
            AcquireError::NotReplicated { acked, wanted }
        }
        AcquireFailure::NotDurable { acked, wanted } => AcquireError::NotDurable { acked, wanted },
        // Only an abandoned acquire (its future dropped) is cancelled, and
        // nobody is listening then.
        AcquireFailure::Cancelled => AcquireError::DriverStopped,
    }
}
