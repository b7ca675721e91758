//! Drawing a seed's fault mix (swarm testing, as in TigerBeetle's VOPR and
//! Jepsen's composed nemeses): each seed enables its own subset of the
//! mix's fault kinds with its own rate for each, then draws episodes of
//! them; some episodes are pairs, a second fault striking inside the
//! first's window (latency then a partition, a pause across a renewal,
//! drift around a failover). Sizes scale with the lock's ttl. The result
//! is an ordinary concrete schedule: the checkers, the shrinker and the
//! reports treat it like any other.

use std::time::Duration;

use crate::{
    config::{DurationRange, FaultKind, FaultTarget, MixSpec, Scenario, SignedDuration, Topology},
    outcome::ConcreteFault,
    rng::Rng,
    scenario::names::{Hosts, fault_kind},
};

/// The faults `mix` draws for `seed`.
pub(super) fn draw(scenario: &Scenario, mix: &MixSpec, seed: u64) -> Vec<ConcreteFault> {
    let mut rng = Rng::fork(seed, 0x5A17);
    // The swarm: each kind in or out, each with its own weight.
    let mut enabled: Vec<(FaultKind, u64)> = Vec::new();
    for kind in &mix.kinds {
        let weight = rng.between(1, 8);
        if rng.between(0, 1) == 1 {
            enabled.push((*kind, weight));
        }
    }
    if enabled.is_empty() {
        let pick = rng.between(0, mix.kinds.len() as u64 - 1) as usize;
        enabled.push((mix.kinds[pick], 1));
    }
    let episodes = rng.between(mix.episodes.0, mix.episodes.1);
    let ttl = scenario.lock.ttl;
    // Episodes start after the first second (locks are taken by then) and
    // before the last ttl.
    let window = DurationRange {
        min: Duration::from_secs(1).min(scenario.duration / 4),
        max: scenario
            .duration
            .saturating_sub(ttl)
            .max(scenario.duration / 2),
    };
    let mut schedule = Vec::new();
    for _ in 0..episodes {
        let kind = weighted(&mut rng, &enabled);
        let at = rng.duration(window);
        let first = episode(&mut rng, scenario, mix, kind, at);
        if rng.between(0, 999) < (mix.pairs * 1000.0) as u64 {
            // The second strikes inside the first's window (or within a
            // ttl of an instant fault).
            let span = first.duration.unwrap_or(ttl).max(Duration::from_millis(1));
            let at = first.at
                + rng.duration(DurationRange {
                    min: Duration::ZERO,
                    max: span,
                });
            let second = weighted(&mut rng, &enabled);
            schedule.push(episode(&mut rng, scenario, mix, second, at));
        }
        schedule.push(first);
    }
    schedule.retain(|fault| fault.at < scenario.duration);
    schedule
}

/// A kind drawn by weight.
fn weighted(rng: &mut Rng, enabled: &[(FaultKind, u64)]) -> FaultKind {
    let total: u64 = enabled.iter().map(|(_, weight)| weight).sum();
    let mut pick = rng.between(0, total - 1);
    for (kind, weight) in enabled {
        if pick < *weight {
            return *kind;
        }
        pick -= weight;
    }
    // The picks above cover 0..total.
    enabled[0].0
}

/// Scales `ttl` by `num / den`.
fn of(ttl: Duration, num: u32, den: u32) -> Duration {
    ttl * num / den
}

/// One fault of `kind` at `at`, its target and sizes drawn.
fn episode(
    rng: &mut Rng,
    scenario: &Scenario,
    mix: &MixSpec,
    kind: FaultKind,
    at: Duration,
) -> ConcreteFault {
    let ttl = scenario.lock.ttl;
    let renew = scenario.lock.renew_every.unwrap_or(ttl / 3);
    let ms = Duration::from_millis;
    let mut fault = ConcreteFault {
        kind,
        at,
        target: target(rng, scenario, kind),
        duration: None,
        rate: None,
        offset: None,
        delay: None,
    };
    let range = |min: Duration, max: Duration| DurationRange { min, max };
    match kind {
        FaultKind::Pause => {
            // Short, across a renewal, or longer than the lease.
            let band = match rng.between(0, 2) {
                0 => range(ms(1), renew),
                1 => range(renew, ttl + renew),
                _ => range(ttl, ttl * 3),
            };
            fault.duration = Some(rng.duration(band));
        }
        FaultKind::Partition | FaultKind::PartitionOneway => {
            fault.duration = Some(rng.duration(range(ms(10), ttl * 3)));
        }
        FaultKind::Latency => {
            // Mostly slow replies that still beat the command timeout (the
            // ones that stretch a wrongly counted validity), sometimes
            // links slower than any command may wait.
            let timeout = crate::client::lock_options(&scenario.lock).effective_command_timeout();
            let band = if rng.between(0, 4) == 0 {
                range(timeout / 2, of(ttl, 1, 2).max(timeout))
            } else {
                range(ms(1), timeout / 2)
            };
            fault.delay = Some(rng.duration(band));
            fault.duration = Some(rng.duration(range(of(ttl, 1, 10), ttl * 5)));
        }
        FaultKind::Busy => fault.duration = Some(rng.duration(range(ms(10), ttl * 2))),
        FaultKind::Restart => {
            // Back at once, or down for up to three ttls.
            fault.duration = (rng.between(0, 1) == 1).then(|| rng.duration(range(ms(1), ttl * 3)));
        }
        FaultKind::ClockDrift => {
            let rate = mix.drift * rng.between(1, 1000) as f64 / 1000.0;
            fault.rate = Some(if rng.between(0, 1) == 1 { rate } else { -rate });
            fault.duration = Some(rng.duration(range(of(ttl, 1, 2), ttl * 10)));
        }
        FaultKind::ClockJump => {
            fault.offset = Some(SignedDuration {
                negative: rng.between(0, 1) == 1,
                magnitude: rng.duration(range(of(ttl, 1, 10).min(mix.jump), mix.jump)),
            });
        }
        FaultKind::ShardFailover => {
            // Demoted at once, or after a stale window of up to 3 ttl.
            fault.duration = (rng.between(0, 1) == 1).then(|| rng.duration(range(ms(1), ttl * 3)));
        }
        FaultKind::SlotMigration | FaultKind::AtomicSlotMigration => {
            fault.duration = Some(rng.duration(range(ms(10), ttl * 2)));
        }
        // Instants: nothing to size (an eviction takes one key).
        FaultKind::Failover | FaultKind::Crash | FaultKind::Evict => {}
    }
    fault
}

/// A host `kind` may hit in this topology, drawn.
fn target(rng: &mut Rng, scenario: &Scenario, kind: FaultKind) -> FaultTarget {
    let info = fault_kind(kind);
    if info.primary_only {
        return FaultTarget::Primary;
    }
    let clients = scenario.clients.count as u64;
    let nodes = scenario.topology.node_count() as u64;
    let client = |rng: &mut Rng| FaultTarget::Client(rng.between(0, clients - 1) as usize);
    let node = |rng: &mut Rng| {
        // In a primary-replica topology, favour the primary.
        if matches!(scenario.topology, Topology::PrimaryReplica { .. }) && rng.between(0, 1) == 1 {
            FaultTarget::Primary
        } else {
            FaultTarget::Redis(rng.between(0, nodes - 1) as usize)
        }
    };
    match info.hosts {
        Hosts::Clients => client(rng),
        Hosts::RedisNodes => node(rng),
        Hosts::ClientsOrRedis => {
            if rng.between(0, 1) == 1 {
                client(rng)
            } else {
                node(rng)
            }
        }
        Hosts::Any => match rng.between(0, 4) {
            0..=1 => client(rng),
            2..=3 => node(rng),
            _ => FaultTarget::Storage,
        },
    }
}
