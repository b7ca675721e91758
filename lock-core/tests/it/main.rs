//! lock-core's integration tests in one test binary: against real servers
//! (the fixtures in `support` start redis-server, Sentinel groups, clusters
//! and TLS servers on loopback, or use `REDIS_URL`), plus the machine tests
//! that need no server.
//!
//! One binary rather than one per file: each file would otherwise compile
//! and link `support`, tokio and redis-rs again (CI builds them with release
//! code generation). Run one file's tests with a filter on its module name,
//! `cargo test -p lock-core --test it redlock::`.

#[path = "../support/mod.rs"]
mod support;

mod bad_input;
mod cluster;
mod cluster_ask;
mod deployment;
mod error_replies;
mod exclusion;
mod fair_script;
mod family;
mod family_batching;
mod family_kill;
mod fixture;
mod keyspace;
mod late_reply;
mod lifecycle;
mod lost;
mod native_release;
mod native_renewal;
mod reconnect;
mod redlock;
mod renewal;
mod rwlock_script;
mod script_compat;
mod semaphore_script;
mod sentinel;
mod server_faults;
mod silent_nodes;
mod tls;
mod topology_blocks;
mod topology_fixtures;
mod waitaof;
