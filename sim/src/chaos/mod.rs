//! Chaos runs: the same scenario files, fault schedules, history schema and
//! checkers as the simulator, against real processes on loopback.
//!
//! `sim chaos FILE|DIR` starts what a scenario's topology names from the
//! installed `redis-server` (sentinels too, with `--sentinel`; a cluster
//! made as `redis-cli --cluster create` makes one), started as every test
//! starts its servers (the `servers` crate), one OS process per client running the
//! production adapter ([`client`]), and applies the fault schedule the
//! simulator draws for the same seed, in real time (`run`). Nothing here
//! is deterministic, and nothing here is used by the simulator: this tree
//! reads the machine's clocks and the simulator's modules never import it.
//!
//! This file only declares the modules and names what they offer. Layering,
//! downwards only: `run` → `batches`, `deploy`, `firewall`, `netns`, `dirs`, `proxy`, `procs`,
//! `wire`, `lazy_aof`, `fake_clock`, `plant`, `atomic_migrate`, `migrate`, `cut`, `sentinel`, `target`; `refuse` →
//! `procs`, `target`, `fake_clock`; `deploy` → `fake_clock`; `sentinel` → `deploy`; `atomic_migrate` → `migrate`; `deploy` → `cut`; `cut` →
//! `proxy`; `client` → `wire`, `plant`.

mod atomic_migrate;
mod batches;
pub mod client;
mod cut;
mod deploy;
mod dirs;
mod error;
pub mod fake_clock;
mod firewall;
pub mod flavour;
pub mod lazy_aof;
mod migrate;
pub mod netns;
pub mod plant;
pub mod procs;
mod proxy;
mod refuse;
mod run;
mod sentinel;
mod target;
pub mod wire;

pub use error::ChaosError;
pub use refuse::{check_binaries, check_faults, refusal};
pub use run::run_seed;
pub use target::{REAL_SLACK, RealOptions, Target};
