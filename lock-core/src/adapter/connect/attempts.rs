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
//! recommended connection attempt delay), applied to one address, and
//! through [`in_turn`] to a list of equivalent nodes (sentinels, cluster
//! seeds), asked in order as RFC 8305 asks its addresses.

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

/// Runs `attempt(0)`, `attempt(1)`, ... through `count`, in turn: the
/// next starts when an attempt fails, or beside those in flight once the
/// latest has run `delay` without an outcome. Returns the first success,
/// or, once all `count` have failed, every failure in index order.
///
/// Why: a list of equivalent nodes (sentinels, cluster seeds) asked one
/// after the other waits out the whole timeout of a silent one before it
/// asks the next, though the next would answer in a round trip. Nodes that
/// answer or fail quickly are asked exactly as one after the other would
/// ask them, and a success wins whichever attempt it comes from. Each
/// attempt bounds itself: nothing here gives up on a silent node.
pub(crate) async fn in_turn<T, E, F, Fut>(
    delay: Duration,
    count: usize,
    mut attempt: F,
) -> Result<T, Vec<E>>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut failures: Vec<Option<E>> = std::iter::repeat_with(|| None).take(count).collect();
    let mut in_flight = FuturesUnordered::new();
    if count > 0 {
        in_flight.push(numbered(0, attempt(0)));
    }
    let mut started = in_flight.len();
    while !in_flight.is_empty() {
        let next = tokio::time::sleep(delay);
        tokio::select! {
            // Outcomes first: one that is ready wins over a new attempt.
            biased;
            Some((index, result)) = in_flight.next() => match result {
                Ok(value) => return Ok(value),
                Err(error) => {
                    failures[index] = Some(error);
                    if started < count {
                        in_flight.push(numbered(started, attempt(started)));
                        started += 1;
                    }
                }
            },
            () = next, if started < count => {
                in_flight.push(numbered(started, attempt(started)));
                started += 1;
            }
        }
    }
    Err(failures.into_iter().flatten().collect())
}

/// `attempt`'s outcome with the index it was started under.
async fn numbered<T>(index: usize, attempt: impl Future<Output = T>) -> (usize, T) {
    (index, attempt.await)
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

    /// Node `i` answers `Ok(i)` after `outcomes[i].0` if `.1`, else fails
    /// with `i` then; `None` is a silent node. Returns the result and when
    /// each node was asked.
    async fn ask_in_turn(
        outcomes: Vec<Option<(Duration, bool)>>,
    ) -> (Result<usize, Vec<usize>>, Vec<Duration>) {
        let begun = tokio::time::Instant::now();
        let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
        let count = outcomes.len();
        let result = {
            let asked = asked.clone();
            in_turn(ATTEMPT_DELAY, count, move |i| {
                asked.lock().expect("not poisoned").push(begun.elapsed());
                let outcome = outcomes[i];
                async move {
                    match outcome {
                        Some((after, ok)) => {
                            tokio::time::sleep(after).await;
                            if ok { Ok(i) } else { Err(i) }
                        }
                        None => std::future::pending().await,
                    }
                }
            })
        };
        let result = tokio::time::timeout(ms(10_000), result)
            .await
            .unwrap_or(Err(Vec::new()));
        let asked = asked.lock().expect("not poisoned").clone();
        (result, asked)
    }

    #[tokio::test(start_paused = true)]
    async fn in_turn_asks_one_node_when_it_answers() {
        let (result, asked) = ask_in_turn(vec![Some((ms(5), true)), Some((ms(1), true))]).await;
        assert_eq!(result, Ok(0));
        assert_eq!(asked, vec![ms(0)]);
    }

    #[tokio::test(start_paused = true)]
    async fn in_turn_asks_the_next_at_once_when_one_fails() {
        let (result, asked) = ask_in_turn(vec![Some((ms(3), false)), Some((ms(1), true))]).await;
        assert_eq!(result, Ok(1));
        assert_eq!(asked, vec![ms(0), ms(3)]);
    }

    #[tokio::test(start_paused = true)]
    async fn in_turn_asks_the_next_beside_a_silent_node() {
        let (result, asked) = ask_in_turn(vec![None, Some((ms(1), true))]).await;
        assert_eq!(result, Ok(1));
        assert_eq!(asked, vec![ms(0), ATTEMPT_DELAY]);
    }

    #[tokio::test(start_paused = true)]
    async fn in_turn_takes_an_earlier_node_that_answers_late() {
        // The first answers at 300 ms, before the second (asked at 250 ms)
        // does at 350 ms.
        let (result, asked) = ask_in_turn(vec![Some((ms(300), true)), Some((ms(100), true))]).await;
        assert_eq!(result, Ok(0));
        assert_eq!(asked, vec![ms(0), ATTEMPT_DELAY]);
    }

    #[tokio::test(start_paused = true)]
    async fn in_turn_reports_every_failure_in_the_order_asked() {
        // The second fails before the first: the failures still come in
        // the nodes' order.
        let (result, asked) = ask_in_turn(vec![
            Some((ms(400), false)),
            Some((ms(10), false)),
            Some((ms(1), false)),
        ])
        .await;
        assert_eq!(result, Err(vec![0, 1, 2]));
        assert_eq!(asked, vec![ms(0), ms(250), ms(260)]);
    }
}
