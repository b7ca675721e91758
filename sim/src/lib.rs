//! The deterministic simulation harness for `lock-core`: a turmoil world with
//! a simulated Redis, faults, a history recorder and checkers.

// No function over 100 lines (`clippy.toml` sets the threshold): every
// module but `chaos` is held to it; `chaos` joins once its long functions
// are split, and the lint then moves to the crate root.
pub mod chaos;
#[warn(clippy::too_many_lines)]
pub mod checker;
#[warn(clippy::too_many_lines)]
pub mod client;
#[warn(clippy::too_many_lines)]
pub mod clock;
#[warn(clippy::too_many_lines)]
pub mod config;
#[warn(clippy::too_many_lines)]
pub mod freeze;
#[warn(clippy::too_many_lines)]
pub mod history;
#[warn(clippy::too_many_lines)]
pub mod net;
#[warn(clippy::too_many_lines)]
pub mod outcome;
#[warn(clippy::too_many_lines)]
pub mod redis;
#[warn(clippy::too_many_lines)]
pub mod report;
#[warn(clippy::too_many_lines)]
pub mod rng;
#[warn(clippy::too_many_lines)]
pub mod runner;
#[warn(clippy::too_many_lines)]
pub mod scenario;
#[warn(clippy::too_many_lines)]
pub mod shrink;
#[warn(clippy::too_many_lines)]
pub mod storage;
#[warn(clippy::too_many_lines)]
pub mod world;
