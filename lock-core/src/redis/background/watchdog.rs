//! The watchdog: renews every held lock on its machine's timer, fires each
//! lock's expiry on time, and finishes what callers left behind (a guard
//! dropped without `release`, an acquire abandoned mid-flight, the
//! minority replies of a Redlock round).
//!
//! Its index ([`Registry`]) is shared: a task that acquires or releases
//! re-arms its lock's entry in passing, without waking the watchdog unless
//! the new deadline is earlier than what it sleeps on. The watchdog itself
//! runs inside the locker's driver future.
//!
//! **Group commit.** Renewals that fall due together go to each node as
//! one call of the lock script. When the earliest renewal falls due, every
//! lock whose renewal is due within its window (renew_every / 8) is renewed
//! early and joins the same call. Renewing early is always safe: validity
//! still counts from each renewal's own send.

use std::{
    collections::BTreeMap,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::{Duration, Instant},
};

use crate::redis::{
    connect::node::Live,
    lock::{
        cell::{CellState, LockCell, Outgoing},
        dispatch::{self, Link, PendingCall},
        registry::Work,
        session::Session,
        timer::DeadlineTimer,
    },
    wire::{
        batch, call,
        codec::{self, BatchOp, OpKind},
    },
};
use crate::{Command, CommandId, Failure, Reply};

/// Operations share a batch when they go to the same node, on the same
/// connection, with the same `WAIT` after them.
type BatchGroup = (usize, u64, Option<(u32, Duration)>);

/// One operation of a batch: whose, which command id, what.
type BatchEntry = (Arc<LockCell>, CommandId, Command);

/// A call the watchdog waits on: a batch, or one adopted call.
struct InFlight {
    node: usize,
    link: Link,
    /// When the call is presumed lost and its connection wedged.
    give_up_at: Instant,
    targets: Vec<(Arc<LockCell>, CommandId)>,
    future: Pin<Box<dyn Future<Output = Vec<Reply>> + Send>>,
}

/// The watchdog's part of the driver.
pub(crate) struct Watchdog {
    timer: DeadlineTimer,
    in_flight: Vec<InFlight>,
}

impl Watchdog {
    pub(crate) fn new() -> Self {
        Self {
            timer: DeadlineTimer::new(),
            in_flight: Vec::new(),
        }
    }

    /// Returns true while calls are in flight.
    pub(crate) fn is_busy(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// Does everything that is due at `now` (the driver's pass reading of
    /// the clock), sends what that produced, and arms the timer for the
    /// next deadline.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>, session: &Session, now: Instant) {
        loop {
            let mut outgoing: Vec<(Arc<LockCell>, Vec<Outgoing>)> = Vec::new();
            let (inbox, due, early) = {
                let mut index = session.watchdog.index();
                index.sleeping_until = None;
                let inbox = std::mem::take(&mut index.inbox);
                let mut due = Vec::new();
                while let Some(&(at, id)) = index.timers.first() {
                    if at > now {
                        break;
                    }
                    index.timers.pop_first();
                    if let Some(cell) = index.locks.get(&id) {
                        due.push(Arc::clone(cell));
                    }
                }
                let early: Vec<Arc<LockCell>> = if due.is_empty() {
                    Vec::new()
                } else {
                    index
                        .timers
                        .range((now, 0)..=(now + index.renew_window, u64::MAX))
                        .filter_map(|(_, id)| index.locks.get(id).map(Arc::clone))
                        .collect()
                };
                (inbox, due, early)
            };
            for work in inbox {
                match work {
                    Work::Send(cell, outs) => outgoing.push((cell, outs)),
                    Work::Adopt(cell, calls) => {
                        for call in calls {
                            self.adopt(&cell, call, now);
                        }
                    }
                    Work::Release(cell) => {
                        let mut state = cell.lock();
                        state.machine.release(now);
                        drain(session, &cell, &mut state, now, &mut outgoing);
                    }
                }
            }
            for cell in due {
                let mut state = cell.lock();
                state.machine.handle_timeout(now);
                drain(session, &cell, &mut state, now, &mut outgoing);
            }
            for cell in early {
                let mut state = cell.lock();
                if state
                    .machine
                    .renewal_due()
                    .is_some_and(|at| at <= now + cell.renew_window)
                {
                    state.machine.renew_early(now);
                    drain(session, &cell, &mut state, now, &mut outgoing);
                }
            }
            let sent = !outgoing.is_empty();
            self.send(session, outgoing, now);
            let answered = self.poll_in_flight(cx, session, now);
            if !sent && !answered {
                break;
            }
        }
        self.arm(cx, session, now);
    }

    fn adopt(&mut self, cell: &Arc<LockCell>, call: PendingCall, now: Instant) {
        let PendingCall {
            node,
            id,
            link,
            sent_at,
            future,
        } = call;
        self.in_flight.push(InFlight {
            node,
            link,
            give_up_at: sent_at.max(now) + cell.command_timeout,
            targets: vec![(Arc::clone(cell), id)],
            future: Box::pin(async move { vec![future.await] }),
        });
    }

    /// Sends the drained commands: script operations grouped per node,
    /// connection and `WAIT` setting into batches; the rest one by one.
    fn send(
        &mut self,
        session: &Session,
        outgoing: Vec<(Arc<LockCell>, Vec<Outgoing>)>,
        now: Instant,
    ) {
        let mut groups: BTreeMap<BatchGroup, (Live, Vec<BatchEntry>)> = BTreeMap::new();
        for (cell, outs) in outgoing {
            for out in outs {
                let batchable = matches!(out.command, Command::Renew { .. } | Command::Release);
                match (&out.live, batchable) {
                    (Some(live), true) => {
                        let wait = match out.command {
                            Command::Renew { wait_replicas, .. } => wait_replicas,
                            _ => None,
                        };
                        let group = (out.node, live.generation, wait);
                        groups
                            .entry(group)
                            .or_insert_with(|| (live.clone(), Vec::new()))
                            .1
                            .push((Arc::clone(&cell), out.id, out.command));
                    }
                    _ => {
                        let call = dispatch::start(session, &cell, out, now);
                        self.adopt(&cell, call, now);
                    }
                }
            }
        }
        for ((node, generation, wait), (live, mut ops)) in groups {
            // A renewal alone goes as a native `SET … IFEQ` where the server
            // has one (codec::encode), not as a script batch of one.
            if let [(_, _, Command::Renew { .. })] = ops.as_slice()
                && live.dialect().set_ifeq
                && let Some((cell, id, command)) = ops.pop()
            {
                let out = Outgoing {
                    node,
                    id,
                    command,
                    live: Some(live),
                };
                let call = dispatch::start(session, &cell, out, now);
                self.adopt(&cell, call, now);
                continue;
            }
            for chunk in ops.chunks(batch::MAX_OPS) {
                let batch: Vec<BatchOp<'_>> = chunk
                    .iter()
                    .map(|(cell, _, command)| BatchOp {
                        keys: &cell.names,
                        token: &cell.token,
                        command,
                    })
                    .collect();
                let cmd = codec::encode_batch(&batch, live.dialect());
                let kinds: Vec<OpKind> = chunk.iter().map(|(_, _, c)| OpKind::of(c)).collect();
                let timeout = chunk
                    .iter()
                    .map(|(cell, _, _)| cell.command_timeout)
                    .min()
                    .unwrap_or(Duration::from_secs(1));
                self.in_flight.push(InFlight {
                    node,
                    link: Link::Node(node, generation),
                    give_up_at: now + timeout,
                    targets: chunk
                        .iter()
                        .map(|(cell, id, _)| (Arc::clone(cell), *id))
                        .collect(),
                    future: Box::pin(call::batch(live.clone(), cmd, wait, kinds)),
                });
            }
        }
    }

    /// Feeds the answers of finished calls to their machines; drops calls
    /// that outlived their timeout and breaks their connections. Returns
    /// true if anything was answered or dropped.
    fn poll_in_flight(&mut self, cx: &mut Context<'_>, session: &Session, now: Instant) -> bool {
        let mut progressed = false;
        let mut index = 0;
        while index < self.in_flight.len() {
            let call = &mut self.in_flight[index];
            match call.future.as_mut().poll(cx) {
                Poll::Ready(replies) => {
                    let call = self.in_flight.swap_remove(index);
                    progressed = true;
                    deliver(session, call, replies, now);
                }
                Poll::Pending if now >= call.give_up_at => {
                    let call = self.in_flight.swap_remove(index);
                    progressed = true;
                    call.link.break_connection(session);
                    // The machines time the command out on their own timers.
                }
                Poll::Pending => index += 1,
            }
        }
        progressed
    }

    fn arm(&mut self, cx: &mut Context<'_>, session: &Session, now: Instant) {
        let next_timer = {
            let mut index = session.watchdog.index();
            let next = index.timers.first().map(|(at, _)| *at);
            index.sleeping_until = next;
            next
        };
        let give_up = self.in_flight.iter().map(|call| call.give_up_at).min();
        let next = [next_timer, give_up].into_iter().flatten().min();
        // Already due: the driver looks again at once.
        self.timer.poll_at(cx, next, now);
    }
}

/// Drains `cell` after an input and re-arms its index entry.
fn drain(
    session: &Session,
    cell: &Arc<LockCell>,
    state: &mut CellState,
    now: Instant,
    outgoing: &mut Vec<(Arc<LockCell>, Vec<Outgoing>)>,
) {
    let mut outs = Vec::new();
    let deadline = cell.drain(state, session, now, &mut outs);
    session.watchdog.rearm(cell, state, deadline);
    if !outs.is_empty() {
        outgoing.push((Arc::clone(cell), outs));
    }
}

/// Feeds a finished call's replies to the machines that sent it. Replies
/// that arrive here never wake a caller: a sending task that still waits
/// reads the outcome from the lock's state.
fn deliver(session: &Session, call: InFlight, replies: Vec<Reply>, now: Instant) {
    if replies
        .iter()
        .any(|reply| matches!(reply, Reply::Failed(f) if call::breaks_connection(*f)))
    {
        call.link.break_connection(session);
    }
    let mut replies = replies.into_iter();
    for (cell, id) in call.targets {
        let reply = replies.next().unwrap_or(Reply::Failed(Failure::Protocol));
        let mut state = cell.lock();
        state.machine.handle_reply(now, call.node, id, reply);
        let mut outs = Vec::new();
        let deadline = cell.drain(&mut state, session, now, &mut outs);
        session.watchdog.rearm(&cell, &mut state, deadline);
        if !outs.is_empty() {
            // A reply that produced a command (a retried release, a
            // Redlock round): hand it back to the watchdog's inbox.
            session.watchdog.submit(Work::Send(Arc::clone(&cell), outs));
            session.wake_driver();
        }
    }
}
