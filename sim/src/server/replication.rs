//! Asynchronous primary → replica replication.
//!
//! How it works, in the spirit of Redis's PSYNC (simplified to what a lock
//! needs):
//! 1. A replica connects to its primary and sends `REPLSYNC replid
//!    offset`: the history it follows (Redis's replication ID) and how far.
//! 2. The primary answers with its whole live keyspace as effects, tagged
//!    with its current write offset and its history. The replica replaces
//!    its data with it — so an empty, restarted primary wipes its replicas,
//!    exactly the hazard the fault table lists. It is a **partial** resync
//!    where the replica's history is a prefix of the primary's
//!    (`Node::continues`: the data are
//!    then the same as the missing stream would make them), and a **full**
//!    sync otherwise (a restarted node, a deposed primary whose writes its
//!    successor never had). On a flavour whose full sync
//!    [waits for the replication cron](super::flavour::Flavour::full_sync_waits_for_cron)
//!    (Valkey 9.1), the replica loads a full sync only at its next cron
//!    tick, applying and acknowledging nothing of the stream before. Once
//!    loaded, a sync is acknowledged at its offset, as Redis's replica
//!    sends its first `REPLCONF ACK` once the sync is loaded.
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
    flavour::REPLICATION_CRON,
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

/// A full sync's message kind.
const FULL: &[u8] = b"FULLSYNC";
/// A partial resync's.
const PARTIAL: &[u8] = b"PARTIAL";
/// A streamed write's.
const WRITE: &[u8] = b"WRITE";

/// One message of the stream: `[kind, offset, effect…]`; a sync's
/// (`FULLSYNC`, `PARTIAL`) carries the primary's history after the offset.
fn message(kind: &[u8], offset: u64, replid: Option<u64>, effects: &[Effect]) -> Frame {
    let mut items = vec![bulk(kind), Frame::Integer(offset as i64)];
    items.extend(replid.map(|id| Frame::Integer(id as i64)));
    items.extend(effects.iter().map(encode_effect));
    Frame::Array(items)
}

/// A message as the replica reads it.
struct Message {
    kind: Vec<u8>,
    offset: u64,
    /// A sync's: the primary's history.
    replid: Option<u64>,
    effects: Vec<Effect>,
}

fn parse_message(frame: Frame) -> Option<Message> {
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
    let replid = if kind == FULL || kind == PARTIAL {
        let Frame::Integer(id) = items.next()? else {
            return None;
        };
        Some(id as u64)
    } else {
        None
    };
    let effects = items.map(decode_effect).collect::<Option<Vec<_>>>()?;
    Some(Message {
        kind,
        offset: u64::try_from(offset).ok()?,
        replid,
        effects,
    })
}

/// The primary's side of one replica link, opened by `args` (`REPLSYNC
/// replid offset`): the sync, partial or full, then the stream, while
/// reading the replica's acknowledgements. `pending` holds what the
/// replica sent after `REPLSYNC` that the connection had already read.
pub async fn serve_replica(
    node: NodeHandle,
    stream: TcpStream,
    args: &[Vec<u8>],
    pending: Vec<u8>,
) {
    let (mut reader, mut writer) = stream.into_split();
    let (link, mut writes) = mpsc::unbounded_channel();
    // Where the replica is: a history and an offset in it (none: a full sync).
    let follows = match args {
        [_, replid, offset] => parse_i64(replid).zip(parse_i64(offset)),
        _ => None,
    };
    let (id, sync) = {
        let mut state = node.0.borrow_mut();
        let id = state.next_id();
        let time = state.time_at(clock::now());
        let partial = follows.is_some_and(|(replid, offset)| {
            state.continues(replid as u64, u64::try_from(offset).unwrap_or(u64::MAX))
        });
        let kind = if partial { PARTIAL } else { FULL };
        let sync = message(
            kind,
            state.offset,
            Some(state.replid),
            &state.db.snapshot(time),
        );
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
                    let frame = message(WRITE, offset, None, &effects);
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
    let (replid, offset, cron) = {
        let state = node.0.borrow();
        let waits = state.flavour.full_sync_waits_for_cron() && state.deployed;
        (
            state.replid,
            state.offset,
            waits.then_some(state.cron_phase),
        )
    };
    let hello = Frame::Array(vec![
        bulk(b"REPLSYNC"),
        bulk(replid.to_string().as_bytes()),
        bulk(offset.to_string().as_bytes()),
    ]);
    if writer.write_all(&to_bytes(&hello)).await.is_err() {
        return;
    }
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    // A full sync that arrived but waits for the replication cron to be
    // loaded: (load at, the sync).
    let mut loading: Option<(Duration, Message)> = None;
    // Writes received but not yet applied: (apply at, offset, effects).
    let mut queue: VecDeque<(Duration, u64, Vec<Effect>)> = VecDeque::new();
    loop {
        // The offset to acknowledge after this pass: a loaded sync's (as
        // Redis sends its first `REPLCONF ACK` once the sync is loaded), or
        // the last write's applied.
        let mut applied = None;
        if !still_following(node) {
            // Promoted or re-pointed: unapplied writes are lost.
            return;
        }
        let next_apply = loading
            .as_ref()
            .map(|(at, _)| *at)
            .or_else(|| queue.front().map(|(at, _, _)| *at));
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
                    let Some(message) = parse_message(frame) else {
                        return;
                    };
                    if let Some(loaded) = receive(node, message, &mut loading, &mut queue, cron) {
                        applied = Some(loaded);
                    }
                }
            }
            () = apply_due => {}
        }
        if loading.as_ref().is_some_and(|(at, _)| *at <= clock::now())
            && let Some((_, message)) = loading.take()
        {
            applied = Some(load(node, message));
        }
        while loading.is_none() && queue.front().is_some_and(|(at, _, _)| *at <= clock::now()) {
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

/// Takes one message off the link: a sync is loaded at once (returning
/// its offset, to acknowledge), or, a full one where the replica's
/// replication cron runs on phase `cron`, at its next tick; a write joins
/// the queue, to be applied after its lag, in order, and never before the
/// sync.
fn receive(
    node: &NodeHandle,
    message: Message,
    loading: &mut Option<(Duration, Message)>,
    queue: &mut VecDeque<(Duration, u64, Vec<Effect>)>,
    cron: Option<Duration>,
) -> Option<u64> {
    if message.kind == FULL || message.kind == PARTIAL {
        // The sync replaces everything; what was queued belongs to the
        // link before.
        queue.clear();
        if let Some(phase) = cron.filter(|_| message.kind == FULL) {
            *loading = Some((next_cron(clock::now(), phase), message));
            return None;
        }
        *loading = None;
        return Some(load(node, message));
    }
    let lag = {
        let mut state = node.0.borrow_mut();
        let lag = state.lag;
        lag.map_or(Duration::ZERO, |range| state.rng.duration(range))
    };
    let earliest = queue
        .back()
        .map(|(at, _, _)| *at)
        .into_iter()
        .chain(loading.as_ref().map(|(at, _)| *at))
        .max()
        .unwrap_or_default();
    queue.push_back((
        (clock::now() + lag).max(earliest),
        message.offset,
        message.effects,
    ));
    None
}

/// Loads a sync: the replica's data, offset and history become the
/// primary's. Returns the offset loaded.
fn load(node: &NodeHandle, sync: Message) -> u64 {
    let mut state = node.0.borrow_mut();
    let mut db = Db::default();
    for effect in &sync.effects {
        db.apply(effect);
    }
    state.db = db;
    state.offset = sync.offset;
    state.deployed = true;
    if let Some(replid) = sync.replid {
        state.replid = replid;
    }
    state.touch();
    sync.offset
}

/// The first tick of a replication cron on `phase` after true time `now`.
fn next_cron(now: Duration, phase: Duration) -> Duration {
    let period = REPLICATION_CRON.as_nanos();
    let since = now.as_nanos().saturating_sub(phase.as_nanos()) % period;
    let ticks_in = if now < phase {
        phase - now
    } else {
        Duration::from_nanos((period - since) as u64)
    };
    now + ticks_in
}

#[cfg(test)]
mod tests {
    use std::{cell::Cell, rc::Rc};

    use super::*;
    use crate::server::{
        flavour::Flavour,
        node::{NodeConfig, NodeHandle},
    };

    /// A write of `key` on primary `node`, streamed to its replicas.
    fn write(node: &NodeHandle, key: &str) {
        let effect = Effect::Set {
            key: key.as_bytes().to_vec(),
            value: b"v".to_vec(),
            expires_at: None,
        };
        let mut state = node.0.borrow_mut();
        state.db.apply(&effect);
        state.propagate(vec![effect]);
    }

    /// Whether every replica link of `node` acknowledged its last write.
    fn all_acked(node: &NodeHandle) -> bool {
        let state = node.0.borrow();
        !state.acked.is_empty() && state.acked.values().all(|&at| at >= state.offset)
    }

    /// redis-0, a primary of `flavour`, and its replica redis-1; redis-1
    /// is promoted, and redis-0, after a write redis-1 never had if
    /// `diverge`, made its replica (a failover that left the old primary
    /// running). Returns how long after the demotion a write on redis-1
    /// was acknowledged by redis-0, what kind of sync redis-0 had, and
    /// redis-0's replication cron phase.
    fn demoted(flavour: Flavour, diverge: bool) -> (Duration, bool, Duration) {
        let node = |index: usize, replica_of: Option<&str>| {
            NodeHandle::new(NodeConfig {
                index,
                replica_of: replica_of.map(str::to_owned),
                ..NodeConfig::standalone(flavour, crate::config::Persistence::None)
            })
        };
        let old = node(0, None);
        let new = node(1, Some("redis-0"));
        let mut sim = turmoil::Builder::new()
            .min_message_latency(Duration::from_millis(1))
            .max_message_latency(Duration::from_millis(1))
            .build();
        for (name, node) in [("redis-0", old.clone()), ("redis-1", new.clone())] {
            sim.host(name, move || super::super::serve(node.clone()));
        }
        let took = Rc::new(Cell::new(None));
        let full = Rc::new(Cell::new(false));
        let (took_in, full_in, old_in, new_in) =
            (Rc::clone(&took), Rc::clone(&full), old.clone(), new.clone());
        sim.client("controller", async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            write(&old_in, "a");
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(all_acked(&old_in), "the replica caught up");
            new_in.promote();
            if diverge {
                write(&old_in, "lost");
            }
            // Diverged or not, a sync from redis-1 replaces redis-0's data.
            full_in.set(!old_in.0.borrow().continues_on(&new_in));
            old_in.demote_keeping_clients("redis-1".to_owned());
            let demoted = crate::clock::now();
            write(&new_in, "b");
            while !all_acked(&new_in) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            took_in.set(Some(crate::clock::now() - demoted));
            assert!(old_in.peek("b", crate::clock::now()).is_some());
            assert!(old_in.peek("lost", crate::clock::now()).is_none());
            Ok(())
        });
        sim.run().expect("the failover runs");
        let phase = old.0.borrow().cron_phase;
        (took.get().expect("acknowledged"), full.get(), phase)
    }

    #[test]
    fn a_deposed_primary_with_writes_its_successor_lacks_resyncs_in_full() {
        for flavour in [Flavour::Redis7, Flavour::Valkey91] {
            let (took, full, _) = demoted(flavour, false);
            assert!(!full, "{flavour:?}: the same history, continued");
            assert!(took < Duration::from_millis(20), "{flavour:?}: {took:?}");
            let (_, full, _) = demoted(flavour, true);
            assert!(full, "{flavour:?}: diverged");
        }
        // Redis 7.0 loads a full sync at once.
        let (took, _, _) = demoted(Flavour::Redis7, true);
        assert!(took < Duration::from_millis(20), "{took:?}");
    }

    #[test]
    fn valkey_91_loads_a_full_sync_at_its_replication_cron() {
        let (took, _, phase) = demoted(Flavour::Valkey91, true);
        // Demoted at 200 ms (plus the reconnection's few ms): loaded at the
        // cron's first tick after the sync arrived.
        let tick = next_cron(Duration::from_millis(200), phase);
        let acked_at = Duration::from_millis(200) + took;
        assert!(
            acked_at >= tick,
            "acknowledged at {acked_at:?}, the cron at {tick:?}"
        );
        assert!(
            acked_at < tick + Duration::from_millis(20),
            "acknowledged at {acked_at:?}, the cron at {tick:?}"
        );
    }

    #[test]
    fn the_next_cron_tick_is_strictly_after_now_on_the_phase() {
        let ms = Duration::from_millis;
        assert_eq!(next_cron(ms(0), ms(300)), ms(300));
        assert_eq!(next_cron(ms(300), ms(300)), ms(1_300));
        assert_eq!(next_cron(ms(301), ms(300)), ms(1_300));
        assert_eq!(next_cron(ms(2_250), ms(300)), ms(2_300));
        assert_eq!(next_cron(ms(2_250), ms(0)), ms(3_000));
    }
}
