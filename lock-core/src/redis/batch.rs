//! Group commit for the hot path: script operations that tasks send to the
//! same node at the same moment share one call of the lock script.
//!
//! A caller alone on its node sends at once: no batching, no added
//! latency. When other calls are in flight on the node (many tasks locking
//! at once), its operation joins the node's open batch instead. The first
//! operation opens the batch and yields to the scheduler once, so that
//! every task that is ready at that moment can join; then it seals the
//! batch and sends it as one `EVALSHA`. One reply comes back, and each
//! participant takes its own entry.
//!
//! Only one participant polls the call (whoever polled it last); when it
//! completes, that participant hands every other one its reply and wakes
//! it: one wake-up per participant, plus the opener's yield. A
//! participant that stops waiting (its future dropped) before the batch is
//! done wakes the others, so one of them seals or polls in its place: the
//! batch completes as long as anyone still waits for it.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
    task::{Context, Poll, Waker},
};

use super::{
    call,
    node::Live,
    wire::{self, BatchOp, OpKind},
};
use crate::{Command, Failure, Reply, scripts::KeyNames};

/// At most this many operations share one call.
const MAX_OPS: usize = 128;

type SendFuture = Pin<Box<dyn Future<Output = Vec<Reply>> + Send>>;

/// One operation waiting in an open batch.
struct Item {
    names: Arc<KeyNames>,
    token: Arc<str>,
    command: Command,
}

enum Phase {
    /// Accepting operations until the sealer seals it.
    Open { items: Vec<Item>, live: Live },
    /// Sent; the call is polled by whichever participant polls.
    Sending(SendFuture),
    /// Answered: one reply per participant, taken as each one collects.
    Done(Vec<Option<Reply>>),
}

struct Inner {
    phase: Phase,
    /// Each participant's waker, by index, while it waits.
    wakers: Vec<Option<Waker>>,
    /// Participants whose futures are gone.
    gone: Vec<bool>,
    /// The participant that seals the batch (the opener, unless it left).
    sealer: usize,
    /// The sealer yielded once, so every ready task had its chance to join.
    yielded: bool,
}

struct Batch {
    generation: u64,
    inner: Mutex<Inner>,
}

impl Batch {
    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A node's group-commit state.
#[derive(Default)]
pub(crate) struct Batcher {
    /// The batch accepting operations, if one is open.
    open: Mutex<Option<Arc<Batch>>>,
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

    fn open(&self) -> MutexGuard<'_, Option<Arc<Batch>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds one operation to the node's open batch (opening one if none is
    /// open on `live`'s connection) and returns the future of its reply.
    pub(crate) fn join(
        self: &Arc<Self>,
        live: &Live,
        names: Arc<KeyNames>,
        token: Arc<str>,
        command: Command,
    ) -> Joined {
        let in_flight = self.enter();
        let item = Item {
            names,
            token,
            command,
        };
        let mut open = self.open();
        if let Some(batch) = open.as_ref()
            && batch.generation == live.generation
        {
            let mut inner = batch.inner();
            if let Phase::Open { items, .. } = &mut inner.phase
                && items.len() < MAX_OPS
            {
                items.push(item);
                let index = items.len() - 1;
                inner.wakers.push(None);
                inner.gone.push(false);
                drop(inner);
                return Joined {
                    batch: Arc::clone(batch),
                    batcher: Arc::clone(self),
                    index,
                    done: false,
                    _in_flight: in_flight,
                };
            }
        }
        let batch = Arc::new(Batch {
            generation: live.generation,
            inner: Mutex::new(Inner {
                phase: Phase::Open {
                    items: vec![item],
                    live: live.clone(),
                },
                wakers: vec![None],
                gone: vec![false],
                sealer: 0,
                yielded: false,
            }),
        });
        *open = Some(Arc::clone(&batch));
        Joined {
            batch,
            batcher: Arc::clone(self),
            index: 0,
            done: false,
            _in_flight: in_flight,
        }
    }

    /// Stops `batch` from accepting operations, if it is the open one.
    fn close(&self, batch: &Arc<Batch>) {
        let mut open = self.open();
        if open.as_ref().is_some_and(|open| Arc::ptr_eq(open, batch)) {
            *open = None;
        }
    }
}

/// One participant's share of a batch: resolves to its own reply.
pub(crate) struct Joined {
    batch: Arc<Batch>,
    batcher: Arc<Batcher>,
    index: usize,
    done: bool,
    _in_flight: InFlight,
}

impl Future for Joined {
    type Output = Reply;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Reply> {
        let this = self.get_mut();
        let mut inner = this.batch.inner();
        if matches!(inner.phase, Phase::Open { .. }) {
            if inner.sealer != this.index {
                set_waker(&mut inner.wakers[this.index], cx);
                return Poll::Pending;
            }
            if !inner.yielded {
                // Yield once: every task ready now runs (and joins) first.
                inner.yielded = true;
                set_waker(&mut inner.wakers[this.index], cx);
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            // Seal. The batcher's lock comes first (join takes it before
            // the batch's), so let go of the batch meanwhile.
            drop(inner);
            this.batcher.close(&this.batch);
            inner = this.batch.inner();
            if let Phase::Open { items, live } =
                std::mem::replace(&mut inner.phase, Phase::Done(Vec::new()))
            {
                inner.phase = Phase::Sending(seal(items, live));
            }
        }
        if let Phase::Sending(call) = &mut inner.phase {
            let Poll::Ready(replies) = call.as_mut().poll(cx) else {
                set_waker(&mut inner.wakers[this.index], cx);
                return Poll::Pending;
            };
            inner.phase = Phase::Done(replies.into_iter().map(Some).collect());
            for (index, waker) in inner.wakers.iter_mut().enumerate() {
                if let Some(waker) = waker.take()
                    && index != this.index
                {
                    waker.wake();
                }
            }
        }
        let Phase::Done(replies) = &mut inner.phase else {
            // Every branch above leaves the batch sent or done, and a sent
            // batch that is not ready returned.
            unreachable!("the batch is done");
        };
        this.done = true;
        Poll::Ready(
            replies
                .get_mut(this.index)
                .and_then(Option::take)
                .unwrap_or(Reply::Failed(Failure::Protocol)),
        )
    }
}

impl Drop for Joined {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut inner = self.batch.inner();
        inner.gone[self.index] = true;
        inner.wakers[self.index] = None;
        if matches!(inner.phase, Phase::Done(_)) {
            return;
        }
        // Someone else must seal or poll in our place: the first
        // participant still waiting takes over as sealer, and everyone
        // still waiting is woken (whoever polls first drives the call).
        if inner.sealer == self.index
            && let Some(next) = inner.gone.iter().position(|gone| !gone)
        {
            inner.sealer = next;
            inner.yielded = true;
        }
        let wakers: Vec<Waker> = inner.wakers.iter_mut().filter_map(Option::take).collect();
        let abandoned = inner.gone.iter().all(|gone| *gone);
        drop(inner);
        if abandoned {
            // Nobody waits: an open batch must not take new operations
            // that nobody would seal. A sent one is dropped with its call.
            self.batcher.close(&self.batch);
        }
        for waker in wakers {
            waker.wake();
        }
    }
}

fn set_waker(slot: &mut Option<Waker>, cx: &Context<'_>) {
    match slot {
        Some(waker) if waker.will_wake(cx.waker()) => {}
        _ => *slot = Some(cx.waker().clone()),
    }
}

/// Encodes the sealed batch as one `EVALSHA` and starts sending it.
fn seal(items: Vec<Item>, live: Live) -> SendFuture {
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
    Box::pin(call::batch(live, cmd, None, kinds))
}
