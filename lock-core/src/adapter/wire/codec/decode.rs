//! Decoding Redis's answers into the machine's replies, and classifying
//! error replies into typed failures. Any value a decoder does not expect
//! becomes a typed failure, never a panic.

use std::time::Duration;

use redis::{RedisError, Value};

use crate::{Command, Failure, Reply};

/// The kind of one operation, to decode its part of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpKind {
    Acquire,
    Renew,
    Release,
}

impl OpKind {
    pub(crate) fn of(command: &Command) -> Self {
        match command {
            Command::Acquire { .. } => Self::Acquire,
            Command::Renew { .. } => Self::Renew,
            Command::Release => Self::Release,
        }
    }
}

/// What the answer to a `SET NX GET` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SetNxGet {
    /// The key was free and is ours now.
    Granted,
    /// The key was already ours: refresh its ttl before counting it.
    AlreadyOurs,
    /// Another owner holds it.
    Contended,
}

/// Decodes the answer to `SET lock token NX PX ttl GET`.
pub(crate) fn decode_set_nx_get(value: &Value, token: &str) -> Result<SetNxGet, Failure> {
    match value {
        Value::Nil => Ok(SetNxGet::Granted),
        Value::BulkString(holder) if holder.as_slice() == token.as_bytes() => {
            Ok(SetNxGet::AlreadyOurs)
        }
        Value::BulkString(_) => Ok(SetNxGet::Contended),
        Value::SimpleString(holder) if holder == token => Ok(SetNxGet::AlreadyOurs),
        Value::SimpleString(_) => Ok(SetNxGet::Contended),
        Value::ServerError(error) => Err(failure_of_code(error.code(), error.details())),
        _ => Err(Failure::Protocol),
    }
}

/// Decodes the answer to `SET lock token IFEQ token PX ttl`: `OK` when the
/// key was ours and its ttl is reset, nil when it is not ours.
pub(crate) fn decode_set_ifeq(value: &Value) -> Reply {
    match value {
        Value::Okay => Reply::Renewed {
            replicas: None,
            aof: None,
        },
        Value::SimpleString(text) if text == "OK" => Reply::Renewed {
            replicas: None,
            aof: None,
        },
        Value::Nil => Reply::NotOwner,
        Value::ServerError(error) => Reply::Failed(failure_of_code(error.code(), error.details())),
        _ => Reply::Failed(Failure::Protocol),
    }
}

/// Decodes the answer to `DELIFEQ lock token` or `DELEX lock IFEQ token`:
/// 1 when our key was deleted, 0 when it was missing or not ours.
pub(crate) fn decode_del_if_eq(value: &Value) -> Reply {
    match value {
        Value::Int(1) => Reply::Released,
        Value::Int(0) => Reply::NotOwner,
        Value::ServerError(error) => Reply::Failed(failure_of_code(error.code(), error.details())),
        _ => Reply::Failed(Failure::Protocol),
    }
}

/// Whether a native command's error reply is a refusal the script would
/// not meet (see [`encode`](super::encode::encode)): `OOM`, a syntax error, an unknown command or
/// option, an ACL refusal. An error the script meets too (`WRONGTYPE`,
/// `READONLY`, `LOADING`, `BUSY`, a redirection, ...) is the outcome
/// itself. A refused command changed nothing, so sending the script's
/// operation after it is safe.
pub(crate) fn refuses_native(error: &RedisError) -> bool {
    error.code().is_some() && failure_of(error) == Failure::Other
}

/// Whether a refusal of `SET … IFEQ` says the server will never take it
/// (a syntax error, an unknown command, an ACL rule), rather than not now
/// (`OOM`).
pub(crate) fn refuses_for_good(error: &RedisError) -> bool {
    error.code() != Some("OOM")
}

/// Decodes a whole script reply: one entry per operation, in order (a
/// single operation's reply comes alone). A reply of the wrong shape fails
/// every operation with a protocol failure (the outcome is unknown).
pub(crate) fn decode_script(value: &Value, kinds: &[OpKind]) -> Vec<Reply> {
    if let [kind] = kinds
        && !matches!(value, Value::Array(_) | Value::ServerError(_))
    {
        return vec![decode_op(*kind, value)];
    }
    match value {
        Value::Array(items) if items.len() == kinds.len() => items
            .iter()
            .zip(kinds)
            .map(|(item, kind)| decode_op(*kind, item))
            .collect(),
        Value::ServerError(error) => {
            let failure = failure_of_code(error.code(), error.details());
            vec![Reply::Failed(failure); kinds.len()]
        }
        _ => vec![Reply::Failed(Failure::Protocol); kinds.len()],
    }
}

/// Decodes one operation's entry of a script reply.
pub(crate) fn decode_op(kind: OpKind, value: &Value) -> Reply {
    let decoded = match (kind, value) {
        (_, Value::ServerError(error)) => Err(failure_of_code(error.code(), error.details())),
        (OpKind::Acquire, value) => decode_acquire(value),
        (OpKind::Renew, value) => decode_flag(value).map(|renewed| {
            if renewed {
                Reply::Renewed {
                    replicas: None,
                    aof: None,
                }
            } else {
                Reply::NotOwner
            }
        }),
        (OpKind::Release, value) => decode_flag(value).map(|deleted| {
            if deleted {
                Reply::Released
            } else {
                Reply::NotOwner
            }
        }),
    };
    decoded.unwrap_or_else(Reply::Failed)
}

/// The fence (`>= 0`) of a grant, or `-2 - pttl` when another owner holds
/// the key (`-1`: a key without ttl).
fn decode_acquire(value: &Value) -> Result<Reply, Failure> {
    match value {
        Value::Int(fence) if *fence >= 0 => Ok(Reply::Granted {
            fence: fence.unsigned_abs(),
            replicas: None,
            aof: None,
        }),
        Value::Int(held) => Ok(Reply::Contended {
            pttl: u64::try_from((-2_i64).saturating_sub(*held))
                .ok()
                .map(Duration::from_millis),
        }),
        _ => Err(Failure::Protocol),
    }
}

fn decode_flag(value: &Value) -> Result<bool, Failure> {
    match value {
        Value::Int(1) => Ok(true),
        Value::Int(0) => Ok(false),
        _ => Err(Failure::Protocol),
    }
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
        Some(code) => failure_of_code(code, error.detail()),
        None => Failure::Protocol,
    }
}

/// Classifies an error reply by its code, looking inside the details of a
/// generic `ERR` (older servers wrap a script's inner error: `ERR Error
/// running script ... WRONGTYPE ...`).
pub(crate) fn failure_of_code(code: &str, detail: Option<&str>) -> Failure {
    match code {
        "READONLY" => Failure::ReadOnly,
        "LOADING" => Failure::Loading,
        "BUSY" => Failure::Busy,
        "NOSCRIPT" => Failure::NoScript,
        "WRONGTYPE" => Failure::WrongType,
        "NOREPLICAS" => Failure::NoReplicas,
        "MASTERDOWN" => Failure::MasterDown,
        "MOVED" => Failure::Moved,
        "ASK" => Failure::Ask,
        "TRYAGAIN" => Failure::TryAgain,
        "CLUSTERDOWN" => Failure::ClusterDown,
        "CROSSSLOT" => Failure::CrossSlot,
        _ => classify_detail(detail.unwrap_or_default()),
    }
}

fn classify_detail(text: &str) -> Failure {
    for (needle, failure) in [
        ("WRONGTYPE", Failure::WrongType),
        ("READONLY", Failure::ReadOnly),
        ("LOADING", Failure::Loading),
        ("BUSY", Failure::Busy),
        ("NOSCRIPT", Failure::NoScript),
        ("NOREPLICAS", Failure::NoReplicas),
        ("MASTERDOWN", Failure::MasterDown),
        ("MOVED", Failure::Moved),
        ("TRYAGAIN", Failure::TryAgain),
        ("CLUSTERDOWN", Failure::ClusterDown),
        ("CROSSSLOT", Failure::CrossSlot),
    ] {
        if text.contains(needle) {
            return failure;
        }
    }
    Failure::Other
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn acquire_replies_decode() {
        let granted = Value::Int(1_700_000_000_000_001);
        assert_eq!(
            decode_op(OpKind::Acquire, &granted),
            Reply::Granted {
                fence: 1_700_000_000_000_001,
                replicas: None,
                aof: None
            }
        );
        assert_eq!(
            decode_op(OpKind::Acquire, &Value::Int(0)),
            Reply::Granted {
                fence: 0,
                replicas: None,
                aof: None
            }
        );
        let held = Value::Int(-2 - 1500);
        assert_eq!(
            decode_op(OpKind::Acquire, &held),
            Reply::Contended {
                pttl: Some(Duration::from_millis(1500))
            }
        );
        assert_eq!(
            decode_op(OpKind::Acquire, &Value::Int(-2)),
            Reply::Contended {
                pttl: Some(Duration::ZERO)
            }
        );
        let no_ttl = Value::Int(-1);
        assert_eq!(
            decode_op(OpKind::Acquire, &no_ttl),
            Reply::Contended { pttl: None }
        );
        for bad in [
            Value::Nil,
            bulk("1"),
            Value::Array(vec![Value::Int(1), bulk("3")]),
        ] {
            assert_eq!(
                decode_op(OpKind::Acquire, &bad),
                Reply::Failed(Failure::Protocol),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn script_replies_decode_per_operation() {
        let kinds = [OpKind::Release, OpKind::Acquire, OpKind::Renew];
        let reply = Value::Array(vec![Value::Int(1), Value::Int(9), Value::Int(0)]);
        assert_eq!(
            decode_script(&reply, &kinds),
            vec![
                Reply::Released,
                Reply::Granted {
                    fence: 9,
                    replicas: None,
                    aof: None
                },
                Reply::NotOwner
            ]
        );
        // A reply of the wrong length leaves every outcome unknown.
        assert_eq!(
            decode_script(&Value::Array(vec![Value::Int(1)]), &kinds),
            vec![Reply::Failed(Failure::Protocol); 3]
        );
    }

    #[test]
    fn set_nx_get_tells_ours_from_theirs() {
        assert_eq!(decode_set_nx_get(&Value::Nil, "t"), Ok(SetNxGet::Granted));
        assert_eq!(
            decode_set_nx_get(&bulk("t"), "t"),
            Ok(SetNxGet::AlreadyOurs)
        );
        assert_eq!(decode_set_nx_get(&bulk("u"), "t"), Ok(SetNxGet::Contended));
        assert_eq!(
            decode_set_nx_get(&Value::Int(3), "t"),
            Err(Failure::Protocol)
        );
    }

    #[test]
    fn set_ifeq_replies_decode() {
        assert_eq!(
            decode_set_ifeq(&Value::Okay),
            Reply::Renewed {
                replicas: None,
                aof: None
            }
        );
        assert_eq!(
            decode_set_ifeq(&Value::SimpleString("OK".into())),
            Reply::Renewed {
                replicas: None,
                aof: None
            }
        );
        assert_eq!(decode_set_ifeq(&Value::Nil), Reply::NotOwner);
        assert_eq!(
            decode_set_ifeq(&Value::Int(1)),
            Reply::Failed(Failure::Protocol)
        );
        assert_eq!(
            decode_set_ifeq(&bulk("t")),
            Reply::Failed(Failure::Protocol)
        );
    }

    #[test]
    fn refusals_of_a_native_command_are_told_from_outcomes() {
        let error = |line: &str| match redis::parse_redis_value(format!("-{line}\r\n").as_bytes()) {
            Ok(Value::ServerError(error)) => RedisError::from(error),
            other => panic!("{line:?} parsed as {other:?}"),
        };
        // Valkey 8.1.8's own answers: refusals the script would not meet.
        let oom = error("OOM command not allowed when used memory > 'maxmemory'.");
        assert!(refuses_native(&oom));
        assert!(!refuses_for_good(&oom));
        for line in [
            "ERR syntax error",
            "ERR unknown command 'SET', with args beginning with: ",
            "NOPERM User u has no permissions to run the 'set' command",
        ] {
            let refused = error(line);
            assert!(refuses_native(&refused), "{line}");
            assert!(refuses_for_good(&refused), "{line}");
        }
        // Outcomes the script meets alike.
        for line in [
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            "READONLY You can't write against a read only replica.",
            "MOVED 12 127.0.0.1:7001",
            "BUSY Redis is busy running a script.",
            "LOADING Redis is loading the dataset in memory",
            "NOREPLICAS Not enough good replicas to write.",
        ] {
            assert!(!refuses_native(&error(line)), "{line}");
        }
        let io = RedisError::from(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "x",
        ));
        assert!(!refuses_native(&io));
    }

    #[test]
    fn error_codes_classify() {
        assert_eq!(failure_of_code("READONLY", None), Failure::ReadOnly);
        assert_eq!(failure_of_code("NOREPLICAS", None), Failure::NoReplicas);
        assert_eq!(
            failure_of_code("ERR", Some("Error running script: WRONGTYPE Operation")),
            Failure::WrongType
        );
        assert_eq!(failure_of_code("ERR", Some("syntax error")), Failure::Other);
        assert_eq!(failure_of_code("ERR", None), Failure::Other);
    }

    #[test]
    fn family_replies_decode() {
        assert_eq!(
            decode_op(OpKind::Acquire, &Value::Int(0)),
            Reply::Granted {
                fence: 0,
                replicas: None,
                aof: None
            }
        );
        assert_eq!(
            decode_op(OpKind::Acquire, &Value::Int(-2 - 150)),
            Reply::Contended {
                pttl: Some(Duration::from_millis(150))
            }
        );
        assert_eq!(decode_op(OpKind::Release, &Value::Int(0)), Reply::NotOwner);
        assert_eq!(
            decode_op(OpKind::Renew, &Value::Int(1)),
            Reply::Renewed {
                replicas: None,
                aof: None
            }
        );
    }
}
