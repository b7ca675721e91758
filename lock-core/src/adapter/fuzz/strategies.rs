//! Strategies for redis-rs values, errors and RESP bytes, shared by the
//! fuzz properties (here and in `check`).

use std::time::Duration;

use proptest::{collection::vec, prelude::*, sample::select};
use redis::{PushKind, Value, VerbatimFormat};

use crate::{
    Failure, Reply,
    adapter::{cluster::SLOTS, wire::codec::OpKind},
};

/// Texts that are numbers, almost numbers, or numbers out of range.
pub(crate) fn number_text() -> BoxedStrategy<String> {
    prop_oneof![
        any::<u64>().prop_map(|number| number.to_string()),
        any::<i64>().prop_map(|number| number.to_string()),
        (0_u64..100).prop_map(|number| number.to_string()),
        select(vec![
            "0",
            "-0",
            "+7",
            " 7",
            "7 ",
            "007",
            "",
            "1e3",
            "0x10",
            "1.5",
            "1.8e+15",
            "4294967295",
            "4294967296",
            "65535",
            "65536",
            "16383",
            "16384",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "340282366920938463463374607431768211456",
        ])
        .prop_map(str::to_owned),
        "[-+0-9 .e]{0,24}",
    ]
    .boxed()
}

/// Any text: numbers, words the readers look for, arbitrary Unicode.
pub(crate) fn text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => number_text(),
        2 => select(vec![
            "OK", "master", "slave", "sentinel", "online", "failed", "loading", "?",
            "slots", "nodes", "id", "port", "tls-port", "ip", "endpoint", "role",
            "health", "message", "+switch-master", "127.0.0.1", "::1", "[::1]:7000",
            "host:6379", ":6380", "redis_version:7.2.4", "MOVED 1 h:1", "ASK 16383 :7001",
        ])
        .prop_map(str::to_owned),
        2 => "\\PC{0,16}",
        1 => any::<String>(),
    ]
    .boxed()
}

/// Byte strings: any text, random bytes (mostly not UTF-8), and numbers
/// spoiled by an invalid byte.
pub(crate) fn bytes() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        3 => text().prop_map(String::into_bytes),
        2 => vec(any::<u8>(), 0..24),
        1 => number_text().prop_map(|number| {
            let mut bytes = number.into_bytes();
            bytes.push(0xff);
            bytes
        }),
    ]
    .boxed()
}

/// Integers, with the edges every conversion must handle.
pub(crate) fn int() -> BoxedStrategy<i64> {
    prop_oneof![
        any::<i64>(),
        -3_i64..20,
        select(vec![
            i64::MIN,
            i64::MAX,
            i64::from(u32::MAX),
            i64::from(u32::MAX) + 1,
            i64::from(u16::MAX) + 1,
            i64::from(SLOTS),
            i64::from(SLOTS) - 1,
        ]),
    ]
    .boxed()
}

/// Error codes: every one the lock classifies, others Redis sends, and
/// arbitrary words.
pub(crate) fn error_code() -> BoxedStrategy<String> {
    prop_oneof![
        3 => select(vec![
            "ERR", "READONLY", "LOADING", "BUSY", "NOSCRIPT", "WRONGTYPE", "NOREPLICAS",
            "MASTERDOWN", "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "CROSSSLOT", "EXECABORT",
            "NOTBUSY", "NOSUB", "NOPERM", "OOM", "NOAUTH", "WRONGPASS", "UNKILLABLE",
        ])
        .prop_map(str::to_owned),
        1 => "[A-Za-z0-9_]{1,12}",
    ]
    .boxed()
}

/// The rest of an error line: nothing, words the classifier looks for,
/// or any text without a line break.
pub(crate) fn error_detail() -> BoxedStrategy<Option<String>> {
    prop::option::of(prop_oneof![
        select(vec![
            "Error running script (call to f_0123): @user_script:1: WRONGTYPE Operation",
            "Error running script: READONLY You can't write against a read only replica.",
            "3999 127.0.0.1:6381",
            "12 :7001",
            "16384 h:1",
            "unknown subcommand 'shards'",
            "Unknown subcommand or wrong number of arguments for 'SHARDS'",
            "syntax error",
        ])
        .prop_map(str::to_owned),
        "[^\r\n]{0,40}",
    ])
    .boxed()
}

/// An error line as the server sends it, `CODE detail`.
pub(crate) fn error_line(code: &str, detail: Option<&str>) -> String {
    match detail {
        Some(detail) => format!("{code} {detail}"),
        None => code.to_owned(),
    }
}

/// `Value::ServerError`s, made the only public way: by parsing an error
/// reply (RESP2 `-...` or RESP3 blob error `!len ...`).
pub(crate) fn server_error() -> BoxedStrategy<Value> {
    (error_code(), error_detail(), any::<bool>())
        .prop_filter_map(
            "an error line that redis-rs parses as an error reply",
            |(code, detail, blob)| {
                let line = error_line(&code, detail.as_deref());
                let resp = if blob {
                    format!("!{}\r\n{line}\r\n", line.len())
                } else {
                    format!("-{line}\r\n")
                };
                match redis::parse_redis_value(resp.as_bytes()) {
                    Ok(error @ Value::ServerError(_)) => Some(error),
                    _ => None,
                }
            },
        )
        .boxed()
}

/// `Value::BigNumber`s, parsed from RESP3 (its payload type depends on a
/// redis-rs feature).
pub(crate) fn big_number() -> BoxedStrategy<Value> {
    "-?[0-9]{1,45}"
        .prop_filter_map("a big number redis-rs parses", |digits| {
            redis::parse_redis_value(format!("({digits}\r\n").as_bytes()).ok()
        })
        .boxed()
}

pub(crate) fn verbatim_format() -> BoxedStrategy<VerbatimFormat> {
    prop_oneof![
        Just(VerbatimFormat::Text),
        Just(VerbatimFormat::Markdown),
        "[a-z]{0,4}".prop_map(VerbatimFormat::Unknown),
    ]
    .boxed()
}

pub(crate) fn push_kind() -> BoxedStrategy<PushKind> {
    prop_oneof![
        Just(PushKind::Message),
        Just(PushKind::PMessage),
        Just(PushKind::SMessage),
        Just(PushKind::Subscribe),
        Just(PushKind::Unsubscribe),
        Just(PushKind::Invalidate),
        Just(PushKind::Disconnection),
        "[a-z]{0,8}".prop_map(PushKind::Other),
    ]
    .boxed()
}

/// Every variant that holds no other value.
pub(crate) fn leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        2 => Just(Value::Nil),
        1 => Just(Value::Okay),
        4 => int().prop_map(Value::Int),
        4 => bytes().prop_map(Value::BulkString),
        2 => text().prop_map(Value::SimpleString),
        1 => any::<f64>().prop_map(Value::Double),
        1 => any::<bool>().prop_map(Value::Boolean),
        1 => (verbatim_format(), text()).prop_map(|(format, text)| Value::VerbatimString {
            format,
            text
        }),
        1 => big_number(),
        3 => server_error(),
    ]
    .boxed()
}

/// Any value, nested up to four levels: arrays, sets, maps, attributes
/// and pushes of anything.
pub(crate) fn value() -> BoxedStrategy<Value> {
    leaf()
        .prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                3 => vec(inner.clone(), 0..6).prop_map(Value::Array),
                1 => vec(inner.clone(), 0..6).prop_map(Value::Set),
                1 => vec((inner.clone(), inner.clone()), 0..4).prop_map(Value::Map),
                1 => (inner.clone(), vec((inner.clone(), inner.clone()), 0..2)).prop_map(
                    |(data, attributes)| Value::Attribute {
                        data: Box::new(data),
                        attributes,
                    }
                ),
                1 => (push_kind(), vec(inner, 0..5))
                    .prop_map(|(kind, data)| Value::Push { kind, data }),
            ]
        })
        .boxed()
}

pub(crate) fn bulk(text: &str) -> Value {
    Value::BulkString(text.as_bytes().to_vec())
}

/// What could stand where a fence goes: number texts of every kind,
/// integers, and anything else.
pub(crate) fn fence_like() -> BoxedStrategy<Value> {
    prop_oneof![
        3 => number_text().prop_map(|text| bulk(&text)),
        1 => number_text().prop_map(Value::SimpleString),
        2 => int().prop_map(Value::Int),
        1 => bytes().prop_map(Value::BulkString),
        1 => value(),
    ]
    .boxed()
}

/// Near-valid answers to one operation of the lock script, and anything.
pub(crate) fn op_reply(kind: OpKind) -> BoxedStrategy<Value> {
    let flag = prop_oneof![
        3 => select(vec![0_i64, 1]).prop_map(Value::Int),
        1 => int().prop_map(Value::Int),
        1 => select(vec!["0", "1"]).prop_map(bulk),
        1 => any::<bool>().prop_map(Value::Boolean),
    ];
    let shaped = match kind {
        OpKind::Acquire => prop_oneof![
            4 => prop_oneof![
                select(vec![0_i64, 1, -1, -2, -3, 1_700_000_000_000_000]),
                int()
            ]
            .prop_map(Value::Int),
            1 => fence_like(),
            1 => vec(fence_like(), 0..3).prop_map(Value::Array),
        ]
        .boxed(),
        OpKind::Renew | OpKind::Release => flag.boxed(),
    };
    prop_oneof![4 => shaped, 1 => server_error(), 1 => value()].boxed()
}

pub(crate) fn op_kind() -> BoxedStrategy<OpKind> {
    select(vec![OpKind::Acquire, OpKind::Renew, OpKind::Release]).boxed()
}

/// A batch's kinds and an answer to it: one near-valid entry per
/// operation, an entry too many or too few, an error reply, or anything.
pub(crate) fn script_case() -> BoxedStrategy<(Vec<OpKind>, Value)> {
    vec(op_kind(), 0..6)
        .prop_flat_map(|kinds| {
            let entries: Vec<BoxedStrategy<Value>> = kinds.iter().map(|&k| op_reply(k)).collect();
            let exact = entries.prop_map(Value::Array).boxed();
            let off_by_one = vec(value(), kinds.len().saturating_sub(1)..=kinds.len() + 1)
                .prop_map(Value::Array);
            let reply = prop_oneof![
                6 => exact,
                1 => off_by_one,
                1 => server_error(),
                1 => value(),
            ];
            (Just(kinds), reply)
        })
        .boxed()
}

pub(crate) fn failure() -> BoxedStrategy<Failure> {
    select(vec![
        Failure::Timeout,
        Failure::Connection,
        Failure::Protocol,
        Failure::ReadOnly,
        Failure::Loading,
        Failure::Busy,
        Failure::NoScript,
        Failure::WrongType,
        Failure::NoReplicas,
        Failure::MasterDown,
        Failure::Moved,
        Failure::Ask,
        Failure::TryAgain,
        Failure::ClusterDown,
        Failure::CrossSlot,
        Failure::Other,
    ])
    .boxed()
}

pub(crate) fn any_reply() -> BoxedStrategy<Reply> {
    prop_oneof![
        (any::<u64>(), prop::option::of(any::<u32>())).prop_map(|(fence, replicas)| {
            Reply::Granted {
                fence,
                replicas,
                aof: None,
            }
        }),
        prop::option::of(any::<u64>()).prop_map(|pttl| Reply::Contended {
            pttl: pttl.map(Duration::from_millis)
        }),
        prop::option::of(any::<u32>()).prop_map(|replicas| Reply::Renewed {
            replicas,
            aof: None
        }),
        Just(Reply::Released),
        Just(Reply::NotOwner),
        failure().prop_map(Reply::Failed),
    ]
    .boxed()
}

/// Byte strings built from RESP pieces — headers with right, wrong,
/// negative and huge lengths, payloads, every RESP3 type, raw bytes — so
/// that they parse into nested values often, and fail to parse often.
pub(crate) fn resp_bytes() -> BoxedStrategy<Vec<u8>> {
    let piece = prop_oneof![
        4 => (select(vec!['*', '%', '~', '>', '|']), -2_i64..5)
            .prop_map(|(kind, length)| format!("{kind}{length}\r\n").into_bytes()),
        1 => (select(vec!['*', '%', '$', '!', '=']), select(vec![
            1_000_000_000_i64, i64::MAX, 1 << 40, 1 << 32,
        ]))
            .prop_map(|(kind, length)| format!("{kind}{length}\r\n").into_bytes()),
        4 => bytes().prop_map(|payload| {
            let mut frame = format!("${}\r\n", payload.len()).into_bytes();
            frame.extend(payload);
            frame.extend(b"\r\n");
            frame
        }),
        2 => (bytes(), -2_i64..3).prop_map(|(payload, off)| {
            // A bulk string whose length is off by a little.
            let length = i64::try_from(payload.len()).unwrap_or(i64::MAX).saturating_add(off);
            let mut frame = format!("${length}\r\n").into_bytes();
            frame.extend(payload);
            frame.extend(b"\r\n");
            frame
        }),
        3 => int().prop_map(|number| format!(":{number}\r\n").into_bytes()),
        2 => number_text().prop_map(|text| format!(":{text}\r\n").into_bytes()),
        2 => (error_code(), error_detail()).prop_map(|(code, detail)| {
            format!("-{}\r\n", error_line(&code, detail.as_deref())).into_bytes()
        }),
        1 => (error_code(), error_detail()).prop_map(|(code, detail)| {
            let line = error_line(&code, detail.as_deref());
            format!("!{}\r\n{line}\r\n", line.len()).into_bytes()
        }),
        2 => "[^\r\n]{0,12}".prop_map(|text| format!("+{text}\r\n").into_bytes()),
        1 => select(vec![
            "_\r\n", "#t\r\n", "#f\r\n", "#x\r\n", ",1.5\r\n", ",inf\r\n", ",nan\r\n",
            ",x\r\n", "(123456789012345678901234567890\r\n", "(x\r\n", "=8\r\ntxt:abcd\r\n",
            "=3\r\nab\r\n", "$-1\r\n", "*-1\r\n", "+OK\r\n", "\r\n", "",
        ])
        .prop_map(|text| text.as_bytes().to_vec()),
        1 => vec(any::<u8>(), 0..8),
    ];
    vec(piece, 1..10).prop_map(|pieces| pieces.concat()).boxed()
}
