//! One client connection: RESP framing and command dispatch.
//!
//! Framing is check-then-parse, as in mini-redis: bytes accumulate in a
//! buffer, `redis-protocol` says whether a whole frame is there, and only
//! then is it parsed and removed. A subscribed connection also carries
//! pushes (`message` frames) from PUBLISH on other connections.

use std::time::Duration;

use redis_protocol::resp2::{
    decode::decode,
    encode::encode,
    types::{OwnedFrame as Frame, Resp2Frame},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    sync::mpsc,
};
use turmoil::net::TcpStream;

use super::{
    NodeHandle, Role,
    db::{self, bulk, error, ok, parse_i64},
    replication, scripts,
};
use crate::clock;

/// Serializes one frame.
pub fn to_bytes(frame: &Frame) -> Vec<u8> {
    let mut out = vec![0; frame.encode_len(false)];
    // The buffer is exactly `encode_len` long, so encoding cannot run out.
    let written = encode(&mut out, frame, false).unwrap_or(0);
    out.truncate(written);
    out
}

/// Takes one whole frame off the front of `buffer`, if there is one.
pub fn next_frame(buffer: &mut Vec<u8>) -> Result<Option<Frame>, String> {
    match decode(buffer) {
        Ok(Some((frame, used))) => {
            buffer.drain(..used);
            Ok(Some(frame))
        }
        Ok(None) => Ok(None),
        Err(problem) => Err(format!("ERR Protocol error: {problem:?}")),
    }
}

/// A command frame as its arguments (an array of bulk strings).
pub fn arguments(frame: Frame) -> Option<Vec<Vec<u8>>> {
    let Frame::Array(items) = frame else {
        return None;
    };
    items
        .into_iter()
        .map(|item| match item {
            Frame::BulkString(bytes) | Frame::SimpleString(bytes) => Some(bytes),
            Frame::Integer(number) => Some(number.to_string().into_bytes()),
            _ => None,
        })
        .collect()
}

/// Serves one connection until it closes.
pub async fn handle(node: NodeHandle, stream: TcpStream) {
    let id = node.0.borrow_mut().next_id();
    let (mut reader, mut writer) = stream.into_split();
    let (push, mut pushes) = mpsc::unbounded_channel::<Frame>();
    let mut buffer = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    'connection: loop {
        tokio::select! {
            biased;
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
                loop {
                    let frame = match next_frame(&mut buffer) {
                        Ok(Some(frame)) => frame,
                        Ok(None) => break,
                        Err(problem) => {
                            let _ = writer.write_all(&to_bytes(&error(&problem))).await;
                            break 'connection;
                        }
                    };
                    let Some(args) = arguments(frame).filter(|args| !args.is_empty()) else {
                        let reply = error("ERR Protocol error: expected an array of bulk strings");
                        if writer.write_all(&to_bytes(&reply)).await.is_err() {
                            break 'connection;
                        }
                        continue;
                    };
                    if args[0].eq_ignore_ascii_case(b"REPLSYNC") {
                        // This connection now carries a replication stream.
                        let stream = reader.reunite(writer).ok();
                        if let Some(stream) = stream {
                            replication::serve_replica(node.clone(), stream).await;
                        }
                        return;
                    }
                    for reply in dispatch(&node, id, &push, &args).await {
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

/// Runs one command and returns its reply frames (SUBSCRIBE answers one per
/// channel; everything else answers one).
pub async fn dispatch(
    node: &NodeHandle,
    id: u64,
    push: &mpsc::UnboundedSender<Frame>,
    args: &[Vec<u8>],
) -> Vec<Frame> {
    let now = clock::now();
    let name = args[0].to_ascii_uppercase();
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
        b"INFO" => vec![info(node)],
        b"SCRIPT" => vec![script_command(node, args)],
        b"EVAL" | b"EVALSHA" => vec![eval(node, args, name == b"EVAL")],
        b"PUBLISH" if args.len() == 3 => {
            vec![Frame::Integer(publish(node, &args[1], &args[2]) as i64)]
        }
        b"SUBSCRIBE" if args.len() >= 2 => subscribe(node, id, push, &args[1..]),
        b"UNSUBSCRIBE" => unsubscribe(node, id, &args[1..]),
        b"WAIT" if args.len() == 3 => vec![wait(node, &args[1], &args[2]).await],
        _ => vec![data(node, args)],
    }
}

fn data(node: &NodeHandle, args: &[Vec<u8>]) -> Frame {
    let mut state = node.0.borrow_mut();
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
            Frame::Integer(i64::from(super::PORT)),
            bulk(b"connected"),
            Frame::Integer(state.offset as i64),
        ]),
    }
}

fn info(node: &NodeHandle) -> Frame {
    let state = node.0.borrow();
    let role = match state.role {
        Role::Primary => "master",
        Role::Replica { .. } => "slave",
    };
    let text = format!(
        "# Replication\r\nrole:{role}\r\nconnected_slaves:{}\r\nmaster_repl_offset:{}\r\n",
        state.streams.len(),
        state.offset
    );
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
            let sha = sha1_smol::Sha1::from(&args[2]).digest().to_string();
            if scripts::known(&sha).is_none() {
                return error("ERR the simulated Redis runs only lock-core's scripts");
            }
            state.scripts.insert(sha.clone());
            bulk(sha.as_bytes())
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
        sha1_smol::Sha1::from(&args[1]).digest().to_string()
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
    let mut state = node.0.borrow_mut();
    let script = match scripts::known(&sha) {
        Some(script) if by_source || state.scripts.contains(&sha) => script,
        Some(_) => return error("NOSCRIPT No matching script. Please use EVAL."),
        None if by_source => return error("ERR the simulated Redis runs only lock-core's scripts"),
        None => return error("NOSCRIPT No matching script. Please use EVAL."),
    };
    state.scripts.insert(sha);
    let time = state.time_at(clock::now());
    let writable = state.role == Role::Primary;
    let (reply, effects) = scripts::run(script, &mut state.db, time, writable, keys, rest);
    state.propagate(effects);
    let channel = scripts::release_channel(script, &reply, rest);
    drop(state);
    if let Some(channel) = channel {
        publish(node, &channel, b"released");
    }
    reply
}

fn publish(node: &NodeHandle, channel: &[u8], message: &[u8]) -> usize {
    let state = node.0.borrow();
    let Some(subscribers) = state.subscribers.get(channel) else {
        return 0;
    };
    let frame = Frame::Array(vec![bulk(b"message"), bulk(channel), bulk(message)]);
    subscribers
        .values()
        .filter(|push| push.send(frame.clone()).is_ok())
        .count()
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
    let target = node.0.borrow().offset;
    let started = clock::now();
    loop {
        let acked = node
            .0
            .borrow()
            .acked
            .values()
            .filter(|offset| **offset >= target)
            .count() as i64;
        let timed_out = timeout_ms > 0
            && clock::now().saturating_sub(started) >= Duration::from_millis(timeout_ms as u64);
        if acked >= wanted || timed_out {
            return Frame::Integer(acked);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_partial_input_waits() {
        let command = Frame::Array(vec![bulk(b"SET"), bulk(b"k"), bulk(b"v")]);
        let bytes = to_bytes(&command);
        let mut buffer = bytes[..5].to_vec();
        assert_eq!(
            next_frame(&mut buffer),
            Ok(None),
            "half a frame is not a frame"
        );
        buffer.extend_from_slice(&bytes[5..]);
        buffer.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        let frame = next_frame(&mut buffer).expect("valid").expect("whole");
        assert_eq!(
            arguments(frame),
            Some(vec![b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()])
        );
        assert_eq!(
            arguments(next_frame(&mut buffer).expect("valid").expect("whole")),
            Some(vec![b"PING".to_vec()])
        );
        assert!(buffer.is_empty());
        let mut garbage = b"?nonsense\r\n".to_vec();
        assert!(next_frame(&mut garbage).is_err());
    }
}
