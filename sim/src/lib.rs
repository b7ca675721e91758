//! The deterministic simulation harness for `lock-core`: a turmoil world with
//! a simulated Redis, faults, a history recorder and checkers.

pub mod config;
pub mod history;
pub mod outcome;
pub mod world;
pub mod client;
pub mod clock;
pub mod freeze;
pub mod rng;
pub mod storage;
pub mod checker;
pub mod redis;
pub mod scenario;
