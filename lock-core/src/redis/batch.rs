//! Group commit for the hot path: script operations that tasks send to the
//! same node at the same moment share one call of the lock script.
//!
//! A caller alone on its node sends at once: no batching, no added
//! latency. When other calls are in flight on the node (many tasks locking
//! at once), its operation joins the node's open batch instead. The first
//! operation opens the batch; the batch yields to the scheduler once, so
//! that every task that is ready at that moment can join, then seals
//! itself and goes out as one `EVALSHA`. One reply comes back, and each
//! participant takes its own entry.
//!
//! The batch is a shared future: every participant polls it, so it
//! completes even if the task that opened it stops waiting.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        Arc, Mutex, PoisonError, Weak,
        atomic::{AtomicUsize, Ordering},
    },
};

use futures_util::future::{FutureExt, Shared};

use super::{
    call,
    node::Live,
    wire::{self, BatchOp, OpKind},
};
use crate::{Command, Failure, Reply, scripts::KeyNames};

/// At most this many operations share one call.
const MAX_OPS: usize = 128;

type BatchFuture = Shared<Pin<Box<dyn Future<Output = Arc<Vec<Reply>>> + Send>>>;

/// One operation waiting in an open batch.
struct Item {
    names: Arc<KeyNames>,
    token: Arc<str>,
    command: Command,
}

struct OpenBatch {
    /// Tells this batch from later ones.
    serial: u64,
    generation: u64,
    items: Arc<Mutex<Vec<Item>>>,
    future: BatchFuture,
}

#[derive(Default)]
struct Open {
    batch: Option<OpenBatch>,
    next_serial: u64,
}

/// A node's group-commit state.
#[derive(Default)]
pub(crate) struct Batcher {
    open: Mutex<Open>,
    /// Calls in flight on the node from the hot path.
    in_flight: AtomicUsize,
}

/// Counts a call in flight for as long as it lives.
pub(crate) struct InFlight(Arc<Batcher>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Batcher {
    /// Counts a call in flight until the returned guard is dropped.
    pub(crate) fn enter(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(self))
    }

    /// Returns true if other calls are in flight, so an operation sent now
    /// would wait behind them anyway: joining a batch costs nothing.
    pub(crate) fn is_busy(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
    }

    /// Adds one operation to the node's open batch (opening one if none is
    /// open on `live`'s connection) and returns the future of its reply.
    pub(crate) fn join(
        self: &Arc<Self>,
        live: &Live,
        names: Arc<KeyNames>,
        token: Arc<str>,
        command: Command,
    ) -> impl Future<Output = Reply> + Send + 'static {
        let in_flight = self.enter();
        let item = Item {
            names,
            token,
            command,
        };
        let (future, index) = {
            let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
            let joinable = open.batch.as_ref().is_some_and(|batch| {
                batch.generation == live.generation
                    && batch
                        .items
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .len()
                        < MAX_OPS
            });
            if !joinable {
                let serial = open.next_serial;
                open.next_serial += 1;
                let items = Arc::new(Mutex::new(Vec::new()));
                let future = run(
                    Arc::downgrade(self),
                    serial,
                    Arc::clone(&items),
                    live.clone(),
                );
                open.batch = Some(OpenBatch {
                    serial,
                    generation: live.generation,
                    items,
                    future: future.boxed().shared(),
                });
            }
            // `joinable` or the branch above leaves a batch open.
            let Some(batch) = open.batch.as_ref() else {
                unreachable!("a batch is open");
            };
            let mut items = batch.items.lock().unwrap_or_else(PoisonError::into_inner);
            items.push(item);
            (batch.future.clone(), items.len() - 1)
        };
        async move {
            let _in_flight = in_flight;
            let replies = future.await;
            replies
                .get(index)
                .cloned()
                .unwrap_or(Reply::Failed(Failure::Protocol))
        }
    }
}

/// The body of one batch: let every ready task join, seal, send.
async fn run(
    batcher: Weak<Batcher>,
    serial: u64,
    items: Arc<Mutex<Vec<Item>>>,
    live: Live,
) -> Arc<Vec<Reply>> {
    tokio::task::yield_now().await;
    if let Some(batcher) = batcher.upgrade() {
        let mut open = batcher.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open
            .batch
            .as_ref()
            .is_some_and(|batch| batch.serial == serial)
        {
            open.batch = None;
        }
    }
    let items = std::mem::take(&mut *items.lock().unwrap_or_else(PoisonError::into_inner));
    let ops: Vec<BatchOp<'_>> = items
        .iter()
        .map(|item| BatchOp {
            keys: &item.names,
            token: &item.token,
            command: &item.command,
        })
        .collect();
    let kinds: Vec<OpKind> = items.iter().map(|item| OpKind::of(&item.command)).collect();
    let cmd = wire::encode_batch(&ops, live.dialect);
    drop(ops);
    Arc::new(call::batch(live, cmd, None, kinds).await)
}
