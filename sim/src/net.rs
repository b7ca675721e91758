//! The simulated network's names and delays, which the world, the clients,
//! the simulated servers and the checkers all use.

use std::time::Duration;

/// The base one-way network delay: uniform-ish in [0, BASE_LATENCY].
pub const BASE_LATENCY: Duration = Duration::from_millis(2);

/// The name of Redis node `index`.
pub fn redis_host(index: usize) -> String {
    format!("redis-{index}")
}
