//! What the checkers' unit tests share to plant histories: a time in
//! milliseconds and one entry stamped with it (true and local time alike).

use std::time::Duration;

use crate::history::{Entry, Op, Process};

/// `n` milliseconds.
pub(super) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `op` by `process` at `at` ms, on an unshifted clock.
pub(super) fn entry(at: u64, process: Process, op: Op) -> Entry {
    Entry {
        at: ms(at),
        local: ms(at),
        process,
        op,
    }
}
