//! Sending a lock's commands: at once, or in the node's open batch (group
//! commit), or to the primary of the lock's slot in a Redis Cluster,
//! following its redirections.
//!
//! Every command may share a batch: an unfenced acquire too (on Redis 7+
//! it goes as its own `SET NX PX GET` in the batch's pipeline, alone or
//! batched: inside the script it would cost Redis more), and a command
//! with a `WAIT` behind it (the batch's one `WAIT` counts every write of
//! the batch).
//!
//! A call is a future that owns everything it needs (a clone of the
//! multiplexed connection, the encoded command), so it can move between
//! the task that started it and the watchdog. Whoever drives the machine
//! drops the call and breaks its connection when its timeout passes.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
};

use redis::{Value, aio::MultiplexedConnection};

use super::{
    cell::{LockCell, Outgoing},
    shared::Shared,
};
use crate::{
    Command, CommandId, Failure, Reply,
    adapter::{
        connect::{dial::NodeAddress, node::Live, slots::slot_of},
        wire::{
            call::{self, exchange},
            codec::{self, Encoded, OpKind, Plan},
            route::{self, ClusterRouter},
        },
    },
};

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
    pub(crate) fn break_connection(&self, session: &Shared) {
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
    session: &Shared,
    cell: &Arc<LockCell>,
    out: Outgoing,
    now: std::time::Instant,
) -> PendingCall {
    start_with(session, cell, out, now, false)
}

/// [`start`], for a caller that sends other operations to the same node's
/// connection, with the same `WAIT`, at this moment (`together`): the
/// operation joins the node's batch even when nothing is in flight there,
/// so that all of them share one call.
pub(crate) fn start_with(
    session: &Shared,
    cell: &Arc<LockCell>,
    out: Outgoing,
    now: std::time::Instant,
    together: bool,
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
    let (Some(live), Some(batcher)) = (live, session.batchers.get(node)) else {
        return PendingCall {
            node,
            id,
            link: Link::None,
            sent_at: now,
            future: Box::pin(std::future::ready(Reply::Failed(Failure::Connection))),
        };
    };
    let link = Link::Node(node, live.generation);
    // A command the server cannot run at all goes the single way, which
    // refuses it before sending anything.
    // The family's scripts run one operation per call: their locks go the
    // single way too.
    let batchable = codec::unsupported(&command, live.dialect()).is_none()
        && cell.names.kind == crate::LockKind::Plain;
    let future: CallFuture = if batchable && (together || batcher.is_busy()) {
        Box::pin(batcher.join(
            &live,
            Arc::clone(&cell.names),
            Arc::clone(&cell.token),
            command,
        ))
    } else {
        let in_flight = batcher.enter();
        let cell = Arc::clone(cell);
        Box::pin(async move {
            let _in_flight = in_flight;
            single(live, command, cell).await
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

async fn single(live: Live, command: Command, cell: Arc<LockCell>) -> Reply {
    let dialect = live.dialect();
    if let Some(failure) = codec::unsupported(&command, dialect) {
        return Reply::Failed(failure);
    }
    let mut encoded = codec::encode(&cell.names, &cell.token, &command, dialect);
    let mut conn = live.conn.clone();
    match send_encoded(&live, &mut conn, &mut encoded, &command, &cell, false).await {
        Ok((value, waited)) => {
            finish(&live, &encoded, &value, &waited, &mut conn, &cell, &command).await
        }
        Err(error) => Reply::Failed(codec::failure_of(&error)),
    }
}

/// Sends `encoded` on `conn` (a connection of `live`). A native command the
/// server refuses (see [`codec::refuses_native`]) changed nothing: the
/// script's operation goes in its place, `encoded` becomes that, and a
/// refusal for good turns the native command off on the connection.
async fn send_encoded(
    live: &Live,
    conn: &mut MultiplexedConnection,
    encoded: &mut Encoded,
    command: &Command,
    cell: &LockCell,
    asking: bool,
) -> Result<(Value, Vec<Value>), redis::RedisError> {
    let result = exchange(conn, &encoded.call, &encoded.after(), asking).await;
    match result {
        Err(error) if encoded.plan == Plan::SetIfEq && codec::refuses_native(&error) => {
            tracing::debug!(%error, "SET IFEQ refused: renewing with the script");
            if codec::refuses_for_good(&error) {
                live.refusals.refuse_set_ifeq();
            }
            let mut dialect = live.dialect();
            dialect.set_ifeq = false;
            *encoded = codec::encode(&cell.names, &cell.token, command, dialect);
            exchange(conn, &encoded.call, &encoded.after(), asking).await
        }
        Err(error) if encoded.plan == Plan::DelIfEq && codec::refuses_native(&error) => {
            tracing::debug!(%error, "native release refused: releasing with the script");
            if codec::refuses_for_good(&error) {
                live.refusals.refuse_del_ifeq();
            }
            let mut dialect = live.dialect();
            dialect.delifeq = false;
            dialect.delex_ifeq = false;
            *encoded = codec::encode(&cell.names, &cell.token, command, dialect);
            exchange(conn, &encoded.call, &encoded.after(), asking).await
        }
        result => result,
    }
}

/// Decodes the answer to one command (and its `WAIT` and `WAITAOF`).
async fn finish(
    live: &Live,
    encoded: &Encoded,
    value: &Value,
    waited: &[Value],
    conn: &mut MultiplexedConnection,
    cell: &LockCell,
    command: &Command,
) -> Reply {
    let reply = match encoded.plan {
        Plan::Script(kind) => single_op(value, kind),
        Plan::SetIfEq => codec::decode_set_ifeq(value),
        Plan::DelIfEq => codec::decode_del_if_eq(value),
        Plan::SetNxGet => {
            call::set_nx_get_reply(conn, value, &cell.names, &cell.token, command).await
        }
    };
    let waited = encoded.waited(waited);
    if encoded.waits.waitaof_unknown(waited) {
        // A server whose version was not read, without WAITAOF: from now
        // on the connection fails such locks before sending.
        live.refusals.refuse_waitaof();
    }
    encoded.waits.apply(reply, waited)
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
        let dialect = live.dialect();
        if let Some(failure) = codec::unsupported(&command, dialect) {
            return Reply::Failed(failure);
        }
        let mut encoded = codec::encode(&cell.names, &cell.token, &command, dialect);
        let mut conn = live.conn.clone();
        let asked = asking.take().is_some();
        match send_encoded(&live, &mut conn, &mut encoded, &command, &cell, asked).await {
            Ok((value, waited)) => {
                return finish(&live, &encoded, &value, &waited, &mut conn, &cell, &command).await;
            }
            Err(error) => {
                if let Some(redirect) = route::redirect_of(&error, &address) {
                    tracing::debug!(?redirect, "redirected");
                    if route::is_moved(&redirect) {
                        router.learn(redirect.slot, redirect.to);
                    } else {
                        asking = Some(redirect.to);
                    }
                    last = codec::failure_of(&error);
                    continue;
                }
                let failure = codec::failure_of(&error);
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

fn single_op(value: &Value, kind: OpKind) -> Reply {
    match codec::decode_script(value, &[kind]).pop() {
        Some(reply) => reply,
        // decode_script returns one reply per kind it is given.
        None => Reply::Failed(Failure::Protocol),
    }
}
