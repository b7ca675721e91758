//! The hot path: a lock's machine driven from the caller's own task.
//!
//! `acquire` and `release` send their commands on a clone of the node's
//! multiplexed connection and wait for the answers in place: one round
//! trip, no hop through a shared task. The only timer is the machine's
//! next timeout (the command timeout while a command is out, the backoff
//! while contended), and a contended acquire also wakes when its lock's
//! channel announces a release.
//!
//! If the caller stops waiting (its future is dropped), whatever is left
//! goes to the watchdog: an acquire that may have set the key is released,
//! calls in flight are taken over, and nothing is lost.

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    task::Poll,
    time::Instant,
};

use tokio::sync::Notify;

use super::{
    cell::{CellState, LockCell, Outgoing},
    dispatch::{self, PendingCall},
    registry::Work,
    session::Session,
    timer::DeadlineTimer,
    waiters::Waiting,
};
use crate::{Reply, adapter::wire::call};

/// One waiter's place on a channel; leaving is dropping it.
pub(crate) struct WaitTicket {
    session: Arc<Session>,
    channel: String,
    pub(crate) waiting: Arc<Waiting>,
}

impl WaitTicket {
    /// Enters `channel`: the driver subscribes if this is its first waiter.
    pub(crate) fn enter(session: &Arc<Session>, channel: String) -> Self {
        let (waiting, first) = {
            let mut channels = session.waiters.channels();
            let entry = channels.waiting.entry(channel.clone()).or_insert_with(|| {
                (
                    0,
                    Arc::new(Waiting {
                        notify: Notify::new(),
                        epoch: AtomicU64::new(0),
                    }),
                )
            });
            entry.0 += 1;
            let waiting = Arc::clone(&entry.1);
            let first = entry.0 == 1;
            channels.dirty |= first;
            (waiting, first)
        };
        if first {
            session.wake_driver();
        }
        Self {
            session: Arc::clone(session),
            channel,
            waiting,
        }
    }
}

impl Drop for WaitTicket {
    fn drop(&mut self) {
        let last = {
            let mut channels = self.session.waiters.channels();
            let last = match channels.waiting.get_mut(&self.channel) {
                Some(entry) => {
                    entry.0 -= 1;
                    entry.0 == 0
                }
                None => false,
            };
            if last {
                channels.waiting.remove(&self.channel);
                channels.dirty = true;
            }
            last
        };
        if last {
            self.session.wake_driver();
        }
    }
}

/// What woke the run loop.
enum Woke {
    Reply(usize, Reply),
    Timer,
    Wakeup,
}

/// The calls a run loop waits on, handed to the watchdog if the loop is
/// dropped before it is done.
struct Running<'a> {
    session: &'a Arc<Session>,
    cell: &'a Arc<LockCell>,
    calls: Vec<PendingCall>,
    done: bool,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // The caller gave up (its future was dropped): the watchdog takes
        // the lock over. An acquire still in progress is cancelled, which
        // releases a key an attempt may have set.
        let now = self.session.clock.now();
        let mut state = self.cell.lock();
        let mut outgoing = Vec::new();
        if state.acquire_result.is_none() {
            state.machine.release(now);
        }
        let deadline = self
            .cell
            .drain(&mut state, self.session, now, &mut outgoing);
        self.session.watchdog.watch(self.cell, &mut state, deadline);
        drop(state);
        if !outgoing.is_empty() {
            self.session
                .watchdog
                .submit(Work::Send(Arc::clone(self.cell), outgoing));
        }
        let calls = std::mem::take(&mut self.calls);
        if !calls.is_empty() {
            self.session
                .watchdog
                .submit(Work::Adopt(Arc::clone(self.cell), calls));
        }
        self.session.wake_driver();
    }
}

/// Waits for the first of: a reply to one of `calls`, a release announced
/// on the lock's channel since `seen_epoch` (while `ticket` waits on it),
/// and `timer`.
async fn wait(
    calls: &mut [PendingCall],
    ticket: Option<&WaitTicket>,
    seen_epoch: u64,
    timer: &mut DeadlineTimer,
) -> Woke {
    let notified = ticket.map(|ticket| ticket.waiting.notify.notified());
    let mut notified = std::pin::pin!(notified);
    std::future::poll_fn(|cx| {
        for (index, call) in calls.iter_mut().enumerate() {
            if let Poll::Ready(reply) = call.future.as_mut().poll(cx) {
                return Poll::Ready(Woke::Reply(index, reply));
            }
        }
        if let (Some(ticket), Some(notified)) = (ticket, notified.as_mut().as_pin_mut()) {
            if ticket.waiting.epoch.load(Ordering::Acquire) != seen_epoch {
                return Poll::Ready(Woke::Wakeup);
            }
            if notified.poll(cx).is_ready() {
                return Poll::Ready(Woke::Wakeup);
            }
        }
        if timer.poll_expired(cx) {
            return Poll::Ready(Woke::Timer);
        }
        Poll::Pending
    })
    .await
}

/// Drives `cell` from the calling task: sends `outgoing` (drained after
/// the input the caller just gave at `now`), then feeds replies, timeouts
/// and wake-ups until `done` holds. Calls still in flight then (a Redlock
/// round's minority) go to the watchdog.
///
/// Each pass reads the injected clock once, when it wakes, and hands that
/// `now` to the machine, the drain, the sends and the timer.
pub(crate) async fn run(
    session: &Arc<Session>,
    cell: &Arc<LockCell>,
    mut now: Instant,
    mut outgoing: Vec<Outgoing>,
    mut deadline: Option<Instant>,
    done: fn(&CellState) -> bool,
) {
    let mut running = Running {
        session,
        cell,
        calls: Vec::new(),
        done: false,
    };
    let mut timer = session.timers.take();
    let mut ticket: Option<WaitTicket> = None;
    let mut seen_epoch = 0;
    loop {
        for out in outgoing.drain(..) {
            running.calls.push(dispatch::start(session, cell, out, now));
        }
        let contended = {
            let state = cell.lock();
            if done(&state) {
                break;
            }
            state.contended
        };
        if contended && ticket.is_none() && !session.redlock {
            let entered = WaitTicket::enter(session, cell.names.channel());
            seen_epoch = entered.waiting.epoch.load(Ordering::Acquire);
            ticket = Some(entered);
        }
        timer.arm(deadline, now);
        let woke = wait(&mut running.calls, ticket.as_ref(), seen_epoch, &mut timer).await;
        now = session.clock.now();
        let mut state = cell.lock();
        match woke {
            Woke::Reply(index, reply) => {
                let call = running.calls.swap_remove(index);
                if let Reply::Failed(failure) = reply
                    && call::breaks_connection(failure)
                {
                    call.link.break_connection(session);
                }
                state.machine.handle_reply(now, call.node, call.id, reply);
            }
            Woke::Timer => {
                state.machine.handle_timeout(now);
                // Calls the machine gave up on are dropped; one that
                // outlived the command timeout may have wedged its stream.
                running.calls.retain(|call| {
                    let wanted = state.machine.awaits(call.node, call.id);
                    if !wanted && now >= call.sent_at + cell.command_timeout {
                        call.link.break_connection(session);
                    }
                    wanted
                });
            }
            Woke::Wakeup => {
                if let Some(ticket) = &ticket {
                    seen_epoch = ticket.waiting.epoch.load(Ordering::Acquire);
                }
                state.machine.handle_wakeup(now);
            }
        }
        deadline = cell.drain(&mut state, session, now, &mut outgoing);
        if session.watchdog.rearm(cell, &mut state, deadline) {
            session.wake_driver();
        }
    }
    running.done = true;
    let calls = std::mem::take(&mut running.calls);
    if !calls.is_empty() {
        // A Redlock grant (or failure) came before every node answered:
        // the stragglers still matter to the per-node machines.
        session
            .watchdog
            .submit(Work::Adopt(Arc::clone(cell), calls));
        session.wake_driver();
    }
}
