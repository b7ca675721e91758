//! A locker's first connections: one attempt per node, all at once,
//! waited for until a majority has opened, and then for at most
//! [`GRACE`] more.
//!
//! Why not wait for every node: a Redlock grants on a majority, so a node
//! that is down or cut off at start (a dead host, a partition: exactly
//! when Redlock is meant to help) would hold up every start by the whole
//! connect timeout while the majority could already grant. Its attempt
//! goes on in the locker's driver, which installs the connection when it
//! opens; from then on the node takes part in every grant (a round's
//! command to a node with no connection fails at once, as a refusal).
//!
//! Why the grace: the first locks' rounds go to the nodes open when
//! connecting returns. Returning the instant a majority opens would leave
//! out a healthy node whose handshake was a moment slower than the
//! others', and those locks would hold on a bare majority, one node
//! failure from lost. A silent node costs the grace, not the timeout.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use super::{
    attempts::ATTEMPT_DELAY,
    error::ConnectError,
    node::{Endpoint, Opened, open},
};

/// How long connecting waits for the other nodes once a majority has
/// opened: the 250 ms after which a connection attempt counts as slow
/// elsewhere too ([`ATTEMPT_DELAY`]).
pub(crate) const GRACE: Duration = ATTEMPT_DELAY;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// An attempt at one node's first connection.
pub(crate) type Opening = BoxFuture<Result<Opened, ConnectError>>;

/// Where one node's first connection stood when connecting returned.
pub(crate) enum First {
    /// Open.
    Opened(Opened),
    /// Still opening: the driver finishes the attempt.
    Opening(Opening),
    /// The attempt failed: the driver tries again at once.
    Failed,
}

/// Why connecting failed: fewer than a majority opened.
pub(crate) struct NoMajority {
    /// Nodes that opened.
    pub(crate) connected: usize,
    /// The majority.
    pub(crate) needed: usize,
    /// Why the first node (in the given order) that failed did.
    pub(crate) first: ConnectError,
}

/// Opens a connection to every endpoint at once (each bounded by
/// `timeout`) and returns once every attempt has ended, or once a majority
/// (`N/2 + 1`) has opened and [`GRACE`] has passed since, with the attempts
/// still out. Fails once every attempt has ended with fewer than a
/// majority open.
pub(crate) async fn open_majority(
    endpoints: &[Endpoint],
    timeout: Duration,
) -> Result<Vec<First>, NoMajority> {
    let total = endpoints.len();
    let needed = total / 2 + 1;
    let mut states: Vec<State> = endpoints
        .iter()
        .map(|endpoint| State::Opening(Box::pin(open(endpoint.clone(), timeout, 0))))
        .collect();
    std::future::poll_fn(|cx| poll_until_opened(cx, &mut states, needed)).await;
    if opened(&states) >= needed {
        let every = std::future::poll_fn(|cx| poll_until_opened(cx, &mut states, total));
        // Out of grace: the attempts still out go on in the driver.
        let _ = tokio::time::timeout(GRACE, every).await;
    }
    let connected = opened(&states);
    if connected >= needed {
        return Ok(states.into_iter().map(State::into_first).collect());
    }
    let first = states
        .into_iter()
        .find_map(|state| match state {
            State::Failed(error) => Some(error),
            _ => None,
        })
        // Fewer than a majority opened and none is still opening (the
        // poll ends only then): some node failed, or there is none.
        .unwrap_or(ConnectError::NoNodes);
    Err(NoMajority {
        connected,
        needed,
        first,
    })
}

/// One node's attempt while connecting.
enum State {
    Opening(Opening),
    Opened(Opened),
    Failed(ConnectError),
}

impl State {
    fn into_first(self) -> First {
        match self {
            Self::Opening(opening) => First::Opening(opening),
            Self::Opened(opened) => First::Opened(opened),
            Self::Failed(error) => {
                tracing::debug!(%error, "a node did not connect; retried in the background");
                First::Failed
            }
        }
    }
}

/// How many attempts have opened.
fn opened(states: &[State]) -> usize {
    states
        .iter()
        .filter(|state| matches!(state, State::Opened(_)))
        .count()
}

/// Polls every attempt still out; ready once `wanted` have opened or none
/// is left opening.
fn poll_until_opened(cx: &mut Context<'_>, states: &mut [State], wanted: usize) -> Poll<()> {
    for state in states.iter_mut() {
        if let State::Opening(opening) = state
            && let Poll::Ready(result) = opening.as_mut().poll(cx)
        {
            *state = match result {
                Ok(opened) => State::Opened(opened),
                Err(error) => State::Failed(error),
            };
        }
    }
    let opening = states
        .iter()
        .any(|state| matches!(state, State::Opening(_)));
    if opened(states) >= wanted || !opening {
        Poll::Ready(())
    } else {
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    //! Against scripted nodes on in-memory streams (`+OK` to every
    //! command), on tokio's paused clock: every delay is exact.

    use std::{io, sync::Arc};

    use redis::RedisConnectionInfo;

    use super::*;
    use crate::adapter::{ConnectFuture, Connector, RedisStream, connect::scripted};

    /// How a scripted node takes a connection.
    #[derive(Clone, Copy)]
    enum Node {
        /// Accepts after this long and answers everything.
        After(Duration),
        /// Accepts and never answers.
        Silent,
        /// Refuses the connection.
        Refused,
    }

    impl Connector for Node {
        fn connect(&self) -> ConnectFuture<'_> {
            let node = *self;
            Box::pin(async move {
                let (client, server) = tokio::io::duplex(4096);
                match node {
                    Self::After(after) => {
                        tokio::time::sleep(after).await;
                        tokio::spawn(scripted::serve(server, |_| Some("+OK\r\n")));
                    }
                    Self::Silent => {
                        tokio::spawn(scripted::serve(server, |_| None));
                    }
                    Self::Refused => return Err(io::Error::from(io::ErrorKind::ConnectionRefused)),
                }
                Ok(Box::new(client) as Box<dyn RedisStream>)
            })
        }
    }

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    /// What `open_majority` returned for `nodes` (each node's state, or
    /// the nodes connected and the first failure), and how long it took.
    async fn open_nodes(
        nodes: &[Node],
        timeout: Duration,
    ) -> (Result<Vec<&'static str>, (usize, String)>, Duration) {
        let endpoints: Vec<Endpoint> = nodes
            .iter()
            .map(|&node| Endpoint {
                connector: Arc::new(node),
                redis: RedisConnectionInfo::default(),
            })
            .collect();
        let begun = tokio::time::Instant::now();
        let result = open_majority(&endpoints, timeout).await;
        let took = begun.elapsed();
        let result = result
            .map(|firsts| {
                firsts
                    .iter()
                    .map(|first| match first {
                        First::Opened(_) => "opened",
                        First::Opening(_) => "opening",
                        First::Failed => "failed",
                    })
                    .collect()
            })
            .map_err(|missed| (missed.connected, missed.first.to_string()));
        (result, took)
    }

    #[tokio::test(start_paused = true)]
    async fn a_node_a_moment_slower_than_the_majority_is_waited_for() {
        let nodes = [Node::After(ms(1)), Node::After(ms(1)), Node::After(ms(100))];
        let (result, took) = open_nodes(&nodes, ms(10_000)).await;
        assert_eq!(result, Ok(vec!["opened"; 3]));
        assert_eq!(took, ms(100));
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_node_costs_the_grace_not_the_timeout() {
        let nodes = [Node::After(ms(1)), Node::Silent, Node::After(ms(1))];
        let (result, took) = open_nodes(&nodes, ms(10_000)).await;
        assert_eq!(result, Ok(vec!["opened", "opening", "opened"]));
        assert_eq!(took, ms(1) + GRACE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_node_waits_for_nothing() {
        let nodes = [Node::Refused, Node::After(ms(1)), Node::After(ms(1))];
        let (result, took) = open_nodes(&nodes, ms(10_000)).await;
        assert_eq!(result, Ok(vec!["failed", "opened", "opened"]));
        assert_eq!(took, ms(1));
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_majority_it_fails_once_every_attempt_has_ended() {
        // One of three opens; the silent one times out.
        let nodes = [Node::After(ms(1)), Node::Silent, Node::Refused];
        let (result, took) = open_nodes(&nodes, ms(1_000)).await;
        assert_eq!(
            result,
            Err((1, ConnectError::Timeout(ms(1_000)).to_string())),
            "the first failure in the nodes' order"
        );
        assert_eq!(took, ms(1_000));
    }
}
