//! Waiting for servers to settle.

use std::{
    thread,
    time::{Duration, Instant},
};

use crate::StartError;

/// Polls `check` every 10 ms until it returns `Some`, for up to `timeout`.
///
/// # Panics
/// After `timeout`, naming `what`: a fixture's servers did not settle.
pub fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?}: {what}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Polls `check` every 10 ms until it returns `Ok`, for up to `timeout`;
/// then fails with `what` and the last error `check` gave.
pub(crate) fn settle<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> Result<T, StartError> {
    let deadline = Instant::now() + timeout;
    loop {
        match check() {
            Ok(value) => return Ok(value),
            Err(why) if Instant::now() >= deadline => {
                return Err(StartError::Setup {
                    what: format!("{what} (within {timeout:?})"),
                    why,
                });
            }
            Err(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
}
