//! The simulated Redis Cluster answers like a real one: the same steps go
//! to a real 3-primary cluster (with a replica each) and to the simulated
//! nodes, and the replies are compared: routing (`MOVED` from primaries
//! and replicas, `CROSSSLOT`), a slot migration key by key (`ASK`,
//! `TRYAGAIN`, `ASKING` lasting one command, the target's `MOVED` without
//! it), a script cache per node (`NOSCRIPT` on the new owner), a failover
//! (the demoted primary answers `MOVED`), and the `CLUSTER SHARDS` and
//! `CLUSTER SLOTS` maps. Both sides announce the simulator's host names;
//! ports, ids, IPs, offsets and server-time fences are normalised.

use crate::common::real_cluster;

use std::{cell::RefCell, rc::Rc, time::Duration};

use lock_core::{internal::cluster::slot_of, scripts};
use real_cluster::RealCluster;
use redis::Value;
use sim::{client::redis_host, server::cluster::ClusterHandle};

/// The lock key's slot, 3196, in shard 0 (slots 0-5460).
const LOCK: &str = "{lock:resource}";
const FENCE: &str = "{lock:resource}:fence";
const SLOT: u16 = 3196;

#[derive(Debug, Clone)]
enum Step {
    /// A command on node `node`, preceded by `ASKING` when `asking`.
    Cmd {
        node: usize,
        args: Vec<String>,
        asking: bool,
    },
    /// Lets replication catch up.
    Sleep(u64),
    BeginMigration {
        from: usize,
        to: usize,
    },
    Migrate {
        key: String,
        from: usize,
        to: usize,
    },
    FinishMigration {
        to: usize,
    },
    /// A graceful failover: `replica` takes over from `primary`.
    FailOver {
        primary: usize,
        replica: usize,
    },
}

fn on(node: usize, parts: &[&str]) -> Step {
    Step::Cmd {
        node,
        args: parts.iter().map(|p| (*p).to_owned()).collect(),
        asking: false,
    }
}

fn asking(node: usize, parts: &[&str]) -> Step {
    Step::Cmd {
        node,
        args: parts.iter().map(|p| (*p).to_owned()).collect(),
        asking: true,
    }
}

fn script(keys: &[&str], args: &[&str]) -> Vec<String> {
    let mut parts = vec![
        "EVALSHA".to_owned(),
        scripts::LOCK.sha1.to_owned(),
        keys.len().to_string(),
    ];
    parts.extend(keys.iter().map(|k| (*k).to_owned()));
    parts.extend(args.iter().map(|a| (*a).to_owned()));
    parts
}

fn script_on(node: usize, keys: &[&str], args: &[&str], ask: bool) -> Step {
    Step::Cmd {
        node,
        args: script(keys, args),
        asking: ask,
    }
}

/// A key of the form `{kN}` whose slot `wanted` accepts.
fn key_where(wanted: impl Fn(u16) -> bool) -> String {
    (0..)
        .map(|n| format!("{{k{n}}}"))
        .find(|key| wanted(slot_of(key)))
        .expect("some key")
}

/// Every step, in order: routing, a migration of the lock's slot from
/// redis-0 to redis-2, then a failover of redis-2's shard.
fn steps() -> Vec<Step> {
    let load = scripts::LOCK.source;
    let shard1 = key_where(|slot| (5461..=10922).contains(&slot));
    let shard1 = shard1.as_str();
    vec![
        // Routing.
        on(0, &["SCRIPT", "LOAD", load]),
        script_on(0, &[LOCK, FENCE], &["t", "tok", "10000"], false),
        on(0, &["CLUSTER", "KEYSLOT", LOCK]),
        on(2, &["GET", LOCK]),
        on(1, &["GET", LOCK]),
        on(2, &["SET", LOCK, "x"]),
        on(0, &["DEL", LOCK, "other"]),
        on(0, &["MGET", LOCK, shard1]),
        script_on(0, &[LOCK, "{other}:fence"], &["t", "t", "1000"], false),
        // A redirection comes before a missing script ...
        script_on(2, &[LOCK], &["r", "tok", "1000"], false),
        // ... and the script cache is per node.
        script_on(2, &[shard1], &["r", "tok", "1000"], false),
        on(2, &["GET"]),
        on(0, &["SELECT", "1"]),
        on(0, &["SELECT", "0"]),
        asking(0, &["GET", shard1]),
        on(0, &["PUBLISH", "channel", "message"]),
        Step::Sleep(200),
        on(1, &["READONLY"]),
        on(1, &["GET", LOCK]),
        on(1, &["SET", LOCK, "x"]),
        on(1, &["READWRITE"]),
        on(1, &["GET", LOCK]),
        on(1, &["WAIT", "0", "10"]),
        on(0, &["SET", "{lock:resource}:w", "1"]),
        on(0, &["WAIT", "1", "2000"]),
        // A source that still holds a key of the slot refuses to give it
        // away (when it has not heard of the target's claim yet).
        on(0, &["DEL", "{lock:resource}:w"]),
        on(3, &["CLUSTER", "SHARDS"]),
        on(3, &["CLUSTER", "SLOTS"]),
        on(0, &["CLUSTER", "NOSUCH"]),
        // The lock's slot moves to redis-2, key by key.
        on(0, &["SET", FENCE, "1", "PX", "10000"]),
        Step::BeginMigration { from: 0, to: 2 },
        script_on(0, &[LOCK, FENCE], &["t", "other", "10000"], false),
        on(0, &["GET", "{lock:resource}:missing"]),
        on(0, &["SET", "{lock:resource}:new", "1"]),
        on(0, &["MGET", LOCK, FENCE]),
        Step::Migrate {
            key: LOCK.to_owned(),
            from: 0,
            to: 2,
        },
        on(0, &["GET", LOCK]),
        on(0, &["GET", FENCE]),
        on(0, &["MGET", LOCK, FENCE]),
        script_on(0, &[LOCK, FENCE], &["t", "other", "10000"], false),
        script_on(0, &[LOCK], &["r", "tok", "10000"], false),
        on(2, &["GET", LOCK]),
        asking(2, &["GET", LOCK]),
        asking(2, &["GET", "{lock:resource}:missing"]),
        asking(2, &["MGET", LOCK, FENCE]),
        asking(2, &["MGET", LOCK, LOCK]),
        script_on(2, &[LOCK, FENCE], &["t", "other", "10000"], true),
        script_on(2, &[LOCK], &["r", "tok", "10000"], true),
        on(2, &["SCRIPT", "LOAD", load]),
        script_on(2, &[LOCK], &["r", "tok", "10000"], true),
        // ASKING lasts one command, whatever it is.
        on(2, &["ASKING"]),
        on(2, &["PING"]),
        on(2, &["GET", LOCK]),
        Step::Migrate {
            key: FENCE.to_owned(),
            from: 0,
            to: 2,
        },
        on(0, &["MGET", LOCK, FENCE]),
        asking(2, &["MGET", LOCK, FENCE]),
        script_on(0, &[LOCK, FENCE], &["t", "other", "10000"], false),
        script_on(2, &[LOCK, FENCE], &["t", "other", "10000"], true),
        Step::FinishMigration { to: 2 },
        on(0, &["GET", LOCK]),
        on(4, &["GET", LOCK]),
        on(2, &["GET", LOCK]),
        on(1, &["CLUSTER", "SHARDS"]),
        on(5, &["CLUSTER", "SLOTS"]),
        // redis-3 takes over redis-2's shard, the lock's slot with it.
        Step::Sleep(200),
        Step::FailOver {
            primary: 2,
            replica: 3,
        },
        on(2, &["GET", LOCK]),
        on(2, &["SET", LOCK, "x"]),
        on(3, &["GET", LOCK]),
        on(2, &["WAIT", "0", "10"]),
        on(4, &["CLUSTER", "SHARDS"]),
    ]
}

/// `host:port` becomes `host`: the nodes' ports differ between the sides.
fn strip_port(detail: &str) -> String {
    let mut words: Vec<String> = detail.split(' ').map(str::to_owned).collect();
    if let Some(last) = words.last_mut()
        && let Some((host, _)) = last.rsplit_once(':')
    {
        *last = host.to_owned();
    }
    words.join(" ")
}

/// Makes replies comparable: errors keep their code (redirections also
/// their slot and host), server-time fences and ttls become placeholders,
/// and in the cluster maps (`map`) ids, ports, IPs and offsets do, and
/// the top-level entries are sorted (a real node lists its shards in the
/// order of its node table).
fn normalise(value: Value, map: bool) -> String {
    if map && let Value::Array(entries) = value {
        let mut entries: Vec<String> = entries.into_iter().map(|e| normalise_in(e, true)).collect();
        entries.sort();
        return format!("[{}]", entries.join(", "));
    }
    normalise_in(value, map)
}

fn normalise_in(value: Value, map: bool) -> String {
    match value {
        // A node of CLUSTER SLOTS: [host, port, id, metadata].
        Value::Array(mut items)
            if map
                && items.len() == 4
                && matches!(&items[0], Value::BulkString(host) if host.starts_with(b"redis-")) =>
        {
            items[1] = Value::SimpleString("<port>".to_owned());
            let out: Vec<String> = items.into_iter().map(|i| normalise_in(i, map)).collect();
            format!("[{}]", out.join(", "))
        }
        Value::Array(items) => {
            let mut out = Vec::new();
            let mut items = items.into_iter().peekable();
            while let Some(item) = items.next() {
                // Map fields whose values differ by nature between runs.
                let field = match &item {
                    Value::BulkString(name) => String::from_utf8_lossy(name).into_owned(),
                    _ => String::new(),
                };
                let placeholder = match field.as_str() {
                    "id" | "port" | "ip" | "replication-offset" => Some(format!("<{field}>")),
                    _ => None,
                };
                out.push(normalise_in(item, map));
                if let Some(placeholder) = placeholder
                    && items.peek().is_some()
                {
                    items.next();
                    out.push(placeholder);
                }
            }
            format!("[{}]", out.join(", "))
        }
        Value::BulkString(bytes) => {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            match text.parse::<u64>() {
                Ok(n) if n > 1_000_000_000_000 => "<time-fence>".to_owned(),
                _ if text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    "<sha-or-id>".to_owned()
                }
                _ => format!("{text:?}"),
            }
        }
        // Ttls (in the cluster maps, integers are slots: kept).
        Value::Int(n) if n > 1_000 && n <= 60_000 && !map => "<ttl>".to_owned(),
        // An acquire's fence from server time, and the -2 - pttl of a
        // contended acquire: both follow each side's own clock.
        Value::Int(n) if n > 1_000_000_000_000 && !map => "<time-fence>".to_owned(),
        Value::Int(n) if (-60_002..=-3).contains(&n) && !map => "<held: -2 - ttl>".to_owned(),
        Value::ServerError(error) => error_text(error.code(), error.details()),
        Value::Okay => "OK".to_owned(),
        Value::SimpleString(text) => text,
        other => format!("{other:?}"),
    }
}

fn error_text(code: &str, detail: Option<&str>) -> String {
    match (code, detail) {
        ("MOVED" | "ASK", Some(detail)) => format!("error {code} {}", strip_port(detail)),
        _ => format!("error {code}"),
    }
}

fn reply_or_error(result: redis::RedisResult<Value>, map: bool) -> String {
    match result {
        Ok(value) => normalise(value, map),
        Err(error) => error_text(error.code().unwrap_or("?"), error.detail()),
    }
}

fn as_cmd(parts: &[String]) -> redis::Cmd {
    let mut command = redis::cmd(&parts[0]);
    for part in &parts[1..] {
        command.arg(part);
    }
    command
}

fn real_replies(steps: &[Step]) -> Vec<String> {
    let cluster = RealCluster::start();
    let mut conns: Vec<redis::Connection> = (0..6)
        .map(|index| {
            redis::Client::open(format!("redis://127.0.0.1:{}/", cluster.port(index)))
                .and_then(|client| client.get_connection())
                .expect("connect to a cluster node")
        })
        .collect();
    let mut replies = Vec::new();
    for step in steps {
        match step {
            Step::Cmd { node, args, asking } => {
                let conn = &mut conns[*node];
                if *asking {
                    let _: () = redis::cmd("ASKING").query(conn).expect("ASKING");
                }
                let map = args[0] == "CLUSTER";
                replies.push(reply_or_error(as_cmd(args).query(conn), map));
            }
            Step::Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
            Step::BeginMigration { from, to } => cluster.begin_migration(SLOT, *from, *to),
            Step::Migrate { key, from, to } => cluster.migrate(key, *from, *to),
            Step::FinishMigration { to } => cluster.finish_migration(SLOT, *to),
            Step::FailOver { replica, .. } => cluster.fail_over(*replica),
        }
    }
    replies
}

fn sim_replies(steps: &[Step]) -> Vec<String> {
    let replies = Rc::new(RefCell::new(Vec::new()));
    let mut sim = crate::common::loopback_world();
    let (cluster, nodes) = ClusterHandle::with_nodes(3, 1);
    for node in &nodes {
        let serving = node.clone();
        sim.host(redis_host(node.index()).as_str(), move || {
            sim::server::serve(serving.clone())
        });
    }
    let (steps, out) = (steps.to_vec(), Rc::clone(&replies));
    sim.client("tester", async move {
        let mut conns = Vec::new();
        for index in 0..6 {
            let host = redis_host(index);
            let stream = turmoil::net::TcpStream::connect((host.as_str(), 6379)).await?;
            let info = redis::RedisConnectionInfo::default().set_skip_set_lib_name();
            let config = redis::AsyncConnectionConfig::new();
            let connect = redis::aio::MultiplexedConnection::new_with_config(&info, stream, config);
            let (conn, driver) = tokio::time::timeout(Duration::from_secs(1), connect).await??;
            tokio::task::spawn_local(driver);
            conns.push(conn);
        }
        let now = sim::clock::now;
        for step in steps {
            match step {
                Step::Cmd { node, args, asking } => {
                    let conn = &mut conns[node];
                    if asking {
                        redis::cmd("ASKING").query_async::<()>(conn).await?;
                    }
                    let reply = as_cmd(&args).query_async::<Value>(conn).await;
                    out.borrow_mut()
                        .push(reply_or_error(reply, args[0] == "CLUSTER"));
                }
                Step::Sleep(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                Step::BeginMigration { from, to } => cluster.begin_migration(SLOT, from, to),
                Step::Migrate { key, from, to } => {
                    assert!(nodes[from].migrate(key.as_bytes(), &nodes[to], now()));
                }
                Step::FinishMigration { to } => cluster.finish_migration(SLOT, to),
                Step::FailOver { primary, replica } => {
                    nodes[replica].promote();
                    cluster.fail_over(primary, replica, false);
                    nodes[primary].demote_keeping_clients(redis_host(replica));
                    // The old primary resyncs from the new one.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        Ok(())
    });
    sim.run().expect("the simulated exchange completes");
    replies.take()
}

#[test]
fn the_simulated_cluster_answers_like_a_real_one() {
    assert_eq!(slot_of(LOCK), SLOT);
    let steps = steps();
    let expected = real_replies(&steps);
    let actual = sim_replies(&steps);
    let commands: Vec<&Step> = steps
        .iter()
        .filter(|step| matches!(step, Step::Cmd { .. }))
        .collect();
    assert_eq!(expected.len(), commands.len());
    let differing: Vec<String> = commands
        .iter()
        .zip(expected.iter().zip(&actual))
        .filter(|(_, (real, simulated))| real != simulated)
        .map(|(step, (real, simulated))| format!("{step:?}\n  real: {real}\n  sim:  {simulated}"))
        .collect();
    assert!(
        differing.is_empty(),
        "{} of {} replies differ:\n{}",
        differing.len(),
        commands.len(),
        differing.join("\n")
    );
    // The comparison covered every redirection.
    for needle in ["MOVED", "ASK", "TRYAGAIN", "CROSSSLOT", "NOSCRIPT"] {
        assert!(
            expected.iter().any(|reply| reply.contains(needle)),
            "no {needle} in {expected:#?}"
        );
    }
}
