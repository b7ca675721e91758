//! Every `lock-core` name the benches, examples and `compare` use, imported
//! here once. lock-core's public interface is being curated: when a name
//! moves (say, what only the benches need going under an internal module),
//! this file is the one to change.

pub use lock_core::{
    // What the lock family's bench holds.
    AcquireError,
    // The sans-IO machine, for the `core` bench's machine-only cycle.
    Command,
    // The user's face: what a service calls.
    Event,
    Fencing,
    LockGuard,
    LockMachine,
    LockOptions,
    Locker,
    LockerBuilder,
    Machine,
    // What `compare` counts when a lease ran out before its release.
    ReleaseError,
    Reply,
    // The lock script, for the raw baselines that send the same Redis work.
    scripts,
};
