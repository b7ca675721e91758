//! One client connection: command dispatch over RESP ([`frame`](super::frame)).
//! A subscribed connection also carries pushes (`message` frames) from
//! PUBLISH on other connections.

use std::time::Duration;

use redis_protocol::resp2::types::OwnedFrame as Frame;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    sync::mpsc,
};
use turmoil::net::TcpStream;

use super::{
    bus::{self, deliver},
    cluster_reply, db,
    frame::{bulk, error, next_command, ok, parse_i64, to_bytes},
    node::{Flavour, NodeHandle, PORT, Role},
    replication, scripts,
};
use crate::clock;

/// What a connection remembers between commands.
#[derive(Debug, Clone, Copy, Default)]
pub struct Session {
    /// The connection's id (its subscriptions are filed under it).
    pub id: u64,
    /// Redis Cluster: `ASKING` came just before; it lasts one command.
    pub asking: bool,
    /// Redis Cluster: `READONLY` was sent (a replica serves reads).
    pub readonly: bool,
}

/// Serves one connection until it closes.
pub async fn handle(node: NodeHandle, stream: TcpStream) {
    let id = node.0.borrow_mut().next_id();
    let mut session = Session {
        id,
        ..Session::default()
    };
    let (mut reader, mut writer) = stream.into_split();
    let (push, mut pushes) = mpsc::unbounded_channel::<Frame>();
    let mut buffer = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let generation = node.clients_generation();
    'connection: loop {
        // A demotion closes every client connection (checked here too, in
        // case it came while this one was busy writing).
        if node.clients_generation() != generation {
            break;
        }
        tokio::select! {
            biased;
            () = node.clients_killed() => {}
            Some(frame) = pushes.recv() => {
                if writer.write_all(&to_bytes(&frame)).await.is_err() {
                    break;
                }
            }
            read = reader.read(&mut chunk) => {
                let Ok(read) = read else { break };
                if read == 0 {
                    break;
                }
                buffer.extend_from_slice(&chunk[..read]);
                node.loop_pass();
                loop {
                    let args = match next_command(&mut buffer) {
                        Ok(Some(args)) => args,
                        Ok(None) => break,
                        Err(problem) => {
                            // As Redis does: the error, then the connection closes.
                            let _ = writer.write_all(&to_bytes(&error(&problem))).await;
                            break 'connection;
                        }
                    };
                    if args[0].eq_ignore_ascii_case(b"REPLSYNC") {
                        // This connection now carries a replication stream;
                        // what came after REPLSYNC belongs to it.
                        let pending = std::mem::take(&mut buffer);
                        if let Ok(stream) = reader.reunite(writer) {
                            replication::serve_replica(node.clone(), stream, pending).await;
                        }
                        break 'connection;
                    }
                    for reply in dispatch_in(&node, &mut session, &push, &args).await {
                        if writer.write_all(&to_bytes(&reply)).await.is_err() {
                            break 'connection;
                        }
                    }
                }
            }
        }
    }
    let mut state = node.0.borrow_mut();
    for subscribers in state.subscribers.values_mut() {
        subscribers.remove(&id);
    }
    state
        .subscribers
        .retain(|_, subscribers| !subscribers.is_empty());
}

/// Runs one command on a fresh connection `id` and returns its reply
/// frames (SUBSCRIBE answers one per channel; everything else answers one).
pub async fn dispatch(
    node: &NodeHandle,
    id: u64,
    push: &mpsc::UnboundedSender<Frame>,
    args: &[Vec<u8>],
) -> Vec<Frame> {
    let mut session = Session {
        id,
        ..Session::default()
    };
    dispatch_in(node, &mut session, push, args).await
}

/// Runs one command on the connection whose state is `session`.
pub async fn dispatch_in(
    node: &NodeHandle,
    session: &mut Session,
    push: &mpsc::UnboundedSender<Frame>,
    args: &[Vec<u8>],
) -> Vec<Frame> {
    let now = clock::now();
    let id = session.id;
    let Some(name) = args.first().map(|name| name.to_ascii_uppercase()) else {
        return vec![error("ERR Protocol error: empty command")];
    };
    node.0.borrow_mut().touch();
    // `ASKING` holds for the one command after it, whatever that is.
    let asking = std::mem::take(&mut session.asking);
    let cluster = node.0.borrow().cluster.clone();
    if let Some(cluster) = &cluster {
        match name.as_slice() {
            b"ASKING" => {
                session.asking = true;
                return vec![ok()];
            }
            b"READONLY" | b"READWRITE" => {
                session.readonly = name == b"READONLY";
                return vec![ok()];
            }
            b"CLUSTER" => {
                return vec![cluster_reply::cluster_command(
                    &node.0.borrow(),
                    cluster,
                    args,
                )];
            }
            b"SELECT" if args.len() == 2 && args[1] != b"0" => {
                return vec![error("ERR SELECT is not allowed in cluster mode")];
            }
            _ => {}
        }
        // Redirections come before everything but the arity check (which
        // `command_keys` leaves to the command).
        let mut state = node.0.borrow_mut();
        let time = state.time_at(now);
        if let Some(redirect) =
            cluster_reply::redirection(&state, cluster, args, asking, session.readonly, time)
        {
            if let Frame::Error(text) = &redirect {
                let counts = &mut state.redirects;
                match text.split(' ').next() {
                    Some("MOVED") => counts.moved += 1,
                    Some("ASK") => counts.ask += 1,
                    Some("TRYAGAIN") => counts.try_again += 1,
                    Some("CROSSSLOT") => counts.cross_slot += 1,
                    Some("CLUSTERDOWN") => counts.cluster_down += 1,
                    _ => {}
                }
            }
            return vec![redirect];
        }
    } else if matches!(name.as_slice(), b"CLUSTER" | b"ASKING" | b"READWRITE") {
        return vec![error("ERR This instance has cluster support disabled")];
    }
    {
        let state = node.0.borrow();
        if now < state.busy_until {
            return vec![error(
                "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.",
            )];
        }
    }
    match name.as_slice() {
        b"PING" => vec![Frame::SimpleString(b"PONG".to_vec())],
        b"ECHO" if args.len() == 2 => vec![bulk(&args[1])],
        b"SELECT" | b"CLIENT" | b"READONLY" => vec![ok()],
        b"ROLE" => vec![role(node)],
        b"INFO" => vec![info(node, args.get(1).map(Vec::as_slice))],
        b"SCRIPT" => vec![script_command(node, args)],
        b"EVAL" | b"EVALSHA" => vec![eval(node, args, name == b"EVAL")],
        b"PUBLISH" if args.len() == 3 => {
            vec![Frame::Integer(publish(node, &args[1], &args[2]) as i64)]
        }
        b"SUBSCRIBE" if args.len() >= 2 => subscribe(node, id, push, &args[1..]),
        b"UNSUBSCRIBE" => unsubscribe(node, id, &args[1..]),
        b"WAIT" if args.len() == 3 => vec![wait(node, &args[1], &args[2]).await],
        // Redis 7.0 has no WAITAOF: it falls through to unknown command.
        b"WAITAOF" if args.len() == 4 && node.0.borrow().flavour != Flavour::Redis7 => {
            vec![waitaof(node, &args[1], &args[2], &args[3]).await]
        }
        _ => vec![data(node, args)],
    }
}

fn data(node: &NodeHandle, args: &[Vec<u8>]) -> Frame {
    let mut state = node.0.borrow_mut();
    // `SET … IFEQ` is Valkey 8.1's: Redis 7.0 knows no such option.
    if state.flavour == Flavour::Redis7
        && args[0].eq_ignore_ascii_case(b"SET")
        && args
            .iter()
            .skip(3)
            .any(|option| option.eq_ignore_ascii_case(b"IFEQ"))
    {
        return error("ERR syntax error");
    }
    // `DELIFEQ` is Valkey 9.0's, `DELEX` Redis 8.4's: unknown elsewhere.
    let known = if args[0].eq_ignore_ascii_case(b"DELIFEQ") {
        state.flavour == Flavour::Valkey90
    } else if args[0].eq_ignore_ascii_case(b"DELEX") {
        state.flavour == Flavour::Redis84
    } else {
        true
    };
    if !known {
        return error(&format!(
            "ERR unknown command '{}', with args beginning with: ",
            String::from_utf8_lossy(&args[0])
        ));
    }
    if args[0].eq_ignore_ascii_case(b"DELIFEQ") || args[0].eq_ignore_ascii_case(b"DELEX") {
        state.native_releases += 1;
    }
    if db::is_write(&args[0]) && state.role != Role::Primary {
        return error(scripts::READONLY);
    }
    let time = state.time_at(clock::now());
    match state.db.execute(args, time) {
        Some((reply, effects)) => {
            state.propagate(effects);
            reply
        }
        None => error(&format!(
            "ERR unknown command '{}', with args beginning with: ",
            String::from_utf8_lossy(&args[0])
        )),
    }
}

fn role(node: &NodeHandle) -> Frame {
    let state = node.0.borrow();
    match &state.role {
        Role::Primary => Frame::Array(vec![
            bulk(b"master"),
            Frame::Integer(state.offset as i64),
            Frame::Array(Vec::new()),
        ]),
        Role::Replica { of } => Frame::Array(vec![
            bulk(b"slave"),
            bulk(of.as_bytes()),
            Frame::Integer(i64::from(PORT)),
            bulk(b"connected"),
            Frame::Integer(state.offset as i64),
        ]),
    }
}

/// The version the simulated node claims, so clients pick the dialect of
/// a current server (`SET … NX … GET`).
pub const VERSION: &str = "7.0.15";

/// The lines a node of [`Flavour::Valkey81`] answers instead (Valkey 8.1.8's:
/// the Redis release it forked from, then its own).
pub const VALKEY_VERSION_LINES: &str =
    "redis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.8\r\n";

fn info(node: &NodeHandle, section: Option<&[u8]>) -> Frame {
    let state = node.0.borrow();
    let role = match state.role {
        Role::Primary => "master",
        Role::Replica { .. } => "slave",
    };
    let section = section.map(<[u8]>::to_ascii_lowercase);
    let mut text = String::new();
    if section.as_deref().is_none_or(|s| s == b"server") {
        match state.flavour {
            Flavour::Redis7 => text.push_str(&format!("# Server\r\nredis_version:{VERSION}\r\n")),
            Flavour::Valkey81 => {
                text.push_str("# Server\r\n");
                text.push_str(VALKEY_VERSION_LINES);
            }
            Flavour::Valkey90 => text.push_str(
                "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.0.0\r\n",
            ),
            Flavour::Redis84 => text.push_str("# Server\r\nredis_version:8.4.0\r\n"),
        }
    }
    if section.as_deref().is_none_or(|s| s == b"replication") {
        text.push_str(&format!(
            "# Replication\r\nrole:{role}\r\nconnected_slaves:{}\r\nmaster_repl_offset:{}\r\n",
            state.streams.len(),
            state.offset
        ));
    }
    bulk(text.as_bytes())
}

fn script_command(node: &NodeHandle, args: &[Vec<u8>]) -> Frame {
    let sub = args
        .get(1)
        .map(|s| s.to_ascii_uppercase())
        .unwrap_or_default();
    let mut state = node.0.borrow_mut();
    match sub.as_slice() {
        b"LOAD" if args.len() == 3 => {
            // Only lock-core's scripts run here, and their SHA1s are known:
            // comparing the source is much cheaper than hashing it.
            let Some(script) = lock_core::scripts::ALL
                .into_iter()
                .find(|script| script.source.as_bytes() == args[2].as_slice())
            else {
                return error("ERR the simulated Redis runs only lock-core's scripts");
            };
            state.scripts.insert(script.sha1.to_owned());
            bulk(script.sha1.as_bytes())
        }
        b"EXISTS" => Frame::Array(
            args[2..]
                .iter()
                .map(|sha| {
                    let sha = String::from_utf8_lossy(sha).to_lowercase();
                    Frame::Integer(i64::from(state.scripts.contains(&sha)))
                })
                .collect(),
        ),
        b"FLUSH" => {
            state.scripts.clear();
            ok()
        }
        _ => error("ERR unknown subcommand or wrong number of arguments for 'script' command"),
    }
}

fn eval(node: &NodeHandle, args: &[Vec<u8>], by_source: bool) -> Frame {
    if args.len() < 3 {
        return error("ERR wrong number of arguments for 'evalsha' command");
    }
    let sha = if by_source {
        // lock-core's scripts' SHA1s are known: look the source up rather
        // than hash it (any other source is refused below anyway).
        lock_core::scripts::ALL
            .into_iter()
            .find(|script| script.source.as_bytes() == args[1].as_slice())
            .map_or_else(
                || sha1_smol::Sha1::from(&args[1]).digest().to_string(),
                |script| script.sha1.to_owned(),
            )
    } else {
        String::from_utf8_lossy(&args[1]).to_lowercase()
    };
    let Some(numkeys) = parse_i64(&args[2]).and_then(|n| usize::try_from(n).ok()) else {
        return error("ERR value is not an integer or out of range");
    };
    if numkeys > args.len() - 3 {
        return error("ERR Number of keys can't be greater than number of args");
    }
    let (keys, rest) = args[3..].split_at(numkeys);
    let (mut db, script, time, writable) = {
        let mut state = node.0.borrow_mut();
        let script = match scripts::known(&sha) {
            Some(script) if by_source || state.scripts.contains(&sha) => script,
            Some(_) => return error("NOSCRIPT No matching script. Please use EVAL."),
            None if by_source => {
                return error("ERR the simulated Redis runs only lock-core's scripts");
            }
            None => return error("NOSCRIPT No matching script. Please use EVAL."),
        };
        state.scripts.insert(sha);
        let time = state.time_at(clock::now());
        let writable = state.role == Role::Primary;
        // The keyspace leaves the node while the script runs: what the
        // script publishes reaches subscribers on this node (and, in a
        // cluster, on the others), which must not find it borrowed.
        (std::mem::take(&mut state.db), script, time, writable)
    };
    let publisher = node.clone();
    let (reply, effects) = scripts::run(
        script,
        &mut db,
        time,
        writable,
        keys,
        rest,
        Box::new(move |channel, message| publish(&publisher, channel, message) as i64),
    );
    let mut state = node.0.borrow_mut();
    state.db = db;
    if state.deposed {
        let (grants, renewals) = scripts::successes(script, rest, &reply);
        state.deposed_acks.grants += grants as u64;
        state.deposed_acks.renewals += renewals as u64;
    }
    state.propagate(effects);
    state.grants_behind_floor += scripts::grants_behind_floor(&reply, time.us) as u64;
    if scripts::operations(script, rest) > 1 {
        state.batched_calls += 1;
    }
    reply
}

/// `PUBLISH`: to this node's subscribers, and in a cluster over the bus
/// to every node's; answers how many of this node's got it.
fn publish(node: &NodeHandle, channel: &[u8], message: &[u8]) -> usize {
    let state = node.0.borrow();
    match state.cluster.clone() {
        Some(cluster) => bus::publish(&state, &cluster, channel, message),
        None => deliver(&state, channel, message),
    }
}

fn subscription_count(node: &NodeHandle, id: u64) -> i64 {
    node.0
        .borrow()
        .subscribers
        .values()
        .filter(|subscribers| subscribers.contains_key(&id))
        .count() as i64
}

fn subscribe(
    node: &NodeHandle,
    id: u64,
    push: &mpsc::UnboundedSender<Frame>,
    channels: &[Vec<u8>],
) -> Vec<Frame> {
    channels
        .iter()
        .map(|channel| {
            node.0
                .borrow_mut()
                .subscribers
                .entry(channel.clone())
                .or_default()
                .insert(id, push.clone());
            Frame::Array(vec![
                bulk(b"subscribe"),
                bulk(channel),
                Frame::Integer(subscription_count(node, id)),
            ])
        })
        .collect()
}

fn unsubscribe(node: &NodeHandle, id: u64, channels: &[Vec<u8>]) -> Vec<Frame> {
    let channels: Vec<Vec<u8>> = if channels.is_empty() {
        node.0
            .borrow()
            .subscribers
            .iter()
            .filter(|(_, subscribers)| subscribers.contains_key(&id))
            .map(|(channel, _)| channel.clone())
            .collect()
    } else {
        channels.to_vec()
    };
    if channels.is_empty() {
        // Subscribed to nothing: Redis still answers, with a nil channel.
        return vec![Frame::Array(vec![
            bulk(b"unsubscribe"),
            Frame::Null,
            Frame::Integer(0),
        ])];
    }
    channels
        .iter()
        .map(|channel| {
            if let Some(subscribers) = node.0.borrow_mut().subscribers.get_mut(channel) {
                subscribers.remove(&id);
            }
            Frame::Array(vec![
                bulk(b"unsubscribe"),
                bulk(channel),
                Frame::Integer(subscription_count(node, id)),
            ])
        })
        .collect()
}

/// WAIT: blocks until `replicas` replicas acknowledged every write made so
/// far, or `timeout` ms pass (0: forever); answers how many did.
async fn wait(node: &NodeHandle, replicas: &[u8], timeout: &[u8]) -> Frame {
    let (Some(wanted), Some(timeout_ms)) = (parse_i64(replicas), parse_i64(timeout)) else {
        return error("ERR value is not an integer or out of range");
    };
    if timeout_ms < 0 {
        return error("ERR timeout is negative");
    }
    if node.0.borrow().role != Role::Primary {
        return error(
            "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
        );
    }
    let (target, acks_changed) = {
        let state = node.0.borrow();
        (state.offset, std::rc::Rc::clone(&state.acks_changed))
    };
    let acked = || {
        node.0
            .borrow()
            .acked
            .values()
            .filter(|offset| **offset >= target)
            .count() as i64
    };
    let deadline = async {
        match timeout_ms {
            0 => std::future::pending().await,
            ms => tokio::time::sleep(Duration::from_millis(ms as u64)).await,
        }
    };
    tokio::pin!(deadline);
    // Woken by each acknowledgement, not polled.
    let acked = loop {
        if acked() >= wanted {
            break acked();
        }
        tokio::select! {
            biased;
            () = acks_changed.notified() => {}
            () = &mut deadline => break acked(),
        }
    };
    let mut state = node.0.borrow_mut();
    if state.deposed && acked < wanted {
        state.deposed_acks.short_waits += 1;
    }
    Frame::Integer(acked)
}

/// WAITAOF (Redis 7.2+, Valkey): answers `[local, replicas]`, how many of
/// this node (0 or 1) and of its replicas fsynced every write made so far,
/// waiting up to `timeout` ms (0: forever) for the counts asked.
///
/// `numlocal` 1 on a node whose AOF is behind waits for the node's next
/// once-a-second fsync, or, on Valkey, for its next cron tick, which
/// acknowledges the write without fsyncing it (`aof_cron`,
/// `Flavour::acks_unsynced_aof`). The simulated replicas keep no AOF, so
/// they never count, as a real replica with `appendonly no` never does.
async fn waitaof(node: &NodeHandle, numlocal: &[u8], numreplicas: &[u8], timeout: &[u8]) -> Frame {
    let (Some(local), Some(replicas), Some(timeout_ms)) = (
        parse_i64(numlocal),
        parse_i64(numreplicas),
        parse_i64(timeout),
    ) else {
        return error("ERR value is not an integer or out of range");
    };
    if !(0..=1).contains(&local) {
        return error("ERR value is out of range, value must between 0 and 1");
    }
    if timeout_ms < 0 {
        return error("ERR timeout is negative");
    }
    let (target, aof, synced) = {
        let state = node.0.borrow();
        if state.role != Role::Primary {
            return error(
                "ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.",
            );
        }
        let aof = state.persistence != crate::config::Persistence::None;
        if local == 1 && !aof {
            return error(
                "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.",
            );
        }
        (state.offset, aof, std::rc::Rc::clone(&state.aof_synced))
    };
    let fsynced = || aof && node.0.borrow().fsynced_offset >= target;
    let deadline = async {
        match timeout_ms {
            0 => std::future::pending().await,
            ms => tokio::time::sleep(Duration::from_millis(ms as u64)).await,
        }
    };
    tokio::pin!(deadline);
    if local == 1 && !fsynced() {
        node.0.borrow_mut().aof_waiters += 1;
        loop {
            tokio::select! {
                biased;
                () = synced.notified() => {
                    if fsynced() {
                        break;
                    }
                }
                () = &mut deadline => break,
            }
        }
        node.0.borrow_mut().aof_waiters -= 1;
    }
    if replicas > 0 {
        // No replica will ever count: wait out the timeout.
        (&mut deadline).await;
    }
    Frame::Array(vec![
        Frame::Integer(i64::from(fsynced())),
        Frame::Integer(0),
    ])
}
