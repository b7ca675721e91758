//! Encoding the machine's commands as Redis calls: a lone command
//! (native where the server has the command), one operation of the lock
//! script or of a family script, a batch of operations in one script call.

use std::time::Duration;

use redis::{Cmd, Value};

use super::{
    decode::OpKind,
    waits::{Waits, millis},
};
use crate::{
    Command, Failure, Fencing,
    adapter::connect::node::Dialect,
    scripts,
    scripts::{KeyNames, LockKind},
};

/// How a single command goes to Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// `SET lock token NX PX ttl GET`: an unfenced acquire on Redis 7+.
    SetNxGet,
    /// `SET lock token IFEQ token PX ttl`: a lone renewal on Valkey 8.1+.
    SetIfEq,
    /// `DELIFEQ lock token` (Valkey 9.0+) or `DELEX lock IFEQ token`
    /// (Redis 8.4+): a release, announced by a `PUBLISH` behind it
    /// ([`Encoded::announce`]) unless the node's releases are quiet.
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
    /// The `PUBLISH` of a native release's wake-up, pipelined right
    /// behind the call (a release has no waits).
    pub(crate) announce: Option<Cmd>,
    pub(crate) waits: Waits,
}

impl Encoded {
    /// What to pipeline behind the call, in order: the announcement, then
    /// the waits.
    pub(crate) fn after(&self) -> Vec<Cmd> {
        let mut after = self.waits.cmds();
        if let Some(announce) = &self.announce {
            after.insert(0, announce.clone());
        }
        after
    }

    /// The waits' answers among the answers to [`after`](Self::after)
    /// (the announcement's, a count of receivers, is not read).
    pub(crate) fn waited<'a>(&self, after: &'a [Value]) -> &'a [Value] {
        after
            .get(usize::from(self.announce.is_some())..)
            .unwrap_or_default()
    }
}

/// `PUBLISH {ns:key}:released released`: the wake-up the script's
/// announced release sends (`lock.lua`), for the plain lock's waiters.
pub(crate) fn announcement(keys: &KeyNames) -> Cmd {
    let mut publish = Cmd::with_capacity(3, keys.lock.len() + 24);
    publish.arg("PUBLISH").arg(keys.channel()).arg("released");
    publish
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
/// sends the script's renewal in its place ([`refuses_native`](super::decode::refuses_native)): the
/// outcome is always the script's.
///
/// A release is `DELIFEQ lock token` on Valkey 9.0+ and `DELEX lock IFEQ
/// token` on Redis 8.4+: the script's release compares the stored string
/// with the token and deletes it on a match, answering 1, else 0; so do
/// both commands (a key of another type is `WRONGTYPE` for all three). A
/// Redlock node's release stops there (nobody subscribes to its channel).
/// Any other release is announced: the `PUBLISH` that wakes the lock's
/// waiters goes in the same pipeline, right behind the delete
/// ([`Encoded::announce`]), where the script publishes only when it
/// deleted our key. The pipeline also announces a release that deleted
/// nothing: that happens only when the lock was already lost (expired, or
/// taken over), and then a woken waiter either finds the key free (the
/// script would have left it to its backoff retry) or is refused once, as
/// by a contender that came first. Waiting for the delete's answer before
/// publishing would cost every handoff a round trip, and a script costs
/// the server more than both commands (`bench/README.md`, "The announced
/// release on Valkey 9": Valkey 9.1's CPU per release, 6-9 times less
/// native, the round trip the same). The two are separate commands, so another client may set
/// the key between them; it could between the script's `PUBLISH` and the
/// waiter's retry too. A refused native command (a proxy, a renamed
/// command, an ACL rule) falls back to the script, as for the renewal.
///
/// A lock of the family ([`KeyNames::kind`] other than plain) is always one
/// operation of its own script ([`encode_family`]).
pub(crate) fn encode(keys: &KeyNames, token: &str, command: &Command, dialect: Dialect) -> Encoded {
    if keys.kind != LockKind::Plain {
        return encode_family(keys, token, command);
    }
    match command {
        Command::Release if dialect.delifeq || dialect.delex_ifeq => {
            let mut call = Cmd::with_capacity(4, keys.lock.len() + token.len() + 16);
            if dialect.delifeq {
                call.arg("DELIFEQ").arg(&keys.lock).arg(token);
            } else {
                call.arg("DELEX").arg(&keys.lock).arg("IFEQ").arg(token);
            }
            Encoded {
                call,
                plan: Plan::DelIfEq,
                announce: (!dialect.quiet_release).then(|| announcement(keys)),
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
                announce: None,
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
                announce: None,
                waits: Waits::of(command),
            }
        }
        _ => {
            let mut call = script_call(1, keys.lock.len() + keys.fence.len() + token.len() + 80);
            push_op(&mut call, keys, token, command, dialect);
            Encoded {
                call,
                plan: Plan::Script(OpKind::of(command)),
                announce: None,
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
        announce: None,
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

#[cfg(test)]
mod tests {
    use redis::Value;

    use super::super::decode::decode_del_if_eq;
    use super::*;
    use crate::{Reply, WaitAof};

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
    fn native_release_from_valkey_9_or_redis_8_4_announced_behind_the_delete() {
        let dialect = |info: &str, quiet: bool| {
            let mut dialect = Dialect::from_info(info);
            dialect.quiet_release = quiet;
            dialect
        };
        let keys = KeyNames::new("lock", "k");
        let release = |info: &str, quiet: bool| {
            let encoded = encode(&keys, "t", &Command::Release, dialect(info, quiet));
            (
                encoded.plan,
                encoded.call.get_packed_command(),
                encoded
                    .after()
                    .iter()
                    .map(Cmd::get_packed_command)
                    .collect::<Vec<_>>(),
            )
        };
        let valkey9 = "redis_version:7.2.4\r\nvalkey_version:9.0.0\r\n";
        let redis84 = "redis_version:8.4.0\r\n";
        let delifeq = redis::cmd("DELIFEQ")
            .arg(&keys.lock)
            .arg("t")
            .get_packed_command();
        let delex = redis::cmd("DELEX")
            .arg(&keys.lock)
            .arg("IFEQ")
            .arg("t")
            .get_packed_command();
        // A Redlock node's release: the delete alone.
        assert_eq!(
            release(valkey9, true),
            (Plan::DelIfEq, delifeq.clone(), vec![])
        );
        assert_eq!(
            release(redis84, true),
            (Plan::DelIfEq, delex.clone(), vec![])
        );
        // Any other: the script's wake-up right behind it.
        let publish = redis::cmd("PUBLISH")
            .arg("{lock:k}:released")
            .arg("released")
            .get_packed_command();
        assert_eq!(
            release(valkey9, false),
            (Plan::DelIfEq, delifeq, vec![publish.clone()])
        );
        assert_eq!(
            release(redis84, false),
            (Plan::DelIfEq, delex, vec![publish])
        );
        // The waits' answers come after the announcement's.
        let announced = encode(&keys, "t", &Command::Release, dialect(valkey9, false));
        assert_eq!(announced.waited(&[Value::Int(2)]), &[] as &[Value]);
        assert_eq!(announced.waited(&[]), &[] as &[Value]);
        // Older servers keep the script.
        for info in [
            "redis_version:7.2.4\r\nvalkey_version:8.1.8\r\n",
            "redis_version:8.2.0\r\n",
            "redis_version:7.0.15\r\n",
            // Valkey says redis_version:7.2.4; a Valkey that claimed 8.4 is
            // still not Redis.
            "redis_version:8.4.0\r\nvalkey_version:8.1.8\r\n",
        ] {
            for quiet in [true, false] {
                assert_eq!(
                    release(info, quiet).0,
                    Plan::Script(OpKind::Release),
                    "{info}"
                );
            }
        }
        assert_eq!(decode_del_if_eq(&Value::Int(1)), Reply::Released);
        assert_eq!(decode_del_if_eq(&Value::Int(0)), Reply::NotOwner);
        assert_eq!(
            decode_del_if_eq(&Value::Nil),
            Reply::Failed(Failure::Protocol)
        );
    }

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
            "{lock}:fence-floor",
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
            "{lock}:fence-floor",
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
        let sem_keys = ["{lock:k}", "{lock}:fence-floor"];
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
}
