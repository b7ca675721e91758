//! Turns the machine's commands into Redis calls and Redis's answers into
//! the machine's replies. No decisions about the lock are made here.

use std::time::Duration;

use redis::{RedisError, Value, aio::MultiplexedConnection};

use crate::{Command, Failure, Reply, scripts, scripts::KeyNames};

/// Runs one machine command on `conn` and reports what Redis said.
pub(crate) async fn execute(
    conn: &mut MultiplexedConnection,
    keys: &KeyNames,
    token: &str,
    command: &Command,
) -> Reply {
    match run(conn, keys, token, command).await {
        Ok(reply) => reply,
        Err(failure) => Reply::Failed(failure),
    }
}

async fn run(
    conn: &mut MultiplexedConnection,
    keys: &KeyNames,
    token: &str,
    command: &Command,
) -> Result<Reply, Failure> {
    match command {
        Command::Acquire {
            ttl,
            fencing,
            wait_replicas,
        } => {
            let ttl_ms = millis(*ttl);
            let value = eval(
                conn,
                scripts::ACQUIRE,
                &[&keys.lock, &keys.fence],
                &[token, &ttl_ms, fencing.script_arg()],
            )
            .await?;
            match parse_acquire(&value)? {
                Reply::Granted { fence, .. } => {
                    let replicas = match wait_replicas {
                        Some((count, timeout)) => Some(wait(conn, *count, *timeout).await?),
                        None => None,
                    };
                    Ok(Reply::Granted { fence, replicas })
                }
                other => Ok(other),
            }
        }
        Command::Renew { ttl, wait_replicas } => {
            let ttl_ms = millis(*ttl);
            let value = eval(conn, scripts::RENEW, &[&keys.lock], &[token, &ttl_ms]).await?;
            if !parse_flag(&value)? {
                return Ok(Reply::NotOwner);
            }
            let replicas = match wait_replicas {
                Some((count, timeout)) => Some(wait(conn, *count, *timeout).await?),
                None => None,
            };
            Ok(Reply::Renewed { replicas })
        }
        Command::Release => {
            let value = eval(
                conn,
                scripts::RELEASE,
                &[&keys.lock],
                &[token, &keys.channel],
            )
            .await?;
            Ok(if parse_flag(&value)? {
                Reply::Released
            } else {
                Reply::NotOwner
            })
        }
    }
}

fn millis(duration: Duration) -> String {
    duration.as_millis().to_string()
}

/// `EVALSHA`, loading the script once on `NOSCRIPT` (a restarted or
/// failed-over node has an empty script cache) and retrying.
async fn eval(
    conn: &mut MultiplexedConnection,
    script: scripts::Script,
    keys: &[&str],
    args: &[&str],
) -> Result<Value, Failure> {
    let mut evalsha = redis::cmd("EVALSHA");
    evalsha.arg(script.sha1).arg(keys.len()).arg(keys).arg(args);
    match evalsha.query_async::<Value>(conn).await {
        Err(error) if failure_of(&error) == Failure::NoScript => {
            tracing::debug!(script = script.name, "NOSCRIPT: loading the script");
            redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(script.source)
                .query_async::<Value>(conn)
                .await
                .map_err(|error| failure_of(&error))?;
            evalsha
                .query_async::<Value>(conn)
                .await
                .map_err(|error| failure_of(&error))
        }
        result => result.map_err(|error| failure_of(&error)),
    }
}

async fn wait(
    conn: &mut MultiplexedConnection,
    replicas: u32,
    timeout: Duration,
) -> Result<u32, Failure> {
    // WAIT 0 means "forever" to Redis; a zero timeout here means "don't block".
    let timeout_ms = timeout.as_millis().max(1);
    let acked: i64 = redis::cmd("WAIT")
        .arg(replicas)
        .arg(timeout_ms.to_string())
        .query_async(conn)
        .await
        .map_err(|error| failure_of(&error))?;
    u32::try_from(acked).map_err(|_| Failure::Protocol)
}

/// Classifies a redis-rs error the way the machine needs it.
pub(crate) fn failure_of(error: &RedisError) -> Failure {
    if error.is_timeout() {
        return Failure::Timeout;
    }
    if error.is_io_error() || error.is_connection_dropped() || error.is_unrecoverable_error() {
        return Failure::Connection;
    }
    match error.code() {
        Some("READONLY") => Failure::ReadOnly,
        Some("LOADING") => Failure::Loading,
        Some("BUSY") => Failure::Busy,
        Some("NOSCRIPT") => Failure::NoScript,
        Some("WRONGTYPE") => Failure::WrongType,
        Some(_) => classify_detail(error),
        None => Failure::Protocol,
    }
}

/// A script error wraps the inner command's error (`ERR Error running
/// script ... WRONGTYPE ...` on older servers): look inside.
fn classify_detail(error: &RedisError) -> Failure {
    let text = error.to_string();
    for (needle, failure) in [
        ("WRONGTYPE", Failure::WrongType),
        ("READONLY", Failure::ReadOnly),
        ("LOADING", Failure::Loading),
        ("BUSY", Failure::Busy),
        ("NOSCRIPT", Failure::NoScript),
    ] {
        if text.contains(needle) {
            return failure;
        }
    }
    Failure::Other
}

/// `{1, "fence"}` or `{0, pttl}`.
fn parse_acquire(value: &Value) -> Result<Reply, Failure> {
    let Value::Array(items) = value else {
        return Err(Failure::Protocol);
    };
    match items.as_slice() {
        [Value::Int(1), fence] => Ok(Reply::Granted {
            fence: parse_u64(fence)?,
            replicas: None,
        }),
        [Value::Int(0), Value::Int(pttl)] => Ok(Reply::Contended {
            pttl: u64::try_from(*pttl).ok().map(Duration::from_millis),
        }),
        _ => Err(Failure::Protocol),
    }
}

fn parse_u64(value: &Value) -> Result<u64, Failure> {
    match value {
        Value::BulkString(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| text.parse().ok())
            .ok_or(Failure::Protocol),
        Value::SimpleString(text) => text.parse().map_err(|_| Failure::Protocol),
        Value::Int(number) => u64::try_from(*number).map_err(|_| Failure::Protocol),
        _ => Err(Failure::Protocol),
    }
}

fn parse_flag(value: &Value) -> Result<bool, Failure> {
    match value {
        Value::Int(1) => Ok(true),
        Value::Int(0) => Ok(false),
        _ => Err(Failure::Protocol),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acquire_replies_parse() {
        let granted = Value::Array(vec![
            Value::Int(1),
            Value::BulkString(b"1700000000000001".to_vec()),
        ]);
        assert_eq!(
            parse_acquire(&granted),
            Ok(Reply::Granted {
                fence: 1_700_000_000_000_001,
                replicas: None
            })
        );
        let held = Value::Array(vec![Value::Int(0), Value::Int(1500)]);
        assert_eq!(
            parse_acquire(&held),
            Ok(Reply::Contended {
                pttl: Some(Duration::from_millis(1500))
            })
        );
        let no_ttl = Value::Array(vec![Value::Int(0), Value::Int(-1)]);
        assert_eq!(parse_acquire(&no_ttl), Ok(Reply::Contended { pttl: None }));
        for bad in [
            Value::Nil,
            Value::Int(1),
            Value::Array(vec![Value::Int(1), Value::BulkString(b"-3".to_vec())]),
            Value::Array(vec![Value::Int(7), Value::Int(0)]),
        ] {
            assert_eq!(parse_acquire(&bad), Err(Failure::Protocol), "{bad:?}");
        }
    }

    #[test]
    fn flags_parse() {
        assert_eq!(parse_flag(&Value::Int(1)), Ok(true));
        assert_eq!(parse_flag(&Value::Int(0)), Ok(false));
        assert_eq!(parse_flag(&Value::Okay), Err(Failure::Protocol));
    }
}
