//! Who waits on which release channel: the callers that wait for a lock
//! held by another owner, woken by the pub/sub connection when a release
//! is announced.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
};

use tokio::sync::Notify;

/// The waiters of one channel.
pub(crate) struct Waiting {
    pub(crate) notify: Notify,
    /// Counts announcements, so a waiter that was busy when one came
    /// still sees it.
    pub(crate) epoch: AtomicU64,
}

impl Waiting {
    pub(crate) fn wake(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.notify.notify_waiters();
    }
}

#[derive(Default)]
pub(crate) struct Channels {
    /// Channel → (waiters, their shared wake-up).
    pub(crate) waiting: BTreeMap<String, (usize, Arc<Waiting>)>,
    /// Set when the subscriptions no longer match `waiting`.
    pub(crate) dirty: bool,
}

/// Who waits on which channel.
#[derive(Default)]
pub(crate) struct Waiters {
    channels: Mutex<Channels>,
}

impl Waiters {
    pub(crate) fn channels(&self) -> std::sync::MutexGuard<'_, Channels> {
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes the waiters of `channel`, if any.
    pub(crate) fn wake(&self, channel: &str) {
        let waiting = self
            .channels()
            .waiting
            .get(channel)
            .map(|(_, waiting)| Arc::clone(waiting));
        if let Some(waiting) = waiting {
            waiting.wake();
        }
    }

    /// Wakes the waiters of the channel `channel` names, if any; the name
    /// is built only when someone waits on some channel (a release with
    /// nobody waiting, the common case, builds none).
    pub(crate) fn wake_named(&self, channel: impl FnOnce() -> String) {
        let waiting = {
            let channels = self.channels();
            if channels.waiting.is_empty() {
                return;
            }
            channels
                .waiting
                .get(&channel())
                .map(|(_, waiting)| Arc::clone(waiting))
        };
        if let Some(waiting) = waiting {
            waiting.wake();
        }
    }
}
