//! [`LockGuard`]: a held lock.

use std::{fmt, sync::Arc, time::Instant};

use crate::LostReason;
use crate::adapter::{
    background::driver::Alive,
    lock::{
        cell::{LockCell, Status},
        error::ReleaseError,
        registry::Work,
        run::run,
        session::Session,
    },
};

/// A held lock. Dropping it releases the lock in the background.
pub struct LockGuard {
    cell: Arc<LockCell>,
    session: Arc<Session>,
    _alive: Arc<Alive>,
    fence: u64,
    released: bool,
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("key", &self.key())
            .field("redis_key", &self.redis_key())
            .field("fence", &self.fence)
            .field("valid_until", &self.valid_until())
            .finish_non_exhaustive()
    }
}

impl LockGuard {
    pub(crate) fn new(
        cell: Arc<LockCell>,
        session: Arc<Session>,
        alive: Arc<Alive>,
        fence: u64,
    ) -> Self {
        Self {
            cell,
            session,
            _alive: alive,
            fence,
            released: false,
        }
    }

    /// The fencing token: attach it to every write the lock protects, and
    /// have the resource refuse tokens lower than the highest it has seen.
    ///
    /// Under Redlock it is the highest of the majority's per-node tokens,
    /// which is not globally ordered: see [`RedlockMachine`](crate::RedlockMachine).
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// The key as given to `acquire` (without namespace or hash tag).
    pub fn key(&self) -> &str {
        &self.cell.key
    }

    /// The Redis key the lock lives under (`{namespace:key}`): `GET` it to
    /// see the holder's token, `PTTL` it to see how long it has left.
    pub fn redis_key(&self) -> &str {
        &self.cell.names.lock
    }

    /// The owner token stored in Redis (`GET` it to see who holds a lock).
    pub fn token(&self) -> &str {
        &self.cell.token
    }

    /// The instant (on the locker's clock) from which the lock is no longer
    /// held unless renewed; `None` once lost or released.
    pub fn valid_until(&self) -> Option<Instant> {
        match self.cell.lock().status {
            Status::Held { valid_until } => Some(valid_until),
            _ => None,
        }
    }

    /// Returns true while the lock is held: false once lost, and false from
    /// `valid_until` on even if the watchdog has not said so yet.
    pub fn is_held(&self) -> bool {
        self.valid_until()
            .is_some_and(|valid_until| self.session.clock.now() < valid_until)
    }

    /// Resolves when the lock is lost, with the reason; pending while held.
    ///
    /// Stop the protected work when it resolves: someone else may get the
    /// lock from that instant on. It resolves at `valid_until` at the
    /// latest, even if the watchdog is late or stopped (timing rule 3).
    pub async fn lost(&self) -> LostReason {
        loop {
            let notified = self.cell.changed.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let valid_until = match self.cell.lock().status {
                Status::Lost(reason) => return reason,
                Status::Released | Status::Pending => return LostReason::NotOwner,
                Status::Held { valid_until } => valid_until,
            };
            // One reading of the clock per pass: once the sleep ends, the
            // next pass reads it again and decides.
            let now = self.session.clock.now();
            if now >= valid_until {
                return LostReason::Expired;
            }
            tokio::select! {
                biased;
                () = &mut notified => {}
                () = tokio::time::sleep(valid_until - now) => {}
            }
        }
    }

    /// Releases the lock (owner-checked) and waits for Redis to confirm
    /// (under Redlock, for a majority of the nodes to confirm; the rest
    /// finish in the background).
    ///
    /// Errors if the lock had already been lost; the release is still sent
    /// and never touches another owner's key.
    pub async fn release(mut self) -> Result<(), ReleaseError> {
        self.released = true;
        let session = &self.session;
        let cell = &self.cell;
        let now = session.clock.now();
        let (outgoing, deadline) = {
            let mut state = cell.lock();
            state.machine.release(now);
            let mut outgoing = Vec::new();
            let deadline = cell.drain(&mut state, session, now, &mut outgoing);
            if session.watchdog.rearm(cell, &mut state, deadline) {
                session.wake_driver();
            }
            (outgoing, deadline)
        };
        run(session, cell, now, outgoing, deadline, |state| {
            state.release_result.is_some()
        })
        .await;
        cell.lock()
            .release_result
            .take()
            // `run` returns only once the release has a result.
            .unwrap_or(Err(ReleaseError::DriverStopped))
    }

    /// The tracing span of this lock.
    pub fn span(&self) -> &tracing::Span {
        &self.cell.span
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            self.session
                .watchdog
                .submit(Work::Release(Arc::clone(&self.cell)));
            self.session.wake_driver();
        }
    }
}

/// A read hold of a read-write lock
/// ([`Locker::acquire_read`](crate::Locker::acquire_read)): like a
/// [`LockGuard`] — its own lease, renewed by the watchdog, a lost signal,
/// an owner-checked release, released in the background when dropped —
/// but without a fence: readers write nothing a fence would guard.
#[derive(Debug)]
pub struct ReadGuard {
    inner: LockGuard,
}

impl ReadGuard {
    pub(crate) fn new(inner: LockGuard) -> Self {
        Self { inner }
    }

    /// The key as given to `acquire_read` (without namespace or hash tag).
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// The Redis key of the read-write lock (`{namespace:key}`, the
    /// writer's key); the readers' leases are in `{namespace:key}:readers`.
    pub fn redis_key(&self) -> &str {
        self.inner.redis_key()
    }

    /// This reader's owner token (its member in the readers' set).
    pub fn token(&self) -> &str {
        self.inner.token()
    }

    /// The instant (on the locker's clock) from which the read hold is no
    /// longer held unless renewed; `None` once lost or released.
    pub fn valid_until(&self) -> Option<Instant> {
        self.inner.valid_until()
    }

    /// Returns true while the read hold is held: false once lost, and
    /// false from `valid_until` on.
    pub fn is_held(&self) -> bool {
        self.inner.is_held()
    }

    /// Resolves when the read hold is lost, with the reason; pending while
    /// held. A writer may be granted from that instant on.
    pub async fn lost(&self) -> LostReason {
        self.inner.lost().await
    }

    /// Releases the read hold (owner-checked) and waits for Redis to
    /// confirm; errors if it had already been lost.
    pub async fn release(self) -> Result<(), ReleaseError> {
        self.inner.release().await
    }

    /// The tracing span of this lock.
    pub fn span(&self) -> &tracing::Span {
        self.inner.span()
    }
}
