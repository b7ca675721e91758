//! The sans-IO lock state machine. The type and its rules: [`LockMachine`].

use std::{
    collections::VecDeque,
    sync::Arc,
    time::{Duration, Instant},
};

use crate::{
    AcquireFailure, Command, CommandId, Event, Failure, LockOptions, LostReason, Machine,
    OptionsError, Phase, ReleaseOutcome, RenewFailure, Reply, UsageError,
    jitter::Jitter,
    scripts::{KeyNames, LockKind},
};

mod state;

use state::{Acquiring, AfterRelease, CleaningUp, Hold, Releasing, State};

/// The kind a lock of `kind` with `opts` runs as: fair mode and the waiter
/// ttl come from the options (see [`LockMachine::with_kind`]).
pub(crate) fn resolve_kind(opts: &LockOptions, kind: LockKind) -> Result<LockKind, OptionsError> {
    let waiter_ttl = opts.effective_waiter_ttl();
    let kind = match kind {
        LockKind::Plain if opts.is_fair() => LockKind::Fair { waiter_ttl },
        LockKind::Fair { .. } => LockKind::Fair { waiter_ttl },
        LockKind::Write { .. } => LockKind::Write {
            intent_ttl: waiter_ttl,
        },
        LockKind::Permit { permits: 0 } => return Err(OptionsError::NoPermits),
        other => other,
    };
    if opts.is_fair() && !matches!(kind, LockKind::Fair { .. }) {
        return Err(OptionsError::FairUnsupported { kind: kind.name() });
    }
    Ok(kind)
}

/// How many times a release is sent before its outcome is reported
/// unknown (it is retried in the background after that: timing rule 9).
const RELEASE_ATTEMPTS: u32 = 3;

/// The timers, indexing a small table; the next timeout is the earliest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timer {
    /// The command in flight is declared unanswered.
    CommandTimeout = 0,
    /// Validity runs out (timing rule 3).
    Expiry = 1,
    /// Send the next renewal (timing rule 4).
    Renew = 2,
    /// Retry an acquire or a release (timing rules 6 and 9).
    Retry = 3,
}

impl Timer {
    /// Handled in this order when several fall due at once: a timed-out
    /// command is settled before expiry, and expiry before any new send.
    const ORDER: [Self; 4] = [Self::CommandTimeout, Self::Expiry, Self::Renew, Self::Retry];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Acquire,
    Renew,
    Release,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InFlight {
    id: CommandId,
    kind: Kind,
    sent_at: Instant,
}

/// Returns true if `reply` is one a command of `kind` can produce.
fn fits(kind: Kind, reply: &Reply) -> bool {
    matches!(
        (kind, reply),
        (_, Reply::Failed(_))
            | (
                Kind::Acquire,
                Reply::Granted { .. } | Reply::Contended { .. }
            )
            | (Kind::Renew, Reply::Renewed { .. } | Reply::NotOwner)
            | (Kind::Release, Reply::Released | Reply::NotOwner)
    )
}

/// The counts a `WAITAOF` requirement asks for.
fn counts(wait: crate::WaitAof) -> crate::AofCounts {
    crate::AofCounts {
        local: wait.local,
        replicas: wait.replicas,
    }
}

/// The durations the machine works with, derived once from validated options.
#[derive(Debug, Clone)]
struct Timing {
    ttl: Duration,
    drift: Duration,
    renew_every: Duration,
    wait: Duration,
    max_hold: Option<Duration>,
    command_timeout: Duration,
    retry_min: Duration,
    retry_max: Duration,
    wait_replicas: Option<(u32, Duration)>,
    wait_aof: Option<crate::WaitAof>,
    fencing: crate::Fencing,
    validity_from_reply: bool,
}

/// The sans-IO state machine of one lock on one node. Driven through
/// [`Machine`]; its own [`handle_reply`](Self::handle_reply) and
/// [`poll_command`](Self::poll_command) leave the node out.
///
/// [`LockMachine`] decides everything about one lock: when to send which
/// command, how long the lock is valid, when to renew, when it is lost. It
/// performs no I/O, reads no clock and draws no randomness of its own: every
/// input carries `now`, and the backoff jitter comes from a seed the caller
/// passes in. A driver (the Redis adapter, a simulator, a test) moves
/// commands to Redis and replies back, through the [`Machine`] trait or the
/// single-node [`LockMachine::handle_reply`] and [`LockMachine::poll_command`].
/// The state is private: the driver reads it through the trait's queries
/// ([`Machine::phase`], [`Machine::is_held`], [`Machine::fence`], ...).
///
/// # The drain rule
///
/// After **every** input (`acquire`, `release`, `handle_reply`,
/// `handle_timeout`, `handle_wakeup`) the driver must
/// 1. send every command from [`LockMachine::poll_command`] until it
///    returns `None`,
/// 2. deliver every event from [`Machine::poll_event`] until it returns
///    `None`, and
/// 3. re-arm its timer to [`Machine::poll_timeout`] (none if `None`).
///
/// # The timing rules
///
/// These are the safety argument; each is cited where the code enforces it.
/// 1. **Validity starts at the send**: `valid_until = sent_at + ttl − drift`,
///    with `sent_at` the `now` of the call that handed the command out and
///    `drift = ttl × drift_factor + 2 ms`. A slow reply never stretches it.
/// 2. **Only a successful renewal extends validity**, to its own
///    `sent_at + ttl − drift`. Errors, timeouts, `NotOwner` and unknown
///    outcomes never do.
/// 3. **Lost fires on the deadline**: at `valid_until`, `handle_timeout`
///    emits `Lost(Expired)` whether or not Redis answered, and
///    [`Machine::is_held`] is false for every `now ≥ valid_until`.
/// 4. **Renewals run on a timer** every `renew_every`; a failed one is retried
///    while validity remains, with at most one command in flight. A reply to
///    any command but the one in flight is ignored.
/// 5. **`max_hold` caps the hold**: validity never passes
///    `acquired_at + max_hold`, and `Lost(MaxHold)` fires there.
/// 6. **Contention retries with jittered backoff**, bounded by the wait;
///    `handle_wakeup` retries at once.
/// 7. **Release after Lost is harmless**: it still sends the owner-checked
///    release, which never touches another owner's key.
/// 8. **Options are checked at construction** ([`LockOptions::validate`]).
/// 9. **A release left unknown is retried until the key has surely
///    expired**: once its tries are spent its outcome is reported
///    unknown, but the owner-checked release goes on in the background,
///    with backoff, until the key's last possible expiry (the latest
///    `sent_at + ttl + drift` of any acquire or renewal sent), then stops.
///    Without it, a key whose renewals ran unanswered outlives its
///    holder's loss by up to a ttl and blocks every waiter.
#[derive(Debug, Clone)]
pub struct LockMachine {
    timing: Timing,
    keys: Arc<KeyNames>,
    token: Arc<str>,
    state: State,
    timers: [Option<Instant>; 4],
    in_flight: Option<InFlight>,
    next_id: u64,
    commands: VecDeque<(CommandId, Command)>,
    events: VecDeque<Event>,
    lost_emitted: bool,
    /// The key's last possible expiry: the latest `sent_at + ttl + drift`
    /// of an acquire or renewal sent (timing rule 9).
    key_may_live_until: Option<Instant>,
    jitter: Jitter,
}

impl LockMachine {
    /// Creates a machine for `key` owned by `token`; fails on invalid options.
    ///
    /// `jitter_seed` drives the backoff jitter: the same seed and inputs give
    /// the same outputs.
    pub fn new(
        opts: &LockOptions,
        key: &str,
        token: String,
        jitter_seed: u64,
    ) -> Result<Self, OptionsError> {
        Self::with_kind(opts, key, token, LockKind::Plain, jitter_seed)
    }

    /// Like [`new`](Self::new), for a member of the lock family: `kind`
    /// decides which script, keys and operation codes the commands encode
    /// to (see [`KeyNames`]); the timing rules are the same for every kind.
    ///
    /// The waiter ttl of [`LockKind::Fair`] and the intent ttl of
    /// [`LockKind::Write`] come from the options
    /// ([`LockOptions::effective_waiter_ttl`]), whatever `kind` carries;
    /// [`LockKind::Plain`] with [`LockOptions::fair`] is
    /// [`LockKind::Fair`]. Fails on fair mode for any other kind, and on a
    /// semaphore of zero permits.
    pub fn with_kind(
        opts: &LockOptions,
        key: &str,
        token: String,
        kind: LockKind,
        jitter_seed: u64,
    ) -> Result<Self, OptionsError> {
        let kind = resolve_kind(opts, kind)?;
        let keys = Arc::new(KeyNames::in_namespace(&opts.namespace, key, kind).for_waiter(&token));
        Self::with_names(opts, keys, token.into(), jitter_seed)
    }

    /// Like [`new`](Self::new), with key names and token already built
    /// (shared, not copied, by a quorum's per-node machines).
    pub(crate) fn with_names(
        opts: &LockOptions,
        keys: Arc<KeyNames>,
        token: Arc<str>,
        jitter_seed: u64,
    ) -> Result<Self, OptionsError> {
        // Timing rule 8: no machine exists with options that break the argument.
        opts.validate()?;
        let timing = Timing {
            ttl: opts.ttl(),
            drift: opts.drift(),
            renew_every: opts.effective_renew_every(),
            wait: opts.effective_wait(),
            max_hold: opts.hold_cap(),
            command_timeout: opts.effective_command_timeout(),
            retry_min: opts.retry_delay.0,
            retry_max: opts.retry_delay.1,
            wait_replicas: opts.replicas(),
            wait_aof: opts.aof(),
            fencing: opts.fencing_mode(),
            validity_from_reply: opts.validity_from_reply,
        };
        Ok(Self {
            timing,
            keys,
            token,
            state: State::Idle,
            timers: [None; 4],
            in_flight: None,
            next_id: 0,
            commands: VecDeque::new(),
            events: VecDeque::new(),
            lost_emitted: false,
            key_may_live_until: None,
            jitter: Jitter::new(jitter_seed),
        })
    }

    /// The key names and the token, shared (an adapter encodes commands
    /// with them without holding the machine).
    #[cfg(feature = "redis")]
    pub(crate) fn shared_names(&self) -> (Arc<KeyNames>, Arc<str>) {
        (Arc::clone(&self.keys), Arc::clone(&self.token))
    }

    /// The ttl this machine sends with every acquire and renewal.
    pub fn ttl(&self) -> Duration {
        self.timing.ttl
    }

    /// The command whose reply the machine waits for, if any.
    ///
    /// After `handle_timeout`, a driver compares it with the command it
    /// still waits on: if the machine gave up on that command (it timed
    /// out, or the lock expired meanwhile), the driver may drop the call.
    pub fn in_flight(&self) -> Option<CommandId> {
        self.in_flight.map(|in_flight| in_flight.id)
    }

    /// Feeds Redis's answer to command `id`; answers to any other id are
    /// ignored. ([`Machine::handle_reply`] with the node left out.)
    pub fn handle_reply(&mut self, now: Instant, id: CommandId, reply: Reply) {
        // Timing rule 3: a deadline that passed before this reply arrived
        // has already ended the hold, whatever the reply says.
        self.expire_if_due(now);
        // Timing rule 4: only the command in flight is answered; a stale or
        // duplicated reply, or one to an abandoned command, changes nothing.
        let Some(in_flight) = self.in_flight.filter(|f| f.id == id) else {
            return;
        };
        self.in_flight = None;
        self.timers[Timer::CommandTimeout as usize] = None;
        // A reply of the wrong kind means the driver is confused: whether
        // our command ran is unknown, which is what a protocol failure says.
        let reply = if fits(in_flight.kind, &reply) {
            reply
        } else {
            Reply::Failed(Failure::Protocol)
        };
        match in_flight.kind {
            Kind::Acquire => self.on_acquire_reply(now, in_flight.sent_at, reply),
            Kind::Renew => self.on_renew_reply(now, in_flight.sent_at, reply),
            Kind::Release => self.on_release_reply(now, reply),
        }
    }

    /// Returns the next command to send, with the id its reply must carry.
    /// ([`Machine::poll_command`] with the node left out.)
    #[must_use]
    pub fn poll_command(&mut self) -> Option<(CommandId, Command)> {
        self.commands.pop_front()
    }

    fn send(&mut self, now: Instant, kind: Kind) {
        let id = CommandId(self.next_id);
        self.next_id += 1;
        let command = match kind {
            Kind::Acquire => Command::Acquire {
                ttl: self.timing.ttl,
                fencing: self.timing.fencing,
                wait_replicas: self.timing.wait_replicas,
                wait_aof: self.timing.wait_aof,
            },
            Kind::Renew => Command::Renew {
                ttl: self.timing.ttl,
                wait_replicas: self.timing.wait_replicas,
                wait_aof: self.timing.wait_aof,
            },
            Kind::Release => Command::Release,
        };
        if kind != Kind::Release {
            // Timing rule 9: Redis runs this no earlier than now, and may
            // set the key's ttl then; the drift covers a slower clock there.
            let may_live_until = now + self.timing.ttl + self.timing.drift;
            self.key_may_live_until = Some(
                self.key_may_live_until
                    .map_or(may_live_until, |until| until.max(may_live_until)),
            );
        }
        // Timing rule 1: `now` here is the send instant validity counts from.
        self.in_flight = Some(InFlight {
            id,
            kind,
            sent_at: now,
        });
        self.timers[Timer::CommandTimeout as usize] = Some(now + self.timing.command_timeout);
        match (&mut self.state, kind) {
            (State::Held(hold), Kind::Renew) => {
                self.state = State::Renewing(hold.clone());
            }
            (State::Releasing(releasing), Kind::Release) => releasing.attempts += 1,
            (State::CleaningUp(cleaning), Kind::Release) => cleaning.attempts += 1,
            _ => {}
        }
        self.commands.push_back((id, command));
    }

    /// The instant validity counts from: the send (timing rule 1). Only the
    /// `sabotage` feature's deliberately broken mode counts from the reply.
    fn anchor(&self, sent_at: Instant, replied_at: Instant) -> Instant {
        if self.timing.validity_from_reply {
            replied_at
        } else {
            sent_at
        }
    }

    /// The deadline a successful command sent at `sent_at` earns (rules 1 and 5).
    fn validity_from(&self, sent_at: Instant, acquired_at: Instant) -> (Instant, Option<Instant>) {
        // Timing rule 1: from the send, minus the drift margin.
        let from_send = sent_at + self.timing.ttl - self.timing.drift;
        // Timing rule 5: never past acquired_at + max_hold.
        let cap = self.timing.max_hold.map(|max| acquired_at + max);
        let valid_until = cap.map_or(from_send, |cap| from_send.min(cap));
        (valid_until, cap)
    }

    fn on_acquire_reply(&mut self, now: Instant, sent_at: Instant, reply: Reply) {
        let State::Acquiring(mut acquiring) = std::mem::replace(&mut self.state, State::Released)
        else {
            // An acquire is only in flight while acquiring (release abandons
            // it), so the state cannot differ; stay put if it somehow does.
            return;
        };
        match reply {
            Reply::Granted {
                fence,
                replicas,
                aof,
            } => {
                if let Some((wanted, _)) = self.timing.wait_replicas {
                    let acked = replicas.unwrap_or(0);
                    if acked < wanted {
                        // Not durable enough to count: undo it and say so.
                        let failure = AcquireFailure::NotReplicated { acked, wanted };
                        self.start_release(now, AfterRelease::Fail(failure), false);
                        return;
                    }
                }
                if let Some(wanted) = self.timing.wait_aof {
                    // Both counts: WAITAOF answers what it has on timeout too.
                    let acked = aof.unwrap_or_default();
                    if !acked.meet(wanted) {
                        let failure = AcquireFailure::NotDurable {
                            acked,
                            wanted: counts(wanted),
                        };
                        self.start_release(now, AfterRelease::Fail(failure), false);
                        return;
                    }
                }
                let (valid_until, cap) = self.validity_from(self.anchor(sent_at, now), sent_at);
                if now >= valid_until {
                    // The reply took longer than the whole validity: the key
                    // is no use to us, and may be someone else's soon.
                    acquiring.maybe_set = true;
                    self.start_release(now, AfterRelease::Retry(acquiring), false);
                    return;
                }
                self.state = State::Held(Hold {
                    fence,
                    acquired_at: sent_at,
                    valid_until,
                    cap,
                    renew_failures: 0,
                });
                self.timers[Timer::Retry as usize] = None;
                self.timers[Timer::Expiry as usize] = Some(valid_until);
                self.schedule_renewal(sent_at + self.timing.renew_every, valid_until, cap);
                self.events
                    .push_back(Event::Acquired { fence, valid_until });
            }
            Reply::Contended { pttl } => {
                acquiring.attempts += 1;
                acquiring.last_failure = None;
                acquiring.queued |= self.keys.kind.waiter_ttl().is_some();
                self.retry_or_give_up(now, acquiring, pttl);
            }
            Reply::Failed(failure) if failure.is_permanent() => {
                if acquiring.maybe_set {
                    self.start_release(
                        now,
                        AfterRelease::Fail(AcquireFailure::Failed(failure)),
                        false,
                    );
                } else {
                    self.clear_timers();
                    self.events
                        .push_back(Event::AcquireFailed(AcquireFailure::Failed(failure)));
                }
            }
            Reply::Failed(failure) => {
                acquiring.attempts += 1;
                acquiring.maybe_set |= failure.outcome_unknown();
                acquiring.last_failure = Some(failure);
                self.retry_or_give_up(now, acquiring, None);
            }
            Reply::Renewed { .. } | Reply::Released | Reply::NotOwner => {
                // `fits` rewrote every mismatched reply to a protocol failure.
                self.state = State::Acquiring(acquiring);
            }
        }
    }

    fn retry_or_give_up(&mut self, now: Instant, acquiring: Acquiring, pttl: Option<Duration>) {
        if now >= acquiring.give_up_at {
            let failure = AcquireFailure::TimedOut {
                last_failure: acquiring.last_failure,
            };
            if acquiring.maybe_set || acquiring.queued {
                // Timing rule 7 / asymmetric partitions: an attempt we never
                // heard back from may have set the key; remove it if it did.
                // A place in a queue is given up the same way (best effort:
                // unanswered, it lapses after its waiter ttl).
                self.start_release(now, AfterRelease::Fail(failure), false);
            } else {
                self.state = State::Released;
                self.clear_timers();
                self.events.push_back(Event::AcquireFailed(failure));
            }
            return;
        }
        // Timing rule 6: exponential backoff with jitter, no later than the
        // holder's key expires, and a last attempt at the give-up instant.
        let mut delay = self.backoff(acquiring.attempts);
        if let Some(pttl) = pttl {
            delay = delay.min(pttl + Duration::from_millis(1));
        }
        if let Some(waiter_ttl) = self.keys.kind.waiter_ttl() {
            // A waiter's place lapses one waiter ttl after its last
            // acquire: re-send it at least every third of that.
            delay = delay.min(waiter_ttl / 3);
        }
        let retry_at = (now + delay).min(acquiring.give_up_at);
        self.timers[Timer::Retry as usize] = Some(retry_at);
        let contended = acquiring.last_failure.is_none();
        self.state = State::Acquiring(acquiring);
        if contended {
            self.events.push_back(Event::Contended { retry_at });
        }
    }

    fn on_renew_reply(&mut self, now: Instant, sent_at: Instant, reply: Reply) {
        let State::Renewing(mut hold) = self.state.clone() else {
            // A renewal is only in flight while renewing (loss and release
            // abandon it), so there is nothing to update.
            return;
        };
        let wanted = self.timing.wait_replicas.map_or(0, |(wanted, _)| wanted);
        let wanted_aof = self.timing.wait_aof;
        let enough_replicas = |replicas: Option<u32>| replicas.unwrap_or(0) >= wanted;
        let durable = |aof: Option<crate::AofCounts>| {
            wanted_aof.is_none_or(|wanted| aof.unwrap_or_default().meet(wanted))
        };
        match reply {
            Reply::Renewed { replicas, aof } if enough_replicas(replicas) && durable(aof) => {
                // Timing rule 2: a success moves validity to its own send
                // instant + ttl − drift (rule 1), capped by max_hold (rule 5).
                let anchor = self.anchor(sent_at, now);
                let (valid_until, cap) = self.validity_from(anchor, hold.acquired_at);
                hold.valid_until = hold.valid_until.max(valid_until);
                hold.renew_failures = 0;
                self.timers[Timer::Expiry as usize] = Some(hold.valid_until);
                self.schedule_renewal(sent_at + self.timing.renew_every, hold.valid_until, cap);
                self.events.push_back(Event::Renewed {
                    valid_until: hold.valid_until,
                });
                self.state = State::Held(hold);
            }
            // WRONGTYPE: the key holds something other than a string, so
            // it is not our token any more; waiting for the deadline would
            // only hide that.
            Reply::NotOwner => {
                self.events
                    .push_back(Event::RenewFailed(RenewFailure::NotOwner));
                self.lose(LostReason::NotOwner);
            }
            Reply::Failed(failure @ Failure::WrongType) => {
                self.events
                    .push_back(Event::RenewFailed(RenewFailure::Failed(failure)));
                self.lose(LostReason::NotOwner);
            }
            Reply::Failed(failure @ Failure::ReadOnly) => {
                self.events
                    .push_back(Event::RenewFailed(RenewFailure::Failed(failure)));
                self.lose(LostReason::Failover);
            }
            reply => {
                // Timing rule 2: a failed, ambiguous or under-replicated
                // renewal leaves validity alone. Rule 4: retry while it lasts.
                let failure = match reply {
                    Reply::Failed(failure) => RenewFailure::Failed(failure),
                    Reply::Renewed { replicas, .. } if !enough_replicas(replicas) => {
                        RenewFailure::NotReplicated {
                            acked: replicas.unwrap_or(0),
                            wanted,
                        }
                    }
                    Reply::Renewed { aof, .. } => RenewFailure::NotDurable {
                        acked: aof.unwrap_or_default(),
                        wanted: wanted_aof.map(counts).unwrap_or_default(),
                    },
                    // `fits` rewrote every other reply to a protocol failure.
                    _ => RenewFailure::Failed(Failure::Protocol),
                };
                self.events.push_back(Event::RenewFailed(failure));
                hold.renew_failures += 1;
                let retry_at = now + self.renew_backoff(hold.renew_failures);
                self.schedule_renewal(retry_at, hold.valid_until, hold.cap);
                self.state = State::Held(hold);
            }
        }
    }

    fn schedule_renewal(&mut self, at: Instant, valid_until: Instant, cap: Option<Instant>) {
        // A renewal is useless once validity has reached the cap, and too
        // late at or after the deadline: expiry decides then.
        let capped = cap.is_some_and(|cap| valid_until >= cap);
        self.timers[Timer::Renew as usize] = (!capped && at < valid_until).then_some(at);
    }

    fn on_release_reply(&mut self, now: Instant, reply: Reply) {
        if let State::CleaningUp(cleaning) = &self.state {
            let attempts = cleaning.attempts;
            self.on_clean_up_reply(now, attempts, &reply);
            return;
        }
        let State::Releasing(releasing) = self.state.clone() else {
            return;
        };
        // Timing rule 9: a release whose outcome stays unknown for a
        // reason retrying may cure goes on in the background.
        let retry_later = matches!(reply, Reply::Failed(failure) if !failure.is_permanent());
        let outcome = match reply {
            Reply::Released => ReleaseOutcome::Deleted,
            // WRONGTYPE: the key is not a string, so not ours; nothing was deleted.
            Reply::NotOwner | Reply::Failed(Failure::WrongType) => ReleaseOutcome::NotOwner,
            Reply::Failed(failure)
                if !failure.is_permanent() && releasing.attempts < RELEASE_ATTEMPTS =>
            {
                let delay = self.backoff(releasing.attempts);
                self.timers[Timer::Retry as usize] = Some(now + delay);
                return;
            }
            _ => ReleaseOutcome::Unknown,
        };
        self.clear_timers();
        match releasing.then {
            AfterRelease::Finish => {
                if releasing.from_hold && outcome == ReleaseOutcome::NotOwner && !self.lost_emitted
                {
                    // We believed we held it, but the key was gone or taken:
                    // the loss happened unseen, and the user must hear of it.
                    self.lost_emitted = true;
                    self.events.push_back(Event::Lost {
                        reason: LostReason::NotOwner,
                    });
                }
                self.state = State::Released;
                self.events.push_back(Event::Released { outcome });
                if retry_later {
                    self.clean_up(now, releasing.attempts);
                }
            }
            // The acquisition goes on and releases again if it gives up.
            AfterRelease::Retry(acquiring) => {
                let acquiring = Acquiring {
                    maybe_set: outcome == ReleaseOutcome::Unknown,
                    ..acquiring
                };
                self.retry_or_give_up(now, acquiring, None);
            }
            AfterRelease::Fail(failure) => {
                self.state = State::Released;
                self.events.push_back(Event::AcquireFailed(failure));
                if retry_later {
                    self.clean_up(now, releasing.attempts);
                }
            }
        }
    }

    /// Timing rule 9: retries the release after `attempts` sends, unless
    /// the key has surely expired by the next try; the caller has already
    /// been answered, so this changes nothing it sees.
    fn clean_up(&mut self, now: Instant, attempts: u32) {
        let retry_at = now + self.clean_up_backoff(attempts);
        match self.key_may_live_until {
            Some(until) if retry_at < until => {
                self.timers[Timer::Retry as usize] = Some(retry_at);
                self.state = State::CleaningUp(CleaningUp { attempts });
            }
            _ => {
                self.clear_timers();
                self.state = State::Released;
            }
        }
    }

    fn on_clean_up_reply(&mut self, now: Instant, attempts: u32, reply: &Reply) {
        match reply {
            // Not permanent: the node may answer once it is reachable again.
            Reply::Failed(failure) if !failure.is_permanent() => self.clean_up(now, attempts),
            // Deleted, or not (or no longer) ours, or never deletable:
            // either way nothing is left for us to remove.
            _ => {
                self.clear_timers();
                self.state = State::Released;
            }
        }
    }

    fn start_release(&mut self, now: Instant, then: AfterRelease, from_hold: bool) {
        // Whatever was in flight is abandoned: its reply will be stale.
        self.in_flight = None;
        self.clear_timers();
        self.state = State::Releasing(Releasing {
            attempts: 0,
            then,
            from_hold,
        });
        self.send(now, Kind::Release);
    }

    fn expire_if_due(&mut self, now: Instant) {
        let (State::Held(hold) | State::Renewing(hold)) = &self.state else {
            return;
        };
        if now < hold.valid_until {
            return;
        }
        // Timing rule 3 (and 5 when the deadline is the cap).
        let reason = if hold.cap == Some(hold.valid_until) {
            LostReason::MaxHold
        } else {
            LostReason::Expired
        };
        self.lose(reason);
    }

    fn lose(&mut self, reason: LostReason) {
        // A renewal in flight is abandoned: no answer can bring the lock back.
        self.in_flight = None;
        self.clear_timers();
        self.state = State::Lost { reason };
        if !self.lost_emitted {
            self.lost_emitted = true;
            self.events.push_back(Event::Lost { reason });
        }
    }

    fn clear_timers(&mut self) {
        self.timers = [None; 4];
    }

    /// Jittered exponential backoff for the `attempt`-th retry (timing rule 6).
    fn backoff(&mut self, attempt: u32) -> Duration {
        self.jitter
            .backoff(self.timing.retry_min, self.timing.retry_max, attempt)
    }

    /// Backoff between clean-up releases: at most a command timeout apart,
    /// so a key whose node answers again goes within about a command
    /// timeout and a round trip, the time a prompt release takes.
    fn clean_up_backoff(&mut self, attempts: u32) -> Duration {
        let cap = self.timing.retry_max.min(self.timing.command_timeout);
        self.jitter
            .backoff(self.timing.retry_min.min(cap), cap, attempts)
    }

    /// Backoff between renewal retries: short at first, never more than half a period.
    fn renew_backoff(&mut self, failures: u32) -> Duration {
        let cap = (self.timing.renew_every / 2).max(Duration::from_millis(1));
        self.jitter
            .backoff(self.timing.retry_min.min(cap), cap, failures)
    }
}

impl Machine for LockMachine {
    fn acquire(&mut self, now: Instant) -> Result<(), UsageError> {
        if self.state != State::Idle {
            return Err(UsageError::AlreadyStarted);
        }
        self.state = State::Acquiring(Acquiring {
            give_up_at: now + self.timing.wait,
            attempts: 0,
            maybe_set: false,
            last_failure: None,
            queued: false,
        });
        self.send(now, Kind::Acquire);
        Ok(())
    }

    /// Harmless in any state: after Lost it still sends the owner-checked
    /// release, which never touches another owner's key (timing rule 7).
    fn release(&mut self, now: Instant) {
        self.expire_if_due(now);
        match std::mem::replace(&mut self.state, State::Released) {
            State::Idle => self.events.push_back(Event::Released {
                outcome: ReleaseOutcome::NotOwner,
            }),
            State::Acquiring(acquiring) => {
                let in_flight = self.in_flight.is_some_and(|f| f.kind == Kind::Acquire);
                if in_flight || acquiring.maybe_set || acquiring.queued {
                    self.start_release(now, AfterRelease::Fail(AcquireFailure::Cancelled), false);
                } else {
                    self.clear_timers();
                    self.events
                        .push_back(Event::AcquireFailed(AcquireFailure::Cancelled));
                }
            }
            State::Held(_) | State::Renewing(_) => {
                self.start_release(now, AfterRelease::Finish, true);
            }
            State::Lost { .. } => self.start_release(now, AfterRelease::Finish, false),
            // Already releasing, or released (in the background or for
            // good): the user has, or will have, the one answer.
            busy @ (State::Releasing(_) | State::CleaningUp(_)) => self.state = busy,
            State::Released => {}
        }
    }

    /// Retries a contended acquire at once (a release was announced).
    fn handle_wakeup(&mut self, now: Instant) {
        if matches!(self.state, State::Acquiring(_)) && self.in_flight.is_none() {
            self.timers[Timer::Retry as usize] = None;
            self.send(now, Kind::Acquire);
        }
    }

    /// The node index is ignored: see [`LockMachine::handle_reply`].
    fn handle_reconnected(&mut self, now: Instant, _node: usize) {
        let retry = &mut self.timers[Timer::Retry as usize];
        if matches!(self.state, State::CleaningUp(_)) && self.in_flight.is_none() && retry.is_some()
        {
            *retry = Some(now);
        }
    }

    /// The node index is ignored: see [`LockMachine::handle_reply`].
    fn handle_reply(&mut self, now: Instant, _node: usize, id: CommandId, reply: Reply) {
        Self::handle_reply(self, now, id, reply);
    }

    fn handle_timeout(&mut self, now: Instant) {
        for timer in Timer::ORDER {
            let due = self.timers[timer as usize].is_some_and(|at| at <= now);
            if !due {
                continue;
            }
            self.timers[timer as usize] = None;
            match timer {
                Timer::CommandTimeout => {
                    if let Some(in_flight) = self.in_flight {
                        self.handle_reply(now, in_flight.id, Reply::Failed(Failure::Timeout));
                    }
                }
                Timer::Expiry => self.expire_if_due(now),
                Timer::Renew => {
                    if matches!(self.state, State::Held(_)) && self.in_flight.is_none() {
                        self.send(now, Kind::Renew);
                    }
                }
                Timer::Retry => match self.state {
                    State::Acquiring(_) if self.in_flight.is_none() => {
                        self.send(now, Kind::Acquire);
                    }
                    State::Releasing(_) | State::CleaningUp(_) if self.in_flight.is_none() => {
                        self.send(now, Kind::Release);
                    }
                    _ => {}
                },
            }
        }
    }

    /// Every command goes to node 0: see [`LockMachine::poll_command`].
    fn poll_command(&mut self) -> Option<(usize, CommandId, Command)> {
        Self::poll_command(self).map(|(id, command)| (0, id, command))
    }

    fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.timers.iter().flatten().min().copied()
    }

    fn awaits(&self, _node: usize, id: CommandId) -> bool {
        self.in_flight() == Some(id)
    }

    /// A driver that batches renewals reads it to find the locks whose
    /// renewal falls due soon, and sends them early with
    /// [`renew_early`](Machine::renew_early).
    fn renewal_due(&self) -> Option<Instant> {
        match self.state {
            State::Held(_) if self.in_flight.is_none() => self.timers[Timer::Renew as usize],
            _ => None,
        }
    }

    /// Renewing early is always safe: the renewal still extends validity
    /// only from its own send (timing rules 1 and 2). Does nothing unless a
    /// renewal is scheduled ([`renewal_due`](Machine::renewal_due) is `Some`).
    fn renew_early(&mut self, now: Instant) {
        self.expire_if_due(now);
        if self.renewal_due().is_some() {
            self.timers[Timer::Renew as usize] = None;
            self.send(now, Kind::Renew);
        }
    }

    fn phase(&self) -> Phase {
        self.state.phase()
    }

    /// False while a release left unknown is retried in the background
    /// (timing rule 9), although the phase is already `Released`.
    fn is_released(&self) -> bool {
        self.state == State::Released
    }

    fn is_held(&self, now: Instant) -> bool {
        match &self.state {
            // Timing rule 3: false for every now ≥ valid_until, even before
            // the driver delivers the timeout.
            State::Held(hold) | State::Renewing(hold) => now < hold.valid_until,
            _ => false,
        }
    }

    fn valid_until(&self) -> Option<Instant> {
        match &self.state {
            State::Held(hold) | State::Renewing(hold) => Some(hold.valid_until),
            _ => None,
        }
    }

    fn fence(&self) -> Option<u64> {
        match &self.state {
            State::Held(hold) | State::Renewing(hold) => Some(hold.fence),
            _ => None,
        }
    }

    fn keys(&self) -> &KeyNames {
        &self.keys
    }

    fn token(&self) -> &str {
        &self.token
    }
}

#[cfg(test)]
mod tests;
