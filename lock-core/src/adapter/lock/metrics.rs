//! Metrics through the [`metrics`](https://docs.rs/metrics) facade, with
//! the cargo feature `metrics`; without it every hook below is an empty
//! inline function and nothing is compiled in.
//!
//! The series are derived from what the adapter already sees: the lock
//! machines' events (drained in `cell`), the renewal commands they hand
//! out (for the round-trip time), the acquire calls (`locker`) and the
//! driver's and the subscriber's reconnections (`driver`, `pubsub`). Each locker registers its handles
//! once, so recording is an atomic operation on a handle: no key is built,
//! nothing is allocated, and no lock name ever becomes a label (label sets
//! are fixed and small, so the series stay bounded however many keys are
//! locked). `docs/operations.md`, "Metrics", lists every series.

#[cfg(not(feature = "metrics"))]
pub(crate) use off::{LockTimes, Metrics};
#[cfg(feature = "metrics")]
pub(crate) use on::{LockTimes, Metrics};

#[cfg(feature = "metrics")]
mod on {
    use std::time::Instant;

    use ::metrics::{
        Counter, Gauge, Histogram, Unit, counter, describe_counter, describe_gauge,
        describe_histogram, gauge, histogram,
    };

    use crate::{AcquireFailure, Command, Event, Failure, LostReason, ReleaseOutcome};

    const ACQUIRE_ATTEMPTS: &str = "redis_lock_acquire_attempts_total";
    const ACQUIRE_GRANTS: &str = "redis_lock_acquire_grants_total";
    const ACQUIRE_CONTENTIONS: &str = "redis_lock_acquire_contentions_total";
    const ACQUIRE_TIMEOUTS: &str = "redis_lock_acquire_timeouts_total";
    const ACQUIRE_ERRORS: &str = "redis_lock_acquire_errors_total";
    const RENEWALS: &str = "redis_lock_renewals_total";
    const LOSSES: &str = "redis_lock_losses_total";
    const RELEASES: &str = "redis_lock_releases_total";
    const RECONNECTS: &str = "redis_lock_reconnects_total";
    const ACQUIRE_DURATION: &str = "redis_lock_acquire_duration_seconds";
    const WAIT_DURATION: &str = "redis_lock_wait_duration_seconds";
    const HOLD_DURATION: &str = "redis_lock_hold_duration_seconds";
    const RENEWAL_DURATION: &str = "redis_lock_renewal_duration_seconds";
    const HELD: &str = "redis_lock_held";

    /// Why an acquire ended without a grant or a timeout: the `reason`
    /// label of the errors counter, one per [`AcquireError`] variant that
    /// can happen.
    ///
    /// [`AcquireError`]: crate::AcquireError
    #[derive(Clone, Copy)]
    enum ErrorReason {
        InvalidOptions = 0,
        Unavailable = 1,
        WrongType = 2,
        NotReplicated = 3,
        Cancelled = 4,
    }

    /// The handles of every series, registered once per locker.
    pub(crate) struct Metrics {
        attempts: Counter,
        grants: Counter,
        contentions: Counter,
        timeouts: Counter,
        /// By [`ErrorReason`].
        errors: [Counter; 5],
        renewals_ok: Counter,
        renewals_failed: Counter,
        /// By [`loss_index`].
        losses: [Counter; 4],
        /// By [`release_index`].
        releases: [Counter; 3],
        /// Command connections reopened.
        reconnects: Counter,
        /// Pub/sub connections reopened.
        pubsub_reconnects: Counter,
        acquire_granted: Histogram,
        acquire_timeout: Histogram,
        acquire_error: Histogram,
        wait: Histogram,
        hold: Histogram,
        renewal_ok: Histogram,
        renewal_failed: Histogram,
        held: Gauge,
    }

    /// What one lock's series need to remember between events.
    #[derive(Debug)]
    pub(crate) struct LockTimes {
        /// When `acquire` was called.
        started: Instant,
        /// The first answer that found another owner, in this acquire.
        contended_since: Option<Instant>,
        /// The grant, until the lock is lost or released.
        held_since: Option<Instant>,
        /// The last renewal handed out and not yet answered.
        renew_sent: Option<Instant>,
    }

    impl LockTimes {
        pub(crate) fn new(started: Instant) -> Self {
            Self {
                started,
                contended_since: None,
                held_since: None,
                renew_sent: None,
            }
        }
    }

    impl Metrics {
        /// Describes and registers every series with the installed recorder.
        pub(crate) fn new() -> Self {
            describe();
            Self {
                attempts: counter!(ACQUIRE_ATTEMPTS),
                grants: counter!(ACQUIRE_GRANTS),
                contentions: counter!(ACQUIRE_CONTENTIONS),
                timeouts: counter!(ACQUIRE_TIMEOUTS),
                errors: [
                    counter!(ACQUIRE_ERRORS, "reason" => "invalid_options"),
                    counter!(ACQUIRE_ERRORS, "reason" => "unavailable"),
                    counter!(ACQUIRE_ERRORS, "reason" => "wrong_type"),
                    counter!(ACQUIRE_ERRORS, "reason" => "not_replicated"),
                    counter!(ACQUIRE_ERRORS, "reason" => "cancelled"),
                ],
                renewals_ok: counter!(RENEWALS, "outcome" => "ok"),
                renewals_failed: counter!(RENEWALS, "outcome" => "failed"),
                losses: [
                    counter!(LOSSES, "reason" => "expired"),
                    counter!(LOSSES, "reason" => "not_owner"),
                    counter!(LOSSES, "reason" => "max_hold"),
                    counter!(LOSSES, "reason" => "failover"),
                ],
                releases: [
                    counter!(RELEASES, "outcome" => "deleted"),
                    counter!(RELEASES, "outcome" => "not_owner"),
                    counter!(RELEASES, "outcome" => "unknown"),
                ],
                reconnects: counter!(RECONNECTS, "connection" => "command"),
                pubsub_reconnects: counter!(RECONNECTS, "connection" => "pubsub"),
                acquire_granted: histogram!(ACQUIRE_DURATION, "outcome" => "granted"),
                acquire_timeout: histogram!(ACQUIRE_DURATION, "outcome" => "timeout"),
                acquire_error: histogram!(ACQUIRE_DURATION, "outcome" => "error"),
                wait: histogram!(WAIT_DURATION),
                hold: histogram!(HOLD_DURATION),
                renewal_ok: histogram!(RENEWAL_DURATION, "outcome" => "ok"),
                renewal_failed: histogram!(RENEWAL_DURATION, "outcome" => "failed"),
                held: gauge!(HELD),
            }
        }

        /// An `acquire` (or `try_acquire`) call began.
        #[inline]
        pub(crate) fn acquire_called(&self) {
            self.attempts.increment(1);
        }

        /// The call's options were refused before anything was sent.
        #[inline]
        pub(crate) fn invalid_options(&self) {
            self.errors[ErrorReason::InvalidOptions as usize].increment(1);
        }

        /// A lock machine handed out `command`.
        #[inline]
        pub(crate) fn on_command(&self, times: &mut LockTimes, command: &Command, now: Instant) {
            if matches!(command, Command::Renew { .. }) {
                times.renew_sent = Some(now);
            }
        }

        /// A lock machine reported `event`.
        pub(crate) fn on_event(&self, times: &mut LockTimes, event: &Event, now: Instant) {
            match event {
                Event::Contended { .. } => {
                    if times.contended_since.is_none() {
                        times.contended_since = Some(now);
                        self.contentions.increment(1);
                    }
                }
                Event::Acquired { .. } => {
                    self.grants.increment(1);
                    self.acquire_granted.record(since(times.started, now));
                    self.acquire_ended(times, now);
                    times.held_since = Some(now);
                    self.held.increment(1.0);
                }
                Event::AcquireFailed(AcquireFailure::TimedOut { last_failure: None }) => {
                    // The last answer found another owner (a try_acquire
                    // gives up on the first, without a Contended event).
                    if times.contended_since.is_none() {
                        self.contentions.increment(1);
                    }
                    self.timeouts.increment(1);
                    self.acquire_timeout.record(since(times.started, now));
                    self.acquire_ended(times, now);
                }
                Event::AcquireFailed(failure) => {
                    let reason = match failure {
                        AcquireFailure::Failed(Failure::WrongType) => ErrorReason::WrongType,
                        AcquireFailure::NotReplicated { .. } => ErrorReason::NotReplicated,
                        AcquireFailure::Cancelled => ErrorReason::Cancelled,
                        _ => ErrorReason::Unavailable,
                    };
                    self.errors[reason as usize].increment(1);
                    self.acquire_error.record(since(times.started, now));
                    self.acquire_ended(times, now);
                }
                Event::Renewed { .. } => {
                    self.renewals_ok.increment(1);
                    if let Some(sent) = times.renew_sent.take() {
                        self.renewal_ok.record(since(sent, now));
                    }
                }
                Event::RenewFailed(_) => {
                    self.renewals_failed.increment(1);
                    if let Some(sent) = times.renew_sent.take() {
                        self.renewal_failed.record(since(sent, now));
                    }
                }
                Event::Lost { reason } => {
                    self.losses[loss_index(*reason)].increment(1);
                    self.hold_ended(times, now);
                }
                Event::Released { outcome } => {
                    self.releases[release_index(*outcome)].increment(1);
                    self.hold_ended(times, now);
                }
            }
        }

        /// A command connection that had been open was opened again.
        #[inline]
        pub(crate) fn reconnected(&self) {
            self.reconnects.increment(1);
        }

        /// The pub/sub connection, which had been open, was opened again.
        #[inline]
        pub(crate) fn pubsub_reconnected(&self) {
            self.pubsub_reconnects.increment(1);
        }

        fn acquire_ended(&self, times: &mut LockTimes, now: Instant) {
            if let Some(since_contended) = times.contended_since.take() {
                self.wait.record(since(since_contended, now));
            }
        }

        fn hold_ended(&self, times: &mut LockTimes, now: Instant) {
            if let Some(held_since) = times.held_since.take() {
                self.hold.record(since(held_since, now));
                self.held.decrement(1.0);
            }
        }
    }

    fn since(from: Instant, now: Instant) -> f64 {
        now.saturating_duration_since(from).as_secs_f64()
    }

    fn loss_index(reason: LostReason) -> usize {
        match reason {
            LostReason::Expired => 0,
            LostReason::NotOwner => 1,
            LostReason::MaxHold => 2,
            LostReason::Failover => 3,
        }
    }

    fn release_index(outcome: ReleaseOutcome) -> usize {
        match outcome {
            ReleaseOutcome::Deleted => 0,
            ReleaseOutcome::NotOwner => 1,
            ReleaseOutcome::Unknown => 2,
        }
    }

    fn describe() {
        describe_counter!(
            ACQUIRE_ATTEMPTS,
            Unit::Count,
            "Calls to acquire and try_acquire."
        );
        describe_counter!(ACQUIRE_GRANTS, Unit::Count, "Acquires that got the lock.");
        describe_counter!(
            ACQUIRE_CONTENTIONS,
            Unit::Count,
            "Acquires that found the lock held by another owner at least once."
        );
        describe_counter!(
            ACQUIRE_TIMEOUTS,
            Unit::Count,
            "Acquires that gave up because another owner held the lock for the whole wait \
             (try_acquire returning None included)."
        );
        describe_counter!(
            ACQUIRE_ERRORS,
            Unit::Count,
            "Acquires that failed otherwise, by reason."
        );
        describe_counter!(
            RENEWALS,
            Unit::Count,
            "Renewals answered or timed out, by outcome (per node under Redlock when failed)."
        );
        describe_counter!(LOSSES, Unit::Count, "Held locks lost, by reason.");
        describe_counter!(RELEASES, Unit::Count, "Releases finished, by outcome.");
        describe_counter!(
            RECONNECTS,
            Unit::Count,
            "Connections to Redis reopened after one broke or closed, by connection \
             (command, pubsub)."
        );
        describe_histogram!(
            ACQUIRE_DURATION,
            Unit::Seconds,
            "From the acquire call to its result, by outcome."
        );
        describe_histogram!(
            WAIT_DURATION,
            Unit::Seconds,
            "Time an acquire spent waiting for another owner: from the first contended answer \
             to the grant or the give-up."
        );
        describe_histogram!(
            HOLD_DURATION,
            Unit::Seconds,
            "From the grant to the release or the loss."
        );
        describe_histogram!(
            RENEWAL_DURATION,
            Unit::Seconds,
            "From a renewal's send to its outcome, by outcome."
        );
        describe_gauge!(HELD, Unit::Count, "Locks held now.");
    }
}

#[cfg(not(feature = "metrics"))]
mod off {
    use std::time::Instant;

    use crate::{Command, Event};

    /// Nothing: the `metrics` feature is off.
    pub(crate) struct Metrics;

    /// Nothing: the `metrics` feature is off.
    #[derive(Debug)]
    pub(crate) struct LockTimes;

    impl LockTimes {
        #[inline(always)]
        pub(crate) fn new(_started: Instant) -> Self {
            Self
        }
    }

    impl Metrics {
        #[inline(always)]
        pub(crate) fn new() -> Self {
            Self
        }

        #[inline(always)]
        pub(crate) fn acquire_called(&self) {}

        #[inline(always)]
        pub(crate) fn invalid_options(&self) {}

        #[inline(always)]
        pub(crate) fn on_command(&self, _: &mut LockTimes, _: &Command, _: Instant) {}

        #[inline(always)]
        pub(crate) fn on_event(&self, _: &mut LockTimes, _: &Event, _: Instant) {}

        #[inline(always)]
        pub(crate) fn reconnected(&self) {}

        #[inline]
        pub(crate) fn pubsub_reconnected(&self) {}
    }
}
