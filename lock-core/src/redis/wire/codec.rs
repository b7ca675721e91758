//! Encodes the machine's commands as Redis calls and decodes Redis's
//! answers into the machine's replies. Pure functions: no I/O, no lock
//! decisions. Every decoder turns any value it does not expect into a
//! typed failure, never a panic.

use std::time::Duration;

use redis::{Cmd, RedisError, Value};

use crate::{
    AofCounts, Command, Failure, Fencing, Reply, WaitAof,
    redis::connect::node::Dialect,
    scripts,
    scripts::{KeyNames, LockKind},
};

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

/// How a single command goes to Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// `SET lock token NX PX ttl GET`: an unfenced acquire on Redis 7+.
    SetNxGet,
    /// `SET lock token IFEQ token PX ttl`: a lone renewal on Valkey 8.1+.
    SetIfEq,
    /// `DELIFEQ lock token` (Valkey 9.0+) or `DELEX lock IFEQ token`
    /// (Redis 8.4+): an unannounced release.
    DelIfEq,
    /// One operation of the lock script.
    Script(OpKind),
}

/// A command ready to send: the call itself, and the `WAIT` and `WAITAOF`
/// to pipeline after it when the lock asks for acknowledgements.
#[derive(Debug, Clone)]
pub(crate) struct Encoded {
    pub(crate) call: Cmd,
    pub(crate) plan: Plan,
    pub(crate) waits: Waits,
}

fn millis(duration: Duration) -> u64 {
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

/// Why `command` cannot go to a server of `dialect` at all: a `WAITAOF`
/// the server does not have ([`Failure::Unsupported`]). Checked before the
/// send, so nothing runs.
pub(crate) fn unsupported(command: &Command, dialect: Dialect) -> Option<Failure> {
    (Waits::of(command).aof.is_some() && dialect.lacks_waitaof).then_some(Failure::Unsupported)
}

/// Encodes one machine command for one lock.
///
/// A renewal on a server with `SET … IFEQ` (Valkey 8.1+) is
/// `SET lock token IFEQ token PX ttl` instead of the script's renew
/// operation. The lock key is a plain string holding the owner's token and
/// nothing else (the fence lives in its own key, which a renewal never
/// touches), so the two are the same operation: both compare the stored
/// value with the token byte for byte; when it matches, the native `SET`
/// writes the same token back with the new ttl (the script's `PEXPIRE`
/// sets that ttl alone) and answers `OK` (the script: 1); when the key is
/// missing, expired or another owner's, neither writes and the `SET`
/// answers nil (the script: 0); a key of another type is `WRONGTYPE` for
/// both, and a replica's `READONLY`, a cluster's redirections and `BUSY`
/// come before either runs. A `WAIT` pipelined behind counts either write.
///
/// They differ where the server refuses the `SET` and would have run the
/// script: `SET` is a `denyoom` command and `PEXPIRE` is not, so on a
/// server above `maxmemory` under `noeviction` the `SET` fails with `OOM`
/// while the script still renews (checked on Valkey 8.1.8); and a server
/// that announces Valkey 8.1 but rejects the option (a proxy) answers a
/// syntax error. A refused native command changed nothing, so the caller
/// sends the script's renewal in its place ([`refuses_native`]): the
/// outcome is always the script's.
///
/// An unannounced release (a Redlock node's: nobody subscribes there) is
/// `DELIFEQ lock token` on Valkey 9.0+ and `DELEX lock IFEQ token` on
/// Redis 8.4+: the script's quiet release compares the stored string with
/// the token and deletes it on a match, answering 1, else 0; so do both
/// commands (a key of another type is `WRONGTYPE` for all three). The
/// announced release stays in the script: it also `PUBLISH`es the wake-up
/// to the lock's waiters, and only when the key was ours, which no single
/// native command does (a `PUBLISH` pipelined behind would announce
/// releases that deleted nothing, and waiting for the answer first costs a
/// round trip). Neither server runs in the test matrix: the native release
/// is tested against the simulator's model of them only.
///
/// A lock of the family ([`KeyNames::kind`] other than plain) is always one
/// operation of its own script ([`encode_family`]).
pub(crate) fn encode(keys: &KeyNames, token: &str, command: &Command, dialect: Dialect) -> Encoded {
    if keys.kind != LockKind::Plain {
        return encode_family(keys, token, command);
    }
    match command {
        Command::Release if dialect.quiet_release && (dialect.delifeq || dialect.delex_ifeq) => {
            let mut call = Cmd::with_capacity(4, keys.lock.len() + token.len() + 16);
            if dialect.delifeq {
                call.arg("DELIFEQ").arg(&keys.lock).arg(token);
            } else {
                call.arg("DELEX").arg(&keys.lock).arg("IFEQ").arg(token);
            }
            Encoded {
                call,
                plan: Plan::DelIfEq,
                waits: Waits::default(),
            }
        }
        Command::Renew { ttl, .. } if dialect.set_ifeq => {
            let mut call = Cmd::with_capacity(7, keys.lock.len() + token.len() * 2 + 24);
            call.arg("SET")
                .arg(&keys.lock)
                .arg(token)
                .arg("IFEQ")
                .arg(token)
                .arg("PX")
                .arg(millis(*ttl));
            Encoded {
                call,
                plan: Plan::SetIfEq,
                waits: Waits::of(command),
            }
        }
        Command::Acquire {
            ttl,
            fencing: Fencing::None,
            ..
        } if dialect.set_nx_get => {
            let mut call = Cmd::with_capacity(7, keys.lock.len() + token.len() + 32);
            call.arg("SET")
                .arg(&keys.lock)
                .arg(token)
                .arg("NX")
                .arg("PX")
                .arg(millis(*ttl))
                .arg("GET");
            Encoded {
                call,
                plan: Plan::SetNxGet,
                waits: Waits::of(command),
            }
        }
        _ => {
            let mut call = script_call(1, keys.lock.len() + keys.fence.len() + token.len() + 80);
            push_op(&mut call, keys, token, command, dialect);
            Encoded {
                call,
                plan: Plan::Script(OpKind::of(command)),
                waits: Waits::of(command),
            }
        }
    }
}

/// One operation of a family script: `EVALSHA sha numkeys KEYS... code
/// token ARGV...`, the keys from [`KeyNames::script_keys`] and the codes
/// from [`scripts::family_op`]. The script always issues the time-mixed
/// fence (the fencing option is the plain lock's); a read grant's fence
/// is 0. The replies have the lock script's shapes (a fence or `-2 -
/// pttl`, then 1/0), so they decode the same way.
pub(crate) fn encode_family(keys: &KeyNames, token: &str, command: &Command) -> Encoded {
    use scripts::family_op as op;
    let names = keys.script_keys();
    let bytes: usize = names.iter().map(String::len).sum::<usize>() + token.len() + 96;
    let mut call = Cmd::with_capacity(names.len() + 8, bytes);
    call.arg("EVALSHA")
        .arg(keys.kind.script().sha1)
        .arg(names.len());
    for name in &names {
        call.arg(name);
    }
    // The kind's codes (acquire, renew, release) and its acquire's extra
    // argument.
    let (acquire, renew, release, extra) = match keys.kind {
        LockKind::Fair { waiter_ttl } => (
            op::FAIR_ACQUIRE,
            op::FAIR_RENEW,
            op::FAIR_RELEASE,
            Some(millis(waiter_ttl)),
        ),
        LockKind::Read => (op::READ_ACQUIRE, op::READ_RENEW, op::READ_RELEASE, None),
        LockKind::Write { intent_ttl } => (
            op::WRITE_ACQUIRE,
            op::WRITE_RENEW,
            op::WRITE_RELEASE,
            Some(millis(intent_ttl)),
        ),
        LockKind::Permit { permits } => (
            op::PERMIT_ACQUIRE,
            op::PERMIT_RENEW,
            op::PERMIT_RELEASE,
            Some(u64::from(permits)),
        ),
        // The plain lock has a script of its own.
        LockKind::Plain => return encode(keys, token, command, Dialect::default()),
    };
    let (code, ttl, extra) = match command {
        Command::Acquire { ttl, .. } => (acquire, Some(*ttl), extra),
        Command::Renew { ttl, .. } => (renew, Some(*ttl), None),
        Command::Release => (release, None, None),
    };
    call.arg(code).arg(token);
    if let Some(ttl) = ttl {
        call.arg(millis(ttl));
    }
    if let Some(extra) = extra {
        call.arg(extra);
    }
    Encoded {
        call,
        plan: Plan::Script(OpKind::of(command)),
        waits: Waits::of(command),
    }
}

/// An `EVALSHA` of the lock script, before its keys and arguments.
fn script_call(ops: usize, bytes: usize) -> Cmd {
    let mut call = Cmd::with_capacity(3 + ops * 6, 64 + bytes);
    call.arg("EVALSHA").arg(scripts::LOCK.sha1);
    call
}

/// Appends one operation's keys and arguments. A batch lays out all keys
/// first, then all arguments: see [`encode_batch`].
fn push_op(call: &mut Cmd, keys: &KeyNames, token: &str, command: &Command, dialect: Dialect) {
    match command {
        Command::Acquire { ttl, fencing, .. } => {
            let code = scripts::op::acquire(*fencing, !dialect.set_nx_get);
            if scripts::op::acquire_sends_fence_key(*fencing) {
                call.arg(2).arg(&keys.lock).arg(keys.fence_key(*fencing));
            } else {
                call.arg(1).arg(&keys.lock);
            }
            call.arg(code).arg(token).arg(millis(*ttl));
        }
        Command::Renew { ttl, .. } => {
            call.arg(1)
                .arg(&keys.lock)
                .arg(scripts::op::RENEW)
                .arg(token)
                .arg(millis(*ttl));
        }
        Command::Release => {
            call.arg(1)
                .arg(&keys.lock)
                .arg(release_code(dialect))
                .arg(token);
        }
    }
}

/// The release's operation code in `dialect`.
fn release_code(dialect: Dialect) -> &'static str {
    if dialect.quiet_release {
        scripts::op::RELEASE_QUIET
    } else {
        scripts::op::RELEASE
    }
}

/// One operation of a batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchOp<'a> {
    pub(crate) keys: &'a KeyNames,
    pub(crate) token: &'a str,
    pub(crate) command: &'a Command,
}

/// Encodes several operations as one `EVALSHA` of the lock script.
pub(crate) fn encode_batch(ops: &[BatchOp<'_>], dialect: Dialect) -> Cmd {
    let bytes = ops
        .iter()
        .map(|op| op.keys.lock.len() * 2 + op.token.len() + 24)
        .sum();
    let mut call = script_call(ops.len(), bytes);
    let key_count: usize = ops
        .iter()
        .map(|op| match op.command {
            Command::Acquire { fencing, .. } if scripts::op::acquire_sends_fence_key(*fencing) => 2,
            _ => 1,
        })
        .sum();
    call.arg(key_count);
    for op in ops {
        call.arg(&op.keys.lock);
        if let Command::Acquire { fencing, .. } = op.command
            && scripts::op::acquire_sends_fence_key(*fencing)
        {
            call.arg(op.keys.fence_key(*fencing));
        }
    }
    for op in ops {
        match op.command {
            Command::Acquire { ttl, fencing, .. } => {
                call.arg(scripts::op::acquire(*fencing, !dialect.set_nx_get))
                    .arg(op.token)
                    .arg(millis(*ttl));
            }
            Command::Renew { ttl, .. } => {
                call.arg(scripts::op::RENEW).arg(op.token).arg(millis(*ttl));
            }
            Command::Release => {
                call.arg(release_code(dialect)).arg(op.token);
            }
        }
    }
    call
}

/// The renew operation alone, for the rare `SET NX GET` answer that shows
/// the key is already ours (a retry after a lost reply): the ttl must be
/// refreshed, owner-checked, before the grant counts.
pub(crate) fn encode_own_refresh(keys: &KeyNames, token: &str, ttl: Duration) -> Cmd {
    let mut call = script_call(1, keys.lock.len() + token.len() + 32);
    push_op(
        &mut call,
        keys,
        token,
        &Command::Renew {
            ttl,
            wait_replicas: None,
            wait_aof: None,
        },
        Dialect::default(),
    );
    call
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
/// not meet (see [`encode`]): `OOM`, a syntax error, an unknown command or
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
    fn dialect_follows_the_major_version() {
        assert!(Dialect::from_info("# Server\r\nredis_version:7.0.15\r\n").set_nx_get);
        assert!(!Dialect::from_info("redis_version:6.2.14\r\n").set_nx_get);
        assert!(!Dialect::from_info("garbage").set_nx_get);
    }

    #[test]
    fn set_ifeq_only_from_valkey_8_1() {
        let valkey = |version: &str| {
            Dialect::from_info(&format!(
                "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:{version}\r\n"
            ))
        };
        assert!(valkey("8.1.8").set_ifeq);
        assert!(valkey("8.1.0").set_ifeq);
        assert!(valkey("9.0.0").set_ifeq);
        assert!(valkey("10").set_ifeq);
        assert!(valkey("8.1.8").set_nx_get);
        assert!(!valkey("8.0.4").set_ifeq);
        assert!(!valkey("7.2.9").set_ifeq);
        assert!(!valkey("8").set_ifeq);
        assert!(!valkey("x.1").set_ifeq);
        // Redis, even Redis 8, keeps the script.
        assert!(!Dialect::from_info("redis_version:8.4.0\r\n").set_ifeq);
        assert!(!Dialect::from_info("redis_version:7.0.15\r\n").set_ifeq);
        // A field whose name only starts the same is not the version.
        assert!(!Dialect::from_info("valkey_version_x:9.0.0\r\n").set_ifeq);
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

    #[test]
    fn native_release_only_unannounced_and_from_valkey_9_or_redis_8_4() {
        let dialect = |info: &str, quiet: bool| {
            let mut dialect = Dialect::from_info(info);
            dialect.quiet_release = quiet;
            dialect
        };
        let keys = KeyNames::new("lock", "k");
        let release = |info: &str, quiet: bool| {
            let encoded = encode(&keys, "t", &Command::Release, dialect(info, quiet));
            (encoded.plan, encoded.call.get_packed_command())
        };
        let valkey9 = "redis_version:7.2.4\r\nvalkey_version:9.0.0\r\n";
        let redis84 = "redis_version:8.4.0\r\n";
        assert_eq!(
            release(valkey9, true),
            (
                Plan::DelIfEq,
                redis::cmd("DELIFEQ")
                    .arg(&keys.lock)
                    .arg("t")
                    .get_packed_command()
            )
        );
        assert_eq!(
            release(redis84, true),
            (
                Plan::DelIfEq,
                redis::cmd("DELEX")
                    .arg(&keys.lock)
                    .arg("IFEQ")
                    .arg("t")
                    .get_packed_command()
            )
        );
        // The announced release publishes: it stays in the script.
        assert_eq!(release(valkey9, false).0, Plan::Script(OpKind::Release));
        assert_eq!(release(redis84, false).0, Plan::Script(OpKind::Release));
        // Older servers keep the script.
        for info in [
            "redis_version:7.2.4\r\nvalkey_version:8.1.8\r\n",
            "redis_version:8.2.0\r\n",
            "redis_version:7.0.15\r\n",
            // Valkey says redis_version:7.2.4; a Valkey that claimed 8.4 is
            // still not Redis.
            "redis_version:8.4.0\r\nvalkey_version:8.1.8\r\n",
        ] {
            assert_eq!(
                release(info, true).0,
                Plan::Script(OpKind::Release),
                "{info}"
            );
        }
        assert_eq!(decode_del_if_eq(&Value::Int(1)), Reply::Released);
        assert_eq!(decode_del_if_eq(&Value::Int(0)), Reply::NotOwner);
        assert_eq!(
            decode_del_if_eq(&Value::Nil),
            Reply::Failed(Failure::Protocol)
        );
    }

    #[test]
    fn waitaof_is_known_missing_only_below_7_2() {
        let lacks = |info: &str| Dialect::from_info(info).lacks_waitaof;
        assert!(lacks("redis_version:7.0.15\r\n"));
        assert!(lacks("redis_version:6.2.14\r\n"));
        assert!(!lacks("redis_version:7.2.0\r\n"));
        assert!(!lacks("redis_version:8.4.0\r\n"));
        assert!(!lacks("redis_version:7.2.4\r\nvalkey_version:8.1.8\r\n"));
        // Unknown: send it, and let the answer decide.
        assert!(!lacks("garbage"));
        let acquire = Command::Acquire {
            ttl: Duration::from_secs(1),
            fencing: Fencing::TimeMixed,
            wait_replicas: None,
            wait_aof: Some(WaitAof {
                local: 1,
                replicas: 0,
                timeout: Duration::from_millis(10),
            }),
        };
        let old = Dialect::from_info("redis_version:7.0.15\r\n");
        assert_eq!(unsupported(&acquire, old), Some(Failure::Unsupported));
        assert_eq!(unsupported(&Command::Release, old), None);
        let new = Dialect::from_info("redis_version:7.2.4\r\n");
        assert_eq!(unsupported(&acquire, new), None);
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

    /// The family's commands: one `EVALSHA` of the kind's script, its keys,
    /// then code, token and the kind's arguments; never a native command,
    /// whatever the dialect offers; the waits kept.
    #[test]
    fn family_commands_encode_to_their_scripts() {
        let ms = Duration::from_millis;
        let acquire = Command::Acquire {
            ttl: ms(1_000),
            fencing: Fencing::None,
            wait_replicas: Some((1, ms(20))),
            wait_aof: None,
        };
        let renew = Command::Renew {
            ttl: ms(1_000),
            wait_replicas: None,
            wait_aof: None,
        };
        // Every native command on: the family must not use any.
        let dialect = Dialect {
            set_nx_get: true,
            set_ifeq: true,
            delifeq: true,
            quiet_release: true,
            ..Dialect::default()
        };
        let packed = |kind: LockKind, command: &Command| {
            let names = KeyNames::with_kind("lock", "k", kind).for_waiter("me");
            let encoded = encode(&names, "me", command, dialect);
            assert_eq!(encoded.plan, Plan::Script(OpKind::of(command)));
            assert_eq!(encoded.waits, Waits::of(command));
            encoded.call.get_packed_command()
        };
        let expect = |script: scripts::Script, keys: &[&str], args: &[&str]| {
            let mut call = redis::cmd("EVALSHA");
            call.arg(script.sha1).arg(keys.len());
            for key in keys {
                call.arg(*key);
            }
            for arg in args {
                call.arg(*arg);
            }
            call.get_packed_command()
        };
        let fair = LockKind::Fair {
            waiter_ttl: ms(300),
        };
        let fair_keys = [
            "{lock:k}",
            "{lock:k}:queue",
            "{lock:k}:waiters",
            "{lock:k}:fence",
        ];
        assert_eq!(
            packed(fair, &acquire),
            expect(scripts::FAIR, &fair_keys, &["a", "me", "1000", "300"])
        );
        assert_eq!(
            packed(fair, &renew),
            expect(scripts::FAIR, &fair_keys, &["r", "me", "1000"])
        );
        assert_eq!(
            packed(fair, &Command::Release),
            expect(scripts::FAIR, &fair_keys, &["d", "me"])
        );
        let rw_keys = [
            "{lock:k}",
            "{lock:k}:readers",
            "{lock:k}:intent",
            "{lock:k}:fence",
        ];
        let write = LockKind::Write {
            intent_ttl: ms(250),
        };
        for (kind, codes) in [(LockKind::Read, ["r", "e", "x"]), (write, ["w", "f", "y"])] {
            let mut acquire_args = vec![codes[0], "me", "1000"];
            if kind == write {
                acquire_args.push("250");
            }
            assert_eq!(
                packed(kind, &acquire),
                expect(scripts::RWLOCK, &rw_keys, &acquire_args)
            );
            assert_eq!(
                packed(kind, &renew),
                expect(scripts::RWLOCK, &rw_keys, &[codes[1], "me", "1000"])
            );
            assert_eq!(
                packed(kind, &Command::Release),
                expect(scripts::RWLOCK, &rw_keys, &[codes[2], "me"])
            );
        }
        let permit = LockKind::Permit { permits: 4 };
        let sem_keys = ["{lock:k}", "{lock:k}:fence"];
        assert_eq!(
            packed(permit, &acquire),
            expect(scripts::SEMAPHORE, &sem_keys, &["a", "me", "1000", "4"])
        );
        assert_eq!(
            packed(permit, &renew),
            expect(scripts::SEMAPHORE, &sem_keys, &["r", "me", "1000"])
        );
        assert_eq!(
            packed(permit, &Command::Release),
            expect(scripts::SEMAPHORE, &sem_keys, &["d", "me"])
        );
    }

    /// The family's replies have the lock script's shapes: a read grant's
    /// fence is 0, a refusal `-2 - ms`, a renewal or release 1 or 0.
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
