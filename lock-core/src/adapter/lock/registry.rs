//! The watchdog's index, shared by callers and the driver: each watched
//! lock's next machine timeout, and the work callers hand over. A task that
//! acquires or releases re-arms its lock's entry in passing, without waking
//! the watchdog unless the new deadline is earlier than what it sleeps on.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use super::{
    cell::{CellState, LockCell, Outgoing},
    dispatch::PendingCall,
};

/// Work handed to the watchdog.
pub(crate) enum Work {
    /// Send these commands for `cell` (drained by a caller that cannot
    /// wait for the replies).
    Send(Arc<LockCell>, Vec<Outgoing>),
    /// Take over these calls in flight for `cell`.
    Adopt(Arc<LockCell>, Vec<PendingCall>),
    /// The guard was dropped: release the lock in the background.
    Release(Arc<LockCell>),
}

#[derive(Default)]
pub(crate) struct Index {
    /// (deadline, lock id): each watched lock's next machine timeout.
    pub(crate) timers: BTreeSet<(Instant, u64)>,
    pub(crate) locks: BTreeMap<u64, Arc<LockCell>>,
    pub(crate) inbox: Vec<Work>,
    /// What the watchdog sleeps until (`None`: no timer armed).
    pub(crate) sleeping_until: Option<Instant>,
    /// The widest early-renewal window of any lock watched so far.
    pub(crate) renew_window: Duration,
}

/// The watchdog's shared index.
#[derive(Default)]
pub(crate) struct Registry {
    index: Mutex<Index>,
}

impl Registry {
    pub(crate) fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts watching `cell` (its state locked by the caller): the
    /// watchdog drives its timers from now on. Returns true if the driver
    /// must wake to arm an earlier timer.
    pub(crate) fn watch(
        &self,
        cell: &Arc<LockCell>,
        state: &mut CellState,
        deadline: Option<Instant>,
    ) -> bool {
        let mut index = self.index();
        if !state.watched {
            state.watched = true;
            index.locks.insert(cell.id, Arc::clone(cell));
            index.renew_window = index.renew_window.max(cell.renew_window);
        }
        Self::rearm_locked(&mut index, cell.id, state, deadline)
    }

    /// Moves a watched lock's index entry to `deadline`; forgets the lock
    /// once its machine is done. Returns true if the driver must wake.
    pub(crate) fn rearm(
        &self,
        cell: &LockCell,
        state: &mut CellState,
        deadline: Option<Instant>,
    ) -> bool {
        if !state.watched {
            return false;
        }
        let mut index = self.index();
        if state.machine.is_released() {
            state.watched = false;
            if let Some(old) = state.armed.take() {
                index.timers.remove(&(old, cell.id));
            }
            index.locks.remove(&cell.id);
            return false;
        }
        Self::rearm_locked(&mut index, cell.id, state, deadline)
    }

    fn rearm_locked(
        index: &mut Index,
        id: u64,
        state: &mut CellState,
        deadline: Option<Instant>,
    ) -> bool {
        if state.armed == deadline {
            return false;
        }
        if let Some(old) = state.armed {
            index.timers.remove(&(old, id));
        }
        state.armed = deadline;
        let Some(at) = deadline else {
            return false;
        };
        index.timers.insert((at, id));
        index.sleeping_until.is_none_or(|sleeping| at < sleeping)
    }

    /// Hands `work` to the watchdog (the caller wakes the driver).
    pub(crate) fn submit(&self, work: Work) {
        self.index().inbox.push(work);
    }

    /// The locker is shutting down (it and every guard are gone): stops
    /// watching the locks whose only work left is a release retried in the
    /// background (the machine's timing rule 9), so that they do not hold
    /// the driver up to a ttl. Their keys expire on their own.
    pub(crate) fn abandon_clean_ups(&self) {
        self.each_clean_up(|state, index, id| {
            state.watched = false;
            if let Some(old) = state.armed.take() {
                index.timers.remove(&(old, id));
            }
            index.locks.remove(&id);
        });
    }

    /// A connection to `node` was just (re)opened: every watched lock
    /// whose release retries in the background (timing rule 9) sends it
    /// now, while its key may still stand, rather than at its backoff.
    /// The watchdog's pass at `now` sends them.
    pub(crate) fn hurry_clean_ups(&self, node: usize, now: Instant) {
        self.each_clean_up(|state, index, id| {
            state.machine.handle_reconnected(now, node);
            let deadline = state.machine.poll_timeout();
            Self::rearm_locked(index, id, state, deadline);
        });
    }

    /// Runs `act` on every watched lock whose only work left is a release
    /// retried in the background, with its state and the index locked.
    fn each_clean_up(&self, mut act: impl FnMut(&mut CellState, &mut Index, u64)) {
        let cells: Vec<Arc<LockCell>> = self.index().locks.values().map(Arc::clone).collect();
        for cell in cells {
            // The cell's state before the index, as `rearm` takes them.
            let mut state = cell.lock();
            let cleaning_up =
                state.machine.phase() == crate::Phase::Released && !state.machine.is_released();
            if state.watched && cleaning_up {
                act(&mut state, &mut self.index(), cell.id);
            }
        }
    }

    /// Returns true once nothing is watched and no work is waiting.
    pub(crate) fn is_idle(&self) -> bool {
        let index = self.index();
        index.locks.is_empty() && index.inbox.is_empty()
    }
}
