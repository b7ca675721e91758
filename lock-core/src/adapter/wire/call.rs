//! Sending encoded calls on a connection and turning the answers into
//! replies: one call, or a batch of script operations.
//!
//! A call reloads the scripts after `NOSCRIPT` (a restarted or failed-over
//! node has an empty script cache) and never waits on a timer of its own:
//! the lock machine's command timeout bounds it.

use redis::{Cmd, RedisError, Value, aio::MultiplexedConnection};

use super::codec::{self, OpKind};
use crate::{
    Command, Failure, Reply,
    adapter::connect::node::Live,
    scripts::{self, KeyNames},
};

/// Sends `call` (behind `ASKING` when `asking`, and with the pipelined
/// waits `after` it: `WAIT`, `WAITAOF`), reloading the script once on
/// `NOSCRIPT`. Answers the call's value and the waits' values, in order.
pub(crate) async fn exchange(
    conn: &mut MultiplexedConnection,
    call: &Cmd,
    after: &[Cmd],
    asking: bool,
) -> Result<(Value, Vec<Value>), RedisError> {
    match send(conn, call, after, asking).await {
        Err(error) if codec::failure_of(&error) == Failure::NoScript => {
            tracing::debug!("NOSCRIPT: loading the scripts");
            // Every script, in one round trip: the call may be any of
            // them, and a node that lost one lost them all.
            let mut load = redis::pipe();
            for script in scripts::ALL {
                load.cmd("SCRIPT").arg("LOAD").arg(script.source);
            }
            load.query_async::<Value>(conn).await?;
            send(conn, call, after, asking).await
        }
        result => result,
    }
}

pub(crate) async fn send(
    conn: &mut MultiplexedConnection,
    call: &Cmd,
    after: &[Cmd],
    asking: bool,
) -> Result<(Value, Vec<Value>), RedisError> {
    if !asking && after.is_empty() {
        return match conn.send_packed_command(call).await? {
            // redis-rs hands a top-level error reply back as a value.
            Value::ServerError(error) => Err(RedisError::from(error)),
            value => Ok((value, Vec::new())),
        };
    }
    // One round trip: `ASKING` right before the call when a migrating slot
    // sent us to its target, then the call, then `WAIT` for the replicas
    // to catch up with it, and `WAITAOF` for the fsyncs (both count the
    // writes this connection made).
    let mut pipe = redis::pipe();
    if asking {
        pipe.cmd("ASKING");
    }
    pipe.add_command(call.clone());
    for wait in after {
        pipe.add_command(wait.clone());
    }
    let count = 1 + usize::from(asking) + after.len();
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
    Ok((first, values.collect()))
}

/// Sends one batch of script operations, with the `waits` they share, and
/// decodes a reply per operation.
pub(crate) async fn batch(
    live: Live,
    call: Cmd,
    waits: codec::Waits,
    kinds: Vec<OpKind>,
) -> Vec<Reply> {
    let mut conn = live.conn;
    match exchange(&mut conn, &call, &waits.cmds(), false).await {
        Ok((value, waited)) => {
            if waits.waitaof_unknown(&waited) {
                live.refusals.refuse_waitaof();
            }
            codec::decode_script(&value, &kinds)
                .into_iter()
                .map(|reply| waits.apply(reply, &waited))
                .collect()
        }
        Err(error) => vec![Reply::Failed(codec::failure_of(&error)); kinds.len()],
    }
}

/// The reply to an unfenced acquire's `SET lock token NX PX ttl GET`
/// (`value`, the answer; `command`, the acquire): granted (fence 0) when
/// the key was free, contended when another owner holds it. When it
/// found our own key (a retry after a reply we never saw), the grant
/// counts only once an owner-checked refresh of its ttl worked, sent on
/// `conn`.
pub(crate) async fn set_nx_get_reply(
    conn: &mut MultiplexedConnection,
    value: &Value,
    names: &KeyNames,
    token: &str,
    command: &Command,
) -> Reply {
    let granted = Reply::Granted {
        fence: 0,
        replicas: None,
        aof: None,
    };
    match codec::decode_set_nx_get(value, token) {
        Ok(codec::SetNxGet::Granted) => granted,
        Ok(codec::SetNxGet::Contended) => Reply::Contended { pttl: None },
        Ok(codec::SetNxGet::AlreadyOurs) => {
            let Command::Acquire { ttl, .. } = command else {
                // Only an acquire sends `SET NX GET`.
                return Reply::Failed(Failure::Protocol);
            };
            let refresh = codec::encode_own_refresh(names, token, *ttl);
            match exchange(conn, &refresh, &[], false).await {
                Ok((value, _)) => match codec::decode_script(&value, &[OpKind::Renew]).pop() {
                    Some(Reply::Renewed { .. }) => granted,
                    Some(Reply::NotOwner) => Reply::Contended { pttl: None },
                    Some(other) => other,
                    // decode_script answers one reply per kind it is given.
                    None => Reply::Failed(Failure::Protocol),
                },
                Err(error) => Reply::Failed(codec::failure_of(&error)),
            }
        }
        Err(failure) => Reply::Failed(failure),
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
