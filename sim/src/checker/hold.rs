//! What the checkers share: a hold as the history shows it, and the slack
//! of "at the deadline". A file of its own below `checker/mod.rs`, so that
//! the checkers of each property (`family.rs`, ...) need not import their
//! parent.

use std::time::Duration;

/// Slack for "at the deadline": the simulation advances in 1 ms ticks.
pub(crate) const TICK_SLACK: Duration = Duration::from_millis(2);

/// One grant, as the history shows it.
#[derive(Debug, Clone)]
pub struct Hold {
    /// The client that held it.
    pub client: usize,
    /// The owner token.
    pub token: String,
    /// The fence.
    pub fence: u64,
    /// True time of the grant.
    pub start: Duration,
    /// True time belief ended.
    pub end: Duration,
    /// Why belief ended.
    pub ended_by: HoldEnd,
    /// The deadline in force when belief ended.
    pub deadline: Duration,
    /// The deadline as the client last learnt it (acquire or renewal),
    /// before any clock change moved it: the client's timers, which run
    /// on the simulation's true clock, were set for this instant.
    pub timer_deadline: Duration,
    /// History index of the `AcquireOk`.
    pub entry: usize,
    /// History index of the `Lost`, if any.
    pub lost_entry: Option<usize>,
    /// A shared hold (a reader's).
    pub shared: bool,
}

/// What ended a belief interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldEnd {
    /// The client released.
    Release,
    /// The client was told it lost the lock before the deadline.
    Lost,
    /// The deadline passed.
    Deadline,
    /// The run ended first.
    EndOfRun,
}
