//! Staggered connection attempts: a connection not open after a short
//! delay gets a second attempt beside it, and the first to open wins.
//!
//! Why: a connection begun while the network is cut (a partition, a
//! one-way loss of the server's replies) waits for TCP's retransmissions,
//! which come late: Linux retransmits a SYN 1, 2, 3, 4, 5 and 7 s after
//! `connect` began, and data 200 ms after its first send, then doubling.
//! A lock cannot wait that long: its key may expire meanwhile, and a
//! release left for the background (timing rule 9) needs a connection
//! before the key's last possible expiry. A fresh attempt made after the
//! cut heals opens in a round trip. The earlier attempts stay in flight,
//! so a slow but working network still opens on its first try.
//!
//! The delay is Happy Eyeballs' (RFC 8305, section 5: 250 ms is the
//! recommended connection attempt delay), applied to one address.

use std::{future::Future, time::Duration};

use futures_util::{StreamExt, stream::FuturesUnordered};

/// How long an attempt runs alone before the next one starts beside it.
pub(crate) const ATTEMPT_DELAY: Duration = Duration::from_millis(250);

/// At most this many attempts run at once (the first and three more).
pub(crate) const MAX_ATTEMPTS: usize = 4;

/// Runs `attempt()` and, every `delay` while none has succeeded, one more
/// beside those in flight, up to `max` in all; returns the first success.
///
/// An attempt that fails is forgotten while others run. Once every
/// attempt started has failed, returns the last failure at once: a refused
/// connection is not retried here (the caller's backoff decides), and a
/// first attempt that fails fast fails the call as it did before. Bound
/// the whole with a timeout: nothing here gives up on a silent network.
pub(crate) async fn staggered<T, E, F, Fut>(
    delay: Duration,
    max: usize,
    mut attempt: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut in_flight = FuturesUnordered::new();
    in_flight.push(attempt());
    let mut started = 1;
    loop {
        let next = tokio::time::sleep(delay);
        tokio::select! {
            // Attempts first: one that is ready wins over a new one.
            biased;
            result = in_flight.next() => match result {
                Some(Ok(value)) => return Ok(value),
                Some(Err(error)) if in_flight.is_empty() => return Err(error),
                // Others are still in flight: wait for them (the delay
                // restarts, so a failure never makes a burst of attempts).
                Some(Err(_)) => {}
                // Never: a failure that empties the set returns above. Kept
                // total without a spin: one more attempt, or wait for the
                // caller's timeout.
                None if started < max => {
                    in_flight.push(attempt());
                    started += 1;
                }
                None => return std::future::pending().await,
            },
            () = next, if started < max => {
                in_flight.push(attempt());
                started += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    use super::*;

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    /// Attempt `i` (from 0) succeeds after `takes[i]`, or never if `None`;
    /// records when each started.
    async fn run(takes: Vec<Option<Duration>>) -> (Result<usize, &'static str>, Vec<Duration>) {
        let begun = tokio::time::Instant::now();
        let starts = Arc::new(std::sync::Mutex::new(Vec::new()));
        let count = Arc::new(AtomicUsize::new(0));
        let result = {
            let starts = starts.clone();
            staggered(ATTEMPT_DELAY, MAX_ATTEMPTS, move || {
                let i = count.fetch_add(1, Ordering::Relaxed);
                starts.lock().expect("not poisoned").push(begun.elapsed());
                let takes = takes.get(i).copied().flatten();
                async move {
                    match takes {
                        Some(after) => {
                            tokio::time::sleep(after).await;
                            Ok(i)
                        }
                        None => std::future::pending().await,
                    }
                }
            })
        };
        let result = tokio::time::timeout(ms(10_000), result)
            .await
            .unwrap_or(Err("timed out"));
        let starts = starts.lock().expect("not poisoned").clone();
        (result, starts)
    }

    #[tokio::test(start_paused = true)]
    async fn a_quick_connection_is_the_only_attempt() {
        let (result, starts) = run(vec![Some(ms(1))]).await;
        assert_eq!(result, Ok(0));
        assert_eq!(starts, vec![ms(0)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stuck_attempt_gets_a_fresh_one_beside_it_and_the_fresh_one_wins() {
        // The first is stuck in a cut; the second, begun after it healed,
        // opens in a round trip.
        let (result, starts) = run(vec![None, Some(ms(1))]).await;
        assert_eq!(result, Ok(1));
        assert_eq!(starts, vec![ms(0), ATTEMPT_DELAY]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_network_still_opens_on_its_first_try() {
        // Each attempt takes 600 ms: the first wins, the later ones (at
        // 250 and 500 ms) are dropped unfinished.
        let slow = Some(ms(600));
        let (result, starts) = run(vec![slow; 4]).await;
        assert_eq!(result, Ok(0));
        assert_eq!(starts, vec![ms(0), ms(250), ms(500)]);
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_four_attempts_run() {
        let (result, starts) = run(vec![None; 8]).await;
        assert_eq!(result, Err("timed out"));
        assert_eq!(starts, vec![ms(0), ms(250), ms(500), ms(750)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fast_failure_fails_the_call_at_once() {
        let begun = tokio::time::Instant::now();
        let result: Result<(), &str> =
            staggered(ATTEMPT_DELAY, MAX_ATTEMPTS, || async { Err("refused") }).await;
        assert_eq!(result, Err("refused"));
        assert_eq!(begun.elapsed(), Duration::ZERO);
    }
}
