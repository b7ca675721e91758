//! The simulated Redis takes whatever a connection sends it without
//! panicking: arbitrary bytes, well-framed commands with arbitrary
//! arguments to every command it knows, and lock.lua with arbitrary keys and
//! arguments. Every complete command gets at least one reply frame; bytes
//! that cannot be a command get a protocol error and the connection closes;
//! an unfinished frame waits for the rest.
//!
//! The pure parts (framing, dispatch, the keyspace, the native script) are
//! driven directly; one property writes the same inputs on a real simulated
//! TCP connection to a node host and checks what comes back.

use std::{
    cell::Cell,
    sync::{Arc, Mutex, Once},
    time::Duration,
};

use proptest::prelude::*;
use redis_protocol::resp2::types::OwnedFrame as Frame;
use sim::server::{
    NodeConfig, NodeHandle, PORT, cmd,
    db::{Db, NodeTime},
    frame::{Command, next_command, next_frame, to_bytes},
    scripts,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Every command name the node answers, and a few it does not.
const COMMANDS: &[&str] = &[
    "PING",
    "ECHO",
    "SELECT",
    "CLIENT",
    "READONLY",
    "ROLE",
    "INFO",
    "SCRIPT",
    "EVAL",
    "EVALSHA",
    "PUBLISH",
    "SUBSCRIBE",
    "UNSUBSCRIBE",
    "WAIT",
    "GET",
    "SET",
    "DEL",
    "EXISTS",
    "PEXPIRE",
    "EXPIRE",
    "PTTL",
    "TTL",
    "INCR",
    "LPUSH",
    "FLUSHALL",
    "FLUSHDB",
    "TIME",
    "REPLSYNC",
    "get",
    "NOSUCHCOMMAND",
    "",
];

/// Words the commands and the script give meaning to.
const WORDS: &[&str] = &[
    "NX",
    "XX",
    "GET",
    "PX",
    "EX",
    "LOAD",
    "EXISTS",
    "FLUSH",
    "server",
    "replication",
    "n",
    "N",
    "t",
    "T",
    "c",
    "C",
    "r",
    "d",
    "none",
    "counter",
    "time-mixed",
    "{k}",
    "{k}:fence",
    "{lock}:fence-counter",
    "list",
    "token",
];

/// Numbers at and around every edge a parser or an addition can trip on.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        prop::sample::select(vec![
            "0",
            "1",
            "-1",
            "2",
            "1000",
            "-1000",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "9223372036853",
            "+5",
            " 5",
            "5 ",
            "1e3",
            "0x10",
            "inf",
            "nan",
            "1.5",
        ])
        .prop_map(str::to_owned),
    ]
}

/// One argument: a word, a number, a key, or any bytes at all.
fn argument() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::sample::select(WORDS).prop_map(|w| w.as_bytes().to_vec()),
        number().prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..12),
        Just(scripts_sha()),
    ]
}

fn scripts_sha() -> Vec<u8> {
    lock_core::scripts::LOCK.sha1.as_bytes().to_vec()
}

/// A command: a known name (or not) and arbitrary arguments.
fn command() -> impl Strategy<Value = Vec<Vec<u8>>> {
    (
        prop::sample::select(COMMANDS),
        prop::collection::vec(argument(), 0..8),
    )
        .prop_map(|(name, mut args)| {
            args.insert(0, name.as_bytes().to_vec());
            args
        })
}

/// Any of the above: arbitrary, shaped, or a script call.
fn any_command() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop_oneof![1 => command(), 3 => shaped_command(), 1 => script_call()]
}

/// A call of lock.lua, by source or by SHA1, with a `numkeys` that may be
/// anything and operations whose codes, tokens, ttls and modes may be
/// anything.
fn script_call() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let operation = (
        prop::sample::select(vec!["n", "N", "t", "T", "c", "C", "r", "d", "x", ""]),
        prop::collection::vec(argument(), 0..4),
    )
        .prop_map(|(code, mut rest)| {
            rest.insert(0, code.as_bytes().to_vec());
            rest
        });
    (
        any::<bool>(),
        prop_oneof![(0usize..6).prop_map(|n| n.to_string()), number(),],
        prop::collection::vec(argument(), 0..6),
        prop::collection::vec(operation, 0..4),
    )
        .prop_map(|(by_source, numkeys, keys, operations)| {
            let mut call = if by_source {
                vec![
                    b"EVAL".to_vec(),
                    lock_core::scripts::LOCK.source.as_bytes().to_vec(),
                ]
            } else {
                vec![b"EVALSHA".to_vec(), scripts_sha()]
            };
            call.push(numkeys.into_bytes());
            call.extend(keys);
            call.extend(operations.into_iter().flatten());
            call
        })
}

fn bytes_of(text: &str) -> Vec<u8> {
    text.as_bytes().to_vec()
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::sample::select(vec!["{k}", "{k}:fence", "list", "counter", "k"]).prop_map(bytes_of),
        argument(),
    ]
}

/// `SET`'s options, in any order and number, with any amounts.
fn set_option() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop_oneof![
        prop::sample::select(vec!["NX", "XX", "GET", "nx", "get"]).prop_map(|o| vec![bytes_of(o)]),
        (prop::sample::select(vec!["PX", "EX", "px"]), number())
            .prop_map(|(unit, amount)| vec![bytes_of(unit), amount.into_bytes()]),
        argument().prop_map(|a| vec![a]),
    ]
}

/// A command shaped the way its name expects, so that the arguments reach
/// the code behind the first arity check: every option, every amount.
fn shaped_command() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let n = || number().prop_map(String::into_bytes);
    let keys = || prop::collection::vec(key(), 1..4);
    prop_oneof![
        key().prop_map(|k| vec![bytes_of("GET"), k]),
        (key(), argument(), prop::collection::vec(set_option(), 0..4)).prop_map(|(k, v, o)| {
            let mut c = vec![bytes_of("SET"), k, v];
            c.extend(o.into_iter().flatten());
            c
        }),
        keys().prop_map(|k| [vec![bytes_of("DEL")], k].concat()),
        keys().prop_map(|k| [vec![bytes_of("EXISTS")], k].concat()),
        (prop::sample::select(vec!["PEXPIRE", "EXPIRE"]), key(), n()).prop_map(|(c, k, a)| vec![
            bytes_of(c),
            k,
            a
        ]),
        (prop::sample::select(vec!["PTTL", "TTL", "INCR"]), key())
            .prop_map(|(c, k)| vec![bytes_of(c), k]),
        (key(), prop::collection::vec(argument(), 1..3)).prop_map(|(k, v)| [
            vec![bytes_of("LPUSH"), k],
            v
        ]
        .concat()),
        (n(), n()).prop_map(|(r, t)| vec![bytes_of("WAIT"), r, t]),
        prop_oneof![
            Just(vec![
                bytes_of("SCRIPT"),
                bytes_of("LOAD"),
                bytes_of(lock_core::scripts::LOCK.source)
            ]),
            argument().prop_map(|src| vec![bytes_of("SCRIPT"), bytes_of("LOAD"), src]),
            prop::collection::vec(argument(), 0..3).prop_map(|s| [
                vec![bytes_of("SCRIPT"), bytes_of("EXISTS")],
                s
            ]
            .concat()),
            Just(vec![bytes_of("SCRIPT"), bytes_of("FLUSH")]),
        ],
        (argument(), argument()).prop_map(|(c, m)| vec![bytes_of("PUBLISH"), c, m]),
        prop::collection::vec(argument(), 0..3)
            .prop_map(|c| [vec![bytes_of("SUBSCRIBE")], c].concat()),
        prop::collection::vec(argument(), 0..3)
            .prop_map(|c| [vec![bytes_of("UNSUBSCRIBE")], c].concat()),
        prop::option::of(argument()).prop_map(|s| [
            vec![bytes_of("INFO")],
            s.into_iter().collect()
        ]
        .concat()),
    ]
}

/// A command as a client sends it: an array of bulk strings.
fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    to_bytes(&Frame::Array(
        args.iter().map(|a| Frame::BulkString(a.clone())).collect(),
    ))
}

/// Bytes that look like RESP often enough to reach past the first check.
fn resp_soup() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        prop::sample::select(vec![
            "*",
            "$",
            "+",
            "-",
            ":",
            "\r\n",
            "\r",
            "\n",
            "0",
            "1",
            "2",
            "3",
            "-1",
            "-2",
            "10",
            "99999999999999999999",
            "PING",
            "GET",
            "k",
            " ",
        ])
        .prop_map(|t| t.as_bytes().to_vec()),
        any::<u8>().prop_map(|b| vec![b]),
    ];
    prop::collection::vec(token, 0..64).prop_map(|tokens| tokens.concat())
}

/// What a connection may carry: noise, RESP-like noise, commands, scripts,
/// and commands with their last bytes cut off.
fn input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        resp_soup(),
        prop::collection::vec(any_command(), 1..6)
            .prop_map(|commands| commands.iter().flat_map(|c| encode(c)).collect()),
        (command(), any::<prop::sample::Index>()).prop_map(|(command, cut)| {
            let bytes = encode(&command);
            let keep = cut.index(bytes.len());
            bytes[..keep].to_vec()
        }),
    ]
}

/// What the framing makes of `bytes` fed in one go: the commands in order,
/// then whether it stopped at a protocol error (`Some`) or for want of
/// bytes (`None`).
fn commands_of(chunks: &[&[u8]]) -> (Vec<Command>, Option<String>) {
    let mut buffer = Vec::new();
    let mut commands = Vec::new();
    for chunk in chunks {
        buffer.extend_from_slice(chunk);
        loop {
            let before = buffer.len();
            match next_command(&mut buffer) {
                Ok(Some(command)) => {
                    assert!(buffer.len() < before, "a command consumed no bytes");
                    commands.push(command);
                }
                Ok(None) => {
                    assert_eq!(buffer.len(), before, "waiting consumed bytes");
                    break;
                }
                Err(problem) => return (commands, Some(problem)),
            }
        }
    }
    (commands, None)
}

fn node(replica: bool) -> NodeHandle {
    NodeHandle::new(NodeConfig {
        index: 0,
        replica_of: replica.then(|| "redis-1".to_owned()),
        replication_lag: None,
        seed: 7,
        flavour: sim::server::Flavour::default(),
        persistence: sim::config::Persistence::None,
    })
}

/// Runs `commands` through `dispatch` on one node, on a paused runtime so
/// that a `WAIT` with a timeout passes at once. Returns each command's
/// replies, `None` for a command still blocked after an hour of virtual
/// time (only `WAIT` may block, as Redis's does).
fn dispatch_all(node: &NodeHandle, commands: &[Vec<Vec<u8>>]) -> Vec<Option<Vec<Frame>>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        // A runtime with only the time driver needs no OS resources.
        .expect("a current-thread runtime");
    let (push, _pushes) = tokio::sync::mpsc::unbounded_channel();
    runtime.block_on(async {
        let mut replies = Vec::new();
        for args in commands {
            let reply = tokio::time::timeout(
                Duration::from_secs(3_600),
                cmd::dispatch(node, 1, &push, args),
            )
            .await
            .ok();
            replies.push(reply);
        }
        replies
    })
}

/// A reply must be something a client can read: it encodes, and decodes
/// back to itself.
fn readable(frame: &Frame) -> bool {
    let mut bytes = to_bytes(frame);
    !bytes.is_empty() && next_frame(&mut bytes) == Ok(Some(frame.clone())) && bytes.is_empty()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, failure_persistence: None, ..ProptestConfig::default() })]

    /// Framing never panics, never loops, and reads the same commands
    /// whether the bytes come in one read or two.
    #[test]
    fn framing_does_not_depend_on_how_the_bytes_arrive(
        bytes in input(),
        cut in any::<prop::sample::Index>(),
    ) {
        let cut = cut.index(bytes.len() + 1);
        let whole = commands_of(&[&bytes]);
        let split = commands_of(&[&bytes[..cut], &bytes[cut..]]);
        prop_assert_eq!(whole, split);
    }

    /// Every command, with any arguments, on a primary or a replica,
    /// answers with at least one readable frame (or, for `WAIT` alone,
    /// blocks as Redis does).
    #[test]
    fn every_command_answers_with_a_frame(
        commands in prop::collection::vec(any_command(), 1..24),
        replica in prop::bool::weighted(0.25),
        busy in prop::bool::weighted(0.1),
    ) {
        let node = node(replica);
        if busy {
            node.busy_until(Duration::from_secs(1));
        }
        let commands: Vec<Vec<Vec<u8>>> = commands
            .into_iter()
            .filter(|args| !args[0].eq_ignore_ascii_case(b"REPLSYNC"))
            .collect();
        for (args, replies) in commands.iter().zip(dispatch_all(&node, &commands)) {
            let name = String::from_utf8_lossy(&args[0]).to_uppercase();
            match replies {
                None => prop_assert_eq!(name.as_str(), "WAIT", "{:?} blocked", args),
                Some(replies) => {
                    prop_assert!(!replies.is_empty(), "{:?} answered nothing", args);
                    for reply in &replies {
                        prop_assert!(readable(reply), "{:?} answered {:?}", args, reply);
                    }
                }
            }
        }
    }

    /// The lock script (run in the embedded Lua) with any keys, arguments and clock reading
    /// returns a readable reply, on a primary or a replica.
    #[test]
    fn the_lock_script_takes_any_keys_and_arguments(
        calls in prop::collection::vec(script_call(), 1..12),
        now_ms in prop_oneof![0i64..4_000_000_000_000, any::<i64>().prop_map(|n| n / 1_000)],
        writable in any::<bool>(),
    ) {
        let mut db = Db::default();
        cmd::data::execute(&mut db, &[b"LPUSH".to_vec(), b"list".to_vec(), b"x".to_vec()], NodeTime { ms: 0, us: 0 });
        let now = NodeTime { ms: now_ms, us: now_ms.saturating_mul(1_000) };
        for call in calls {
            // EVAL|EVALSHA, script, numkeys, then keys and arguments.
            let numkeys = std::str::from_utf8(&call[2]).ok().and_then(|n| n.parse::<usize>().ok());
            let Some(numkeys) = numkeys.filter(|n| *n <= call.len() - 3) else { continue };
            let (keys, args) = call[3..].split_at(numkeys);
            let (reply, _) = scripts::run(
                lock_core::scripts::LOCK, &mut db, now, writable, keys, args, Box::new(|_, _| 0),
            );
            prop_assert!(readable(&reply), "{:?}", reply);
        }
    }
}

thread_local! {
    /// Set by the panic hook on the thread that panicked: a node's
    /// connection task runs on the test's thread inside turmoil, and tokio
    /// would otherwise swallow its panic.
    static PANICKED: Cell<bool> = const { Cell::new(false) };
}

fn watch_for_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICKED.with(|flag| flag.set(true));
            previous(info);
        }));
    });
}

/// What the fuzzing client saw: every byte the node sent back, whether the
/// node closed the connection, whether a fresh connection still got `PONG`,
/// and the client's own error, if one ended it early.
#[derive(Debug, Default)]
struct Seen {
    received: Vec<u8>,
    closed: bool,
    pong: bool,
    error: Option<String>,
}

/// Writes `bytes` (in two writes, split at `cut`) to a node host over
/// turmoil's TCP, its network drawn from `seed`, and records what comes
/// back.
fn over_tcp(bytes: Vec<u8>, cut: usize, seed: u64) -> Seen {
    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .simulation_duration(Duration::from_secs(60))
        .build();
    let node = node(false);
    sim.host("redis-0", move || sim::server::serve(node.clone()));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let record = Arc::clone(&seen);
    sim.client("fuzzer", async move {
        if let Err(error) = fuzz(&bytes, cut, &record).await {
            lock(&record).error = Some(error.to_string());
        }
        Ok(())
    });
    // The client never fails; what went wrong is in `Seen::error`.
    let _ = sim.run();
    std::mem::take(&mut *lock(&seen))
}

fn lock(seen: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The fuzzing client: the bytes, what comes back, then a fresh `PING`.
async fn fuzz(bytes: &[u8], cut: usize, record: &Mutex<Seen>) -> std::io::Result<()> {
    let mut stream = turmoil::net::TcpStream::connect(("redis-0", PORT)).await?;
    stream.write_all(&bytes[..cut]).await?;
    tokio::time::sleep(Duration::from_millis(5)).await;
    if let Err(error) = stream.write_all(&bytes[cut..]).await {
        // The node closed the connection on the first part: the second
        // meets a closed pipe, as it would on a real network.
        lock(record).error = Some(error.to_string());
    }
    let mut chunk = [0u8; 4096];
    let closed = loop {
        // Quiet for a second of sim time: the node has said all it will.
        match tokio::time::timeout(Duration::from_secs(1), stream.read(&mut chunk)).await {
            Err(_) => break false,
            Ok(Ok(0) | Err(_)) => break true,
            Ok(Ok(read)) => lock(record).received.extend_from_slice(&chunk[..read]),
        }
    };
    lock(record).closed = closed;
    let mut fresh = turmoil::net::TcpStream::connect(("redis-0", PORT)).await?;
    fresh.write_all(b"*1\r\n$4\r\nPING\r\n").await?;
    let mut pong = [0u8; 7];
    fresh.read_exact(&mut pong).await?;
    lock(record).pong = &pong == b"+PONG\r\n";
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// End to end on a simulated TCP connection: the node survives, answers
    /// every complete command, and closes exactly when the bytes cannot be
    /// a command.
    #[test]
    fn a_node_survives_anything_on_a_connection(
        bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..256),
            resp_soup(),
            prop::collection::vec(prop_oneof![command(), shaped_command()], 1..4)
                .prop_map(|commands| commands.iter().flat_map(|c| encode(c)).collect()),
            // A replication link opened, then anything on it.
            input().prop_map(|rest| [encode(&[b"REPLSYNC".to_vec()]), rest].concat()),
        ],
        cut in any::<prop::sample::Index>(),
        seed in any::<u64>(),
    ) {
        watch_for_panics();
        PANICKED.with(|flag| flag.set(false));
        let (commands, problem) = commands_of(&[&bytes]);
        // WAIT blocks and REPLSYNC turns the connection into a replication
        // link: after either, the node need only survive.
        let special = commands.iter().any(|c| {
            c.first().is_some_and(|n| n.eq_ignore_ascii_case(b"WAIT") || n.eq_ignore_ascii_case(b"REPLSYNC"))
        });
        // Bytes a node already closed on would meet a reset, which may
        // discard its error reply, as on a real network: send those in one
        // write.
        let cut = if problem.is_some() { bytes.len() } else { cut.index(bytes.len() + 1) };
        let seen = over_tcp(bytes, cut, seed);
        prop_assert!(!PANICKED.with(Cell::get), "the node panicked");
        prop_assert!(seen.pong, "a fresh connection got no PONG: {:?}", seen);
        if special {
            return Ok(());
        }
        prop_assert_eq!(&seen.error, &None, "{:?}", seen);
        let mut received = seen.received.clone();
        let mut replies = Vec::new();
        while let Ok(Some(frame)) = next_frame(&mut received) {
            replies.push(frame);
        }
        prop_assert!(received.is_empty(), "a partial reply: {:?}", seen);
        prop_assert_eq!(seen.closed, problem.is_some(), "{:?}", seen);
        let expected = commands.len() + usize::from(problem.is_some());
        prop_assert!(replies.len() >= expected, "{} replies for {} commands: {:?}", replies.len(), commands.len(), replies);
        if let Some(problem) = problem {
            prop_assert_eq!(replies.last(), Some(&Frame::Error(problem)));
        }
    }
}

/// A request nested a hundred thousand arrays deep is refused at the first
/// nested array, as Redis refuses it, instead of recursing into it.
#[test]
fn a_deeply_nested_request_is_a_protocol_error() {
    let mut bytes = b"*1\r\n".repeat(100_000);
    bytes.extend_from_slice(b"$4\r\nPING\r\n");
    let error = next_command(&mut bytes).expect_err("nested arrays are not a command");
    assert!(error.starts_with("ERR Protocol error"), "{error}");
}

/// The same, on a connection, and on a replication link (where the node
/// reads acknowledgements): the node closes it and lives on.
#[test]
fn a_node_survives_a_deeply_nested_request() {
    watch_for_panics();
    let mut nested = b"*1\r\n".repeat(100_000);
    nested.extend_from_slice(b"$4\r\nPING\r\n");
    for bytes in [
        nested.clone(),
        [encode(&[b"REPLSYNC".to_vec()]), nested].concat(),
    ] {
        PANICKED.with(|flag| flag.set(false));
        let seen = over_tcp(bytes.clone(), bytes.len(), 1);
        assert!(!PANICKED.with(Cell::get), "the node panicked");
        assert!(seen.pong && seen.closed, "{:?}", (seen.pong, seen.closed));
    }
}
