//! sim's integration tests in one test binary, `sim_it` (named apart from
//! lock-core's `it`, so that `cargo test --workspace --test it` selects one
//! binary): scenario properties under proptest, determinism, idle-skipping
//! equivalence, the differential tests against a real `redis-server` (and
//! Valkey, in CI's Valkey pass), the RESP fuzzing, sharding, and `sim chaos`
//! on real processes.
//!
//! One binary rather than one per file: each file would otherwise link the
//! simulator, turmoil, tokio, redis-rs and the embedded Lua again (CI builds
//! them with release code generation). Run one file's tests with a filter
//! on its module name: `cargo test -p sim --test sim_it differential::`.
//! `tests/cli/` stays a binary of its own: it only runs the `sim` binary,
//! and CI builds it first to start the scenario suite early.
#![warn(clippy::too_many_lines)]

mod common;

mod agree;
mod chaos;
mod cluster;
mod determinism;
mod differential;
mod differential_cluster;
mod equivalence;
mod eviction;
mod fair_dead_waiter;
mod first_failure;
mod independent;
mod lazy_aof;
mod overlap;
mod resp_fuzz;
mod retransmit;
mod sabotage;
mod safe_setups;
mod sentinel;
mod sharding;
mod skip_idle;
mod unsafe_setups;
mod wakeups;
