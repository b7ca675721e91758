//! Deterministic jitter for backoff: splitmix64 over a seed the caller
//! passes in. A pure function of the seed, not an entropy source, so the
//! machines stay free of randomness of their own.

use std::time::Duration;

/// splitmix64's increment (the golden ratio in 64 bits).
pub(crate) const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// splitmix64's output function for the counter value `state`; a bijection,
/// so distinct counters never collide.
pub(crate) fn splitmix64(state: u64) -> u64 {
    let mut z = state.wrapping_add(GOLDEN_GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A jitter source seeded by the caller.
#[derive(Debug, Clone)]
pub(crate) struct Jitter {
    state: u64,
}

impl Jitter {
    pub(crate) fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        let value = splitmix64(self.state);
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        value
    }

    /// A draw from the seed's sequence, for seeding sub-machines.
    pub(crate) fn seed(&mut self) -> u64 {
        self.next_u64()
    }

    /// Uniform in (base/2, base].
    pub(crate) fn up_to(&mut self, base: Duration) -> Duration {
        let half = base / 2;
        let span = (base - half).as_nanos() as u64;
        if span == 0 {
            return base;
        }
        half + Duration::from_nanos(1 + self.next_u64() % span)
    }

    /// Exponential backoff for the `attempt`-th retry, jittered:
    /// base = min(cap, min × 2^attempt), then [`up_to`](Self::up_to).
    pub(crate) fn backoff(&mut self, min: Duration, cap: Duration, attempt: u32) -> Duration {
        self.up_to(min.saturating_mul(1 << attempt.min(16)).min(cap))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_stays_in_bounds_and_replays_from_the_seed() {
        let (min, cap) = (Duration::from_millis(10), Duration::from_millis(200));
        let draws = |seed| {
            let mut jitter = Jitter::new(seed);
            (0..20)
                .map(|attempt| jitter.backoff(min, cap, attempt))
                .collect::<Vec<_>>()
        };
        assert_eq!(draws(1), draws(1));
        assert_ne!(draws(1), draws(2));
        for (attempt, delay) in draws(1).into_iter().enumerate() {
            let base = min.saturating_mul(1 << attempt.min(16)).min(cap);
            assert!(delay > base / 2 && delay <= base, "{attempt}: {delay:?}");
        }
    }
}
