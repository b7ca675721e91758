//! The lock script's call layout (`KEYS`, then `ARGV`), walked the way
//! `lock.lua` walks it, gives back exactly the operations encoded.

use std::time::Duration;

use proptest::{collection::vec, prelude::*, sample::select};

use super::{CASES, config, strategies::text};
use crate::{
    Command, Fencing,
    adapter::{
        connect::node::Dialect,
        wire::codec::{self as wire, BatchOp, OpKind, Plan},
    },
    scripts::{self, KeyNames},
};

/// One operation as the script sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Walked {
    code: String,
    lock: Vec<u8>,
    fence: Option<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

/// The arguments of a command, as bytes.
fn args_of(call: &redis::Cmd) -> Vec<Vec<u8>> {
    call.args_iter()
        .map(|arg| match arg {
            redis::Arg::Simple(bytes) => bytes.to_vec(),
            _ => b"<not a plain argument>".to_vec(),
        })
        .collect()
}

/// Walks an `EVALSHA` of the lock script the way lock.lua does: `KEYS` and
/// `ARGV` split by the key count, then each operation code in `ARGV` takes
/// its keys and arguments. Errors where the script would misread.
fn walk(call: &redis::Cmd) -> Result<Vec<Walked>, String> {
    let args = args_of(call);
    let [command, sha, count, rest @ ..] = args.as_slice() else {
        return Err(format!("too short: {args:?}"));
    };
    if command.as_slice() != b"EVALSHA" || sha.as_slice() != scripts::LOCK.sha1.as_bytes() {
        return Err("not an EVALSHA of the lock script".into());
    }
    let count: usize = std::str::from_utf8(count)
        .ok()
        .and_then(|count| count.parse().ok())
        .ok_or("a key count that is not a number")?;
    if count > rest.len() {
        return Err("more keys than arguments".into());
    }
    let (keys, argv) = rest.split_at(count);
    let (mut k, mut a) = (0, 0);
    let mut walked = Vec::new();
    while a < argv.len() {
        let code = String::from_utf8(argv[a].clone()).map_err(|_| "a binary op code")?;
        let (key_count, arg_count) = match code.as_str() {
            "t" | "T" | "c" | "C" => (2, 2),
            "n" | "N" | "r" => (1, 2),
            "d" | "q" => (1, 1),
            _ => return Err(format!("unknown operation {code:?}")),
        };
        let (Some(op_keys), Some(op_args)) = (
            keys.get(k..k + key_count),
            argv.get(a + 1..a + 1 + arg_count),
        ) else {
            return Err(format!("operation {code:?} runs past KEYS or ARGV"));
        };
        walked.push(Walked {
            code,
            lock: op_keys[0].clone(),
            fence: op_keys.get(1).cloned(),
            args: op_args.to_vec(),
        });
        k += key_count;
        a += 1 + arg_count;
    }
    if k != keys.len() {
        return Err(format!("{} keys left unread", keys.len() - k));
    }
    Ok(walked)
}

/// What the script must see for one operation.
fn expected_walk(keys: &KeyNames, token: &str, command: &Command, dialect: Dialect) -> Walked {
    let ms = |ttl: &Duration| {
        u64::try_from(ttl.as_millis())
            .unwrap_or(u64::MAX)
            .to_string()
    };
    let (code, fence, args) = match command {
        Command::Acquire { ttl, fencing, .. } => (
            crate::scripts::op::acquire(*fencing, !dialect.set_nx_get),
            (*fencing != Fencing::None).then(|| keys.fence_key(*fencing).as_bytes().to_vec()),
            vec![token.to_owned(), ms(ttl)],
        ),
        Command::Renew { ttl, .. } => ("r", None, vec![token.to_owned(), ms(ttl)]),
        Command::Release if dialect.quiet_release => ("q", None, vec![token.to_owned()]),
        Command::Release => ("d", None, vec![token.to_owned()]),
    };
    Walked {
        code: code.to_owned(),
        lock: keys.lock.as_bytes().to_vec(),
        fence,
        args: args.into_iter().map(String::into_bytes).collect(),
    }
}

fn ttl() -> BoxedStrategy<Duration> {
    prop_oneof![
        (1_u64..120_000).prop_map(Duration::from_millis),
        (any::<u64>(), 0_u32..1_000_000_000).prop_map(|(secs, nanos)| Duration::new(secs, nanos)),
        Just(Duration::ZERO),
        Just(Duration::MAX),
    ]
    .boxed()
}

fn command() -> BoxedStrategy<Command> {
    let fencing = select(vec![Fencing::None, Fencing::Counter, Fencing::TimeMixed]);
    let wait = prop::option::of((any::<u32>(), ttl()));
    let aof = prop::option::of((0..=1_u32, any::<u32>(), ttl())).prop_map(|aof| {
        aof.map(|(local, replicas, timeout)| crate::WaitAof {
            local,
            replicas,
            timeout,
        })
    });
    prop_oneof![
        (ttl(), fencing, wait.clone(), aof.clone()).prop_map(
            |(ttl, fencing, wait_replicas, wait_aof)| Command::Acquire {
                ttl,
                fencing,
                wait_replicas,
                wait_aof,
            }
        ),
        (ttl(), wait, aof).prop_map(|(ttl, wait_replicas, wait_aof)| Command::Renew {
            ttl,
            wait_replicas,
            wait_aof
        }),
        Just(Command::Release),
    ]
    .boxed()
}

/// A lock's names, token and command.
fn operation() -> BoxedStrategy<(KeyNames, String, Command)> {
    let name = prop_oneof![
        "[a-z:0-9]{0,12}",
        select(vec!["{", "}", "{}", "a{b}c", ":", " "]).prop_map(str::to_owned),
        any::<String>(),
    ];
    (name.clone(), name, text(), command())
        .prop_map(|(namespace, key, token, command)| {
            (KeyNames::new(&namespace, &key), token, command)
        })
        .boxed()
}

proptest! {
    #![proptest_config(config(CASES))]

    /// A batch's `KEYS`/`ARGV`, walked as the script walks them, give back
    /// the operations in order, each with its own keys and arguments.
    #[test]
    fn batches_decode_back_into_their_operations(
        ops in vec(operation(), 0..8),
        set_nx_get in any::<bool>(),
        set_ifeq in any::<bool>(),
        quiet_release in any::<bool>(),
    ) {
        let dialect = Dialect {
            set_nx_get,
            set_ifeq,
            quiet_release,
            lacks_waitaof: false,
            delifeq: false,
            delex_ifeq: false,
        };
        let batch: Vec<BatchOp<'_>> = ops
            .iter()
            .map(|(keys, token, command)| BatchOp { keys, token, command })
            .collect();
        let walked = walk(&wire::encode_batch(&batch, dialect));
        let expected: Vec<Walked> = ops
            .iter()
            .map(|(keys, token, command)| expected_walk(keys, token, command, dialect))
            .collect();
        prop_assert_eq!(walked, Ok(expected));
    }

    /// A single command goes out as `SET NX PX GET` exactly when it is an
    /// unfenced acquire on Redis 7+, as `SET … IFEQ` exactly when it is a
    /// renewal on Valkey 8.1+, else as one operation of the script; a
    /// `WAIT` follows whenever an acquire or a renewal asks for one.
    #[test]
    fn single_commands_encode_as_planned(
        (keys, token, command) in operation(),
        set_nx_get in any::<bool>(),
        set_ifeq in any::<bool>(),
        quiet_release in any::<bool>(),
    ) {
        let dialect = Dialect {
            set_nx_get,
            set_ifeq,
            quiet_release,
            lacks_waitaof: false,
            delifeq: false,
            delex_ifeq: false,
        };
        let encoded = wire::encode(&keys, &token, &command, dialect);
        let plain = matches!(command, Command::Acquire { fencing: Fencing::None, .. })
            && set_nx_get;
        if plain {
            prop_assert_eq!(encoded.plan, Plan::SetNxGet);
            let Command::Acquire { ttl, .. } = &command else { unreachable!("plain is an acquire") };
            let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).to_string();
            let expected: Vec<&[u8]> = vec![
                b"SET", keys.lock.as_bytes(), token.as_bytes(), b"NX", b"PX", ms.as_bytes(), b"GET",
            ];
            prop_assert_eq!(args_of(&encoded.call), expected);
        } else if let (Command::Renew { ttl, .. }, true) = (&command, set_ifeq) {
            prop_assert_eq!(encoded.plan, Plan::SetIfEq);
            let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).to_string();
            let expected: Vec<&[u8]> = vec![
                b"SET", keys.lock.as_bytes(), token.as_bytes(), b"IFEQ", token.as_bytes(),
                b"PX", ms.as_bytes(),
            ];
            prop_assert_eq!(args_of(&encoded.call), expected);
        } else {
            prop_assert_eq!(encoded.plan, Plan::Script(OpKind::of(&command)));
            prop_assert_eq!(
                walk(&encoded.call),
                Ok(vec![expected_walk(&keys, &token, &command, dialect)])
            );
        }
        let (asked, asked_aof) = match &command {
            Command::Acquire { wait_replicas, wait_aof, .. }
            | Command::Renew { wait_replicas, wait_aof, .. } => (*wait_replicas, *wait_aof),
            _ => (None, None),
        };
        // WAIT (and WAITAOF) 0 would block forever: a zero timeout becomes 1 ms.
        let ms = |timeout: Duration| u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut expected = Vec::new();
        if let Some((replicas, timeout)) = asked {
            expected.push(vec![
                b"WAIT".to_vec(),
                replicas.to_string().into_bytes(),
                ms(timeout).to_string().into_bytes(),
            ]);
        }
        if let Some(aof) = asked_aof {
            expected.push(vec![
                b"WAITAOF".to_vec(),
                aof.local.to_string().into_bytes(),
                aof.replicas.to_string().into_bytes(),
                ms(aof.timeout).to_string().into_bytes(),
            ]);
        }
        let sent: Vec<Vec<Vec<u8>>> = encoded.waits.cmds().iter().map(args_of).collect();
        prop_assert_eq!(sent, expected);
        // The owner-checked refresh after a `SET NX GET` found our key.
        if let Command::Acquire { ttl, .. } = command {
            let refresh = wire::encode_own_refresh(&keys, &token, ttl);
            let renew = Command::Renew {
                ttl,
                wait_replicas: None,
                wait_aof: None,
            };
            prop_assert_eq!(
                walk(&refresh),
                Ok(vec![expected_walk(&keys, &token, &renew, Dialect::default())])
            );
        }
    }
}
