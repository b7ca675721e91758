//! Group commit, the one path for every batched operation: acquires,
//! renewals and releases that go to the same node at the same moment share
//! one call of the lock script, at most [`MAX_OPS`] of them, with one
//! `WAIT` after it when they ask for replica acknowledgements (operations
//! with different `WAIT` settings go in different batches).
//!
//! A caller alone on its node sends at once: no batching, no added
//! latency. When other calls are in flight on the node (many tasks locking
//! at once), or when the caller sends several operations at once (the
//! watchdog's renewals that fall due together), each operation joins the
//! node's open batch instead. The first
//! operation opens the batch and yields to the scheduler once, so that
//! every task that is ready at that moment can join; then it seals the
//! batch and sends it as one `EVALSHA`. One reply comes back, and each
//! participant takes its own entry. Operations with a native command go
//! out as that command in the same pipeline instead, where the server has
//! it (see [`native`](super::native)): unfenced acquires (`SET NX PX GET`,
//! Redis 7+), releases (`DELIFEQ`, Valkey 9+) and renewals (`SET IFEQ`,
//! Valkey 8.1+).
//!
//! Only one participant polls the call (whoever polled it last); when it
//! completes, that participant hands every other one its reply and wakes
//! it: one wake-up per participant, plus the opener's yield. A
//! participant that stops waiting (its future dropped) before the batch is
//! done wakes the others, so one of them seals or polls in its place: the
//! batch completes as long as anyone still waits for it.
//!
//! A large batch does not wake everyone at once. If it did, client and
//! Redis would take turns: the client handles every participant while
//! Redis idles, then Redis runs all their next operations while the client
//! idles. Instead the participant that completes it wakes half of the
//! others, and the other half wake once the next call on the node has gone
//! out, so Redis works on that call while the client handles them. With
//! two cores this doubles throughput at 64 tasks (the performance section
//! of `docs/evidence.md`). The completer yields at most twice waiting for that call, then
//! wakes the deferred half itself, so nobody waits on a call that never
//! comes.

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
    codec::{self, OpKind},
    item::Item,
    native,
};
use crate::adapter::connect::node::Live;
use crate::{Command, Failure, Reply, scripts::KeyNames};

/// At most this many operations share one script call, so that no single
/// call blocks the server for long.
pub(crate) const MAX_OPS: usize = 128;

/// A completed batch with at least this many other participants waiting
/// wakes only half of them at once: the rest wake once the next call on
/// the node is sent (see [`Batcher::deferred`]).
const SPLIT_MIN: usize = 8;

/// How many times the participant that completed a split batch yields,
/// waiting for the next call on the node to go out, before it wakes the
/// deferred half itself.
const BATON_YIELDS: u8 = 2;

type SendFuture = Pin<Box<dyn Future<Output = Vec<Reply>> + Send>>;

/// Sends a sealed batch's operations as one call (on the connection the
/// batch was opened for).
type SendFn = Box<dyn FnOnce(Vec<Item>) -> SendFuture + Send>;

enum Phase {
    /// Accepting operations until the sealer seals it.
    Open { items: Vec<Item>, send: SendFn },
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
    /// The `WAIT` and `WAITAOF` after the batch's call.
    wait: codec::Waits,
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
    /// The batches accepting operations: at most one per `WAIT` setting,
    /// all on the node's current connection.
    open: Mutex<Vec<Arc<Batch>>>,
    /// Calls in flight on the node from the hot path.
    in_flight: AtomicUsize,
    /// Participants of a completed batch whose wake-up waits until the next
    /// call on this node is sent. Waking every participant of a large batch
    /// at once keeps client and Redis in lock step: the client handles all
    /// of them while Redis idles, then Redis runs their next batch while the
    /// client idles. Waking half after the next call went out lets Redis
    /// run that call while the client handles the other half.
    deferred: Mutex<Vec<Waker>>,
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

    fn open(&self) -> MutexGuard<'_, Vec<Arc<Batch>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn deferred(&self) -> MutexGuard<'_, Vec<Waker>> {
        self.deferred.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes every deferred participant.
    fn wake_deferred(&self) {
        let wakers = std::mem::take(&mut *self.deferred());
        for waker in wakers {
            waker.wake();
        }
    }

    /// Adds one operation to the node's open batch for its `WAIT` setting
    /// (opening one if none is open on `live`'s connection, or if the open
    /// one is full) and returns the future of its reply.
    pub(crate) fn join(
        self: &Arc<Self>,
        live: &Live,
        names: Arc<KeyNames>,
        token: Arc<str>,
        command: Command,
    ) -> Joined {
        let item = Item {
            names,
            token,
            command,
        };
        let wait = codec::Waits::of(&item.command);
        self.join_with(live.generation, wait, item, || {
            let live = live.clone();
            Box::new(move |items| seal(items, live, wait))
        })
    }

    /// [`join`](Self::join), for a connection of `generation` that `send`
    /// sends on (called only if this operation opens a batch), with `wait`
    /// after the call.
    fn join_with(
        self: &Arc<Self>,
        generation: u64,
        wait: codec::Waits,
        item: Item,
        send: impl FnOnce() -> SendFn,
    ) -> Joined {
        let in_flight = self.enter();
        let mut open = self.open();
        if let Some(batch) = open
            .iter()
            .find(|batch| batch.generation == generation && batch.wait == wait)
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
                    baton: 0,
                    _in_flight: in_flight,
                };
            }
        }
        let batch = Arc::new(Batch {
            generation,
            wait,
            inner: Mutex::new(Inner {
                phase: Phase::Open {
                    items: vec![item],
                    send: send(),
                },
                wakers: vec![None],
                gone: vec![false],
                sealer: 0,
                yielded: false,
            }),
        });
        // The new batch replaces a full one of its setting; batches on an
        // older connection take nothing more.
        open.retain(|other| other.generation == generation && other.wait != wait);
        open.push(Arc::clone(&batch));
        Joined {
            batch,
            batcher: Arc::clone(self),
            index: 0,
            done: false,
            baton: 0,
            _in_flight: in_flight,
        }
    }

    /// Stops `batch` from accepting operations, if it is the open one.
    fn close(&self, batch: &Arc<Batch>) {
        self.open().retain(|open| !Arc::ptr_eq(open, batch));
    }
}

/// One participant's share of a batch: resolves to its own reply.
pub(crate) struct Joined {
    batch: Arc<Batch>,
    batcher: Arc<Batcher>,
    index: usize,
    done: bool,
    /// Yields left before this participant, which completed a split batch,
    /// wakes the deferred half itself (0: it holds no such duty).
    baton: u8,
    _in_flight: InFlight,
}

impl Future for Joined {
    type Output = Reply;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Reply> {
        let this = self.get_mut();
        if this.baton > 0 && !this.batcher.deferred().is_empty() {
            // The half woken first may still be forming the next batch:
            // give it the chance to send that before waking the rest.
            if this.baton > 1 && !this.batcher.open().is_empty() {
                this.baton -= 1;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            this.batcher.wake_deferred();
        }
        this.baton = 0;
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
            if let Phase::Open { items, send } =
                std::mem::replace(&mut inner.phase, Phase::Done(Vec::new()))
            {
                inner.phase = Phase::Sending(send(items));
            }
        }
        if let Phase::Sending(call) = &mut inner.phase {
            let Poll::Ready(replies) = call.as_mut().poll(cx) else {
                set_waker(&mut inner.wakers[this.index], cx);
                drop(inner);
                // This call is on its way: whoever was deferred until then
                // runs while Redis works on it.
                this.batcher.wake_deferred();
                return Poll::Pending;
            };
            inner.phase = Phase::Done(replies.into_iter().map(Some).collect());
            let own = this.index;
            let mut waiting: Vec<Waker> = inner
                .wakers
                .iter_mut()
                .enumerate()
                .filter_map(|(index, waker)| if index == own { None } else { waker.take() })
                .collect();
            drop(inner);
            if waiting.len() >= SPLIT_MIN {
                let later = waiting.split_off(waiting.len() / 2);
                this.batcher.deferred().extend(later);
                this.baton = BATON_YIELDS;
            }
            for waker in waiting {
                waker.wake();
            }
            if this.baton > 0 {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            inner = this.batch.inner();
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
        if self.baton > 0 {
            self.batcher.wake_deferred();
        }
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

/// Encodes the sealed batch and starts sending it, with `wait` after it:
/// as a pipeline of native commands (beside one script call for the
/// operations that have none) where the server has them (see
/// [`native`](super::native)), else as one `EVALSHA`.
fn seal(items: Vec<Item>, live: Live, wait: codec::Waits) -> SendFuture {
    if native::goes_native(&items, live.dialect()) {
        return Box::pin(native::send(live, items, wait));
    }
    let ops = native::ops_at(&items, 0..items.len());
    let kinds: Vec<OpKind> = items.iter().map(|item| OpKind::of(&item.command)).collect();
    let cmd = codec::encode_batch(&ops, live.dialect());
    Box::pin(call::batch(live, cmd, wait, kinds))
}

#[cfg(test)]
mod tests {
    use std::{
        sync::atomic::{AtomicBool, Ordering::SeqCst},
        task::Wake,
        time::Duration,
    };

    use super::*;

    /// A waker that remembers it was woken.
    #[derive(Default)]
    struct Flag(AtomicBool);

    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, SeqCst);
        }
    }

    /// The calls sealed batches made: how many operations each carried, and
    /// which of them Redis has answered. Operation `i` of a call is answered
    /// `Granted { fence: i }`, so a test sees who got which entry.
    #[derive(Default)]
    struct Wire {
        calls: Mutex<Vec<(usize, bool)>>,
    }

    impl Wire {
        fn sent(&self) -> Vec<usize> {
            self.calls
                .lock()
                .unwrap()
                .iter()
                .map(|(ops, _)| *ops)
                .collect()
        }

        fn answer(&self, call: usize) {
            self.calls.lock().unwrap()[call].1 = true;
        }

        fn send(self: &Arc<Self>) -> SendFn {
            let wire = Arc::clone(self);
            Box::new(move |items: Vec<Item>| {
                let call = {
                    let mut calls = wire.calls.lock().unwrap();
                    calls.push((items.len(), false));
                    calls.len() - 1
                };
                Box::pin(std::future::poll_fn(move |_| {
                    if wire.calls.lock().unwrap()[call].1 {
                        Poll::Ready(
                            (0..items.len())
                                .map(|i| Reply::Granted {
                                    fence: i as u64,
                                    replicas: None,
                                    aof: None,
                                })
                                .collect(),
                        )
                    } else {
                        Poll::Pending
                    }
                }))
            })
        }
    }

    /// One participant, polled by hand.
    struct Task {
        joined: Option<Joined>,
        flag: Arc<Flag>,
    }

    impl Task {
        fn poll(&mut self) -> Poll<Reply> {
            let waker = Waker::from(Arc::clone(&self.flag));
            let joined = self.joined.as_mut().expect("still waiting");
            Pin::new(joined).poll(&mut Context::from_waker(&waker))
        }

        /// Returns whether this task was woken since the last call.
        fn woken(&self) -> bool {
            self.flag.0.swap(false, SeqCst)
        }

        fn drop_future(&mut self) {
            self.joined = None;
        }
    }

    fn join(batcher: &Arc<Batcher>, wire: &Arc<Wire>, key: &str) -> Task {
        join_waiting(batcher, wire, key, None)
    }

    /// A renewal with `wait` after it.
    fn join_waiting(
        batcher: &Arc<Batcher>,
        wire: &Arc<Wire>,
        key: &str,
        wait: Option<(u32, Duration)>,
    ) -> Task {
        let command = match wait {
            None => Command::Release,
            Some(_) => Command::Renew {
                ttl: Duration::from_secs(1),
                wait_replicas: wait,
                wait_aof: None,
            },
        };
        let waits = codec::Waits::of(&command);
        let item = Item {
            names: Arc::new(KeyNames::new("test", key)),
            token: Arc::from("token"),
            command,
        };
        Task {
            joined: Some(batcher.join_with(1, waits, item, || wire.send())),
            flag: Arc::default(),
        }
    }

    #[test]
    fn operations_with_different_waits_go_in_different_batches() {
        let (batcher, wire) = (Arc::new(Batcher::default()), Arc::new(Wire::default()));
        let wait = Some((1, Duration::from_millis(50)));
        let mut tasks = vec![
            join(&batcher, &wire, "a"),
            join_waiting(&batcher, &wire, "b", wait),
            join(&batcher, &wire, "c"),
            join_waiting(&batcher, &wire, "d", wait),
        ];
        // Each opener yields once, then seals its own batch.
        for task in &mut tasks {
            assert!(task.poll().is_pending());
        }
        assert!(wire.sent().is_empty());
        assert!(tasks[0].poll().is_pending() && tasks[1].poll().is_pending());
        assert_eq!(wire.sent(), vec![2, 2]);
    }

    #[test]
    fn a_full_batch_makes_the_next_operation_open_another() {
        let (batcher, wire) = (Arc::new(Batcher::default()), Arc::new(Wire::default()));
        let mut tasks: Vec<Task> = (0..=MAX_OPS)
            .map(|i| join(&batcher, &wire, &i.to_string()))
            .collect();
        for task in &mut tasks {
            assert!(task.poll().is_pending());
        }
        assert!(tasks[0].poll().is_pending() && tasks[MAX_OPS].poll().is_pending());
        assert_eq!(wire.sent(), vec![MAX_OPS, 1]);
    }

    fn granted(fence: u64) -> Poll<Reply> {
        Poll::Ready(Reply::Granted {
            fence,
            replicas: None,
            aof: None,
        })
    }

    #[test]
    fn operations_joined_before_the_opener_seals_share_one_call() {
        let (batcher, wire, mut tasks) = gathered(3);
        assert!(tasks[0].poll().is_pending());
        assert_eq!(wire.sent(), vec![3]);
        assert!(batcher.is_busy());
        // Sealed: a new operation opens a new batch.
        let mut late = join(&batcher, &wire, "late");
        wire.answer(0);
        assert!(!tasks[1].woken());
        assert_eq!(tasks[0].poll(), granted(0));
        assert!(tasks[1].woken() && tasks[2].woken());
        assert_eq!(tasks[2].poll(), granted(2));
        assert_eq!(tasks[1].poll(), granted(1));
        assert!(late.poll().is_pending() && late.poll().is_pending());
        assert_eq!(wire.sent(), vec![3, 1]);
    }

    #[test]
    fn an_opener_dropped_before_sealing_hands_the_seal_to_the_next() {
        let (_batcher, wire, mut tasks) = gathered(3);
        tasks[0].drop_future();
        assert!(tasks[1].woken() && tasks[2].woken(), "the rest must learn");
        assert!(wire.sent().is_empty());
        // The next participant seals at once: the opener already yielded.
        assert!(tasks[2].poll().is_pending());
        assert!(wire.sent().is_empty(), "only the new sealer seals");
        assert!(tasks[1].poll().is_pending());
        assert_eq!(wire.sent(), vec![3]);
        wire.answer(0);
        assert_eq!(tasks[1].poll(), granted(1));
        assert!(tasks[2].woken());
        assert_eq!(tasks[2].poll(), granted(2));
    }

    #[test]
    fn a_poller_dropped_while_the_call_is_out_hands_the_call_to_another() {
        let (batcher, wire, mut tasks) = gathered(3);
        assert!(tasks[0].poll().is_pending());
        assert_eq!(wire.sent(), vec![3]);
        assert!(!tasks[1].woken());
        tasks[0].drop_future();
        assert!(tasks[1].woken() && tasks[2].woken());
        wire.answer(0);
        // Participant 1 was woken by the drop; it collects whenever it runs.
        assert_eq!(tasks[2].poll(), granted(2));
        assert_eq!(tasks[1].poll(), granted(1));
        assert!(batcher.is_busy(), "until the futures are gone");
        drop(tasks);
        assert!(!batcher.is_busy());
    }

    #[test]
    fn a_batch_everyone_left_takes_no_new_operations() {
        let (batcher, wire) = (Arc::new(Batcher::default()), Arc::new(Wire::default()));
        let mut first = join(&batcher, &wire, "a");
        assert!(first.poll().is_pending());
        first.drop_future();
        assert!(!batcher.is_busy());
        let mut next = join(&batcher, &wire, "b");
        assert!(next.poll().is_pending() && next.poll().is_pending());
        assert_eq!(wire.sent(), vec![1], "the abandoned batch is never sent");
        wire.answer(0);
        assert_eq!(next.poll(), granted(0));
    }

    /// `n` participants in one open batch: the opener has yielded once and
    /// every other one has joined; nothing is sent yet.
    fn gathered(n: usize) -> (Arc<Batcher>, Arc<Wire>, Vec<Task>) {
        let (batcher, wire) = (Arc::new(Batcher::default()), Arc::new(Wire::default()));
        let mut tasks: Vec<Task> = (0..n)
            .map(|i| join(&batcher, &wire, &i.to_string()))
            .collect();
        assert!(tasks[0].poll().is_pending());
        assert!(tasks[0].woken(), "the opener yields once");
        for task in &mut tasks[1..] {
            assert!(task.poll().is_pending());
        }
        assert!(wire.sent().is_empty());
        (batcher, wire, tasks)
    }

    /// Runs one batch of `n` participants to its answer, which participant
    /// 0 (the opener, which sealed it) will collect.
    fn complete(n: usize) -> (Arc<Batcher>, Arc<Wire>, Vec<Task>) {
        let (batcher, wire, mut tasks) = gathered(n);
        assert!(tasks[0].poll().is_pending());
        assert_eq!(wire.sent(), vec![n]);
        for task in &tasks {
            task.woken();
        }
        wire.answer(0);
        (batcher, wire, tasks)
    }

    #[test]
    fn a_large_batch_wakes_half_now_and_half_once_the_next_call_is_out() {
        let n = SPLIT_MIN + 1;
        let (batcher, wire, mut tasks) = complete(n);
        assert!(
            tasks[0].poll().is_pending(),
            "the completer waits for the next call"
        );
        let woken: Vec<bool> = tasks.iter().map(Task::woken).collect();
        let now = woken[1..].iter().filter(|w| **w).count();
        assert_eq!(now, SPLIT_MIN / 2, "{woken:?}");
        assert!(woken[0], "the completer yields");
        // The half woken now collects and starts the next batch.
        let mut next = join(&batcher, &wire, "next");
        assert!(next.poll().is_pending());
        for (i, task) in tasks.iter_mut().enumerate().skip(1).take(now) {
            assert_eq!(task.poll(), granted(i as u64));
        }
        // The completer yields while that batch is open.
        assert!(tasks[0].poll().is_pending());
        assert!(!tasks[n - 1].woken());
        // Sending it wakes the deferred half.
        assert!(next.poll().is_pending());
        assert_eq!(wire.sent().len(), 2);
        for task in &tasks[now + 1..] {
            assert!(task.woken());
        }
        assert_eq!(tasks[0].poll(), granted(0));
        for (i, task) in tasks.iter_mut().enumerate().skip(now + 1) {
            assert_eq!(task.poll(), granted(i as u64));
        }
    }

    #[test]
    fn the_deferred_half_wakes_even_if_no_next_call_goes_out() {
        let n = SPLIT_MIN + 1;
        let (_batcher, _wire, mut tasks) = complete(n);
        assert!(tasks[0].poll().is_pending());
        assert!(!tasks[n - 1].woken());
        // No batch was opened: the completer wakes the rest itself.
        assert_eq!(tasks[0].poll(), granted(0));
        assert!(tasks[n - 1].woken());
        assert_eq!(tasks[n - 1].poll(), granted(n as u64 - 1));
    }

    #[test]
    fn a_completer_dropped_before_waking_the_deferred_half_wakes_it() {
        let n = SPLIT_MIN + 1;
        let (_batcher, _wire, mut tasks) = complete(n);
        assert!(tasks[0].poll().is_pending());
        assert!(!tasks[n - 1].woken());
        tasks[0].drop_future();
        assert!(tasks[n - 1].woken());
        assert_eq!(tasks[n - 1].poll(), granted(n as u64 - 1));
    }

    #[test]
    fn a_small_batch_wakes_everyone_at_once() {
        let n = SPLIT_MIN;
        let (_batcher, _wire, mut tasks) = complete(n);
        assert_eq!(tasks[0].poll(), granted(0));
        for (i, task) in tasks.iter_mut().enumerate().skip(1) {
            assert!(task.woken());
            assert_eq!(task.poll(), granted(i as u64));
        }
    }
}
