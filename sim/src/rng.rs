//! The simulation's one source of randomness: splitmix64 from the seed.
//!
//! Every draw in a run comes from an `Rng` derived from the run's seed, so
//! the same seed replays the same run.

use std::time::Duration;

use crate::config::DurationRange;

/// A small deterministic generator (splitmix64).
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `min..=max` (`min` if the range is empty).
    pub fn between(&mut self, min: u64, max: u64) -> u64 {
        if max <= min {
            return min;
        }
        let span = max - min;
        if span == u64::MAX {
            return self.next_u64();
        }
        min + self.next_u64() % (span + 1)
    }

    /// A duration drawn uniformly from `range` (inclusive), in whole
    /// microseconds.
    pub fn duration(&mut self, range: DurationRange) -> Duration {
        let min = range.min.as_micros() as u64;
        let max = range.max.as_micros() as u64;
        Duration::from_micros(self.between(min, max.max(min)))
    }

    /// True with probability `p` (0 draws nothing, so a scenario without
    /// the option keeps every other draw where it was).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.between(0, 999_999) as f64) < p * 1_000_000.0
    }

    /// A fresh generator for a sub-stream (a client, a node), independent of
    /// how many draws this one has made.
    pub fn fork(seed: u64, stream: u64) -> Self {
        let mut mixer = Self::new(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        Self::new(mixer.next_u64())
    }
}
