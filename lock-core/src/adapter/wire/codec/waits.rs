//! What a grant or a renewal waits for after its call: `WAIT` for
//! replicas and `WAITAOF` for fsyncs, encoded once here, and their
//! answers added to the reply.

use std::time::Duration;

use redis::{Cmd, Value};

use super::decode::failure_of_code;
use crate::{AofCounts, Command, Failure, Reply, WaitAof};

/// `duration` in whole milliseconds, saturating.
pub(super) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// What a grant or a renewal waits for once it ran: `WAIT` for replicas,
/// then `WAITAOF` for fsyncs, pipelined behind it in that order (both
/// count the writes this connection made before them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) struct Waits {
    pub(crate) replicas: Option<(u32, Duration)>,
    pub(crate) aof: Option<WaitAof>,
}

impl Waits {
    /// The waits of `command` (none for a release).
    pub(crate) fn of(command: &Command) -> Self {
        match command {
            Command::Acquire {
                wait_replicas,
                wait_aof,
                ..
            }
            | Command::Renew {
                wait_replicas,
                wait_aof,
                ..
            } => Self {
                replicas: *wait_replicas,
                aof: *wait_aof,
            },
            Command::Release => Self::default(),
        }
    }

    /// The commands to pipeline after the call, in the order
    /// [`apply`](Self::apply) reads their answers.
    pub(crate) fn cmds(&self) -> Vec<Cmd> {
        let mut cmds = Vec::new();
        if let Some((replicas, timeout)) = self.replicas {
            // WAIT 0 means "forever" to Redis; a zero timeout here means
            // "don't block". The same holds for WAITAOF.
            let mut wait = redis::cmd("WAIT");
            wait.arg(replicas).arg(millis(timeout).max(1));
            cmds.push(wait);
        }
        if let Some(aof) = self.aof {
            let mut wait = redis::cmd("WAITAOF");
            wait.arg(aof.local)
                .arg(aof.replicas)
                .arg(millis(aof.timeout).max(1));
            cmds.push(wait);
        }
        cmds
    }

    /// Adds what the waits answered (`values`, in [`cmds`](Self::cmds)
    /// order) to a granted or renewed reply. A missing or unreadable
    /// answer counts as no acknowledgement, which never meets a
    /// requirement.
    pub(crate) fn apply(&self, mut reply: Reply, values: &[Value]) -> Reply {
        let mut values = values.iter();
        if self.replicas.is_some() {
            let acked = values.next().map_or(Err(Failure::Protocol), decode_wait);
            reply = with_replicas(reply, acked);
        }
        if self.aof.is_some() {
            let counts = values.next().map_or(Err(Failure::Protocol), decode_waitaof);
            reply = with_aof(reply, counts.unwrap_or_default());
        }
        reply
    }

    /// Whether the server answered the `WAITAOF` among `values` with an
    /// unknown command (a server before 7.2 whose version was not read).
    pub(crate) fn waitaof_unknown(&self, values: &[Value]) -> bool {
        if self.aof.is_none() {
            return false;
        }
        let index = usize::from(self.replicas.is_some());
        matches!(
            values.get(index),
            Some(Value::ServerError(error))
                if error.details().is_some_and(|d| d.starts_with("unknown command"))
        )
    }
}

/// Decodes `WAIT`'s answer: the number of replicas that acknowledged.
pub(crate) fn decode_wait(value: &Value) -> Result<u32, Failure> {
    match value {
        Value::Int(acked) => u32::try_from(*acked).map_err(|_| Failure::Protocol),
        Value::ServerError(error) => Err(failure_of_code(error.code(), error.details())),
        _ => Err(Failure::Protocol),
    }
}

/// Decodes `WAITAOF`'s answer: `[local, replicas]`, the fsyncs counted
/// (it answers them on timeout too). An error reply (a replica, AOF off
/// with `numlocal` 1, an unknown command) or any other shape is a failure.
pub(crate) fn decode_waitaof(value: &Value) -> Result<AofCounts, Failure> {
    match value {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(local), Value::Int(replicas)] => Ok(AofCounts {
                local: u32::try_from(*local).map_err(|_| Failure::Protocol)?,
                replicas: u32::try_from(*replicas).map_err(|_| Failure::Protocol)?,
            }),
            _ => Err(Failure::Protocol),
        },
        Value::ServerError(error) => Err(failure_of_code(error.code(), error.details())),
        _ => Err(Failure::Protocol),
    }
}

/// Adds what `WAIT` reported to a granted or renewed reply.
pub(crate) fn with_replicas(reply: Reply, wait: Result<u32, Failure>) -> Reply {
    // The key was granted (or renewed) but we cannot tell how far it
    // replicated: treat it as acknowledged by none, which never counts
    // when replicas were asked for.
    let acked = Some(wait.unwrap_or(0));
    match reply {
        Reply::Granted { fence, aof, .. } => Reply::Granted {
            fence,
            replicas: acked,
            aof,
        },
        Reply::Renewed { aof, .. } => Reply::Renewed {
            replicas: acked,
            aof,
        },
        other => other,
    }
}

/// Adds what `WAITAOF` counted to a granted or renewed reply.
pub(crate) fn with_aof(reply: Reply, counts: AofCounts) -> Reply {
    match reply {
        Reply::Granted {
            fence, replicas, ..
        } => Reply::Granted {
            fence,
            replicas,
            aof: Some(counts),
        },
        Reply::Renewed { replicas, .. } => Reply::Renewed {
            replicas,
            aof: Some(counts),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waitaof_answers_decode_with_both_counts() {
        let counts = |local, replicas| AofCounts { local, replicas };
        let pair = |a, b| Value::Array(vec![Value::Int(a), Value::Int(b)]);
        assert_eq!(decode_waitaof(&pair(1, 0)), Ok(counts(1, 0)));
        assert_eq!(decode_waitaof(&pair(0, 2)), Ok(counts(0, 2)));
        for bad in [
            Value::Int(1),
            pair(-1, 0),
            Value::Array(vec![Value::Int(1)]),
            Value::Nil,
        ] {
            assert_eq!(decode_waitaof(&bad), Err(Failure::Protocol), "{bad:?}");
        }
        let waits = Waits {
            replicas: Some((1, Duration::from_millis(10))),
            aof: Some(WaitAof {
                local: 1,
                replicas: 0,
                timeout: Duration::from_millis(10),
            }),
        };
        let cmds: Vec<Vec<u8>> = waits.cmds().iter().map(Cmd::get_packed_command).collect();
        assert_eq!(
            cmds,
            vec![
                redis::cmd("WAIT").arg(1).arg(10).get_packed_command(),
                redis::cmd("WAITAOF")
                    .arg(1)
                    .arg(0)
                    .arg(10)
                    .get_packed_command()
            ]
        );
        let granted = Reply::Granted {
            fence: 7,
            replicas: None,
            aof: None,
        };
        // WAIT's answer first, then WAITAOF's.
        assert_eq!(
            waits.apply(granted.clone(), &[Value::Int(1), pair(0, 0)]),
            Reply::Granted {
                fence: 7,
                replicas: Some(1),
                aof: Some(counts(0, 0))
            }
        );
        // An error (AOF off, a replica, unknown command) counts nothing.
        let unknown = match redis::parse_redis_value(
            b"-ERR unknown command 'waitaof', with args beginning with: '1'\r\n",
        ) {
            Ok(value) => value,
            Err(error) => panic!("{error}"),
        };
        assert_eq!(
            waits.apply(granted.clone(), &[Value::Int(1), unknown.clone()]),
            Reply::Granted {
                fence: 7,
                replicas: Some(1),
                aof: Some(counts(0, 0))
            }
        );
        assert!(waits.waitaof_unknown(&[Value::Int(1), unknown.clone()]));
        assert!(!waits.waitaof_unknown(&[unknown, pair(1, 0)]));
        // A missing answer counts nothing either.
        assert_eq!(
            waits.apply(granted, &[]),
            Reply::Granted {
                fence: 7,
                replicas: Some(0),
                aof: Some(counts(0, 0))
            }
        );
    }
}
