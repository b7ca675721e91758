//! Redlock: one lock over N independent Redis primaries, held while a The type and its rules: [`RedlockMachine`].

use std::{
    collections::VecDeque,
    sync::Arc,
    time::{Duration, Instant},
};

use crate::{
    AcquireFailure, Command, CommandId, Event, LockMachine, LockOptions, LostReason, Machine,
    OptionsError, Phase, ReleaseOutcome, Reply, UsageError, jitter::Jitter, scripts::KeyNames,
};

/// Why a Redlock could not be set up.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RedlockError {
    /// The options break a timing rule.
    #[error("invalid lock options: {0}")]
    Options(#[from] OptionsError),
    /// Redlock needs at least one node.
    #[error("redlock needs at least one node")]
    NoNodes,
}

/// Command ids carry the round in their high bits, so that a late answer to
/// an earlier round's command never reaches this round's machine.
const ROUND_SHIFT: u32 = 40;
const INNER_MASK: u64 = (1 << ROUND_SHIFT) - 1;

/// The quorum's own progress, private: [`Machine::phase`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Idle,
    /// A round is out: waiting for a majority to grant, or for every node
    /// to settle.
    Trying {
        give_up_at: Instant,
    },
    /// Between rounds.
    BackingOff {
        give_up_at: Instant,
        retry_at: Instant,
    },
    /// Undoing a round that failed; then retry (or fail).
    Undoing {
        give_up_at: Instant,
        failure: Option<AcquireFailure>,
    },
    Held {
        valid_until: Instant,
    },
    Releasing,
    Lost,
    Released,
}

/// The quorum lock machine: one lock over N independent Redis primaries,
/// held while a majority of them hold it.
///
/// majority of them hold it.
///
/// [`RedlockMachine`] composes one single-node [`LockMachine`] per node, all
/// with the same key and token, so every per-node timing rule still holds
/// and the Redlock rules follow from them:
/// - **Validity counts from before the first request**: every node's
///   command of a round is handed out at the same `now`, so each node's
///   `valid_until` is `sent_at + ttl − drift` (timing rule 1).
/// - **A grant needs a majority with validity left**: the lock's deadline
///   is the latest instant at which at least `N/2 + 1` nodes are still
///   valid; a round that ends without a majority, or past that deadline,
///   releases every node — including the ones that seemed to fail — and
///   retries after a jittered backoff.
/// - **The grant does not wait for the slowest node**: it comes as soon as
///   a majority holds the lock. The nodes still out keep going: a late
///   grant joins the lock (with validity from the same first send, so it
///   never extends the deadline past what is true) and is renewed with the
///   others; a late refusal leaves the lock to the majority. A release
///   reaches those nodes too, sent behind their acquire on the same
///   connection. (If that connection breaks, or the node lost its script
///   cache, the acquire may run after the release: our key then stays on
///   that one node, a minority, until its ttl.)
/// - **A release is reported once a majority deleted the key**; the other
///   nodes' releases finish afterwards, and the machine is
///   [`is_released`](Machine::is_released) only once they have, and once
///   every node has stopped retrying a release left unknown in the
///   background (the single node's timing rule 9; an undone round's nodes
///   stop at the next round, which starts fresh ones).
/// - **Renewal needs a majority**: each node renews on its own timer; the
///   lock is lost (reason Expired) once fewer than a majority remain valid,
///   at the deadline, whether or not any node answers (timing rule 3).
/// - **Release goes to every node.**
///
/// **Fencing in Redlock mode.** Each node issues its own token. The fence
/// reported is the highest token among the granting majority. Any two
/// majorities share a node, and on that node tokens strictly increase, so
/// the fence is at least the shared node's newer token — but another node
/// of the older majority may have issued a higher one. With time-mixed
/// tokens the fence increases across grants only while the nodes' clocks
/// disagree by less than the time between grants. Do not rely on it for
/// strict ordering; if writes must be fenced, use a single primary's
/// token or a dedicated fencing service.
/// The drain rule is the same as [`LockMachine`]'s: after every input, drain
/// [`poll_command`](Self::poll_command) (each command names its node),
/// [`poll_event`](Self::poll_event), and re-arm to
/// [`poll_timeout`](Self::poll_timeout).
#[derive(Debug, Clone)]
pub struct RedlockMachine {
    opts: LockOptions,
    keys: Arc<KeyNames>,
    token: Arc<str>,
    nodes: Vec<LockMachine>,
    step: Step,
    round: u64,
    attempts: u32,
    events: VecDeque<Event>,
    jitter: Jitter,
    lost_emitted: bool,
    fence: u64,
    /// Nodes whose release deleted our key, in the current release.
    deleted: usize,
    /// The current release's outcome was reported (it may be, before every
    /// node answered: once a majority deleted the key).
    release_reported: bool,
}

impl RedlockMachine {
    /// Creates a machine for `key` over `node_count` nodes, owned by `token`.
    /// Fails on fair mode: the lock family needs one node's queue and
    /// leases (see [`LockKind`](crate::LockKind)).
    pub fn new(
        opts: &LockOptions,
        key: &str,
        token: String,
        node_count: usize,
        jitter_seed: u64,
    ) -> Result<Self, RedlockError> {
        opts.validate()?;
        if opts.is_fair() {
            return Err(RedlockError::Options(OptionsError::FairUnsupported {
                kind: "redlock",
            }));
        }
        if node_count == 0 {
            return Err(RedlockError::NoNodes);
        }
        let mut machine = Self {
            opts: opts.clone(),
            keys: Arc::new(KeyNames::in_namespace(
                &opts.namespace,
                key,
                crate::LockKind::Plain,
            )),
            token: token.into(),
            nodes: Vec::new(),
            step: Step::Idle,
            round: 0,
            attempts: 0,
            events: VecDeque::new(),
            jitter: Jitter::new(jitter_seed),
            lost_emitted: false,
            fence: 0,
            deleted: 0,
            release_reported: false,
        };
        machine.nodes = machine.fresh_nodes(node_count)?;
        Ok(machine)
    }

    /// Per-node machines for one round: a single attempt each (wait 0); the
    /// quorum machine owns retries.
    fn fresh_nodes(&mut self, count: usize) -> Result<Vec<LockMachine>, OptionsError> {
        let single = self.opts.clone().wait(Duration::ZERO);
        (0..count)
            .map(|_| {
                let seed = self.jitter.seed();
                LockMachine::with_names(
                    &single,
                    Arc::clone(&self.keys),
                    Arc::clone(&self.token),
                    seed,
                )
            })
            .collect()
    }

    /// How many nodes form a majority.
    pub fn quorum(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    /// The number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The key names and the token, shared.
    #[cfg(feature = "redis")]
    pub(crate) fn shared_names(&self) -> (Arc<KeyNames>, Arc<str>) {
        (Arc::clone(&self.keys), Arc::clone(&self.token))
    }

    fn start_round(&mut self, now: Instant, give_up_at: Instant) {
        if self.round > 0 {
            // Infallible: the options were validated in `new`.
            if let Ok(nodes) = self.fresh_nodes(self.nodes.len()) {
                self.nodes = nodes;
            }
        }
        self.round += 1;
        self.step = Step::Trying { give_up_at };
        // Redlock: T1 is this `now`, shared by every node's first send.
        for node in &mut self.nodes {
            let _ = node.acquire(now);
        }
        self.settle(now);
    }

    /// The latest instant at which at least a quorum of nodes is valid.
    fn quorum_deadline(&self, now: Instant) -> Option<Instant> {
        let mut deadlines: Vec<Instant> = self
            .nodes
            .iter()
            .filter(|node| node.is_held(now))
            .filter_map(LockMachine::valid_until)
            .collect();
        if deadlines.len() < self.quorum() {
            return None;
        }
        deadlines.sort_unstable_by(|a, b| b.cmp(a));
        deadlines.get(self.quorum() - 1).copied()
    }

    /// Collects per-node events and moves the quorum's step on.
    fn settle(&mut self, now: Instant) {
        let mut node_events = Vec::new();
        for node in &mut self.nodes {
            while let Some(event) = node.poll_event() {
                node_events.push(event);
            }
        }
        self.deleted += node_events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::Released {
                        outcome: ReleaseOutcome::Deleted
                    }
                )
            })
            .count();
        match self.step {
            Step::Trying { give_up_at } => self.settle_round(now, give_up_at, &node_events),
            Step::Undoing {
                give_up_at,
                failure,
            } => self.settle_undo(now, give_up_at, failure),
            Step::Held { valid_until } => self.settle_hold(now, valid_until, &node_events),
            Step::Releasing => self.settle_release(),
            Step::Idle | Step::BackingOff { .. } | Step::Lost | Step::Released => {}
        }
    }

    /// A round is out: grant once a majority holds with validity left;
    /// once every node has answered without one, undo the round everywhere.
    fn settle_round(&mut self, now: Instant, give_up_at: Instant, node_events: &[Event]) {
        let granted = self
            .quorum_deadline(now)
            .filter(|valid_until| now < *valid_until);
        let pending = self
            .nodes
            .iter()
            .filter(|node| matches!(node.phase(), Phase::Acquiring | Phase::Releasing))
            .count();
        if pending > 0 && granted.is_none() {
            return;
        }
        if let Some(valid_until) = granted {
            self.fence = self
                .nodes
                .iter()
                .filter_map(LockMachine::fence)
                .max()
                .unwrap_or(0);
            self.step = Step::Held { valid_until };
            self.events.push_back(Event::Acquired {
                fence: self.fence,
                valid_until,
            });
            return;
        }
        // No majority (or no validity left): undo everywhere.
        let failure = node_events.iter().find_map(|event| match event {
            Event::AcquireFailed(AcquireFailure::Failed(f)) => Some(AcquireFailure::Failed(*f)),
            _ => None,
        });
        self.step = Step::Undoing {
            give_up_at,
            failure,
        };
        for node in &mut self.nodes {
            if node.phase() == Phase::Held {
                node.release(now);
            }
        }
        self.settle(now);
    }

    /// A failed round is being undone: once every node is done, fail, give
    /// up, or back off before the next round.
    fn settle_undo(&mut self, now: Instant, give_up_at: Instant, failure: Option<AcquireFailure>) {
        // A node retrying a release in the background (timing rule 9) has
        // answered: the round's outcome does not wait for it.
        let busy = self
            .nodes
            .iter()
            .any(|node| node.phase() != Phase::Released);
        if busy {
            return;
        }
        self.attempts += 1;
        if let Some(failure) = failure {
            self.step = Step::Released;
            self.events.push_back(Event::AcquireFailed(failure));
        } else if now >= give_up_at {
            self.step = Step::Released;
            self.events
                .push_back(Event::AcquireFailed(AcquireFailure::TimedOut {
                    last_failure: None,
                }));
        } else {
            let retry_at = (now + self.backoff()).min(give_up_at);
            self.step = Step::BackingOff {
                give_up_at,
                retry_at,
            };
            self.events.push_back(Event::Contended { retry_at });
        }
    }

    /// Held: follow the quorum deadline as the nodes renew, and lose the
    /// lock once fewer than a majority remain valid.
    fn settle_hold(&mut self, now: Instant, valid_until: Instant, node_events: &[Event]) {
        // Each node's failed renewal is reported as it happens; whether the
        // lock survives it is the quorum's to say.
        self.events.extend(
            node_events
                .iter()
                .filter(|event| matches!(event, Event::RenewFailed(_)))
                .cloned(),
        );
        match self.quorum_deadline(now) {
            Some(deadline) if now < deadline => {
                if deadline != valid_until {
                    self.step = Step::Held {
                        valid_until: deadline,
                    };
                    self.events.push_back(Event::Renewed {
                        valid_until: deadline,
                    });
                }
            }
            _ => {
                // Timing rule 3 for the quorum: fewer than a majority remain
                // valid, so the lock is gone.
                self.step = Step::Lost;
                if !self.lost_emitted {
                    self.lost_emitted = true;
                    self.events.push_back(Event::Lost {
                        reason: lost_reason(node_events),
                    });
                }
            }
        }
    }

    /// Releasing: report once a majority deleted the key (or every node
    /// answered), and finish once every node has.
    fn settle_release(&mut self) {
        // Deleted is certain once a majority deleted the key: the lock is
        // free for others, whatever the rest answer. Until every node has
        // answered the step stays, so the driver keeps the rest going.
        let settled = self
            .nodes
            .iter()
            .all(|node| node.phase() == Phase::Released);
        if !self.release_reported && (settled || self.deleted >= self.quorum()) {
            self.release_reported = true;
            let outcome = if self.deleted >= self.quorum() {
                ReleaseOutcome::Deleted
            } else {
                ReleaseOutcome::Unknown
            };
            self.events.push_back(Event::Released { outcome });
        }
        if settled {
            self.step = Step::Released;
        }
    }

    /// The round as it travels in command ids (wrapping, in the top bits).
    fn round_tag(&self) -> u64 {
        self.round & (u64::MAX >> ROUND_SHIFT)
    }

    fn backoff(&mut self) -> Duration {
        let (min, max) = self.opts.retry_delay;
        self.jitter.backoff(min, max, self.attempts)
    }
}

impl Machine for RedlockMachine {
    fn acquire(&mut self, now: Instant) -> Result<(), UsageError> {
        if self.step != Step::Idle {
            return Err(UsageError::AlreadyStarted);
        }
        let give_up_at = now + self.opts.effective_wait();
        self.start_round(now, give_up_at);
        Ok(())
    }

    /// Releases on every node (owner-checked), or cancels an acquisition.
    ///
    /// A hold whose deadline has passed is lost first (reason Expired), as
    /// on a single node: the release then reports it.
    fn release(&mut self, now: Instant) {
        if let Step::Held { valid_until } = self.step
            && now >= valid_until
        {
            self.settle(now);
        }
        match self.step {
            Step::Released | Step::Releasing => return,
            Step::Idle => {
                self.step = Step::Released;
                self.events.push_back(Event::Released {
                    outcome: ReleaseOutcome::NotOwner,
                });
                return;
            }
            Step::Trying { .. } | Step::BackingOff { .. } | Step::Undoing { .. } => {
                self.step = Step::Undoing {
                    give_up_at: now,
                    failure: Some(AcquireFailure::Cancelled),
                };
            }
            Step::Held { .. } | Step::Lost => self.step = Step::Releasing,
        }
        self.deleted = 0;
        self.release_reported = false;
        for node in &mut self.nodes {
            node.release(now);
        }
        self.settle(now);
    }

    /// Ignores release announcements: every failed round releases the
    /// nodes it won, so under contention the announcements come from
    /// competitors undoing partial grants, and retrying on each one makes
    /// a herd that keeps every round failing. Rounds retry on the jittered
    /// backoff only.
    fn handle_wakeup(&mut self, now: Instant) {
        let _ = now;
    }

    /// Only `node`'s own machine is told: each node's release retries on
    /// its own connection.
    fn handle_reconnected(&mut self, now: Instant, node: usize) {
        if let Some(machine) = self.nodes.get_mut(node) {
            machine.handle_reconnected(now, 0);
        }
    }

    /// Feeds node `node`'s answer to its command `id`. Answers to an
    /// earlier round's commands are ignored (that round's machines are gone).
    fn handle_reply(&mut self, now: Instant, node: usize, id: CommandId, reply: Reply) {
        if id.0 >> ROUND_SHIFT == self.round_tag()
            && let Some(machine) = self.nodes.get_mut(node)
        {
            machine.handle_reply(now, CommandId(id.0 & INNER_MASK), reply);
        }
        self.settle(now);
    }

    /// Fires every timer due at `now`, on every node and the quorum's own.
    fn handle_timeout(&mut self, now: Instant) {
        for machine in &mut self.nodes {
            if machine.poll_timeout().is_some_and(|at| at <= now) {
                machine.handle_timeout(now);
            }
        }
        if let Step::BackingOff {
            give_up_at,
            retry_at,
        } = self.step
            && retry_at <= now
        {
            self.start_round(now, give_up_at);
            return;
        }
        self.settle(now);
    }

    /// Returns the next command: `(node, id, command)`.
    fn poll_command(&mut self) -> Option<(usize, CommandId, Command)> {
        let round = self.round_tag() << ROUND_SHIFT;
        self.nodes.iter_mut().enumerate().find_map(|(index, node)| {
            node.poll_command()
                .map(|(id, c)| (index, CommandId(round | (id.0 & INNER_MASK)), c))
        })
    }

    fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Returns the next time at which `handle_timeout` should be called.
    fn poll_timeout(&self) -> Option<Instant> {
        let own = match self.step {
            Step::BackingOff { retry_at, .. } => Some(retry_at),
            Step::Held { valid_until } => Some(valid_until),
            _ => None,
        };
        self.nodes
            .iter()
            .filter_map(LockMachine::poll_timeout)
            .chain(own)
            .min()
    }

    /// Returns true if node `node` still waits for the reply to command
    /// `id` (see [`LockMachine::in_flight`]).
    fn awaits(&self, node: usize, id: CommandId) -> bool {
        id.0 >> ROUND_SHIFT == self.round_tag()
            && self
                .nodes
                .get(node)
                .and_then(LockMachine::in_flight)
                .is_some_and(|inner| inner.0 == id.0 & INNER_MASK)
    }

    /// The earliest scheduled renewal over the nodes that hold the lock
    /// (see [`LockMachine::renewal_due`]).
    fn renewal_due(&self) -> Option<Instant> {
        match self.step {
            Step::Held { .. } => self.nodes.iter().filter_map(LockMachine::renewal_due).min(),
            _ => None,
        }
    }

    /// Sends every node's scheduled renewal now (see
    /// [`LockMachine::renew_early`]).
    fn renew_early(&mut self, now: Instant) {
        if matches!(self.step, Step::Held { .. }) {
            for node in &mut self.nodes {
                node.renew_early(now);
            }
        }
        self.settle(now);
    }

    fn phase(&self) -> Phase {
        match self.step {
            Step::Idle => Phase::Idle,
            Step::Trying { .. } | Step::BackingOff { .. } => Phase::Acquiring,
            Step::Undoing { failure, .. } => {
                if failure == Some(AcquireFailure::Cancelled) {
                    Phase::Releasing
                } else {
                    Phase::Acquiring
                }
            }
            Step::Held { .. } => Phase::Held,
            Step::Releasing => Phase::Releasing,
            Step::Lost => Phase::Lost,
            Step::Released => Phase::Released,
        }
    }

    fn is_held(&self, now: Instant) -> bool {
        matches!(self.step, Step::Held { valid_until } if now < valid_until)
    }

    /// The quorum deadline while held.
    fn valid_until(&self) -> Option<Instant> {
        match self.step {
            Step::Held { valid_until } => Some(valid_until),
            _ => None,
        }
    }

    /// The fence of the current grant (see the module docs for its limits).
    fn fence(&self) -> Option<u64> {
        matches!(self.step, Step::Held { .. }).then_some(self.fence)
    }

    fn keys(&self) -> &KeyNames {
        &self.keys
    }

    fn token(&self) -> &str {
        &self.token
    }

    /// True once released and no node retries a release in the background.
    fn is_released(&self) -> bool {
        self.step == Step::Released && self.nodes.iter().all(Machine::is_released)
    }
}

/// Why the quorum lost the lock, from the per-node events of the pass that
/// lost it: a node's cap or a node's key gone decides, else expiry.
fn lost_reason(node_events: &[Event]) -> LostReason {
    let any = |reason: LostReason| node_events.contains(&Event::Lost { reason });
    if any(LostReason::MaxHold) {
        LostReason::MaxHold
    } else if any(LostReason::NotOwner) {
        LostReason::NotOwner
    } else {
        LostReason::Expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn machine(nodes: usize) -> (RedlockMachine, Instant) {
        let opts = LockOptions::new(ms(1_000)).wait(ms(500));
        let machine = RedlockMachine::new(&opts, "k", "tok".into(), nodes, 1).expect("valid");
        (machine, Instant::now())
    }

    /// Answers every pending command with `answer(node, command)`; `None`
    /// leaves it unanswered.
    fn answer_all(
        machine: &mut RedlockMachine,
        now: Instant,
        mut answer: impl FnMut(usize, &Command) -> Option<Reply>,
    ) -> Vec<(usize, Command)> {
        let mut sent = Vec::new();
        while let Some((node, id, command)) = machine.poll_command() {
            sent.push((node, command.clone()));
            if let Some(reply) = answer(node, &command) {
                machine.handle_reply(now, node, id, reply);
            }
        }
        sent
    }

    fn events(machine: &mut RedlockMachine) -> Vec<Event> {
        std::iter::from_fn(|| machine.poll_event()).collect()
    }

    /// The grant event of a round sent at `t0` (ttl 1 s, drift 12 ms).
    fn acquired(fence: u64, t0: Instant) -> Event {
        Event::Acquired {
            fence,
            valid_until: t0 + ms(1_000) - ms(12),
        }
    }

    fn grant(fence: u64) -> Option<Reply> {
        Some(Reply::Granted {
            fence,
            replicas: None,
            aof: None,
        })
    }

    #[test]
    fn majority_grants_with_validity_from_the_first_send() {
        let (mut m, t0) = machine(3);
        m.acquire(t0).expect("idle");
        let sent = answer_all(&mut m, t0 + ms(5), |node, _| {
            if node == 2 {
                Some(Reply::Contended {
                    pttl: Some(ms(800)),
                })
            } else {
                grant(10 + node as u64)
            }
        });
        assert_eq!(sent.len(), 3, "one acquire per node, all at once");
        let valid_until = t0 + ms(1_000) - ms(12);
        assert_eq!(events(&mut m), vec![acquired(11, t0)]);
        assert!(m.is_held(t0 + ms(5)));
        assert!(!m.is_held(valid_until));
    }

    /// The grant does not wait for the last node: a majority is enough. The
    /// last node's answer then joins the lock (renewed with the others) or,
    /// if it is refused, leaves the lock held by the majority.
    #[test]
    fn a_majority_grants_at_once_and_a_late_node_joins_it() {
        for late_grants in [true, false] {
            let (mut m, t0) = machine(3);
            m.acquire(t0).expect("idle");
            let sent: Vec<_> = std::iter::from_fn(|| m.poll_command()).collect();
            assert_eq!(sent.len(), 3);
            let (_, late, _) = sent[2];
            for &(node, id, _) in &sent[..2] {
                m.handle_reply(
                    t0 + ms(2),
                    node,
                    id,
                    grant(10 + node as u64).expect("a reply"),
                );
            }
            assert_eq!(
                events(&mut m),
                vec![acquired(11, t0)],
                "granted by nodes 0 and 1 while node 2 is still out"
            );
            assert!(m.awaits(2, late), "node 2's acquire is still awaited");
            let answer = if late_grants {
                grant(20).expect("a reply")
            } else {
                Reply::Contended { pttl: None }
            };
            m.handle_reply(t0 + ms(40), 2, late, answer);
            assert_eq!(events(&mut m), vec![], "nothing changes for the user");
            assert_eq!(m.fence(), Some(11), "the fence is the granting majority's");
            let renew_at = m.poll_timeout().expect("renewal timer");
            m.handle_timeout(renew_at);
            let renewed: Vec<usize> = answer_all(&mut m, renew_at, |_, _| {
                Some(Reply::Renewed {
                    replicas: None,
                    aof: None,
                })
            })
            .into_iter()
            .map(|(node, _)| node)
            .collect();
            let expected: &[usize] = if late_grants { &[0, 1, 2] } else { &[0, 1] };
            assert_eq!(renewed, expected, "renewals go to every node that holds it");
            assert!(m.is_held(renew_at));
        }
    }

    /// Releasing right after a grant at quorum reaches the node whose
    /// acquire is still out too: its release goes out behind the acquire
    /// on the same connection, so it deletes what that acquire may set.
    #[test]
    fn release_after_a_grant_at_quorum_reaches_the_late_node() {
        let (mut m, t0) = machine(3);
        m.acquire(t0).expect("idle");
        let sent: Vec<_> = std::iter::from_fn(|| m.poll_command()).collect();
        for &(node, id, _) in &sent[..2] {
            m.handle_reply(t0, node, id, grant(1).expect("a reply"));
        }
        assert!(m.is_held(t0));
        m.release(t0);
        let released = answer_all(&mut m, t0, |_, _| Some(Reply::Released));
        assert_eq!(
            released,
            vec![
                (0, Command::Release),
                (1, Command::Release),
                (2, Command::Release)
            ]
        );
        assert!(m.is_released());
        assert!(
            !m.awaits(2, sent[2].1),
            "the late acquire is no longer awaited"
        );
        assert_eq!(
            events(&mut m),
            vec![
                acquired(1, t0),
                Event::Released {
                    outcome: ReleaseOutcome::Deleted
                }
            ]
        );
        // The late acquire's answer, after the release: ignored.
        m.handle_reply(t0, 2, sent[2].1, grant(1).expect("a reply"));
        assert!(m.is_released());
        assert_eq!(events(&mut m), vec![]);
        assert_eq!(m.poll_command(), None);
    }

    /// Releasing after the quorum deadline has passed reports the loss
    /// first, so the caller learns the hold had expired (as on one node).
    #[test]
    fn release_after_the_deadline_reports_the_loss() {
        let (mut m, t0) = machine(3);
        m.acquire(t0).expect("idle");
        answer_all(&mut m, t0, |_, _| grant(1));
        let valid_until = m.valid_until().expect("held");
        let _ = events(&mut m);
        m.release(valid_until);
        answer_all(&mut m, valid_until, |_, _| Some(Reply::NotOwner));
        assert_eq!(
            events(&mut m),
            vec![
                Event::Lost {
                    reason: LostReason::Expired
                },
                Event::Released {
                    outcome: ReleaseOutcome::Unknown
                }
            ]
        );
        assert!(m.is_released());
    }

    /// A release is reported as soon as a majority deleted the key; the
    /// machine stays busy (`is_released` false) until the last node answers.
    #[test]
    fn release_is_reported_at_a_majority_of_deletes() {
        let (mut m, t0) = machine(3);
        m.acquire(t0).expect("idle");
        answer_all(&mut m, t0, |node, _| grant(node as u64));
        let _ = events(&mut m);
        m.release(t0);
        let sent: Vec<_> = std::iter::from_fn(|| m.poll_command()).collect();
        assert_eq!(sent.len(), 3, "release goes to every node");
        m.handle_reply(t0, sent[0].0, sent[0].1, Reply::Released);
        assert_eq!(events(&mut m), vec![], "one delete is not a majority");
        m.handle_reply(t0, sent[1].0, sent[1].1, Reply::Released);
        assert_eq!(
            events(&mut m),
            vec![Event::Released {
                outcome: ReleaseOutcome::Deleted
            }]
        );
        assert!(!m.is_released(), "node 2's release is still out");
        assert!(m.awaits(sent[2].0, sent[2].1));
        m.handle_reply(t0, sent[2].0, sent[2].1, Reply::NotOwner);
        assert!(m.is_released());
        assert_eq!(events(&mut m), vec![], "the outcome is reported once");
    }

    #[test]
    fn minority_is_undone_on_every_node_and_retried() {
        let (mut m, t0) = machine(3);
        m.acquire(t0).expect("idle");
        let sent = answer_all(&mut m, t0, |node, command| match command {
            Command::Release => Some(Reply::Released),
            _ if node == 0 => grant(1),
            _ => Some(Reply::Contended { pttl: None }),
        });
        // The one node that granted is released before anything else.
        let releases: Vec<_> = sent
            .iter()
            .filter(|(_, c)| *c == Command::Release)
            .collect();
        assert_eq!(releases, vec![&(0, Command::Release)]);
        let retry_at = match events(&mut m).as_slice() {
            [Event::Contended { retry_at }] => *retry_at,
            other => panic!("expected Contended, got {other:?}"),
        };
        assert!(retry_at > t0 && retry_at <= t0 + ms(500));
        m.handle_timeout(retry_at);
        let sent = answer_all(&mut m, retry_at, |node, _| grant(node as u64 + 1));
        assert_eq!(sent.len(), 3, "a new round goes to every node");
        assert!(matches!(
            events(&mut m).as_slice(),
            [Event::Acquired { .. }]
        ));
    }

    #[test]
    fn losing_a_majority_is_lost_and_release_reaches_every_node() {
        let (mut m, t0) = machine(3);
        m.acquire(t0).expect("idle");
        answer_all(&mut m, t0, |_, _| grant(1));
        let _ = events(&mut m);
        // First renewal round: node 0 lost its key, the others renew.
        let renew_at = m.poll_timeout().expect("renewal timer");
        m.handle_timeout(renew_at);
        answer_all(&mut m, renew_at, |node, _| {
            Some(if node == 0 {
                Reply::NotOwner
            } else {
                Reply::Renewed {
                    replicas: None,
                    aof: None,
                }
            })
        });
        assert!(m.is_held(renew_at), "two of three still hold");
        assert!(matches!(
            events(&mut m).as_slice(),
            [
                Event::RenewFailed(crate::RenewFailure::NotOwner),
                Event::Renewed { .. }
            ]
        ));
        // From now on nothing answers: the quorum deadline ends it.
        let deadline = m.valid_until().expect("held");
        let mut now = renew_at;
        while now < deadline {
            now = m.poll_timeout().expect("timers").min(deadline);
            m.handle_timeout(now);
            answer_all(&mut m, now, |_, _| None);
        }
        assert!(!m.is_held(deadline));
        let mut seen = events(&mut m);
        assert_eq!(
            seen.pop(),
            Some(Event::Lost {
                reason: LostReason::Expired
            })
        );
        assert!(
            seen.iter().all(|event| *event
                == Event::RenewFailed(crate::RenewFailure::Failed(crate::Failure::Timeout))),
            "only timed-out renewals before the loss: {seen:?}"
        );
        m.release(now);
        let sent = answer_all(&mut m, now, |_, _| Some(Reply::NotOwner));
        assert_eq!(
            sent.len(),
            3,
            "release goes to every node, even failed ones"
        );
        assert!(m.is_released());
    }

    #[test]
    fn a_late_answer_from_an_earlier_round_is_ignored() {
        let (mut m, t0) = machine(3);
        m.acquire(t0).expect("idle");
        // Round 1: node 2's acquire stays out; the others are contended.
        let mut late = None;
        while let Some((node, id, command)) = m.poll_command() {
            if node == 2 && late.is_none() {
                late = Some(id);
                continue;
            }
            let reply = match command {
                Command::Release => Reply::Released,
                _ => Reply::Contended { pttl: None },
            };
            m.handle_reply(t0, node, id, reply);
        }
        let late = late.expect("node 2 was sent an acquire");
        // Its command times out; the round is undone and a retry is due.
        while !matches!(m.step, Step::BackingOff { .. }) {
            let now = m.poll_timeout().expect("a timer runs");
            m.handle_timeout(now);
            answer_all(&mut m, now, |_, _| Some(Reply::Released));
        }
        let retry_at = m.poll_timeout().expect("retry timer");
        m.handle_timeout(retry_at);
        let fresh: Vec<_> = std::iter::from_fn(|| m.poll_command()).collect();
        assert_eq!(fresh.len(), 3, "round 2 goes out");
        assert!(
            fresh.iter().all(|(_, id, _)| *id != late),
            "ids differ per round"
        );
        // Round 1's answer arrives now, saying granted: it must not count.
        m.handle_reply(
            retry_at,
            2,
            late,
            Reply::Granted {
                fence: 9,
                replicas: None,
                aof: None,
            },
        );
        let (_, own, _) = fresh
            .iter()
            .find(|(node, _, _)| *node == 2)
            .expect("round 2 went to node 2");
        assert!(
            m.awaits(2, *own),
            "round 2's machine still waits for its own answer"
        );
        assert_eq!(m.phase(), Phase::Acquiring);
        assert_eq!(m.fence(), None);
    }
}
