//! Sending encoded commands and turning the answers into replies.
//!
//! A call is a future that owns everything it needs (a clone of the
//! multiplexed connection, the encoded command), so it can move between
//! the task that started it and the watchdog. It reloads the script after
//! `NOSCRIPT` (a restarted or failed-over node has an empty script cache)
//! and never waits on a timer of its own: the lock machine's command
//! timeout bounds it, and whoever drives the machine drops the call and
//! breaks its connection when that passes.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use redis::{Cmd, RedisError, Value, aio::MultiplexedConnection};

use super::{
    NodeAddress,
    cell::{LockCell, Outgoing},
    cluster::slot_of,
    node::Live,
    route::{self, ClusterRouter},
    session::Session,
    wire::{self, Encoded, OpKind, Plan, SetNxGet},
};
use crate::{Command, CommandId, Failure, Reply, scripts};

pub(crate) type CallFuture = Pin<Box<dyn Future<Output = Reply> + Send>>;

/// A command on its way to Redis.
pub(crate) struct PendingCall {
    pub(crate) node: usize,
    pub(crate) id: CommandId,
    /// The connection it went out on, to drop if it outlives its timeout.
    pub(crate) link: Link,
    /// When it went out.
    pub(crate) sent_at: std::time::Instant,
    pub(crate) future: CallFuture,
}

/// The connection a call uses.
#[derive(Clone)]
pub(crate) enum Link {
    /// None: the node had no connection.
    None,
    /// Node `.0`'s connection of generation `.1`.
    Node(usize, u64),
    /// A cluster call's current connection (it may follow redirections).
    Cluster(Arc<Mutex<Option<(NodeAddress, u64)>>>),
}

impl Link {
    /// Drops the connection the call is (or was last) on: it may be wedged.
    pub(crate) fn break_connection(&self, session: &Session) {
        match self {
            Self::None => {}
            Self::Node(node, generation) => session.break_connection(*node, *generation),
            Self::Cluster(current) => {
                let current = current
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                if let (Some((address, generation)), Some(router)) =
                    (current, session.cluster.as_ref())
                {
                    router.break_connection(&address, generation);
                }
            }
        }
    }
}

/// Starts sending `out` for the lock in `cell`: at once, or in the node's
/// open batch when other calls are in flight there (group commit).
pub(crate) fn start(
    session: &Session,
    cell: &Arc<LockCell>,
    out: Outgoing,
    now: std::time::Instant,
) -> PendingCall {
    let Outgoing {
        node,
        id,
        command,
        live,
    } = out;
    if let Some(router) = &session.cluster {
        let current = Arc::new(Mutex::new(None));
        return PendingCall {
            node,
            id,
            link: Link::Cluster(Arc::clone(&current)),
            sent_at: now,
            future: Box::pin(cluster(
                Arc::clone(router),
                Arc::clone(cell),
                command,
                current,
            )),
        };
    }
    let (Some(live), Some(slot)) = (live, session.nodes.get(node)) else {
        return PendingCall {
            node,
            id,
            link: Link::None,
            sent_at: now,
            future: Box::pin(std::future::ready(Reply::Failed(Failure::Connection))),
        };
    };
    let link = Link::Node(node, live.generation);
    let future: CallFuture = if batchable(&command) && slot.batcher.is_busy() {
        Box::pin(slot.batcher.join(
            &live,
            Arc::clone(&cell.names),
            Arc::clone(&cell.token),
            command,
        ))
    } else {
        let in_flight = slot.batcher.enter();
        let encoded = wire::encode(&cell.names, &cell.token, &command, live.dialect);
        let ttl = match command {
            crate::Command::Acquire { ttl, .. } => ttl,
            _ => Duration::ZERO,
        };
        let cell = Arc::clone(cell);
        Box::pin(async move {
            let _in_flight = in_flight;
            single(live, encoded, cell, ttl).await
        })
    };
    PendingCall {
        node,
        id,
        link,
        sent_at: now,
        future,
    }
}

/// Whether a command may share a script call with others: every script
/// operation without a `WAIT` behind it, and an unfenced acquire too (alone
/// it is a native `SET NX PX GET`, but in a batch it shares the call, which
/// costs less on both sides than a command of its own).
fn batchable(command: &Command) -> bool {
    match command {
        Command::Acquire { wait_replicas, .. } | Command::Renew { wait_replicas, .. } => {
            wait_replicas.is_none()
        }
        Command::Release => true,
    }
}

async fn single(live: Live, encoded: Encoded, cell: Arc<LockCell>, ttl: Duration) -> Reply {
    let mut conn = live.conn;
    match exchange(&mut conn, &encoded.call, encoded.wait.as_ref(), false).await {
        Ok((value, waited)) => finish(&encoded, &value, waited, &mut conn, &cell, ttl).await,
        Err(error) => Reply::Failed(wire::failure_of(&error)),
    }
}

/// Decodes the answer to one command (and its `WAIT`).
async fn finish(
    encoded: &Encoded,
    value: &Value,
    waited: Option<Value>,
    conn: &mut MultiplexedConnection,
    cell: &LockCell,
    ttl: Duration,
) -> Reply {
    let reply = match encoded.plan {
        Plan::Script(kind) => single_op(value, kind),
        Plan::SetNxGet => match wire::decode_set_nx_get(value, &cell.token) {
            Ok(SetNxGet::Granted) => Reply::Granted {
                fence: 0,
                replicas: None,
            },
            Ok(SetNxGet::Contended) => Reply::Contended { pttl: None },
            Ok(SetNxGet::AlreadyOurs) => own_refresh(conn, cell, ttl).await,
            Err(failure) => Reply::Failed(failure),
        },
    };
    match waited {
        Some(value) => wire::with_replicas(reply, wire::decode_wait(&value)),
        None => reply,
    }
}

/// One command of a lock in a Redis Cluster: to the primary of its slot,
/// following `MOVED`, `ASK` and `TRYAGAIN` (see `route`).
async fn cluster(
    router: Arc<ClusterRouter>,
    cell: Arc<LockCell>,
    command: Command,
    current: Arc<Mutex<Option<(NodeAddress, u64)>>>,
) -> Reply {
    let slot = slot_of(&cell.names.lock);
    let ttl = match command {
        Command::Acquire { ttl, .. } => ttl,
        _ => Duration::ZERO,
    };
    let mut asking: Option<NodeAddress> = None;
    let mut last = Failure::Moved;
    for attempt in 0..=route::MAX_REDIRECTS {
        let address = match asking.clone().or_else(|| router.owner(slot)) {
            Some(address) => address,
            None => {
                // No owner known for the slot yet: read the table again.
                router.request_refresh();
                router.changed().await;
                continue;
            }
        };
        let live = match router.connection(&address).await {
            Ok(live) => live,
            Err(failure) => {
                router.request_refresh();
                return Reply::Failed(failure);
            }
        };
        *current.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((address.clone(), live.generation));
        let encoded = wire::encode(&cell.names, &cell.token, &command, live.dialect);
        let mut conn = live.conn;
        let asked = asking.take().is_some();
        match exchange(&mut conn, &encoded.call, encoded.wait.as_ref(), asked).await {
            Ok((value, waited)) => {
                return finish(&encoded, &value, waited, &mut conn, &cell, ttl).await;
            }
            Err(error) => {
                if let Some(redirect) = route::redirect_of(&error, &address) {
                    tracing::debug!(?redirect, "redirected");
                    if route::is_moved(&redirect) {
                        router.learn(redirect.slot, redirect.to);
                    } else {
                        asking = Some(redirect.to);
                    }
                    last = wire::failure_of(&error);
                    continue;
                }
                let failure = wire::failure_of(&error);
                if failure == Failure::TryAgain {
                    last = failure;
                    tokio::time::sleep(route::try_again_delay(attempt)).await;
                    continue;
                }
                if matches!(failure, Failure::Connection | Failure::ClusterDown) {
                    router.request_refresh();
                }
                return Reply::Failed(failure);
            }
        }
    }
    // Too many redirections in a row: let the machine retry later.
    Reply::Failed(last)
}

/// A `SET NX GET` found our own key (a retry after a reply we never saw):
/// refresh its ttl, owner-checked, and count the grant only if that works.
async fn own_refresh(conn: &mut MultiplexedConnection, cell: &LockCell, ttl: Duration) -> Reply {
    let refresh = wire::encode_own_refresh(&cell.names, &cell.token, ttl);
    match exchange(conn, &refresh, None, false).await {
        Ok((value, _)) => match single_op(&value, OpKind::Renew) {
            Reply::Renewed { .. } => Reply::Granted {
                fence: 0,
                replicas: None,
            },
            Reply::NotOwner => Reply::Contended { pttl: None },
            other => other,
        },
        Err(error) => Reply::Failed(wire::failure_of(&error)),
    }
}

fn single_op(value: &Value, kind: OpKind) -> Reply {
    match wire::decode_script(value, &[kind]).pop() {
        Some(reply) => reply,
        // decode_script returns one reply per kind it is given.
        None => Reply::Failed(Failure::Protocol),
    }
}

/// Sends `call` (behind `ASKING` when `asking`, and with a pipelined
/// `WAIT` after it), reloading the script once on `NOSCRIPT`.
async fn exchange(
    conn: &mut MultiplexedConnection,
    call: &Cmd,
    wait: Option<&Cmd>,
    asking: bool,
) -> Result<(Value, Option<Value>), RedisError> {
    match send(conn, call, wait, asking).await {
        Err(error) if wire::failure_of(&error) == Failure::NoScript => {
            tracing::debug!("NOSCRIPT: loading the lock script");
            redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(scripts::LOCK.source)
                .query_async::<Value>(conn)
                .await?;
            send(conn, call, wait, asking).await
        }
        result => result,
    }
}

async fn send(
    conn: &mut MultiplexedConnection,
    call: &Cmd,
    wait: Option<&Cmd>,
    asking: bool,
) -> Result<(Value, Option<Value>), RedisError> {
    if !asking && wait.is_none() {
        return match conn.send_packed_command(call).await? {
            // redis-rs hands a top-level error reply back as a value.
            Value::ServerError(error) => Err(RedisError::from(error)),
            value => Ok((value, None)),
        };
    }
    // One round trip: `ASKING` right before the call when a migrating slot
    // sent us to its target, then the call, then `WAIT` for the replicas
    // to catch up with it (WAIT counts the writes this connection made).
    let mut pipe = redis::pipe();
    if asking {
        pipe.cmd("ASKING");
    }
    pipe.add_command(call.clone());
    if let Some(wait) = wait {
        pipe.add_command(wait.clone());
    }
    let count = 1 + usize::from(asking) + usize::from(wait.is_some());
    let values = conn.send_packed_commands(&pipe, 0, count).await?;
    let mut values = values.into_iter().skip(usize::from(asking));
    let Some(first) = values.next() else {
        return Err(RedisError::from((
            redis::ErrorKind::Parse,
            "a pipeline answered fewer replies than it had commands",
        )));
    };
    if let Value::ServerError(error) = first {
        return Err(RedisError::from(error));
    }
    Ok((first, values.next()))
}

/// Sends one batch of script operations and decodes a reply per operation.
pub(crate) async fn batch(
    live: Live,
    call: Cmd,
    wait: Option<Cmd>,
    kinds: Vec<OpKind>,
) -> Vec<Reply> {
    let mut conn = live.conn;
    match exchange(&mut conn, &call, wait.as_ref(), false).await {
        Ok((value, waited)) => {
            let replies = wire::decode_script(&value, &kinds);
            match waited {
                Some(waited) => {
                    let acked = wire::decode_wait(&waited);
                    replies
                        .into_iter()
                        .map(|reply| wire::with_replicas(reply, acked))
                        .collect()
                }
                None => replies,
            }
        }
        Err(error) => vec![Reply::Failed(wire::failure_of(&error)); kinds.len()],
    }
}

/// Whether a failure means the connection it came from should be dropped:
/// a command that timed out may have wedged the stream (a partition drops
/// segments and nothing retransmits), a reset or a reply we cannot parse
/// leaves the stream in an unknown state, and `READONLY` or a redirection
/// means the node we talk to is not the primary any more.
pub(crate) fn breaks_connection(failure: Failure) -> bool {
    matches!(
        failure,
        Failure::Timeout
            | Failure::Connection
            | Failure::ReadOnly
            | Failure::Protocol
            | Failure::Moved
            | Failure::MasterDown
    )
}
