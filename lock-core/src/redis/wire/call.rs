//! Sending encoded calls on a connection and turning the answers into
//! replies: one call, or a batch of script operations.
//!
//! A call reloads the script after `NOSCRIPT` (a restarted or failed-over
//! node has an empty script cache) and never waits on a timer of its own:
//! the lock machine's command timeout bounds it.

use std::time::Duration;

use redis::{Cmd, RedisError, Value, aio::MultiplexedConnection};

use super::codec::{self, OpKind};
use crate::{Failure, Reply, redis::connect::node::Live, scripts};

/// Sends `call` (behind `ASKING` when `asking`, and with a pipelined
/// `WAIT` after it), reloading the script once on `NOSCRIPT`.
pub(crate) async fn exchange(
    conn: &mut MultiplexedConnection,
    call: &Cmd,
    wait: Option<&Cmd>,
    asking: bool,
) -> Result<(Value, Option<Value>), RedisError> {
    match send(conn, call, wait, asking).await {
        Err(error) if codec::failure_of(&error) == Failure::NoScript => {
            tracing::debug!("NOSCRIPT: loading the lock script");
            redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(scripts::LOCK.source)
                .query_async::<Value>(conn)
                .await?;
            send(conn, call, wait, asking).await
        }
        result => result,
    }
}

pub(crate) async fn send(
    conn: &mut MultiplexedConnection,
    call: &Cmd,
    wait: Option<&Cmd>,
    asking: bool,
) -> Result<(Value, Option<Value>), RedisError> {
    if !asking && wait.is_none() {
        return match conn.send_packed_command(call).await? {
            // redis-rs hands a top-level error reply back as a value.
            Value::ServerError(error) => Err(RedisError::from(error)),
            value => Ok((value, None)),
        };
    }
    // One round trip: `ASKING` right before the call when a migrating slot
    // sent us to its target, then the call, then `WAIT` for the replicas
    // to catch up with it (WAIT counts the writes this connection made).
    let mut pipe = redis::pipe();
    if asking {
        pipe.cmd("ASKING");
    }
    pipe.add_command(call.clone());
    if let Some(wait) = wait {
        pipe.add_command(wait.clone());
    }
    let count = 1 + usize::from(asking) + usize::from(wait.is_some());
    let values = conn.send_packed_commands(&pipe, 0, count).await?;
    let mut values = values.into_iter().skip(usize::from(asking));
    let Some(first) = values.next() else {
        return Err(RedisError::from((
            redis::ErrorKind::Parse,
            "a pipeline answered fewer replies than it had commands",
        )));
    };
    if let Value::ServerError(error) = first {
        return Err(RedisError::from(error));
    }
    Ok((first, values.next()))
}

/// Sends one batch of script operations (with a `WAIT` for
/// `wait_replicas` after it) and decodes a reply per operation.
pub(crate) async fn batch(
    live: Live,
    call: Cmd,
    wait_replicas: Option<(u32, Duration)>,
    kinds: Vec<OpKind>,
) -> Vec<Reply> {
    let wait = codec::encode_wait(wait_replicas);
    let mut conn = live.conn;
    match exchange(&mut conn, &call, wait.as_ref(), false).await {
        Ok((value, waited)) => {
            let replies = codec::decode_script(&value, &kinds);
            match waited {
                Some(waited) => {
                    let acked = codec::decode_wait(&waited);
                    replies
                        .into_iter()
                        .map(|reply| codec::with_replicas(reply, acked))
                        .collect()
                }
                None => replies,
            }
        }
        Err(error) => vec![Reply::Failed(codec::failure_of(&error)); kinds.len()],
    }
}

/// Whether a failure means the connection it came from should be dropped:
/// a command that timed out may have wedged the stream (a partition drops
/// segments and nothing retransmits), a reset or a reply we cannot parse
/// leaves the stream in an unknown state, and `READONLY` or a redirection
/// means the node we talk to is not the primary any more.
pub(crate) fn breaks_connection(failure: Failure) -> bool {
    matches!(
        failure,
        Failure::Timeout
            | Failure::Connection
            | Failure::ReadOnly
            | Failure::Protocol
            | Failure::Moved
            | Failure::MasterDown
    )
}
