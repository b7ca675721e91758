//! Lock options and their validation.

use std::{fmt, sync::Arc, time::Duration};

/// The fixed part of the clock-drift margin: Redis expires keys with 1 ms
/// precision, and the reference clients add 2 ms to cover it.
pub const DRIFT_FLOOR: Duration = Duration::from_millis(2);

/// How the acquire script issues fencing tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Fencing {
    /// No token: every grant carries fence 0.
    None,
    /// A plain `INCR` counter. It goes backwards when a failover loses the
    /// last increment; kept to demonstrate exactly that.
    Counter,
    /// `max(stored + 1, server time in µs)`: monotonic across a failover while
    /// the nodes' clocks disagree by less than the failover takes.
    #[default]
    TimeMixed,
}

impl Fencing {
    /// The mode's name, as logs and scenario files spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Counter => "counter",
            Self::TimeMixed => "time-mixed",
        }
    }
}

/// `WAITAOF numlocal numreplicas timeout` after each grant and renewal
/// (Redis 7.2+, Valkey): the write counts only once it is fsynced to the
/// append-only file of the primary (`local`, 0 or 1) and of at least
/// `replicas` replicas. Set with [`LockOptions::wait_aof`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WaitAof {
    /// Local fsyncs required: 0 or 1 (`numlocal`).
    pub local: u32,
    /// Replicas that must have fsynced the write (`numreplicas`).
    pub replicas: u32,
    /// How long the server may block before answering (it answers the
    /// counts it has even when they fall short).
    pub timeout: Duration,
}

/// What `WAITAOF` answered: how many of the primary (0 or 1) and of its
/// replicas fsynced every write of the connection before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AofCounts {
    /// The primary's own AOF (0 or 1).
    pub local: u32,
    /// Replicas whose AOF holds the writes.
    pub replicas: u32,
}

impl AofCounts {
    /// Whether these counts meet what `wanted` asks for (both of them).
    pub fn meet(self, wanted: WaitAof) -> bool {
        self.local >= wanted.local && self.replicas >= wanted.replicas
    }
}

/// How long and how hard to hold a lock.
///
/// Built with [`LockOptions::new`] and chainable setters. The setters never
/// panic; [`LockOptions::validate`] (called by every acquire) reports a bad
/// combination as an [`OptionsError`]. The check runs in the setters, once
/// per change, so that an acquire only reads its outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct LockOptions {
    pub(crate) ttl: Duration,
    pub(crate) renew_every: Option<Duration>,
    pub(crate) wait: Option<Duration>,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) drift_factor: f64,
    pub(crate) wait_replicas: Option<(u32, Duration)>,
    pub(crate) wait_aof: Option<WaitAof>,
    pub(crate) namespace: Namespace,
    pub(crate) fencing: Fencing,
    pub(crate) command_timeout: Option<Duration>,
    pub(crate) retry_delay: (Duration, Duration),
    pub(crate) validity_from_reply: bool,
    pub(crate) fair: bool,
    pub(crate) waiter_ttl: Option<Duration>,
    /// What [`check`](Self::check) says of the fields above, kept by every
    /// setter that changes one it reads: an acquire reads it, where it ran
    /// the whole check before (issue 22's client cost).
    checked: Result<(), OptionsError>,
}

/// The key namespace and the two names its locks share: the time-mixed
/// fence floor and the fence counter, built once with the options
/// instead of once per acquire, and shared by every lock's key names.
#[derive(Clone)]
pub(crate) struct Namespace {
    pub(crate) name: Arc<str>,
    /// `{namespace}:fence-floor`.
    pub(crate) fence_floor: Arc<str>,
    /// `{namespace}:fence-counter`.
    pub(crate) fence_counter: Arc<str>,
}

impl Namespace {
    pub(crate) fn new(name: &str) -> Self {
        let per_namespace = |suffix: &str| {
            let mut key = String::with_capacity(name.len() + suffix.len() + 2);
            key.push('{');
            key.push_str(name);
            key.push('}');
            key.push_str(suffix);
            Arc::from(key)
        };
        Self {
            name: Arc::from(name),
            fence_floor: per_namespace(":fence-floor"),
            fence_counter: per_namespace(":fence-counter"),
        }
    }
}

/// The names derive from the namespace: it alone decides equality.
impl PartialEq for Namespace {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// Shown as the namespace alone, as the options showed it before.
impl fmt::Debug for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.name, f)
    }
}

impl LockOptions {
    /// Options for a lock whose Redis key lives `ttl` unless renewed.
    ///
    /// Defaults: renew every ttl/3, wait up to one ttl, drift factor 0.01,
    /// time-mixed fencing, namespace `lock`, no hold cap, no `WAIT`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            checked: Ok(()),
            ttl,
            renew_every: None,
            wait: None,
            max_hold: None,
            drift_factor: 0.01,
            wait_replicas: None,
            wait_aof: None,
            namespace: Namespace::new("lock"),
            fencing: Fencing::TimeMixed,
            command_timeout: None,
            retry_delay: (Duration::from_millis(10), Duration::from_millis(200)),
            validity_from_reply: false,
            fair: false,
            waiter_ttl: None,
        }
        .checked()
    }

    /// Runs the check again after a setter changed a field it reads.
    fn checked(mut self) -> Self {
        self.checked = self.check();
        self
    }

    /// Fair mode: waiters are granted in arrival order (a queue in Redis,
    /// in the lock's hash slot), and a release wakes only the next waiter.
    /// Every client of one lock must use it: a plain acquire does not look
    /// at the queue. A waiting client keeps its place by re-sending its
    /// acquire at least every third of [`waiter_ttl`](Self::waiter_ttl); a
    /// waiter that dies or pauses holds the queue up by at most that ttl.
    /// Not for Redlock (the acquire fails with
    /// [`AcquireError::NotOnRedlock`](crate::AcquireError::NotOnRedlock)).
    pub fn fair(mut self) -> Self {
        self.fair = true;
        self.checked()
    }

    /// How long a waiter's place (fair mode) or a waiting writer's intent
    /// (a read-write lock) lasts without renewal; the waiting client
    /// renews it by re-sending its acquire at least every third of it.
    /// Default: ttl / 3 (whole milliseconds). At least 3 ms, whole
    /// milliseconds.
    pub fn waiter_ttl(mut self, ttl: Duration) -> Self {
        self.waiter_ttl = Some(ttl);
        self.checked()
    }

    /// Whether fair mode is on.
    pub fn is_fair(&self) -> bool {
        self.fair
    }

    /// The waiter ttl in effect: the one set, or ttl / 3.
    pub fn effective_waiter_ttl(&self) -> Duration {
        self.waiter_ttl.unwrap_or_else(|| {
            let millis = u64::try_from(self.ttl.as_millis() / 3).unwrap_or(u64::MAX);
            Duration::from_millis(millis.max(3))
        })
    }

    /// Sets how often the watchdog renews the lock; must be below ttl − drift.
    pub fn renew_every(mut self, every: Duration) -> Self {
        self.renew_every = Some(every);
        self.checked()
    }

    /// Sets how long `acquire` waits for a contended lock before giving up.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Caps the total hold: renewals stop at `acquired_at + max_hold`, and the
    /// lock is lost (reason `MaxHold`) there. Must be at least the ttl.
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = Some(max_hold);
        self.checked()
    }

    /// Sets the clock-drift factor in [0, 0.5); the margin is ttl × factor + 2 ms.
    pub fn drift_factor(mut self, factor: f64) -> Self {
        self.drift_factor = factor;
        self.checked()
    }

    /// After acquire and each renewal, waits for `replicas` acknowledgements
    /// (`WAIT replicas timeout`); fewer means no grant and no extension.
    pub fn wait_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.wait_replicas = Some((replicas, timeout));
        self.checked()
    }

    /// After acquire and each renewal, waits until the write is fsynced to
    /// the append-only file of the primary (`local`: 0 or 1) and of
    /// `replicas` replicas (`WAITAOF local replicas timeout`, Redis 7.2+ and
    /// Valkey); fewer in either count means no grant and no extension.
    ///
    /// With `local = 1` on Redis 8.0 or later, a restart of the primary (a
    /// crash, `kill -9`, a power loss with `appendfsync everysec`) cannot
    /// lose a grant the lock counted. **Not on Valkey, nor Redis 7.2 to
    /// 7.4**: their `WAITAOF` counts the local AOF once written, before
    /// the fsync (redis/redis#13793 fixed it in Redis 8.0; measured on
    /// Valkey 8.1.8: an acknowledged key lost to a machine crash in 15 of
    /// 30 tries, and `scenarios/restart-without-fsync-waitaof.toml`), so
    /// there a `kill -9` cannot lose a counted grant but a power loss can:
    /// use `appendfsync always`. Under `appendfsync everysec` a server that
    /// waits for the fsync answers within the once-a-second fsync: give it
    /// a timeout above a second. Replicas without `appendonly yes` never
    /// count. Combines with [`wait_replicas`](Self::wait_replicas): `WAIT`
    /// is sent first, and the two timeouts together must stay below the
    /// command timeout. On a server older than 7.2 every acquire fails
    /// with [`Failure::Unsupported`](crate::Failure::Unsupported).
    pub fn wait_aof(mut self, local: u32, replicas: u32, timeout: Duration) -> Self {
        self.wait_aof = Some(WaitAof {
            local,
            replicas,
            timeout,
        });
        self.checked()
    }

    /// Sets the prefix of every key this lock uses (default `lock`).
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Namespace::new(namespace);
        self.checked()
    }

    /// Chooses how fencing tokens are issued (default [`Fencing::TimeMixed`]).
    /// The plain lock's only: the lock family (fair mode, read and write
    /// holds, permits) always issues the time-mixed fence.
    pub fn fencing(mut self, fencing: Fencing) -> Self {
        self.fencing = fencing;
        self.checked()
    }

    /// Sets how long a command may go unanswered before its outcome is treated
    /// as unknown and it is retried (default renew_every / 2).
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = Some(timeout);
        self.checked()
    }

    /// Sets the bounds of the randomised backoff between contended attempts
    /// (default 10 ms to 200 ms).
    pub fn retry_delay(mut self, min: Duration, max: Duration) -> Self {
        self.retry_delay = (min, max);
        self.checked()
    }

    /// **Breaks timing rule 1 on purpose**: counts validity from the reply
    /// instead of the send. Exists only with the `sabotage` feature, so the
    /// simulator can prove its checkers catch a broken core. Never use it.
    #[cfg(feature = "sabotage")]
    #[doc(hidden)]
    pub fn sabotage_validity_from_reply(mut self) -> Self {
        self.validity_from_reply = true;
        self.checked()
    }

    /// The ttl of the Redis key.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The clock-drift margin subtracted from every validity: ttl × factor + 2 ms.
    ///
    /// A drift factor outside [0, 0.5) is rejected by [`validate`](Self::validate);
    /// here it is clamped so the margin is always defined.
    pub fn drift(&self) -> Duration {
        let factor = if self.drift_factor.is_finite() {
            self.drift_factor.clamp(0.0, 0.5)
        } else {
            0.0
        };
        self.ttl.mul_f64(factor) + DRIFT_FLOOR
    }

    /// The renewal period in effect (ttl / 3 unless set).
    pub fn effective_renew_every(&self) -> Duration {
        self.renew_every.unwrap_or(self.ttl / 3)
    }

    /// How long `acquire` waits in effect (one ttl unless set).
    pub fn effective_wait(&self) -> Duration {
        self.wait.unwrap_or(self.ttl)
    }

    /// The command timeout in effect (renew_every / 2 unless set).
    pub fn effective_command_timeout(&self) -> Duration {
        self.command_timeout
            .unwrap_or(self.effective_renew_every() / 2)
    }

    /// The `WAIT` requirement, if any: (replicas, timeout).
    pub fn replicas(&self) -> Option<(u32, Duration)> {
        self.wait_replicas
    }

    /// The `WAITAOF` requirement, if any.
    pub fn aof(&self) -> Option<WaitAof> {
        self.wait_aof
    }

    /// The key namespace.
    pub fn key_namespace(&self) -> &str {
        &self.namespace.name
    }

    /// The fencing mode.
    pub fn fencing_mode(&self) -> Fencing {
        self.fencing
    }

    /// The hold cap, if any.
    pub fn hold_cap(&self) -> Option<Duration> {
        self.max_hold
    }

    /// Checks every rule the timing argument relies on (timing rule 8).
    pub fn validate(&self) -> Result<(), OptionsError> {
        // Every setter but `wait`'s (which the check does not read) keeps
        // `checked` current.
        // (Compared as text: a NaN drift factor is unequal to itself.)
        debug_assert_eq!(
            format!("{:?}", self.checked),
            format!("{:?}", self.check()),
            "a setter skipped the check"
        );
        self.checked.clone()
    }

    /// The check itself, which [`validate`](Self::validate) reports.
    fn check(&self) -> Result<(), OptionsError> {
        if self.ttl.is_zero() {
            return Err(OptionsError::ZeroTtl);
        }
        if !self.ttl.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(OptionsError::SubMillisecondTtl { ttl: self.ttl });
        }
        if !(self.drift_factor.is_finite() && (0.0..0.5).contains(&self.drift_factor)) {
            return Err(OptionsError::DriftFactor {
                factor: self.drift_factor,
            });
        }
        let drift = self.drift();
        let margin = self.ttl.saturating_sub(drift);
        let renew_every = self.effective_renew_every();
        if renew_every.is_zero() || renew_every >= margin {
            return Err(OptionsError::RenewEvery {
                renew_every,
                limit: margin,
            });
        }
        if let Some(max_hold) = self.max_hold
            && max_hold < self.ttl
        {
            return Err(OptionsError::MaxHold {
                max_hold,
                ttl: self.ttl,
            });
        }
        let command_timeout = self.effective_command_timeout();
        if command_timeout.is_zero() {
            return Err(OptionsError::CommandTimeout);
        }
        if let Some((_, wait_timeout)) = self.wait_replicas
            && wait_timeout >= command_timeout
        {
            return Err(OptionsError::WaitReplicasTimeout {
                wait_timeout,
                command_timeout,
            });
        }
        if let Some(aof) = self.wait_aof {
            if aof.local > 1 {
                return Err(OptionsError::WaitAofLocal { local: aof.local });
            }
            if aof.local == 0 && aof.replicas == 0 {
                return Err(OptionsError::WaitAofNothing);
            }
            let wait_timeout = self
                .wait_replicas
                .map_or(Duration::ZERO, |(_, timeout)| timeout)
                + aof.timeout;
            if wait_timeout >= command_timeout {
                return Err(OptionsError::WaitAofTimeout {
                    wait_timeout,
                    command_timeout,
                });
            }
        }
        let (min, max) = self.retry_delay;
        if min.is_zero() || min > max {
            return Err(OptionsError::RetryDelay { min, max });
        }
        if self.namespace.name.contains(['{', '}']) {
            return Err(OptionsError::Namespace);
        }
        let waiter_ttl = self.effective_waiter_ttl();
        if waiter_ttl < Duration::from_millis(3)
            || !waiter_ttl.subsec_nanos().is_multiple_of(1_000_000)
        {
            return Err(OptionsError::WaiterTtl { waiter_ttl });
        }
        Ok(())
    }
}

/// Why a set of [`LockOptions`] was rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// The ttl is zero.
    #[error("ttl must be greater than zero")]
    ZeroTtl,
    /// The ttl is not a whole number of milliseconds (`PX` counts in ms).
    #[error("ttl {ttl:?} is not a whole number of milliseconds")]
    SubMillisecondTtl {
        /// The rejected ttl.
        ttl: Duration,
    },
    /// The drift factor is outside [0, 0.5).
    #[error("drift factor {factor} is outside [0, 0.5)")]
    DriftFactor {
        /// The rejected factor.
        factor: f64,
    },
    /// The renewal period is zero or not below ttl − drift.
    #[error("renew_every {renew_every:?} must be above zero and below ttl - drift ({limit:?})")]
    RenewEvery {
        /// The rejected period.
        renew_every: Duration,
        /// ttl − drift, the exclusive upper bound.
        limit: Duration,
    },
    /// `max_hold` is shorter than the ttl.
    #[error("max_hold {max_hold:?} is shorter than the ttl {ttl:?}")]
    MaxHold {
        /// The rejected cap.
        max_hold: Duration,
        /// The ttl it must reach.
        ttl: Duration,
    },
    /// The command timeout is zero.
    #[error("command timeout must be greater than zero")]
    CommandTimeout,
    /// The `WAIT` timeout does not fit inside the command timeout.
    #[error(
        "wait_replicas timeout {wait_timeout:?} must be below the command timeout {command_timeout:?}"
    )]
    WaitReplicasTimeout {
        /// The rejected `WAIT` timeout.
        wait_timeout: Duration,
        /// The command timeout it must stay under.
        command_timeout: Duration,
    },
    /// `WAITAOF`'s `numlocal` is above 1 (the server allows only 0 or 1).
    #[error("wait_aof local count {local} must be 0 or 1")]
    WaitAofLocal {
        /// The rejected count.
        local: u32,
    },
    /// `wait_aof(0, 0, _)` asks for nothing: the server answers at once.
    #[error("wait_aof must ask for the local fsync, replicas, or both")]
    WaitAofNothing,
    /// The `WAITAOF` timeout (plus the `WAIT` timeout, when both are set)
    /// does not fit inside the command timeout.
    #[error(
        "wait_aof timeout (with any wait_replicas timeout) {wait_timeout:?} must be below the command timeout {command_timeout:?}"
    )]
    WaitAofTimeout {
        /// The `WAITAOF` timeout plus the `WAIT` timeout.
        wait_timeout: Duration,
        /// The command timeout it must stay under.
        command_timeout: Duration,
    },
    /// The retry backoff bounds are zero or reversed.
    #[error("retry delay bounds {min:?}..{max:?} must be non-zero and ordered")]
    RetryDelay {
        /// The lower bound.
        min: Duration,
        /// The upper bound.
        max: Duration,
    },
    /// The namespace contains a brace, which would break the hash tag.
    #[error("namespace must not contain '{{' or '}}'")]
    Namespace,
    /// Fair mode was asked of a kind other than the plain lock (a
    /// read-write lock, a semaphore, Redlock).
    #[error("fair mode applies to the plain lock on one node, not to a {kind} lock")]
    FairUnsupported {
        /// The kind that was asked for.
        kind: &'static str,
    },
    /// A semaphore of zero permits could never be acquired.
    #[error("a semaphore needs at least one permit")]
    NoPermits,
    /// The waiter ttl is below 3 ms or not a whole number of milliseconds.
    #[error("waiter_ttl {waiter_ttl:?} must be at least 3 ms, in whole milliseconds")]
    WaiterTtl {
        /// The rejected waiter ttl.
        waiter_ttl: Duration,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn defaults_are_valid_and_documented() {
        let opts = LockOptions::new(ms(30_000));
        assert_eq!(opts.validate(), Ok(()));
        assert_eq!(opts.effective_renew_every(), ms(10_000));
        assert_eq!(opts.effective_wait(), ms(30_000));
        assert_eq!(opts.drift(), ms(302));
        assert_eq!(opts.effective_waiter_ttl(), ms(10_000));
        assert!(!opts.is_fair());
        assert!(opts.fair().is_fair());
        assert_eq!(LockOptions::new(ms(1_000)).effective_waiter_ttl(), ms(333));
    }

    #[test]
    fn every_bad_option_has_its_own_error() {
        let base = || LockOptions::new(ms(1_000));
        assert_eq!(
            LockOptions::new(ms(0)).validate(),
            Err(OptionsError::ZeroTtl)
        );
        assert!(matches!(
            LockOptions::new(Duration::from_micros(1_500)).validate(),
            Err(OptionsError::SubMillisecondTtl { .. })
        ));
        for factor in [-0.1, 0.5, 2.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                base().drift_factor(factor).validate(),
                Err(OptionsError::DriftFactor { .. })
            ));
        }
        // ttl 1 s, drift 12 ms: renewals must come before 988 ms.
        assert!(matches!(
            base().renew_every(ms(988)).validate(),
            Err(OptionsError::RenewEvery { .. })
        ));
        assert_eq!(base().renew_every(ms(987)).validate(), Ok(()));
        assert!(matches!(
            base().renew_every(ms(0)).validate(),
            Err(OptionsError::RenewEvery { .. })
        ));
        assert!(matches!(
            base().max_hold(ms(999)).validate(),
            Err(OptionsError::MaxHold { .. })
        ));
        assert_eq!(base().max_hold(ms(1_000)).validate(), Ok(()));
        assert_eq!(
            base().command_timeout(ms(0)).validate(),
            Err(OptionsError::CommandTimeout)
        );
        assert!(matches!(
            base().wait_replicas(1, ms(500)).validate(),
            Err(OptionsError::WaitReplicasTimeout { .. })
        ));
        assert_eq!(
            base().wait_aof(2, 0, ms(10)).validate(),
            Err(OptionsError::WaitAofLocal { local: 2 })
        );
        assert_eq!(
            base().wait_aof(0, 0, ms(10)).validate(),
            Err(OptionsError::WaitAofNothing)
        );
        assert_eq!(base().wait_aof(1, 0, ms(10)).validate(), Ok(()));
        assert_eq!(base().wait_aof(0, 2, ms(10)).validate(), Ok(()));
        // ttl 1 s: renew every 333.3 ms, command timeout 166.7 ms; the two
        // waits share it.
        assert_eq!(base().wait_aof(1, 0, ms(166)).validate(), Ok(()));
        assert!(matches!(
            base().wait_aof(1, 0, ms(167)).validate(),
            Err(OptionsError::WaitAofTimeout { .. })
        ));
        assert_eq!(
            base()
                .wait_replicas(1, ms(80))
                .wait_aof(1, 0, ms(80))
                .validate(),
            Ok(())
        );
        assert!(matches!(
            base()
                .wait_replicas(1, ms(80))
                .wait_aof(1, 0, ms(87))
                .validate(),
            Err(OptionsError::WaitAofTimeout { .. })
        ));
        assert!(matches!(
            base().retry_delay(ms(5), ms(1)).validate(),
            Err(OptionsError::RetryDelay { .. })
        ));
        assert_eq!(
            base().namespace("a{b").validate(),
            Err(OptionsError::Namespace)
        );
        assert_eq!(
            base().waiter_ttl(ms(2)).validate(),
            Err(OptionsError::WaiterTtl { waiter_ttl: ms(2) })
        );
        assert!(matches!(
            base().waiter_ttl(Duration::from_micros(3_500)).validate(),
            Err(OptionsError::WaiterTtl { .. })
        ));
        assert_eq!(base().waiter_ttl(ms(3)).validate(), Ok(()));
    }

    #[test]
    fn tiny_ttls_are_rejected_not_panicking() {
        for ttl in [1, 2, 3] {
            assert!(LockOptions::new(ms(ttl)).validate().is_err(), "ttl {ttl}");
        }
    }
}
