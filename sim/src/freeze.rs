//! Process pauses: a wrapper that stops polling a client's whole task tree
//! until a true sim deadline.
//!
//! turmoil cannot stop a host, and a `tokio::spawn`ed task would escape any
//! wrapper, so a client runs its workload *and* its lock driver inside one
//! [`Frozen`] future. While frozen nothing of it runs: no renewals, no
//! timers, no reads. Its timers still come due, so on thawing the client
//! sees all the time that passed at once, as a paused process would.

use std::{
    cell::Cell,
    future::Future,
    pin::Pin,
    rc::Rc,
    task::{Context, Poll},
    time::Duration,
};

use crate::clock;

/// The world's handle on one client's pause state.
#[derive(Debug, Clone, Default)]
pub struct FreezeSwitch {
    until: Rc<Cell<Duration>>,
}

impl FreezeSwitch {
    /// Freezes the client until true time `until` (extends, never shortens).
    pub fn freeze_until(&self, until: Duration) {
        self.until.set(self.until.get().max(until));
    }

    /// Returns true while the client is frozen at true time `at`.
    pub fn is_frozen(&self, at: Duration) -> bool {
        at < self.until.get()
    }
}

/// Wraps a future so that it is not polled while its switch is frozen.
pub struct Frozen<F> {
    inner: Pin<Box<F>>,
    switch: FreezeSwitch,
    thaw: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The latest freeze seen to have ended: while the switch still says
    /// so, the client is not frozen and the clock need not be read.
    thawed: Duration,
}

impl<F: Future> Frozen<F> {
    /// Wraps `inner`.
    pub fn new(inner: F, switch: FreezeSwitch) -> Self {
        Self {
            inner: Box::pin(inner),
            switch,
            thaw: None,
            thawed: Duration::ZERO,
        }
    }
}

impl<F: Future> Future for Frozen<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let until = self.switch.until.get();
        if until != self.thawed {
            let now = clock::now();
            if self.switch.is_frozen(now) {
                let thaw = self.thaw.insert(Box::pin(tokio::time::sleep(until - now)));
                // Registers the waker for the thaw; the inner future is not
                // polled, so nothing it would do happens while frozen.
                if thaw.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
            // True time only moves forward: once past, it stays past.
            self.thawed = until;
        }
        self.thaw = None;
        self.inner.as_mut().poll(cx)
    }
}
