//! Tests of the lock machine: a virtual-time harness against a small model
//! of Redis, one test per timing rule, and property tests over random
//! interleavings. No real time passes anywhere.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;
use crate::{Fencing, ReleaseOutcome};

mod clean_up;

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// ttl 1 s: drift = 10 ms + 2 ms, renewals every 333 ms, commands time out
/// after 166 ms.
fn opts() -> LockOptions {
    LockOptions::new(ms(1_000)).wait(ms(2_000))
}

const DRIFT: Duration = ms(12);

/// A model of one Redis key with ttls on the model's own clock, applying
/// the scripts' semantics (lock-core/src/scripts/*.lua).
#[derive(Debug, Default)]
struct Redis {
    key: Option<(String, Instant)>,
    fence: u64,
}

impl Redis {
    fn owner(&self, now: Instant) -> Option<&str> {
        self.key
            .as_ref()
            .filter(|(_, expires)| now < *expires)
            .map(|(owner, _)| owner.as_str())
    }

    fn apply(&mut self, now: Instant, token: &str, command: &Command) -> Reply {
        match command {
            Command::Acquire { ttl, .. } => match self.owner(now) {
                Some(owner) if owner == token => {
                    self.key = Some((token.to_owned(), now + *ttl));
                    Reply::Granted {
                        fence: self.fence,
                        replicas: None,
                        aof: None,
                    }
                }
                Some(_) => Reply::Contended {
                    pttl: self
                        .key
                        .as_ref()
                        .map(|(_, e)| e.saturating_duration_since(now)),
                },
                None => {
                    self.fence += 1;
                    self.key = Some((token.to_owned(), now + *ttl));
                    Reply::Granted {
                        fence: self.fence,
                        replicas: None,
                        aof: None,
                    }
                }
            },
            Command::Renew { ttl, .. } => {
                if self.owner(now) == Some(token) {
                    self.key = Some((token.to_owned(), now + *ttl));
                    Reply::Renewed {
                        replicas: None,
                        aof: None,
                    }
                } else {
                    Reply::NotOwner
                }
            }
            Command::Release => {
                if self.owner(now) == Some(token) {
                    self.key = None;
                    Reply::Released
                } else {
                    Reply::NotOwner
                }
            }
        }
    }
}

/// A command on its way: it reaches Redis at `arrive`, its reply comes back
/// at `reply` (if the network delivers it).
struct Flight {
    id: CommandId,
    command: Command,
    arrive: Instant,
    reply_at: Instant,
    reply: Option<Reply>,
}

/// Drives one machine against the model, jumping time from event to event
/// (quinn-proto's `Pair::drive`).
struct Harness {
    machine: LockMachine,
    redis: Redis,
    now: Instant,
    /// One-way delay of every message.
    delay: Duration,
    /// While true, replies are lost (commands still run).
    drop_replies: bool,
    /// While true, commands are lost before reaching Redis.
    drop_commands: bool,
    /// While true, the connection is down: every command fails at once
    /// with `Failed(Connection)` and never reaches Redis.
    refuse_commands: bool,
    flights: Vec<Flight>,
    events: Vec<(Instant, Event)>,
    sent: Vec<(Instant, CommandId, Command)>,
}

impl Harness {
    fn new(opts: &LockOptions) -> Self {
        Self {
            machine: LockMachine::new(opts, "k", "me".into(), 7).expect("valid options"),
            redis: Redis::default(),
            now: Instant::now(),
            delay: ms(1),
            drop_replies: false,
            drop_commands: false,
            refuse_commands: false,
            flights: Vec::new(),
            events: Vec::new(),
            sent: Vec::new(),
        }
    }

    /// The drain rule: take every command and event after an input.
    fn drain(&mut self) {
        while let Some((id, command)) = self.machine.poll_command() {
            self.sent.push((self.now, id, command.clone()));
            if self.refuse_commands {
                self.flights.push(Flight {
                    id,
                    command,
                    arrive: self.now,
                    reply_at: self.now,
                    reply: Some(Reply::Failed(Failure::Connection)),
                });
            } else if !self.drop_commands {
                self.flights.push(Flight {
                    id,
                    command,
                    arrive: self.now + self.delay,
                    reply_at: self.now + self.delay * 2,
                    reply: None,
                });
            }
        }
        while let Some(event) = self.machine.poll_event() {
            self.events.push((self.now, event));
        }
    }

    /// Runs until `until`, processing timers and deliveries in time order.
    fn run_until(&mut self, until: Instant) {
        self.drain();
        loop {
            let next_flight = self
                .flights
                .iter()
                .map(|f| {
                    if f.reply.is_none() {
                        f.arrive
                    } else {
                        f.reply_at
                    }
                })
                .min();
            let next = [self.machine.poll_timeout(), next_flight]
                .into_iter()
                .flatten()
                .min();
            let Some(next) = next.filter(|at| *at <= until) else {
                self.now = until.max(self.now);
                return;
            };
            self.now = next.max(self.now);
            let now = self.now;
            // Deliveries due now: commands reach Redis, replies come back.
            let mut index = 0;
            while index < self.flights.len() {
                let flight = &mut self.flights[index];
                if flight.reply.is_none() && flight.arrive <= now {
                    let reply = self.redis.apply(now, "me", &flight.command);
                    flight.reply = Some(reply);
                }
                if flight.reply.is_some() && flight.reply_at <= now {
                    let flight = self.flights.remove(index);
                    if !self.drop_replies
                        && let Some(reply) = flight.reply
                    {
                        self.machine.handle_reply(now, flight.id, reply);
                        self.drain();
                    }
                    continue;
                }
                index += 1;
            }
            if self.machine.poll_timeout().is_some_and(|at| at <= now) {
                self.machine.handle_timeout(now);
                self.drain();
            }
        }
    }

    fn acquire(&mut self) {
        self.machine.acquire(self.now).expect("fresh machine");
        self.drain();
    }

    fn events_of(&self, f: impl Fn(&Event) -> bool) -> Vec<(Instant, Event)> {
        self.events.iter().filter(|(_, e)| f(e)).cloned().collect()
    }

    fn lost(&self) -> Vec<(Instant, Event)> {
        self.events_of(|e| matches!(e, Event::Lost { .. }))
    }
}

#[test]
fn rule1_validity_counts_from_send_not_reply() {
    // A 400 ms round trip, inside a generous command timeout.
    let mut h = Harness::new(&opts().command_timeout(ms(900)));
    h.delay = ms(200);
    let t0 = h.now;
    h.acquire();
    h.run_until(t0 + ms(450));
    let acquired = h.events_of(|e| matches!(e, Event::Acquired { .. }));
    let [(at, Event::Acquired { valid_until, .. })] = acquired.as_slice() else {
        panic!("one grant expected: {:?}", h.events);
    };
    assert_eq!(
        *at,
        t0 + ms(400),
        "the reply came after a 400 ms round trip"
    );
    assert_eq!(
        *valid_until,
        t0 + ms(1_000) - DRIFT,
        "from the send, not the reply"
    );
}

#[test]
fn rule2_failed_renewal_never_extends() {
    for failure in [
        Reply::Failed(Failure::Timeout),
        Reply::Failed(Failure::Connection),
        Reply::Failed(Failure::Busy),
        Reply::Failed(Failure::Loading),
        Reply::Failed(Failure::Protocol),
    ] {
        let mut machine = LockMachine::new(&opts(), "k", "me".into(), 1).expect("valid");
        let t0 = Instant::now();
        machine.acquire(t0).expect("idle");
        let (id, _) = machine.poll_command().expect("acquire");
        machine.handle_reply(
            t0,
            id,
            Reply::Granted {
                fence: 1,
                replicas: None,
                aof: None,
            },
        );
        let deadline = machine.valid_until().expect("held");
        let renew_at = machine.poll_timeout().expect("renewal timer");
        machine.handle_timeout(renew_at);
        let (id, command) = machine.poll_command().expect("renewal");
        assert!(matches!(command, Command::Renew { .. }));
        machine.handle_reply(renew_at + ms(1), id, failure.clone());
        assert_eq!(
            machine.valid_until(),
            Some(deadline),
            "{failure:?} extended validity"
        );
        let Reply::Failed(expected) = failure else {
            unreachable!("the list holds failures only")
        };
        let events: Vec<Event> = std::iter::from_fn(|| machine.poll_event()).collect();
        assert_eq!(
            events.last(),
            Some(&Event::RenewFailed(RenewFailure::Failed(expected))),
            "a failed renewal is reported"
        );
    }
    // Under-replicated renewals do not count either.
    let opts = opts().wait_replicas(1, ms(50));
    let mut machine = LockMachine::new(&opts, "k", "me".into(), 1).expect("valid");
    let t0 = Instant::now();
    machine.acquire(t0).expect("idle");
    let (id, _) = machine.poll_command().expect("acquire");
    machine.handle_reply(
        t0,
        id,
        Reply::Granted {
            fence: 1,
            replicas: Some(1),
            aof: None,
        },
    );
    let deadline = machine.valid_until().expect("held");
    let renew_at = machine.poll_timeout().expect("renewal");
    machine.handle_timeout(renew_at);
    let (id, _) = machine.poll_command().expect("renewal");
    machine.handle_reply(
        renew_at,
        id,
        Reply::Renewed {
            replicas: Some(0),
            aof: None,
        },
    );
    assert_eq!(machine.valid_until(), Some(deadline));
    let events: Vec<Event> = std::iter::from_fn(|| machine.poll_event()).collect();
    assert_eq!(
        events.last(),
        Some(&Event::RenewFailed(RenewFailure::NotReplicated {
            acked: 0,
            wanted: 1
        }))
    );
}

#[test]
fn rule2_successful_renewal_moves_validity_to_its_own_send() {
    let mut h = Harness::new(&opts());
    h.delay = ms(20);
    let t0 = h.now;
    h.acquire();
    h.run_until(t0 + ms(400));
    let renewals: Vec<_> = h
        .sent
        .iter()
        .filter(|(_, _, c)| matches!(c, Command::Renew { .. }))
        .collect();
    let (renew_sent, _, _) = renewals.first().expect("a renewal by 400 ms");
    assert_eq!(*renew_sent, t0 + opts().effective_renew_every());
    assert_eq!(renewals.len(), 1);
    assert_eq!(
        h.machine.valid_until(),
        Some(*renew_sent + ms(1_000) - DRIFT)
    );
}

#[test]
fn rule3_lost_fires_at_deadline_without_reply() {
    let mut h = Harness::new(&opts());
    let t0 = h.now;
    h.acquire();
    h.run_until(t0 + ms(10));
    let deadline = h.machine.valid_until().expect("held");
    assert!(h.machine.is_held(deadline - Duration::from_nanos(1)));
    h.drop_replies = true;
    h.run_until(t0 + ms(3_000));
    let lost = h.lost();
    assert_eq!(lost.len(), 1, "{:?}", h.events);
    assert_eq!(
        lost[0],
        (
            deadline,
            Event::Lost {
                reason: LostReason::Expired
            }
        )
    );
    assert!(!h.machine.is_held(deadline));
    // Redis would still have had the key at the deadline: the margin.
    assert!(deadline < t0 + ms(1_000));
}

#[test]
fn rule3_is_held_is_false_from_the_deadline_even_before_the_timeout_runs() {
    let mut machine = LockMachine::new(&opts(), "k", "me".into(), 1).expect("valid");
    let t0 = Instant::now();
    machine.acquire(t0).expect("idle");
    let (id, _) = machine.poll_command().expect("acquire");
    machine.handle_reply(
        t0,
        id,
        Reply::Granted {
            fence: 1,
            replicas: None,
            aof: None,
        },
    );
    let deadline = machine.valid_until().expect("held");
    assert!(machine.is_held(deadline - ms(1)));
    assert!(!machine.is_held(deadline), "no handle_timeout needed");
    assert!(!machine.is_held(deadline + ms(5_000)));
}

#[test]
fn rule4_stale_reply_ignored_and_one_command_in_flight() {
    let mut machine = LockMachine::new(&opts(), "k", "me".into(), 1).expect("valid");
    let t0 = Instant::now();
    machine.acquire(t0).expect("idle");
    let (acquire_id, _) = machine.poll_command().expect("acquire");
    machine.handle_reply(
        t0,
        acquire_id,
        Reply::Granted {
            fence: 1,
            replicas: None,
            aof: None,
        },
    );
    let deadline = machine.valid_until().expect("held");
    let renew_at = machine.poll_timeout().expect("renewal");
    machine.handle_timeout(renew_at);
    let (stale_id, _) = machine.poll_command().expect("renewal");
    assert!(machine.poll_command().is_none(), "one command in flight");
    // The renewal times out (command timeout), and a retry goes out.
    let mut now;
    let retry_id = loop {
        now = machine.poll_timeout().expect("timers");
        machine.handle_timeout(now);
        if let Some((id, _)) = machine.poll_command() {
            break id;
        }
    };
    assert_ne!(retry_id, stale_id);
    // The first renewal's answer arrives late: ignored.
    machine.handle_reply(
        now,
        stale_id,
        Reply::Renewed {
            replicas: None,
            aof: None,
        },
    );
    assert_eq!(
        machine.valid_until(),
        Some(deadline),
        "a stale reply changed validity"
    );
    // A duplicate of the acquire's reply too.
    machine.handle_reply(
        now,
        acquire_id,
        Reply::Granted {
            fence: 9,
            replicas: None,
            aof: None,
        },
    );
    assert_eq!(machine.fence(), Some(1));
    // The retry's own success counts, from its own send.
    machine.handle_reply(
        now + ms(1),
        retry_id,
        Reply::Renewed {
            replicas: None,
            aof: None,
        },
    );
    assert_eq!(machine.valid_until(), Some(now + ms(1_000) - DRIFT));
}

#[test]
fn rule4_failed_renewal_retried_while_valid() {
    let mut h = Harness::new(&opts());
    let t0 = h.now;
    h.acquire();
    h.run_until(t0 + ms(10));
    let deadline = h.machine.valid_until().expect("held");
    h.drop_commands = true;
    h.run_until(deadline + ms(100));
    let renewals: Vec<Instant> = h
        .sent
        .iter()
        .filter(|(_, _, c)| matches!(c, Command::Renew { .. }))
        .map(|(at, _, _)| *at)
        .collect();
    assert!(renewals.len() >= 3, "retries while valid: {renewals:?}");
    assert!(
        renewals.iter().all(|at| *at < deadline),
        "none after the deadline"
    );
}

#[test]
fn rule5_max_hold_ends_in_lost_maxhold() {
    let opts = opts().max_hold(ms(2_500));
    let mut h = Harness::new(&opts);
    let t0 = h.now;
    h.acquire();
    h.run_until(t0 + ms(5_000));
    let lost = h.lost();
    assert_eq!(
        lost,
        vec![(
            t0 + ms(2_500),
            Event::Lost {
                reason: LostReason::MaxHold
            }
        )]
    );
    for (_, event) in &h.events {
        if let Event::Renewed { valid_until } | Event::Acquired { valid_until, .. } = event {
            assert!(*valid_until <= t0 + ms(2_500), "validity passed the cap");
        }
    }
}

#[test]
fn rule6_contention_backoff_with_jitter_and_wakeup() {
    let mut h = Harness::new(&opts());
    let t0 = h.now;
    h.redis.key = Some(("other".into(), t0 + ms(10_000)));
    h.acquire();
    h.run_until(t0 + ms(5_000));
    let contended: Vec<Instant> = h
        .events_of(|e| matches!(e, Event::Contended { .. }))
        .into_iter()
        .map(|(_, e)| match e {
            Event::Contended { retry_at } => retry_at,
            _ => unreachable!("filtered"),
        })
        .collect();
    assert!(contended.len() >= 5, "retries: {contended:?}");
    let attempts: Vec<Instant> = h.sent.iter().map(|(at, _, _)| *at).collect();
    for pair in attempts.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= ms(5) && gap <= ms(202),
            "backoff {gap:?} outside 10 ms/2 .. 200 ms"
        );
    }
    // Gave up at the wait (2 s), having attempted up to it.
    let failed = h.events_of(|e| matches!(e, Event::AcquireFailed(_)));
    assert_eq!(
        failed.iter().map(|(_, e)| e.clone()).collect::<Vec<_>>(),
        vec![Event::AcquireFailed(AcquireFailure::TimedOut {
            last_failure: None
        })]
    );
    assert!(failed[0].0 >= t0 + ms(2_000) && failed[0].0 <= t0 + ms(2_010));

    // The jitter is a pure function of the seed.
    let gaps = |seed| {
        let mut machine = LockMachine::new(&opts(), "k", "me".into(), seed).expect("valid");
        machine.acquire(t0).expect("idle");
        let mut retries = Vec::new();
        for _ in 0..5 {
            let (id, _) = machine.poll_command().expect("attempt");
            machine.handle_reply(t0, id, Reply::Contended { pttl: None });
            let Some(Event::Contended { retry_at }) = machine.poll_event() else {
                panic!("contended");
            };
            retries.push(retry_at);
            machine.handle_timeout(retry_at);
        }
        retries
    };
    assert_eq!(gaps(3), gaps(3));
    assert_ne!(gaps(3), gaps(4));

    // A wake-up retries at once.
    let mut machine = LockMachine::new(&opts(), "k", "me".into(), 1).expect("valid");
    machine.acquire(t0).expect("idle");
    let (id, _) = machine.poll_command().expect("attempt");
    machine.handle_reply(
        t0,
        id,
        Reply::Contended {
            pttl: Some(ms(900)),
        },
    );
    machine.handle_wakeup(t0 + ms(1));
    assert!(matches!(
        machine.poll_command(),
        Some((_, Command::Acquire { .. }))
    ));
}

#[test]
fn rule7_release_after_lost_still_sends_owner_checked_release() {
    let mut h = Harness::new(&opts());
    let t0 = h.now;
    h.acquire();
    h.run_until(t0 + ms(10));
    // Someone else takes the key; our renewal finds out.
    h.redis.key = Some(("other".into(), t0 + ms(60_000)));
    h.run_until(t0 + ms(400));
    assert_eq!(h.lost().len(), 1);
    h.machine.release(h.now);
    h.drain();
    assert!(matches!(h.sent.last(), Some((_, _, Command::Release))));
    h.run_until(h.now + ms(50));
    assert_eq!(
        h.redis.owner(h.now),
        Some("other"),
        "another owner's key untouched"
    );
    assert!(h.events.iter().any(|(_, e)| *e
        == Event::Released {
            outcome: ReleaseOutcome::NotOwner
        }));
    assert!(h.machine.is_released());
}

#[test]
fn rule8_invalid_options_rejected() {
    let bad = LockOptions::new(ms(1_000)).renew_every(ms(995));
    assert!(matches!(
        LockMachine::new(&bad, "k", "me".into(), 1),
        Err(OptionsError::RenewEvery { .. })
    ));
    assert!(matches!(
        LockMachine::new(
            &LockOptions::new(ms(1_000)).drift_factor(0.7),
            "k",
            "me".into(),
            1
        ),
        Err(OptionsError::DriftFactor { .. })
    ));
    assert!(matches!(
        LockMachine::new(
            &LockOptions::new(ms(1_000)).max_hold(ms(10)),
            "k",
            "me".into(),
            1
        ),
        Err(OptionsError::MaxHold { .. })
    ));
    assert_eq!(
        LockMachine::new(&LockOptions::new(Duration::ZERO), "k", "me".into(), 1).err(),
        Some(OptionsError::ZeroTtl)
    );
}

fn held(opts: &LockOptions) -> (LockMachine, Instant) {
    let mut machine = LockMachine::new(opts, "k", "me".into(), 1).expect("valid");
    let t0 = Instant::now();
    machine.acquire(t0).expect("idle");
    let (id, _) = machine.poll_command().expect("acquire");
    machine.handle_reply(
        t0,
        id,
        Reply::Granted {
            fence: 1,
            replicas: None,
            aof: None,
        },
    );
    assert!(matches!(machine.poll_event(), Some(Event::Acquired { .. })));
    (machine, t0)
}

fn renew_and_answer(machine: &mut LockMachine, reply: Reply) -> Instant {
    let at = machine.poll_timeout().expect("renewal timer");
    machine.handle_timeout(at);
    let (id, _) = machine.poll_command().expect("renewal");
    machine.handle_reply(at, id, reply);
    at
}

#[test]
fn not_owner_renewal_is_lost_at_once() {
    let (mut machine, _) = held(&opts());
    let at = renew_and_answer(&mut machine, Reply::NotOwner);
    assert_eq!(
        machine.poll_event(),
        Some(Event::RenewFailed(RenewFailure::NotOwner))
    );
    assert_eq!(
        machine.poll_event(),
        Some(Event::Lost {
            reason: LostReason::NotOwner
        })
    );
    assert!(!machine.is_held(at));
}

#[test]
fn readonly_renewal_means_failover_and_loss() {
    let (mut machine, _) = held(&opts());
    renew_and_answer(&mut machine, Reply::Failed(Failure::ReadOnly));
    assert_eq!(
        machine.poll_event(),
        Some(Event::RenewFailed(RenewFailure::Failed(Failure::ReadOnly)))
    );
    assert_eq!(
        machine.poll_event(),
        Some(Event::Lost {
            reason: LostReason::Failover
        })
    );
}

#[test]
fn unknown_acquire_outcome_is_released_on_give_up() {
    let mut h = Harness::new(&opts().wait(ms(300)));
    h.drop_replies = true; // commands run, replies vanish
    let t0 = h.now;
    h.acquire();
    h.run_until(t0 + ms(2_000));
    assert!(
        h.sent.iter().any(|(_, _, c)| *c == Command::Release),
        "best-effort release"
    );
    assert!(h.events.iter().any(|(_, e)| matches!(
        e,
        Event::AcquireFailed(AcquireFailure::TimedOut {
            last_failure: Some(Failure::Timeout)
        })
    )));
    assert_eq!(h.redis.owner(h.now), None, "the orphaned key was removed");
}

#[test]
fn under_replicated_grant_is_released_and_reported() {
    let opts = opts().wait_replicas(1, ms(50));
    let mut machine = LockMachine::new(&opts, "k", "me".into(), 1).expect("valid");
    let t0 = Instant::now();
    machine.acquire(t0).expect("idle");
    let (id, _) = machine.poll_command().expect("acquire");
    machine.handle_reply(
        t0,
        id,
        Reply::Granted {
            fence: 1,
            replicas: Some(0),
            aof: None,
        },
    );
    let (id, command) = machine.poll_command().expect("undo");
    assert_eq!(command, Command::Release);
    assert!(!machine.is_held(t0));
    machine.handle_reply(t0, id, Reply::Released);
    assert_eq!(
        machine.poll_event(),
        Some(Event::AcquireFailed(AcquireFailure::NotReplicated {
            acked: 0,
            wanted: 1
        }))
    );
}

/// `WAITAOF` counts as answered: both must meet `wait_aof(local, replicas, _)`.
fn aof(local: u32, replicas: u32) -> Option<crate::AofCounts> {
    Some(crate::AofCounts { local, replicas })
}

#[test]
fn a_grant_short_of_either_aof_count_is_released_and_reported() {
    let opts = opts().wait_aof(1, 1, ms(50));
    // Short of the local fsync, of the replica's, of both, or unanswered.
    for counts in [aof(0, 1), aof(1, 0), aof(0, 0), None] {
        let mut machine = LockMachine::new(&opts, "k", "me".into(), 1).expect("valid");
        let t0 = Instant::now();
        machine.acquire(t0).expect("idle");
        let (id, command) = machine.poll_command().expect("acquire");
        assert!(matches!(
            command,
            Command::Acquire {
                wait_aof: Some(crate::WaitAof {
                    local: 1,
                    replicas: 1,
                    ..
                }),
                ..
            }
        ));
        machine.handle_reply(
            t0,
            id,
            Reply::Granted {
                fence: 1,
                replicas: None,
                aof: counts,
            },
        );
        let (id, command) = machine.poll_command().expect("undo");
        assert_eq!(command, Command::Release, "{counts:?}");
        assert!(!machine.is_held(t0), "{counts:?}");
        machine.handle_reply(t0, id, Reply::Released);
        let acked = counts.unwrap_or_default();
        assert_eq!(
            machine.poll_event(),
            Some(Event::AcquireFailed(AcquireFailure::NotDurable {
                acked,
                wanted: crate::AofCounts {
                    local: 1,
                    replicas: 1
                }
            }))
        );
    }
    // Both met: held.
    let mut machine = LockMachine::new(&opts, "k", "me".into(), 1).expect("valid");
    let t0 = Instant::now();
    machine.acquire(t0).expect("idle");
    let (id, _) = machine.poll_command().expect("acquire");
    let granted = Reply::Granted {
        fence: 1,
        replicas: None,
        aof: aof(1, 2),
    };
    machine.handle_reply(t0, id, granted);
    assert!(machine.is_held(t0));
}

#[test]
fn a_renewal_short_of_an_aof_count_does_not_extend() {
    let opts = opts().wait_aof(1, 0, ms(50));
    let mut machine = LockMachine::new(&opts, "k", "me".into(), 1).expect("valid");
    let t0 = Instant::now();
    machine.acquire(t0).expect("idle");
    let (id, _) = machine.poll_command().expect("acquire");
    let granted = Reply::Granted {
        fence: 1,
        replicas: None,
        aof: aof(1, 0),
    };
    machine.handle_reply(t0, id, granted);
    let deadline = machine.valid_until().expect("held");
    let renew_at = machine.poll_timeout().expect("renewal");
    machine.handle_timeout(renew_at);
    let (id, _) = machine.poll_command().expect("renewal");
    let short = Reply::Renewed {
        replicas: None,
        aof: aof(0, 3),
    };
    machine.handle_reply(renew_at, id, short);
    assert_eq!(machine.valid_until(), Some(deadline), "not extended");
    let events: Vec<Event> = std::iter::from_fn(|| machine.poll_event()).collect();
    assert_eq!(
        events.last(),
        Some(&Event::RenewFailed(RenewFailure::NotDurable {
            acked: crate::AofCounts {
                local: 0,
                replicas: 3
            },
            wanted: crate::AofCounts {
                local: 1,
                replicas: 0
            }
        }))
    );
    // The retry that is fsynced extends.
    let retry_at = machine.poll_timeout().expect("retry");
    machine.handle_timeout(retry_at);
    let (id, _) = machine.poll_command().expect("retried renewal");
    let durable = Reply::Renewed {
        replicas: None,
        aof: aof(1, 0),
    };
    machine.handle_reply(retry_at, id, durable);
    assert!(machine.valid_until() > Some(deadline), "extended");
}

#[test]
fn an_unsupported_waitaof_fails_the_acquire_at_once() {
    let opts = opts().wait_aof(1, 0, ms(50));
    let mut machine = LockMachine::new(&opts, "k", "me".into(), 1).expect("valid");
    let t0 = Instant::now();
    machine.acquire(t0).expect("idle");
    let (id, _) = machine.poll_command().expect("acquire");
    machine.handle_reply(t0, id, Reply::Failed(Failure::Unsupported));
    assert_eq!(
        machine.poll_event(),
        Some(Event::AcquireFailed(AcquireFailure::Failed(
            Failure::Unsupported
        )))
    );
    assert!(machine.poll_command().is_none(), "nothing ran: no undo");
}

#[test]
fn wrongtype_is_a_permanent_acquire_failure() {
    let mut machine = LockMachine::new(&opts(), "k", "me".into(), 1).expect("valid");
    let t0 = Instant::now();
    machine.acquire(t0).expect("idle");
    let (id, _) = machine.poll_command().expect("acquire");
    machine.handle_reply(t0, id, Reply::Failed(Failure::WrongType));
    assert_eq!(
        machine.poll_event(),
        Some(Event::AcquireFailed(AcquireFailure::Failed(
            Failure::WrongType
        )))
    );
    assert!(machine.poll_command().is_none(), "no retry");
}

#[test]
fn wrongtype_on_renewal_loses_the_lock_at_once() {
    let mut machine = LockMachine::new(&opts(), "k", "me".into(), 1).expect("valid");
    let t0 = Instant::now();
    machine.acquire(t0).expect("idle");
    let (id, _) = machine.poll_command().expect("acquire");
    machine.handle_reply(
        t0,
        id,
        Reply::Granted {
            fence: 1,
            replicas: None,
            aof: None,
        },
    );
    let _ = machine.poll_event();
    let renew_at = machine.poll_timeout().expect("a renewal is scheduled");
    machine.handle_timeout(renew_at);
    let (id, command) = machine.poll_command().expect("renew");
    assert!(matches!(command, Command::Renew { .. }));
    machine.handle_reply(renew_at, id, Reply::Failed(Failure::WrongType));
    assert_eq!(
        machine.poll_event(),
        Some(Event::RenewFailed(RenewFailure::Failed(Failure::WrongType)))
    );
    assert_eq!(
        machine.poll_event(),
        Some(Event::Lost {
            reason: LostReason::NotOwner
        })
    );
    assert!(!machine.is_held(renew_at));
}

#[test]
fn wrongtype_on_release_means_the_key_is_not_ours() {
    let mut machine = LockMachine::new(&opts(), "k", "me".into(), 1).expect("valid");
    let t0 = Instant::now();
    machine.acquire(t0).expect("idle");
    let (id, _) = machine.poll_command().expect("acquire");
    machine.handle_reply(
        t0,
        id,
        Reply::Granted {
            fence: 1,
            replicas: None,
            aof: None,
        },
    );
    let _ = machine.poll_event();
    machine.release(t0);
    let (id, command) = machine.poll_command().expect("release");
    assert_eq!(command, Command::Release);
    machine.handle_reply(t0, id, Reply::Failed(Failure::WrongType));
    assert_eq!(
        machine.poll_event(),
        Some(Event::Lost {
            reason: LostReason::NotOwner
        })
    );
    assert_eq!(
        machine.poll_event(),
        Some(Event::Released {
            outcome: ReleaseOutcome::NotOwner
        })
    );
    assert!(machine.poll_command().is_none(), "not retried");
}

#[test]
fn reply_of_the_wrong_kind_is_treated_as_unknown() {
    let mut machine = LockMachine::new(&opts(), "k", "me".into(), 1).expect("valid");
    let t0 = Instant::now();
    machine.acquire(t0).expect("idle");
    let (id, _) = machine.poll_command().expect("acquire");
    machine.handle_reply(t0, id, Reply::Released);
    assert!(!machine.is_held(t0));
    assert!(matches!(&machine.state, State::Acquiring(a) if a.maybe_set));
}

#[test]
fn usage_errors_do_not_panic() {
    let (mut machine, t0) = held(&opts());
    assert_eq!(machine.acquire(t0), Err(UsageError::AlreadyStarted));
    machine.release(t0);
    machine.release(t0);
    machine.handle_reply(t0, CommandId(999), Reply::Released);
    machine.handle_wakeup(t0);
}

#[derive(Debug, Clone)]
enum Step {
    Advance(u64),
    Release,
    Wakeup,
    Reply { pick: usize, kind: u8 },
    Duplicate { pick: usize },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u64..700).prop_map(Step::Advance),
        1 => Just(Step::Release),
        1 => Just(Step::Wakeup),
        6 => (any::<usize>(), 0u8..9).prop_map(|(pick, kind)| Step::Reply { pick, kind }),
        1 => any::<usize>().prop_map(|pick| Step::Duplicate { pick }),
    ]
}

fn reply_of(kind: u8, command: &Command, fence: u64) -> Reply {
    match (kind, command) {
        (0, Command::Acquire { .. }) => Reply::Granted {
            fence,
            replicas: None,
            aof: None,
        },
        (0, Command::Renew { .. }) => Reply::Renewed {
            replicas: None,
            aof: None,
        },
        (0, Command::Release) => Reply::Released,
        (1, _) => Reply::NotOwner,
        (2, _) => Reply::Contended {
            pttl: Some(ms(100)),
        },
        (3, _) => Reply::Failed(Failure::Timeout),
        (4, _) => Reply::Failed(Failure::Connection),
        (5, _) => Reply::Failed(Failure::Busy),
        (6, _) => Reply::Failed(Failure::ReadOnly),
        (7, _) => Reply::Failed(Failure::WrongType),
        _ => Reply::Renewed {
            replicas: Some(3),
            aof: None,
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random interleavings of inputs, replies (right, wrong, failed,
    /// late, duplicated, stale) and clock advances keep every invariant.
    #[test]
    fn invariants_hold_under_any_interleaving(
        steps in prop::collection::vec(step(), 1..80),
        max_hold in prop::option::of(1_000u64..4_000),
    ) {
        let mut opts = opts();
        if let Some(max_hold) = max_hold {
            opts = opts.max_hold(ms(max_hold));
        }
        let mut machine = LockMachine::new(&opts, "k", "me".into(), 11).expect("valid");
        let mut now = Instant::now();
        machine.acquire(now).expect("idle");
        // Every command handed out, with its send instant.
        let mut sent: Vec<(CommandId, Instant, Command)> = Vec::new();
        let mut answered: Vec<(CommandId, Reply)> = Vec::new();
        // The latest send instant of a successful acquire or renewal.
        let mut best_success: Option<Instant> = None;
        let mut lost_seen = 0;
        let mut after_lost: Vec<Command> = Vec::new();
        let mut fence = 0;
        for step in steps {
            match step {
                Step::Advance(by) => {
                    now += ms(by);
                    if machine.poll_timeout().is_some_and(|at| at <= now) {
                        machine.handle_timeout(now);
                    }
                }
                Step::Release => machine.release(now),
                Step::Wakeup => machine.handle_wakeup(now),
                Step::Reply { pick, kind } => {
                    if !sent.is_empty() {
                        let (id, sent_at, command) = sent[pick % sent.len()].clone();
                        fence += 1;
                        let reply = reply_of(kind, &command, fence);
                        let success = matches!(reply, Reply::Granted { .. } | Reply::Renewed { .. });
                        let before = machine.valid_until();
                        machine.handle_reply(now, id, reply.clone());
                        if success && machine.valid_until() != before {
                            best_success = Some(best_success.map_or(sent_at, |b| b.max(sent_at)));
                        }
                        answered.push((id, reply));
                    }
                }
                Step::Duplicate { pick } => {
                    if !answered.is_empty() {
                        let (id, reply) = answered[pick % answered.len()].clone();
                        let before = (machine.valid_until(), machine.fence());
                        machine.handle_reply(now, id, reply);
                        // A duplicate is either the in-flight answer (first
                        // delivery) or ignored; it never moves validity back.
                        if let (Some(b), Some(a)) = (before.0, machine.valid_until()) {
                            prop_assert!(a >= b);
                        }
                    }
                }
            }
            while let Some((id, command)) = machine.poll_command() {
                if lost_seen > 0 {
                    after_lost.push(command.clone());
                }
                sent.push((id, now, command));
            }
            while let Some(event) = machine.poll_event() {
                if matches!(event, Event::Lost { .. }) {
                    lost_seen += 1;
                }
            }
            // Invariants.
            if machine.is_held(now) {
                let valid_until = machine.valid_until().expect("held has a deadline");
                prop_assert!(now < valid_until);
                let anchor = best_success.expect("held implies a success");
                prop_assert!(valid_until <= anchor + ms(1_000) - DRIFT,
                    "validity {valid_until:?} beyond the latest success's send + ttl - drift");
            }
            prop_assert!(lost_seen <= 1, "Lost emitted twice");
            prop_assert!(after_lost.iter().all(|c| *c == Command::Release), "{after_lost:?} after Lost");
        }
    }
}

#[test]
fn fencing_mode_and_ttl_reach_the_command() {
    let opts = LockOptions::new(ms(2_000)).fencing(Fencing::Counter);
    let mut machine = LockMachine::new(&opts, "k", "me".into(), 1).expect("valid");
    machine.acquire(Instant::now()).expect("idle");
    assert_eq!(
        machine.poll_command().map(|(_, c)| c),
        Some(Command::Acquire {
            ttl: ms(2_000),
            fencing: Fencing::Counter,
            wait_replicas: None,
            wait_aof: None
        })
    );
}

mod family {
    //! The machine per kind: the same timing, and what a waiting client of
    //! a queueing kind (fair mode, a writer) does more.

    use super::*;

    fn machine(opts: &LockOptions, kind: LockKind) -> LockMachine {
        LockMachine::with_kind(opts, "k", "me".into(), kind, 7).expect("valid")
    }

    /// Starts an acquire and answers it contended (the holder has `pttl`
    /// left); returns the machine's next timeout (the retry, if any).
    fn contended(machine: &mut LockMachine, t0: Instant, pttl: Duration) -> Option<Instant> {
        machine.acquire(t0).expect("idle");
        let (id, command) = machine.poll_command().expect("acquire");
        assert!(matches!(command, Command::Acquire { .. }));
        machine.handle_reply(t0, id, Reply::Contended { pttl: Some(pttl) });
        machine.poll_timeout()
    }

    #[test]
    fn kinds_resolve_from_the_options() {
        let fair = opts().fair().waiter_ttl(ms(90));
        assert_eq!(
            machine(&fair, LockKind::Plain).keys().kind,
            LockKind::Fair { waiter_ttl: ms(90) }
        );
        assert_eq!(
            machine(&fair, LockKind::Plain).keys().channel(),
            "{lock:k}:released:me",
            "a fair waiter listens on its own channel"
        );
        let write = machine(
            &opts().waiter_ttl(ms(60)),
            LockKind::Write { intent_ttl: ms(1) },
        );
        assert_eq!(
            write.keys().kind,
            LockKind::Write { intent_ttl: ms(60) },
            "the intent ttl is the options' waiter ttl"
        );
        assert_eq!(write.keys().channel(), "{lock:k}:released");
        assert_eq!(
            LockMachine::with_kind(&fair, "k", "me".into(), LockKind::Read, 1).err(),
            Some(OptionsError::FairUnsupported { kind: "read" })
        );
        assert_eq!(
            LockMachine::with_kind(
                &opts(),
                "k",
                "me".into(),
                LockKind::Permit { permits: 0 },
                1
            )
            .err(),
            Some(OptionsError::NoPermits)
        );
        assert_eq!(
            crate::RedlockMachine::new(&fair, "k", "me".into(), 3, 1).err(),
            Some(crate::RedlockError::Options(
                OptionsError::FairUnsupported { kind: "redlock" }
            ))
        );
    }

    #[test]
    fn a_queueing_waiter_retries_within_a_third_of_its_waiter_ttl() {
        let t0 = Instant::now();
        // Backoff of 300 ms (jittered, at least 100 ms), the holder 5 s
        // from its end: a plain contender waits the backoff, a queueing
        // one a third of its 90 ms waiter ttl.
        let slow = opts().retry_delay(ms(300), ms(300));
        let backoff = |at: Option<Instant>| at.is_some_and(|at| at > t0 + ms(100));
        assert!(backoff(contended(
            &mut machine(&slow, LockKind::Plain),
            t0,
            ms(5_000)
        )));
        let fair = slow.clone().fair().waiter_ttl(ms(90));
        assert_eq!(
            contended(&mut machine(&fair, LockKind::Plain), t0, ms(5_000)),
            Some(t0 + ms(30))
        );
        let write = slow.clone().waiter_ttl(ms(90));
        let kind = LockKind::Write { intent_ttl: ms(1) };
        assert_eq!(
            contended(&mut machine(&write, kind), t0, ms(5_000)),
            Some(t0 + ms(30))
        );
        // Readers and permits do not queue: the plain rule.
        assert!(backoff(contended(
            &mut machine(&write, LockKind::Read),
            t0,
            ms(5_000)
        )));
        let permit = LockKind::Permit { permits: 2 };
        assert!(backoff(contended(
            &mut machine(&write, permit),
            t0,
            ms(5_000)
        )));
    }

    /// Gives up after one contended answer (wait 0); returns what it sent.
    fn give_up(kind: LockKind, cancel: bool) -> Vec<Command> {
        let opts = opts().wait(if cancel { ms(5_000) } else { ms(0) });
        let mut machine = machine(&opts, kind);
        let t0 = Instant::now();
        contended(&mut machine, t0, ms(500));
        if cancel {
            machine.release(t0 + ms(1));
        }
        let mut sent = Vec::new();
        while let Some((_, command)) = machine.poll_command() {
            sent.push(command);
        }
        sent
    }

    #[test]
    fn a_queueing_waiter_that_gives_up_takes_its_place_back() {
        let fair = LockKind::Fair {
            waiter_ttl: ms(300),
        };
        let write = LockKind::Write {
            intent_ttl: ms(300),
        };
        for cancel in [false, true] {
            assert_eq!(give_up(fair, cancel), [Command::Release], "cancel {cancel}");
            assert_eq!(
                give_up(write, cancel),
                [Command::Release],
                "cancel {cancel}"
            );
            assert_eq!(give_up(LockKind::Read, cancel), [], "cancel {cancel}");
            assert_eq!(
                give_up(LockKind::Permit { permits: 1 }, cancel),
                [],
                "cancel {cancel}"
            );
        }
        // The release's answer (0: no hold, the place withdrawn) ends the
        // acquire with its own failure.
        let mut machine = machine(&opts().wait(ms(0)), fair);
        let t0 = Instant::now();
        contended(&mut machine, t0, ms(500));
        let (id, command) = machine.poll_command().expect("release");
        assert_eq!(command, Command::Release);
        machine.handle_reply(t0 + ms(1), id, Reply::NotOwner);
        let events: Vec<_> = std::iter::from_fn(|| machine.poll_event()).collect();
        assert!(
            events.contains(&Event::AcquireFailed(AcquireFailure::TimedOut {
                last_failure: None
            }))
        );
        assert_eq!(machine.phase(), Phase::Released);
    }

    #[test]
    fn every_kind_keeps_the_plain_timing() {
        for kind in [
            LockKind::Fair {
                waiter_ttl: ms(300),
            },
            LockKind::Read,
            LockKind::Write {
                intent_ttl: ms(300),
            },
            LockKind::Permit { permits: 3 },
        ] {
            let opts = opts();
            let mut h = Harness::new(&opts);
            h.machine = machine(&opts, kind);
            let t0 = h.now;
            h.acquire();
            h.run_until(t0 + ms(100));
            // Rule 1: validity from the send, minus the drift.
            assert_eq!(
                h.machine.valid_until(),
                Some(t0 + ms(1_000) - DRIFT),
                "{kind:?}"
            );
            // Rule 3: with Redis gone silent, Lost(Expired) at that deadline.
            h.drop_replies = true;
            h.run_until(t0 + ms(2_000));
            let lost_at = h.events.iter().find_map(|(at, event)| {
                matches!(
                    event,
                    Event::Lost {
                        reason: LostReason::Expired
                    }
                )
                .then_some(*at)
            });
            assert_eq!(lost_at, Some(t0 + ms(1_000) - DRIFT), "{kind:?}");
        }
    }
}
