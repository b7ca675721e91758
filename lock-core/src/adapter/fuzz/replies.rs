//! The lock's reply decoders (`wire`) against a specification written
//! here, and the classification of every redis-rs error.

use std::{io, time::Duration};

use proptest::{collection::vec, prelude::*, sample::select};
use redis::{ErrorKind, RedisError, ServerErrorKind, Value};

use super::{CASES, config, strategies::*};
use crate::{
    Failure, Reply,
    adapter::{
        cluster::{Redirect, SLOTS, SlotMap},
        connect::node::Dialect,
        wire::codec::{self as wire, OpKind, SetNxGet},
    },
};

/// What one operation's entry of a script reply must decode to.
fn spec_op(kind: OpKind, value: &Value) -> Reply {
    if let Value::ServerError(error) = value {
        return Reply::Failed(wire::failure_of_code(error.code(), error.details()));
    }
    let protocol = Reply::Failed(Failure::Protocol);
    match (kind, value) {
        (OpKind::Acquire, Value::Int(fence)) if *fence >= 0 => Reply::Granted {
            fence: u64::try_from(*fence).unwrap_or_default(),
            replicas: None,
            aof: None,
        },
        (OpKind::Acquire, Value::Int(held)) => Reply::Contended {
            // -2 - pttl: -1 is a key without ttl.
            pttl: (*held <= -2).then(|| Duration::from_millis((-2 - *held).unsigned_abs())),
        },
        (OpKind::Renew, Value::Int(1)) => Reply::Renewed {
            replicas: None,
            aof: None,
        },
        (OpKind::Release, Value::Int(1)) => Reply::Released,
        (OpKind::Renew | OpKind::Release, Value::Int(0)) => Reply::NotOwner,
        _ => protocol,
    }
}

/// The code-to-failure table of `docs/operations.md`'s error section.
fn spec_code(code: &str) -> Option<Failure> {
    Some(match code {
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
        _ => return None,
    })
}

/// How an error was made, which says how it must classify.
#[derive(Debug, Clone)]
enum Expect {
    Timeout,
    Connection,
    /// An error reply: classified by its code and detail, never as an
    /// unknown outcome.
    ByCode(String, Option<String>),
    /// Not an answer from the server's command: the outcome is unknown.
    Unknown,
}

/// redis-rs errors, made every public way, with how each must classify.
fn redis_error() -> BoxedStrategy<(RedisError, Expect)> {
    let io_kind = select(vec![
        io::ErrorKind::TimedOut,
        io::ErrorKind::WouldBlock,
        io::ErrorKind::ConnectionReset,
        io::ErrorKind::ConnectionRefused,
        io::ErrorKind::ConnectionAborted,
        io::ErrorKind::BrokenPipe,
        io::ErrorKind::UnexpectedEof,
        io::ErrorKind::NotConnected,
        io::ErrorKind::NotFound,
        io::ErrorKind::PermissionDenied,
        io::ErrorKind::Unsupported,
        io::ErrorKind::InvalidData,
        io::ErrorKind::Other,
    ]);
    let io = io_kind.prop_map(|kind| {
        let expect = if matches!(kind, io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock) {
            Expect::Timeout
        } else {
            Expect::Connection
        };
        (RedisError::from(io::Error::new(kind, "fuzz")), expect)
    });
    let reply = server_error().prop_map(|value| {
        let Value::ServerError(error) = value else {
            unreachable!("server_error() makes only error replies")
        };
        let expect = Expect::ByCode(error.code().to_owned(), error.details().map(str::to_owned));
        (RedisError::from(error), expect)
    });
    let extension = (error_code(), error_detail()).prop_map(|(code, detail)| {
        let expect = Expect::ByCode(code.clone(), detail.clone());
        (redis::make_extension_error(code, detail), expect)
    });
    let server_kind = select(vec![
        (ServerErrorKind::ResponseError, "ERR"),
        (ServerErrorKind::ExecAbort, "EXECABORT"),
        (ServerErrorKind::BusyLoading, "LOADING"),
        (ServerErrorKind::NoScript, "NOSCRIPT"),
        (ServerErrorKind::Moved, "MOVED"),
        (ServerErrorKind::Ask, "ASK"),
        (ServerErrorKind::TryAgain, "TRYAGAIN"),
        (ServerErrorKind::ClusterDown, "CLUSTERDOWN"),
        (ServerErrorKind::CrossSlot, "CROSSSLOT"),
        (ServerErrorKind::MasterDown, "MASTERDOWN"),
        (ServerErrorKind::ReadOnly, "READONLY"),
        (ServerErrorKind::NotBusy, "NOTBUSY"),
        (ServerErrorKind::NoSub, "NOSUB"),
        (ServerErrorKind::NoPerm, "NOPERM"),
    ]);
    let general_server = (server_kind, error_detail()).prop_map(|((kind, code), detail)| {
        let expect = Expect::ByCode(code.to_owned(), detail.clone());
        let error = match detail {
            Some(detail) => RedisError::from((ErrorKind::Server(kind), "fuzz", detail)),
            None => RedisError::from((ErrorKind::Server(kind), "fuzz")),
        };
        (error, expect)
    });
    let client_kind = select(vec![
        (ErrorKind::Io, Expect::Connection),
        (ErrorKind::Parse, Expect::Unknown),
        (ErrorKind::AuthenticationFailed, Expect::Unknown),
        (ErrorKind::UnexpectedReturnType, Expect::Unknown),
        (ErrorKind::InvalidClientConfig, Expect::Unknown),
        (ErrorKind::Client, Expect::Unknown),
        (ErrorKind::Extension, Expect::Unknown),
        (ErrorKind::ClusterConnectionNotFound, Expect::Unknown),
        (ErrorKind::RESP3NotSupported, Expect::Unknown),
    ]);
    let general_client =
        (client_kind, prop::option::of("[^\r\n]{0,20}")).prop_map(|((kind, expect), detail)| {
            let error = match detail {
                Some(detail) => RedisError::from((kind, "fuzz", detail)),
                None => RedisError::from((kind, "fuzz")),
            };
            (error, expect)
        });
    let unparsable = resp_bytes().prop_map(|bytes| {
        let error = redis::parse_redis_value(&bytes).err().unwrap_or_else(|| {
            // Spoil what parsed: no RESP type starts with '?'.
            let spoiled = [b"?".as_slice(), &bytes].concat();
            redis::parse_redis_value(&spoiled).expect_err("no RESP type starts with '?'")
        });
        (error, Expect::Unknown)
    });
    prop_oneof![
        io,
        reply,
        extension,
        general_server,
        general_client,
        unparsable
    ]
    .boxed()
}

proptest! {
    #![proptest_config(config(CASES))]

    /// Each operation's entry decodes exactly as specified: a grant only
    /// from `[1, <u64>]`, a contention only from `[0, <int>]`, a renewal or
    /// a release only from `1`; an error reply by its code; anything else
    /// is a protocol failure (outcome unknown).
    #[test]
    fn each_operation_decodes_as_specified(kind in op_kind(), value in prop_oneof![
        3 => op_kind().prop_flat_map(op_reply),
        1 => value(),
    ]) {
        let decoded = wire::decode_op(kind, &value);
        prop_assert_eq!(&decoded, &spec_op(kind, &value), "{:?} {:?}", kind, value);
        if let Reply::Failed(failure) = decoded {
            // An error reply says nothing ran; only a reply we could not
            // read leaves the outcome unknown.
            prop_assert_eq!(
                failure.outcome_unknown(),
                !matches!(value, Value::ServerError(_)),
            );
        }
    }

    /// A batch reply gives one reply per operation, always: its entries'
    /// own when it has exactly one per operation (or, for a single
    /// operation, the reply alone), else one failure for all.
    #[test]
    fn script_replies_give_one_reply_per_operation((kinds, value) in script_case()) {
        let replies = wire::decode_script(&value, &kinds);
        prop_assert_eq!(replies.len(), kinds.len());
        match &value {
            single if kinds.len() == 1 && !matches!(single, Value::Array(_)) => {
                prop_assert_eq!(&replies[0], &spec_op(kinds[0], single));
            }
            Value::Array(items) if items.len() == kinds.len() => {
                for ((reply, kind), item) in replies.iter().zip(&kinds).zip(items) {
                    prop_assert_eq!(reply, &spec_op(*kind, item));
                }
            }
            Value::ServerError(error) => {
                let failure = wire::failure_of_code(error.code(), error.details());
                prop_assert!(!failure.outcome_unknown());
                prop_assert!(replies.iter().all(|reply| *reply == Reply::Failed(failure)));
            }
            _ => prop_assert!(replies.iter().all(|r| *r == Reply::Failed(Failure::Protocol))),
        }
    }

    /// `SET NX PX GET`: granted only from nil, ours only from our token,
    /// contended only from another string; an error reply by its code.
    #[test]
    fn set_nx_get_decodes_as_specified(token in text(), value in prop_oneof![
        Just(Value::Nil),
        Just(Value::Okay),
        text().prop_map(Value::SimpleString),
        bytes().prop_map(Value::BulkString),
        server_error(),
        value(),
    ], ours in any::<bool>(), simple in any::<bool>()) {
        // Half the time, the holder is our own token.
        let value = match (ours, simple) {
            (true, true) => Value::SimpleString(token.clone()),
            (true, false) => bulk(&token),
            (false, _) => value,
        };
        let decoded = wire::decode_set_nx_get(&value, &token);
        let expected = match &value {
            Value::Nil => Ok(SetNxGet::Granted),
            Value::BulkString(holder) if holder.as_slice() == token.as_bytes() => {
                Ok(SetNxGet::AlreadyOurs)
            }
            Value::SimpleString(holder) if *holder == token => Ok(SetNxGet::AlreadyOurs),
            Value::BulkString(_) | Value::SimpleString(_) => Ok(SetNxGet::Contended),
            Value::ServerError(error) => {
                Err(wire::failure_of_code(error.code(), error.details()))
            }
            _ => Err(Failure::Protocol),
        };
        prop_assert_eq!(decoded, expected);
    }

    /// `WAIT` counts replicas only from a non-negative integer that fits.
    #[test]
    fn wait_decodes_as_specified(value in prop_oneof![int().prop_map(Value::Int), value()]) {
        let expected = match &value {
            Value::Int(acked) => u32::try_from(*acked).map_err(|_| Failure::Protocol),
            Value::ServerError(error) => {
                Err(wire::failure_of_code(error.code(), error.details()))
            }
            _ => Err(Failure::Protocol),
        };
        prop_assert_eq!(wire::decode_wait(&value), expected);
    }

    /// `WAIT`'s count lands on grants and renewals only; a failed `WAIT`
    /// counts as no replica; nothing else changes.
    #[test]
    fn replicas_land_on_grants_and_renewals(reply in any_reply(), wait in prop_oneof![
        any::<u32>().prop_map(Ok),
        failure().prop_map(Err),
    ]) {
        let acked = wait.unwrap_or(0);
        let expected = match reply.clone() {
            Reply::Granted { fence, .. } => Reply::Granted { fence, replicas: Some(acked) , aof: None },
            Reply::Renewed { .. } => Reply::Renewed { replicas: Some(acked) , aof: None },
            other => other,
        };
        prop_assert_eq!(wire::with_replicas(reply, wait), expected);
    }

    /// Every redis-rs error classifies by how it came about: an I/O error
    /// as a timeout or a broken connection, an error reply by its code
    /// (never as an unknown outcome), anything else as an unknown outcome.
    #[test]
    fn redis_errors_classify_by_origin((error, expect) in redis_error(), host in text()) {
        let failure = wire::failure_of(&error);
        match &expect {
            Expect::Timeout => prop_assert_eq!(failure, Failure::Timeout),
            Expect::Connection => prop_assert_eq!(failure, Failure::Connection),
            Expect::ByCode(code, detail) => {
                prop_assert_eq!(failure, wire::failure_of_code(code, detail.as_deref()));
                prop_assert!(!failure.outcome_unknown());
            }
            Expect::Unknown => prop_assert!(failure.outcome_unknown(), "{failure:?}"),
        }
        // The cluster's readers of the same errors.
        if let Some(redirect) = Redirect::from_error(&error, &host) {
            prop_assert!(redirect.slot < SLOTS);
            prop_assert!(matches!(error.code(), Some("MOVED" | "ASK")));
        }
        if SlotMap::shards_unsupported(&error) {
            prop_assert_eq!(error.code(), Some("ERR"));
        }
    }

    /// Any code and detail classify without panicking, never as an unknown
    /// outcome; the codes `docs/operations.md` names map to their own failure.
    #[test]
    fn error_codes_classify(code in prop_oneof![error_code(), text()], detail in prop_oneof![
        error_detail(),
        prop::option::of(text()),
    ]) {
        let failure = wire::failure_of_code(&code, detail.as_deref());
        prop_assert!(!failure.outcome_unknown());
        if let Some(expected) = spec_code(&code) {
            prop_assert_eq!(failure, expected);
        } else if !detail.as_deref().unwrap_or_default().chars().any(|c| c.is_ascii_uppercase()) {
            // Only an upper-case code word in the detail can classify it.
            prop_assert_eq!(failure, Failure::Other);
        }
    }

    /// Arbitrary `INFO` text never panics; a well-formed version line
    /// decides the dialect by its major version (the first such line).
    #[test]
    fn the_dialect_follows_the_first_version_line(
        junk in vec("[a-z_]{1,12}:[^\r\n]{0,12}", 0..4),
        major in prop_oneof![
            (0_u32..12).prop_map(|major| major.to_string()),
            "[0-9]{1,12}",
            select(vec!["", "x", "-1", "+7", "07"]).prop_map(str::to_owned),
        ],
        rest in "(\\.[0-9]{1,3}){0,2}",
        later in prop::option::of(0_u32..12),
        crlf in any::<bool>(),
        noise in any::<String>(),
    ) {
        let _ = Dialect::from_info(&noise);
        let newline = if crlf { "\r\n" } else { "\n" };
        let mut info = String::from("# Server");
        for line in junk.iter().filter(|line| !line.starts_with("redis_version:")) {
            info.push_str(newline);
            info.push_str(line);
        }
        info.push_str(&format!("{newline}redis_version:{major}{rest}{newline}"));
        if let Some(later) = later {
            info.push_str(&format!("redis_version:{later}.0.0{newline}"));
        }
        let expected = major.parse::<u32>().is_ok_and(|major| major >= 7);
        prop_assert_eq!(Dialect::from_info(&info).set_nx_get, expected, "{}", info);
    }
}
