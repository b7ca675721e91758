//! What chance decides when the sentinels adopt a failover, drawn apart
//! from everything else so that `sim chaos` replays the simulator's draws
//! for a seed on real sentinels.

use std::time::Duration;

use crate::{config::DurationRange, rng::Rng};

/// What chance decides in each Sentinel failover of a run, in order: which
/// sentinel leads it and how long after the leader's hello each other one
/// adopts it. `sim chaos` replays the same draws on real sentinels.
#[derive(Debug, Clone)]
pub struct SentinelDraws {
    rng: Rng,
}

/// One failover's draws.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adoption {
    /// The sentinel that leads the failover.
    pub leader: usize,
    /// For each sentinel, how long after the leader's hello it adopts the
    /// failover (`None` for the leader, which switches at its end).
    pub lags: Vec<Option<Duration>>,
}

impl SentinelDraws {
    /// The draws of seed `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: Rng::fork(seed, 0x5E47),
        }
    }

    /// The next failover's draws among `sentinels` sentinels (at least
    /// one), each lag from `lag`.
    pub fn next(&mut self, sentinels: usize, lag: DurationRange) -> Adoption {
        let leader = self.rng.between(0, sentinels.saturating_sub(1) as u64) as usize;
        let lags = (0..sentinels)
            .map(|index| (index != leader).then(|| self.rng.duration(lag)))
            .collect();
        Adoption { leader, lags }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sentinel_but_the_leader_draws_a_lag_in_range_and_a_seed_replays_them() {
        let lag = DurationRange {
            min: Duration::from_millis(100),
            max: Duration::from_millis(300),
        };
        let mut draws = SentinelDraws::new(7);
        let first = draws.next(3, lag);
        assert!(first.leader < 3);
        for (index, drawn) in first.lags.iter().enumerate() {
            match drawn {
                None => assert_eq!(index, first.leader),
                Some(lag) => assert!((100..=300).contains(&lag.as_millis())),
            }
        }
        assert_eq!(first.lags.iter().filter(|lag| lag.is_none()).count(), 1);
        let second = draws.next(3, lag);
        let mut again = SentinelDraws::new(7);
        assert_eq!((again.next(3, lag), again.next(3, lag)), (first, second));
    }
}
