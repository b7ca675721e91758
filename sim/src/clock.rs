//! Per-process clocks that run fast or slow and step, driven by true sim time.
//!
//! A node's clock reads `local(t) = base_local + (t − base_true) × (1 + rate)`:
//! changing the rate or stepping the clock re-bases it at the current true
//! time, so readings stay continuous except for deliberate jumps.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

/// The simulation's time step. Timers resolve to it, so it must be far
/// below the smallest drift margin in use (ttl × drift_factor + 2 ms).
pub const TICK: Duration = Duration::from_millis(1);

/// The shared, mutable model of one process's clock. The world changes it
/// (drift, jumps); the process reads it.
#[derive(Debug, Clone, Default)]
pub struct ClockControl {
    model: Arc<Mutex<ClockModel>>,
}

#[derive(Debug, Clone, Copy, Default)]
struct ClockModel {
    /// True time of the last re-base, in ns.
    base_true: i128,
    /// Local reading at the last re-base, in ns (may go negative after a
    /// backward jump).
    base_local: i128,
    /// Relative rate error: 0.01 runs 1 % fast.
    rate: f64,
    /// Bumped at every change of rate or step.
    generation: u64,
}

impl ClockModel {
    fn local_at(&self, true_ns: i128) -> i128 {
        let elapsed = (true_ns - self.base_true) as f64;
        self.base_local + (elapsed * (1.0 + self.rate)).round() as i128
    }

    fn true_at(&self, local_ns: i128) -> i128 {
        let elapsed = (local_ns - self.base_local) as f64;
        self.base_true + (elapsed / (1.0 + self.rate)).round() as i128
    }
}

fn ns(duration: Duration) -> i128 {
    duration.as_nanos() as i128
}

impl ClockControl {
    fn with<T>(&self, f: impl FnOnce(&mut ClockModel) -> T) -> T {
        f(&mut self.model.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The local reading at true time `at`, in ns since the run began.
    pub fn local_ns(&self, at: Duration) -> i128 {
        self.with(|model| model.local_at(ns(at)))
    }

    /// How many times the clock changed rate or stepped.
    pub fn generation(&self) -> u64 {
        self.with(|model| model.generation)
    }

    /// The local reading at true time `at`, clamped at zero.
    pub fn local(&self, at: Duration) -> Duration {
        nonnegative(self.local_ns(at))
    }

    /// The true time at which the clock will read `local_ns`, assuming no
    /// further change of rate or step.
    pub fn true_time_of(&self, local_ns: i128) -> Duration {
        nonnegative(self.with(|model| model.true_at(local_ns)))
    }

    /// From true time `at` on, runs `rate` fast (negative: slow).
    pub fn set_rate(&self, at: Duration, rate: f64) {
        self.with(|model| {
            let local = model.local_at(ns(at));
            *model = ClockModel {
                base_true: ns(at),
                base_local: local,
                rate,
                generation: model.generation + 1,
            };
        });
    }

    /// At true time `at`, steps the clock by `offset_ns` (negative: back).
    pub fn jump(&self, at: Duration, offset_ns: i128) {
        self.with(|model| {
            let local = model.local_at(ns(at));
            model.base_true = ns(at);
            model.base_local = local + offset_ns;
            model.generation += 1;
        });
    }
}

fn nonnegative(value_ns: i128) -> Duration {
    Duration::from_nanos(u64::try_from(value_ns.max(0)).unwrap_or(u64::MAX))
}

/// True sim time inside a turmoil host. Outside a simulation there is no
/// such time; every caller in this crate runs inside one.
pub fn now() -> Duration {
    turmoil::sim_elapsed().unwrap_or_default()
}

/// The lock adapter's [`lock_core::internal::Clock`] for a simulated client: a
/// monotonic reading of its [`ClockControl`].
///
/// Instants are `origin + local`, where `origin` is any fixed instant: only
/// differences between readings carry meaning. A backward step is clamped,
/// as a real monotonic clock never goes back.
#[derive(Debug, Clone)]
pub struct SimClock {
    control: ClockControl,
    origin: Instant,
    last: Arc<Mutex<Reading>>,
}

/// The last reading, and what it was read at: the host's tokio instant and
/// the clock's generation. The host's true time is a function of its tokio
/// instant, so an equal key gives an equal reading; the adapter reads its
/// clock many times per instant.
#[derive(Debug, Default)]
struct Reading {
    local: Duration,
    key: Option<(tokio::time::Instant, u64)>,
}

impl SimClock {
    /// A clock reading `control`, with `origin` as the instant for local 0.
    pub fn new(control: ClockControl, origin: Instant) -> Self {
        Self {
            control,
            origin,
            last: Arc::default(),
        }
    }

    /// The local reading now, as an offset from `origin`.
    pub fn local_now(&self) -> Duration {
        let key = (tokio::time::Instant::now(), self.control.generation());
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if last.key != Some(key) {
            let reading = self.control.local(now());
            last.local = last.local.max(reading);
            last.key = Some(key);
        }
        debug_assert!(
            self.control.local(now()) <= last.local,
            "a cached clock reading is behind the clock"
        );
        last.local
    }

    /// Maps an instant of this clock to the true time it will be reached.
    pub fn true_time_of(&self, instant: Instant) -> Duration {
        let local = instant.saturating_duration_since(self.origin);
        self.control.true_time_of(ns(local))
    }

    /// Maps an instant of this clock to its local offset.
    pub fn local_of(&self, instant: Instant) -> Duration {
        instant.saturating_duration_since(self.origin)
    }
}

impl lock_core::internal::Clock for SimClock {
    fn now(&self) -> Instant {
        self.origin + self.local_now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn drift_and_jumps_rebase_continuously() {
        let clock = ClockControl::default();
        assert_eq!(clock.local(s(10)), s(10));
        clock.set_rate(s(10), 0.5);
        assert_eq!(clock.local(s(12)), s(13));
        clock.jump(s(12), ns(s(5)));
        assert_eq!(clock.local(s(12)), s(18));
        assert_eq!(clock.local(s(14)), s(21));
        assert_eq!(clock.true_time_of(ns(s(21))), s(14));
        clock.jump(s(14), -ns(s(30)));
        assert_eq!(clock.local(s(14)), Duration::ZERO, "clamped at zero");
    }
}
