//! Asynchronous primary → replica replication.
//!
//! How it works, in the spirit of Redis's PSYNC (simplified to what a lock
//! needs):
//! 1. A replica connects to its primary and sends `REPLSYNC`.
//! 2. The primary answers with a **full sync**: its whole live keyspace as
//!    effects, tagged with its current write offset. The replica replaces
//!    its data with it — so an empty, restarted primary wipes its replicas,
//!    exactly the hazard the fault table lists.
//! 3. The primary then streams every later write as `(offset, effects)`.
//!    The replica applies each one after a **lag** drawn from its
//!    configuration (in order: a write never overtakes an earlier one) and
//!    acknowledges its offset; `WAIT` counts those acknowledgements.
//! 4. Nothing is acknowledged to the *client* by replication: a write the
//!    primary answered may still be in flight or queued on the replica when
//!    the primary dies. If that replica is promoted, the write is lost.
//!
//! Promotion (`NodeHandle::promote`) makes a replica drop its link and its
//! queue of unapplied writes at once.

use std::{collections::VecDeque, time::Duration};

use redis_protocol::resp2::types::OwnedFrame as Frame;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    sync::mpsc,
};
use turmoil::net::TcpStream;

use super::{
    db::{Db, Effect},
    frame::{arguments, bulk, next_command, next_frame, parse_i64, to_bytes},
    node::{NodeHandle, PORT, Role},
};
use crate::clock;

fn encode_effect(effect: &Effect) -> Frame {
    let parts: Vec<Vec<u8>> = match effect {
        Effect::Set {
            key,
            value,
            expires_at,
        } => vec![
            b"SET".to_vec(),
            key.clone(),
            value.clone(),
            expires_at
                .map(|at| at.to_string())
                .unwrap_or_default()
                .into_bytes(),
        ],
        Effect::Del { key } => vec![b"DEL".to_vec(), key.clone()],
        Effect::ExpireAt { key, at } => {
            vec![
                b"PEXPIREAT".to_vec(),
                key.clone(),
                at.to_string().into_bytes(),
            ]
        }
        Effect::ZAdd { key, members } => {
            // The score as Rust writes it, which parses back to the same
            // f64 (and `inf`, `-inf`).
            let mut parts = vec![b"ZADD".to_vec(), key.clone()];
            for (score, member) in members {
                parts.push(score.to_string().into_bytes());
                parts.push(member.clone());
            }
            parts
        }
        Effect::ZRem { key, members } => {
            let mut parts = vec![b"ZREM".to_vec(), key.clone()];
            parts.extend(members.iter().cloned());
            parts
        }
        Effect::Push { key, values } => {
            let mut parts = vec![b"LPUSH".to_vec(), key.clone()];
            parts.extend(values.iter().cloned());
            parts
        }
        Effect::Flush => vec![b"FLUSHALL".to_vec()],
    };
    Frame::Array(parts.iter().map(|part| bulk(part)).collect())
}

fn decode_effect(frame: Frame) -> Option<Effect> {
    let mut parts = arguments(frame)?.into_iter();
    let name = parts.next()?;
    Some(match name.as_slice() {
        b"SET" => {
            let key = parts.next()?;
            let value = parts.next()?;
            let at = parts.next()?;
            Effect::Set {
                key,
                value,
                expires_at: parse_i64(&at),
            }
        }
        b"DEL" => Effect::Del { key: parts.next()? },
        b"PEXPIREAT" => Effect::ExpireAt {
            key: parts.next()?,
            at: parse_i64(&parts.next()?)?,
        },
        b"ZADD" => {
            let key = parts.next()?;
            let rest: Vec<Vec<u8>> = parts.collect();
            let members = rest
                .chunks(2)
                .map(|pair| {
                    let score: f64 = std::str::from_utf8(&pair[0]).ok()?.parse().ok()?;
                    Some((score, pair.get(1)?.clone()))
                })
                .collect::<Option<Vec<_>>>()?;
            Effect::ZAdd { key, members }
        }
        b"ZREM" => Effect::ZRem {
            key: parts.next()?,
            members: parts.collect(),
        },
        b"LPUSH" => Effect::Push {
            key: parts.next()?,
            values: parts.collect(),
        },
        b"FLUSHALL" => Effect::Flush,
        _ => return None,
    })
}

/// One message of the stream: `[kind, offset, effect…]`.
fn message(kind: &[u8], offset: u64, effects: &[Effect]) -> Frame {
    let mut items = vec![bulk(kind), Frame::Integer(offset as i64)];
    items.extend(effects.iter().map(encode_effect));
    Frame::Array(items)
}

fn parse_message(frame: Frame) -> Option<(Vec<u8>, u64, Vec<Effect>)> {
    let Frame::Array(items) = frame else {
        return None;
    };
    let mut items = items.into_iter();
    let Frame::BulkString(kind) = items.next()? else {
        return None;
    };
    let Frame::Integer(offset) = items.next()? else {
        return None;
    };
    let effects = items.map(decode_effect).collect::<Option<Vec<_>>>()?;
    Some((kind, u64::try_from(offset).ok()?, effects))
}

/// The primary's side of one replica link: full sync, then the stream,
/// while reading the replica's acknowledgements. `pending` holds what the
/// replica sent after `REPLSYNC` that the connection had already read.
pub async fn serve_replica(node: NodeHandle, stream: TcpStream, pending: Vec<u8>) {
    let (mut reader, mut writer) = stream.into_split();
    let (link, mut writes) = mpsc::unbounded_channel();
    let (id, sync) = {
        let mut state = node.0.borrow_mut();
        let id = state.next_id();
        let time = state.time_at(clock::now());
        let sync = message(b"FULLSYNC", state.offset, &state.db.snapshot(time));
        state.streams.insert(id, link);
        state.acked.insert(id, 0);
        (id, sync)
    };
    let mut buffer = pending;
    let mut chunk = [0u8; 1024];
    if writer.write_all(&to_bytes(&sync)).await.is_ok() && take_acks(&node, id, &mut buffer) {
        loop {
            tokio::select! {
                biased;
                Some((offset, effects)) = writes.recv() => {
                    let frame = message(b"WRITE", offset, &effects);
                    if writer.write_all(&to_bytes(&frame)).await.is_err() {
                        break;
                    }
                }
                read = reader.read(&mut chunk) => {
                    match read {
                        Ok(read) if read > 0 => buffer.extend_from_slice(&chunk[..read]),
                        _ => break,
                    }
                    if !take_acks(&node, id, &mut buffer) {
                        break;
                    }
                }
            }
        }
    }
    let mut state = node.0.borrow_mut();
    state.streams.remove(&id);
    state.acked.remove(&id);
}

/// Applies every whole acknowledgement (`ACK offset`, a command) in
/// `buffer` to link `id`; other commands are ignored. False if the bytes
/// are not commands at all: the link then ends.
fn take_acks(node: &NodeHandle, id: u64, buffer: &mut Vec<u8>) -> bool {
    loop {
        let args = match next_command(buffer) {
            Ok(Some(args)) => args,
            Ok(None) => return true,
            Err(_) => return false,
        };
        let acked = Some(args)
            .filter(|args| args.len() == 2 && args[0] == b"ACK")
            .and_then(|args| parse_i64(&args[1]))
            .and_then(|offset| u64::try_from(offset).ok());
        if let Some(offset) = acked {
            node.acknowledge(id, offset);
        }
    }
}

/// The replica's side: while the node is a replica, keep a link to its
/// primary, apply what arrives after the lag, and acknowledge.
pub async fn run_replica(node: NodeHandle) {
    loop {
        let primary = match node.role() {
            Role::Replica { of } => of,
            Role::Primary => {
                node.role_change().await;
                continue;
            }
        };
        let connected = tokio::time::timeout(
            Duration::from_millis(200),
            TcpStream::connect((primary.as_str(), PORT)),
        )
        .await;
        if let Ok(Ok(stream)) = connected {
            follow(&node, &primary, stream).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Follows one primary until the link breaks or the node's role changes.
async fn follow(node: &NodeHandle, primary: &str, stream: TcpStream) {
    let still_following = |node: &NodeHandle| {
        node.role()
            == (Role::Replica {
                of: primary.to_owned(),
            })
    };
    let (mut reader, mut writer) = stream.into_split();
    let hello = Frame::Array(vec![bulk(b"REPLSYNC")]);
    if writer.write_all(&to_bytes(&hello)).await.is_err() {
        return;
    }
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    // Writes received but not yet applied: (apply at, offset, effects).
    let mut queue: VecDeque<(Duration, u64, Vec<Effect>)> = VecDeque::new();
    loop {
        if !still_following(node) {
            // Promoted or re-pointed: unapplied writes are lost.
            return;
        }
        let next_apply = queue.front().map(|(at, _, _)| *at);
        let apply_due = async {
            match next_apply {
                Some(at) => tokio::time::sleep(at.saturating_sub(clock::now())).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            // Promoted or re-pointed: checked at the top of the loop.
            () = node.role_change() => {}
            read = reader.read(&mut chunk) => {
                match read {
                    Ok(read) if read > 0 => buffer.extend_from_slice(&chunk[..read]),
                    _ => return,
                }
                while let Ok(Some(frame)) = next_frame(&mut buffer) {
                    let Some((kind, offset, effects)) = parse_message(frame) else {
                        return;
                    };
                    if kind == b"FULLSYNC" {
                        // A full sync replaces everything, at once.
                        queue.clear();
                        let mut state = node.0.borrow_mut();
                        let mut db = Db::default();
                        for effect in &effects {
                            db.apply(effect);
                        }
                        state.db = db;
                        state.offset = offset;
                        state.touch();
                    } else {
                        let lag = {
                            let mut state = node.0.borrow_mut();
                            let lag = state.lag;
                            lag.map_or(Duration::ZERO, |range| state.rng.duration(range))
                        };
                        let earliest = queue.back().map_or(Duration::ZERO, |(at, _, _)| *at);
                        queue.push_back(((clock::now() + lag).max(earliest), offset, effects));
                    }
                }
            }
            () = apply_due => {}
        }
        let mut applied = None;
        while queue.front().is_some_and(|(at, _, _)| *at <= clock::now()) {
            if let Some((_, offset, effects)) = queue.pop_front() {
                let mut state = node.0.borrow_mut();
                for effect in &effects {
                    state.db.apply(effect);
                }
                state.offset = offset;
                state.touch();
                applied = Some(offset);
            }
        }
        if let Some(offset) = applied {
            let ack = Frame::Array(vec![bulk(b"ACK"), bulk(offset.to_string().as_bytes())]);
            if writer.write_all(&to_bytes(&ack)).await.is_err() {
                return;
            }
        }
    }
}
