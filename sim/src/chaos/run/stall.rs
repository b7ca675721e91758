//! The controller's own stalls. Its runtime has one thread: the fault
//! schedule, the oracle and the watchers all wait while anything blocks
//! it (a blocking call, a machine too busy to run it). A stall is a fault
//! no schedule drew, so it is recorded ([`Op::Stall`]) and a run with one
//! longer than the file's `max_stall` proves nothing.

use std::time::Duration;

use super::recorder::Recorder;
use crate::{
    chaos::wire::mono_ns,
    history::{Op, Process},
};

/// How often the watch wakes.
const TICK: Duration = Duration::from_millis(10);

/// The shortest lateness recorded as a stall: a timer's own jitter and a
/// busy moment stay below it.
const RECORDED: Duration = Duration::from_millis(50);

/// Wakes every [`TICK`] and records each wake-up later than [`RECORDED`]
/// as a stall, from when it was due.
pub(super) async fn watch(recorder: Recorder) {
    loop {
        let due = mono_ns().saturating_add(TICK.as_nanos() as u64);
        tokio::time::sleep(TICK).await;
        let lasted = Duration::from_nanos(mono_ns().saturating_sub(due));
        if lasted > RECORDED {
            recorder.record_at(due, Process::Controller, Op::Stall { lasted });
        }
    }
}
