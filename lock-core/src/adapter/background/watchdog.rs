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
//! one call of the lock script, through the node's batcher (`wire::batch`,
//! the group commit the callers' acquires and releases use too). When the
//! earliest renewal falls due, every lock whose renewal is due within its
//! window (renew_every / 8) is renewed early and joins the same call.
//! Renewing early is always safe: validity still counts from each
//! renewal's own send.

use std::{
    collections::BTreeMap,
    sync::Arc,
    task::{Context, Poll},
    time::Instant,
};

use crate::adapter::{
    lock::{
        cell::{CellState, LockCell, Outgoing},
        dispatch::{self, CallFuture, Link, PendingCall},
        registry::Work,
        session::Session,
        timer::DeadlineTimer,
    },
    wire::{call, codec},
};
use crate::{CommandId, Reply};

/// Operations share a batch when they go to the same node, on the same
/// connection, with the same `WAIT` and `WAITAOF` after them.
type BatchGroup = (usize, u64, codec::Waits);

/// A call the watchdog waits on.
struct InFlight {
    node: usize,
    link: Link,
    /// When the call is presumed lost and its connection wedged.
    give_up_at: Instant,
    cell: Arc<LockCell>,
    id: CommandId,
    future: CallFuture,
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
                        // Early only to share a call: the family's locks
                        // never share one.
                        .filter(|cell| cell.names.kind == crate::LockKind::Plain)
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
            cell: Arc::clone(cell),
            id,
            future,
        });
    }

    /// Sends the drained commands. Those that go to one node's connection
    /// with the same `WAIT` after them join the node's batch together (one
    /// call of the lock script); a command alone goes as the hot path sends
    /// it (a lone renewal as a native `SET … IFEQ` where the server has
    /// one: `codec::encode`).
    fn send(
        &mut self,
        session: &Session,
        outgoing: Vec<(Arc<LockCell>, Vec<Outgoing>)>,
        now: Instant,
    ) {
        // The lock family's scripts run one operation per call: their
        // commands go the single way and count in no group.
        let group = |cell: &LockCell, out: &Outgoing| -> Option<BatchGroup> {
            if cell.names.kind != crate::LockKind::Plain {
                return None;
            }
            let live = out.live.as_ref()?;
            Some((out.node, live.generation, codec::Waits::of(&out.command)))
        };
        let mut sizes: BTreeMap<BatchGroup, usize> = BTreeMap::new();
        for (cell, outs) in &outgoing {
            for out in outs {
                if let Some(group) = group(cell, out) {
                    *sizes.entry(group).or_default() += 1;
                }
            }
        }
        for (cell, outs) in outgoing {
            for out in outs {
                let together = group(&cell, &out).is_some_and(|group| sizes[&group] > 1);
                let call = dispatch::start_with(session, &cell, out, now, together);
                self.adopt(&cell, call, now);
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
                Poll::Ready(reply) => {
                    let call = self.in_flight.swap_remove(index);
                    progressed = true;
                    deliver(session, call, reply, now);
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

/// Feeds a finished call's reply to the machine that sent it. Replies that
/// arrive here never wake a caller: a sending task that still waits reads
/// the outcome from the lock's state.
fn deliver(session: &Session, call: InFlight, reply: Reply, now: Instant) {
    if matches!(reply, Reply::Failed(f) if call::breaks_connection(f)) {
        call.link.break_connection(session);
    }
    let cell = call.cell;
    let mut state = cell.lock();
    state.machine.handle_reply(now, call.node, call.id, reply);
    let mut outs = Vec::new();
    let deadline = cell.drain(&mut state, session, now, &mut outs);
    session.watchdog.rearm(&cell, &mut state, deadline);
    if !outs.is_empty() {
        // A reply that produced a command (a retried release, a Redlock
        // round): hand it back to the watchdog's inbox.
        session.watchdog.submit(Work::Send(Arc::clone(&cell), outs));
        session.wake_driver();
    }
}
