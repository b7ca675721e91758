//! The deterministic simulation harness for `lock-core`: a turmoil world with
//! a simulated Redis, faults, a history recorder and checkers.

// No function over 100 lines outside tests (`clippy.toml` sets the
// threshold).
#![warn(clippy::too_many_lines)]

pub mod chaos;
pub mod checker;
pub mod client;
pub mod clock;
pub mod config;
pub mod freeze;
pub mod history;
pub mod net;
pub mod outcome;
pub mod report;
pub mod rng;
pub mod runner;
pub mod scenario;
pub mod schedule;
pub mod server;
pub mod shrink;
pub mod storage;
pub mod world;
