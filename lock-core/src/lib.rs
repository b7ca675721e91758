//! A Redis distributed lock with a renewal watchdog, fencing tokens, and a
//! lost-lock signal that fires on time.
//!
//! The crate has two layers:
//! - [`LockMachine`], a sans-IO state machine that owns every timing
//!   decision (see the [`machine`] module for the rules it enforces). It
//!   builds without tokio or redis (`default-features = false`).
//! - With the default `redis` feature, a tokio + redis-rs adapter
//!   (`Locker`, `LockGuard`) that drives the machine over a real connection.
//!   With the `metrics` feature it also records counters, a gauge and
//!   histograms through the `metrics` facade (the README's "Metrics"
//!   section lists them).
//!
//! The Lua scripts both layers share live in [`scripts`].
//!
//! ```
//! use std::time::{Duration, Instant};
//! use lock_core::{Command, Event, LockMachine, LockOptions, Machine, Reply};
//!
//! let opts = LockOptions::new(Duration::from_secs(30));
//! let mut machine = LockMachine::new(&opts, "orders:42", "token-1".into(), 7)?;
//! let t0 = Instant::now();
//! machine.acquire(t0)?;
//! let (id, command) = machine.poll_command().expect("an acquire is sent at once");
//! assert!(matches!(command, Command::Acquire { .. }));
//! machine.handle_reply(t0 + Duration::from_millis(1), id, Reply::Granted { fence: 1, replicas: None, aof: None });
//! assert!(matches!(machine.poll_event(), Some(Event::Acquired { fence: 1, .. })));
//! // Validity counts from the send: 30 s − (30 s × 0.01 + 2 ms).
//! assert_eq!(machine.valid_until(), Some(t0 + Duration::from_millis(29_698)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

mod command;
mod contract;
mod event;
mod jitter;
pub mod machine;
mod options;
pub mod redlock;
pub mod scripts;

pub use command::{Command, CommandId, Failure, Reply};
pub use contract::{Machine, Phase, UsageError};
pub use event::{AcquireFailure, Event, LostReason, ReleaseOutcome, RenewFailure};
pub use machine::LockMachine;
pub use options::{AofCounts, DRIFT_FLOOR, Fencing, LockOptions, OptionsError, WaitAof};
pub use redlock::{RedlockError, RedlockMachine};

#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "redis")]
pub use crate::redis::{
    AcquireError, CheckError, CheckOptions, ConnectError, DeploymentReport, Finding, FindingKind,
    LockGuard, Locker, LockerBuilder, LockerReport, NodeReport, ReleaseError, Severity,
    check_deployment,
};

/// The README's examples, compiled and run as doctests (they need a Redis at
/// `REDIS_URL`; `scripts/test.sh` starts one).
#[cfg(all(doctest, feature = "redis"))]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
