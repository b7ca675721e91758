//! One lock's life in the adapter: its machine and the state its callers
//! and the watchdog share (`cell`), sending its commands (`dispatch`), the
//! loop that runs it in the caller's task (`run`), the session every lock
//! of a locker shares, the watchdog's registry, the release waiters, the
//! metrics and the errors an acquire or a release returns.

pub(crate) mod cell;
pub(crate) mod dispatch;
pub(crate) mod error;
pub(crate) mod machines;
pub(crate) mod metrics;
pub(crate) mod registry;
pub(crate) mod run;
pub(crate) mod session;
pub(crate) mod shared;
pub(crate) mod timer;
pub(crate) mod waiters;
