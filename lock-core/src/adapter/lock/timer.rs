//! Tokio timers armed from deadlines on the locker's injected clock.
//!
//! Every deadline the adapter keeps (a machine's next timeout, a
//! reconnect, a slot-table refresh, a sentinel re-check) is an instant of
//! the injected [`Clock`](crate::adapter::Clock). A loop reads that clock
//! once per pass and passes the reading down; a [`DeadlineTimer`] turns a
//! deadline into a tokio sleep of `deadline − now` from that one reading.
//! A skewed or simulated clock thus decides every wake-up: tokio's clock is
//! read only here, as the base the sleep counts from.
//!
//! A caller's run loop takes its timer from the locker's [`TimerPool`] and
//! gives it back when done, instead of making a tokio sleep per call: a
//! new sleep registers with tokio's timer driver and a dropped one
//! deregisters, each under the driver's lock, where a kept one that is
//! re-armed to a later deadline only moves its expiry in place.

use std::{
    future::Future,
    pin::Pin,
    sync::{Mutex, PoisonError},
    task::{Context, Poll},
    time::{Duration, Instant},
};

use tokio::{runtime, time::Sleep};

/// How many idle timers a pool keeps: more than the callers a locker
/// usually has in flight at once, and a bound on what an idle locker holds.
const POOL_LIMIT: usize = 256;

/// The idle timers of one locker's run loops, each with the runtime whose
/// timer driver it belongs to (a timer is reused only on that runtime).
#[derive(Default)]
pub(crate) struct TimerPool {
    idle: Mutex<Vec<(runtime::Id, DeadlineTimer)>>,
}

impl TimerPool {
    /// An idle timer of the current runtime, or a new one; nothing is armed.
    pub(crate) fn take(&self) -> PooledTimer<'_> {
        let runtime = runtime::Handle::current().id();
        let kept = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let timer = match kept {
            Some((kept_on, timer)) if kept_on == runtime => timer,
            _ => DeadlineTimer::new(),
        };
        PooledTimer {
            pool: self,
            runtime,
            timer: Some(timer),
        }
    }
}

/// A timer taken from a [`TimerPool`], given back (disarmed) when dropped.
pub(crate) struct PooledTimer<'a> {
    pool: &'a TimerPool,
    runtime: runtime::Id,
    /// `Some` until dropped.
    timer: Option<DeadlineTimer>,
}

impl std::ops::Deref for PooledTimer<'_> {
    type Target = DeadlineTimer;

    fn deref(&self) -> &DeadlineTimer {
        // `timer` is `None` only inside `drop`.
        self.timer.as_ref().expect("a pooled timer until dropped")
    }
}

impl std::ops::DerefMut for PooledTimer<'_> {
    fn deref_mut(&mut self) -> &mut DeadlineTimer {
        // `timer` is `None` only inside `drop`.
        self.timer.as_mut().expect("a pooled timer until dropped")
    }
}

impl Drop for PooledTimer<'_> {
    fn drop(&mut self) {
        let Some(mut timer) = self.timer.take() else {
            return;
        };
        // The sleep may stay registered at its old deadline: if that comes
        // first, it wakes its last poller once, for nothing; a re-arm to a
        // later deadline moves it.
        timer.armed = None;
        let mut idle = self
            .pool
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if idle.len() < POOL_LIMIT {
            idle.push((self.runtime, timer));
        }
    }
}

/// One tokio sleep, re-armed to the next deadline only when it changes.
pub(crate) struct DeadlineTimer {
    sleep: Pin<Box<Sleep>>,
    /// The deadline the sleep runs to, on the injected clock.
    armed: Option<Instant>,
}

impl DeadlineTimer {
    /// A timer with nothing armed.
    pub(crate) fn new() -> Self {
        Self {
            sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
            armed: None,
        }
    }

    /// Arms the timer to `deadline` (`None` disarms it), where `now` is the
    /// pass's reading of the injected clock: the sleep lasts
    /// `deadline − now`. An unchanged deadline keeps the running sleep.
    pub(crate) fn arm(&mut self, deadline: Option<Instant>, now: Instant) {
        if deadline == self.armed {
            return;
        }
        if let Some(at) = deadline {
            let wait = at.saturating_duration_since(now);
            self.sleep
                .as_mut()
                .reset(tokio::time::Instant::now() + wait);
        }
        self.armed = deadline;
    }

    /// Returns true once the armed deadline's sleep has run out, and
    /// disarms the timer then; otherwise registers `cx` to be woken.
    pub(crate) fn poll_expired(&mut self, cx: &mut Context<'_>) -> bool {
        if self.armed.is_some() && self.sleep.as_mut().poll(cx) == Poll::Ready(()) {
            self.armed = None;
            return true;
        }
        false
    }

    /// [`arm`](Self::arm), then [`poll_expired`](Self::poll_expired); on
    /// expiry `cx` is woken, so that the owner's next pass looks again.
    pub(crate) fn poll_at(
        &mut self,
        cx: &mut Context<'_>,
        deadline: Option<Instant>,
        now: Instant,
    ) {
        self.arm(deadline, now);
        if self.poll_expired(cx) {
            cx.waker().wake_by_ref();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noop_cx() -> Context<'static> {
        Context::from_waker(std::task::Waker::noop())
    }

    /// The sleep counts from the pass's reading of the injected clock, not
    /// from tokio's: a deadline 50 ms after the injected `now` expires 50 ms
    /// of tokio time later, whatever instant the injected clock shows.
    #[tokio::test(start_paused = true)]
    async fn sleeps_the_distance_from_the_injected_now() {
        let mut cx = noop_cx();
        let mut timer = DeadlineTimer::new();
        // An injected clock an hour ahead of tokio's.
        let now = tokio::time::Instant::now().into_std() + Duration::from_secs(3_600);
        timer.arm(Some(now + Duration::from_millis(50)), now);
        assert!(!timer.poll_expired(&mut cx));
        tokio::time::advance(Duration::from_millis(49)).await;
        assert!(!timer.poll_expired(&mut cx));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(timer.poll_expired(&mut cx), "due after 50 ms");
        assert!(!timer.poll_expired(&mut cx), "disarmed once it fired");
    }

    /// An unchanged deadline keeps the running sleep; a new one re-arms.
    #[tokio::test(start_paused = true)]
    async fn rearms_only_on_a_new_deadline() {
        let mut cx = noop_cx();
        let mut timer = DeadlineTimer::new();
        let t0 = tokio::time::Instant::now().into_std();
        timer.arm(Some(t0 + Duration::from_millis(10)), t0);
        tokio::time::advance(Duration::from_millis(5)).await;
        // The same deadline, read 5 ms later: still due at 10 ms.
        timer.arm(
            Some(t0 + Duration::from_millis(10)),
            t0 + Duration::from_millis(5),
        );
        tokio::time::advance(Duration::from_millis(5)).await;
        assert!(timer.poll_expired(&mut cx));
        timer.arm(None, t0);
        assert!(!timer.poll_expired(&mut cx), "nothing armed");
    }

    /// A timer given back to the pool comes out again disarmed, and fires
    /// at the deadline it is armed to next, later or earlier than the one
    /// its sleep was still registered at, never at that old one.
    #[tokio::test(start_paused = true)]
    async fn a_pooled_timer_fires_at_its_new_deadline_only() {
        let ms = Duration::from_millis;
        let mut cx = noop_cx();
        let pool = TimerPool::default();
        let t0 = tokio::time::Instant::now().into_std();
        pool.take().arm(Some(t0 + ms(10)), t0);
        let mut timer = pool.take();
        assert_eq!(pool.idle.lock().unwrap().len(), 0, "the same timer again");
        tokio::time::advance(ms(10)).await;
        assert!(
            !timer.poll_expired(&mut cx),
            "the old deadline is not its own"
        );
        let now = t0 + ms(10);
        timer.arm(Some(now + ms(20)), now);
        tokio::time::advance(ms(19)).await;
        assert!(!timer.poll_expired(&mut cx));
        tokio::time::advance(ms(1)).await;
        assert!(
            timer.poll_expired(&mut cx),
            "due at its new, later deadline"
        );
        let now = now + ms(20);
        timer.arm(Some(now + ms(50)), now);
        drop(timer);
        let mut timer = pool.take();
        timer.arm(Some(now + ms(5)), now);
        tokio::time::advance(ms(5)).await;
        assert!(
            timer.poll_expired(&mut cx),
            "due at its new, earlier deadline"
        );
    }
}
