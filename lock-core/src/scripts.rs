//! The Lua script, the one copy the adapter and the simulator share.
//!
//! [`LOCK`] runs every lock operation — acquire, renew, release — one or
//! many per call: a batch of operations that fall due together costs one
//! `EVALSHA` (group commit). Its source is `scripts/lock.lua` next to this
//! module, embedded with `include_str!`; its SHA1 is computed by the build
//! script, so an `EVALSHA` digest can never drift from the text it names.
//!
//! The lock family — [`FAIR`], [`RWLOCK`], [`SEMAPHORE`] — has a script
//! per kind, each sent as a shared prelude followed by its own body (one
//! source, one digest), one operation per call. [`LockKind`] says which a
//! lock uses, [`KeyNames`] which keys.
//!
//! The unfenced acquire needs no script on Redis 7.0 and later: it is a
//! plain `SET key token NX PX ttl GET`.

use std::sync::Arc;

use crate::options::Namespace;

include!(concat!(env!("OUT_DIR"), "/script_sha1.rs"));

/// A Lua script together with the digest `EVALSHA` addresses it by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Script {
    /// A short name for logs.
    pub name: &'static str,
    /// The Lua source, byte for byte what `SCRIPT LOAD` receives.
    pub source: &'static str,
    /// The lowercase hex SHA1 of `source`.
    pub sha1: &'static str,
}

/// Runs a sequence of lock operations; see [`op`] for their layout.
///
/// Replies with one integer per operation, in order: for an acquire the
/// fence when granted (`>= 0`), or `-2 - pttl` when another owner holds the
/// key; `1`/`0` for a renew or a release; or an error reply for an
/// operation that failed (and changed nothing).
pub const LOCK: Script = Script {
    name: "lock",
    source: include_str!("scripts/lock.lua"),
    sha1: LOCK_SHA1,
};

/// The fair lock ([`LockKind::Fair`]): `family_prelude.lua` followed by
/// `fair.lua`, whose header defines its operations ([`family_op`]) and
/// replies. One operation per call.
pub const FAIR: Script = Script {
    name: "fair",
    source: concat!(
        include_str!("scripts/family_prelude.lua"),
        include_str!("scripts/fair.lua")
    ),
    sha1: FAIR_SHA1,
};

/// The read-write lock ([`LockKind::Read`], [`LockKind::Write`]):
/// `family_prelude.lua` followed by `rwlock.lua`. One operation per call.
pub const RWLOCK: Script = Script {
    name: "rwlock",
    source: concat!(
        include_str!("scripts/family_prelude.lua"),
        include_str!("scripts/rwlock.lua")
    ),
    sha1: RWLOCK_SHA1,
};

/// The counting semaphore ([`LockKind::Permit`]): `family_prelude.lua`
/// followed by `semaphore.lua`. One operation per call.
pub const SEMAPHORE: Script = Script {
    name: "semaphore",
    source: concat!(
        include_str!("scripts/family_prelude.lua"),
        include_str!("scripts/semaphore.lua")
    ),
    sha1: SEMAPHORE_SHA1,
};

/// Every script, for loading them all at once.
pub const ALL: [Script; 4] = [LOCK, FAIR, RWLOCK, SEMAPHORE];

/// Which member of the lock family a lock is: it decides which script its
/// commands run, with which keys and operation codes (see [`KeyNames`]),
/// and nothing of the timing, which is the plain lock's for every kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum LockKind {
    /// The plain lock ([`LOCK`]).
    #[default]
    Plain,
    /// The plain lock in fair mode ([`FAIR`]): granted in arrival order.
    Fair {
        /// How long a waiter's place lasts without renewal.
        waiter_ttl: std::time::Duration,
    },
    /// A read hold of a read-write lock ([`RWLOCK`]).
    Read,
    /// A write hold of a read-write lock ([`RWLOCK`]).
    Write {
        /// How long a waiting writer's intent lasts without renewal.
        intent_ttl: std::time::Duration,
    },
    /// One permit of a counting semaphore ([`SEMAPHORE`]).
    Permit {
        /// How many holders the semaphore admits at once.
        permits: u32,
    },
}

impl LockKind {
    /// The kind's name, for logs and errors.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::Fair { .. } => "fair",
            Self::Read => "read",
            Self::Write { .. } => "write",
            Self::Permit { .. } => "permit",
        }
    }

    /// The script this kind's commands run.
    pub fn script(self) -> Script {
        match self {
            Self::Plain => LOCK,
            Self::Fair { .. } => FAIR,
            Self::Read | Self::Write { .. } => RWLOCK,
            Self::Permit { .. } => SEMAPHORE,
        }
    }

    /// How long a waiting client's place lasts without renewal, for the
    /// kinds that queue while they wait (fair mode, a writer's intent):
    /// the waiting client re-sends its acquire, which renews the place, at
    /// least every third of it. `None` for the others.
    pub fn waiter_ttl(self) -> Option<std::time::Duration> {
        match self {
            Self::Fair { waiter_ttl } => Some(waiter_ttl),
            Self::Write { intent_ttl } => Some(intent_ttl),
            _ => None,
        }
    }
}

/// The operation codes of the family's scripts ([`FAIR`], [`RWLOCK`],
/// [`SEMAPHORE`]); each script's header lists its `KEYS` and `ARGV`.
/// A lock's `KEYS`, in order, are [`KeyNames::script_keys`].
pub mod family_op {
    /// Fair: acquire (or join the queue, or keep a place in it).
    /// `ARGV`: code, token, ttl (ms), waiter ttl (ms).
    pub const FAIR_ACQUIRE: &str = "a";
    /// Fair: renew the holder's lease. `ARGV`: code, token, ttl (ms).
    pub const FAIR_RENEW: &str = "r";
    /// Fair: release the lock, or give up a place in the queue, and wake
    /// the head of the queue. `ARGV`: code, token.
    pub const FAIR_RELEASE: &str = "d";
    /// Read-write: a reader's acquire. `ARGV`: code, token, ttl (ms).
    pub const READ_ACQUIRE: &str = "r";
    /// Read-write: a writer's acquire (claims the intent when refused).
    /// `ARGV`: code, token, ttl (ms), intent ttl (ms).
    pub const WRITE_ACQUIRE: &str = "w";
    /// Read-write: a reader's renewal. `ARGV`: code, token, ttl (ms).
    pub const READ_RENEW: &str = "e";
    /// Read-write: a writer's renewal. `ARGV`: code, token, ttl (ms).
    pub const WRITE_RENEW: &str = "f";
    /// Read-write: a reader's release. `ARGV`: code, token.
    pub const READ_RELEASE: &str = "x";
    /// Read-write: a writer's release, or the withdrawal of its intent.
    /// `ARGV`: code, token.
    pub const WRITE_RELEASE: &str = "y";
    /// Semaphore: take a permit. `ARGV`: code, token, ttl (ms), permits.
    pub const PERMIT_ACQUIRE: &str = "a";
    /// Semaphore: renew a permit's lease. `ARGV`: code, token, ttl (ms).
    pub const PERMIT_RENEW: &str = "r";
    /// Semaphore: return a permit. `ARGV`: code, token.
    pub const PERMIT_RELEASE: &str = "d";
}

/// The operation codes of [`LOCK`]. Each operation appends its keys to
/// `KEYS` and its code and arguments to `ARGV`:
///
/// | operation | `KEYS` | `ARGV` |
/// |---|---|---|
/// | [`acquire`](op::acquire) with [`Fencing::None`](crate::Fencing::None) | lock | code, token, ttl (ms) |
/// | [`acquire`](op::acquire) with a fence | lock, fence key | code, token, ttl (ms) |
/// | [`RENEW`](op::RENEW) | lock | code, token, ttl (ms) |
/// | [`RELEASE`](op::RELEASE), [`RELEASE_QUIET`](op::RELEASE_QUIET) | lock | code, token |
pub mod op {
    use crate::Fencing;

    /// Acquire without a fence (Redis 7.0 and later: `SET … NX PX … GET`).
    pub const ACQUIRE_NONE: &str = "n";
    /// Acquire with the time-mixed fence ([`Fencing::TimeMixed`]).
    pub const ACQUIRE_TIME_MIXED: &str = "t";
    /// Acquire with the namespace counter ([`Fencing::Counter`]).
    pub const ACQUIRE_COUNTER: &str = "c";
    /// Reset the ttl of our key.
    pub const RENEW: &str = "r";
    /// Delete our key and publish on its channel.
    pub const RELEASE: &str = "d";
    /// Delete our key without publishing: Redlock's waiters never
    /// subscribe (they retry on their backoff), so nobody would listen.
    pub const RELEASE_QUIET: &str = "q";

    /// The acquire code for `fencing`; `compat` for servers before 7.0,
    /// whose `SET` cannot combine `NX` and `GET` (`GET`, then `SET`).
    pub fn acquire(fencing: Fencing, compat: bool) -> &'static str {
        match (fencing, compat) {
            (Fencing::None, false) => ACQUIRE_NONE,
            (Fencing::TimeMixed, false) => ACQUIRE_TIME_MIXED,
            (Fencing::Counter, false) => ACQUIRE_COUNTER,
            (Fencing::None, true) => "N",
            (Fencing::TimeMixed, true) => "T",
            (Fencing::Counter, true) => "C",
        }
    }

    /// Whether an acquire of `fencing` sends a fence key after its lock.
    pub fn acquire_sends_fence_key(fencing: Fencing) -> bool {
        fencing != Fencing::None
    }
}

/// The Redis names one lock uses, and its [`LockKind`].
///
/// Every name of one lock carries the hash tag `{namespace:key}`, so they
/// share a cluster slot; the time-mixed fence floor and the fence counter
/// are the namespace's (`{namespace}:fence-floor`, `{namespace}:fence-counter`;
/// in a cluster the locker puts one of each in every slot, in the lock's).
/// By kind, the script's `KEYS` ([`script_keys`](Self::script_keys)) are:
///
/// | kind | `KEYS` |
/// |---|---|
/// | [`Fair`](LockKind::Fair) | `{ns:key}` (the holder's token, as the plain lock's), `{ns:key}:queue`, `{ns:key}:waiters`, the floor |
/// | [`Read`](LockKind::Read), [`Write`](LockKind::Write) | `{ns:key}` (the writer's token), `{ns:key}:readers`, `{ns:key}:intent`, the floor |
/// | [`Permit`](LockKind::Permit) | `{ns:key}` (a sorted set of the holders' leases), the floor |
///
/// A read-write lock's and a semaphore's releases announce themselves on
/// `{ns:key}:released`, as the plain lock's do; fair mode wakes only the
/// head of the queue, on `{ns:key}:released:<token>` (its
/// [`channel`](Self::channel) is that one, see [`for_waiter`](Self::for_waiter)).
/// A write hold and a plain lock on one key exclude each other (both are
/// the string `{ns:key}`); a semaphore and any other kind on one key meet
/// `WRONGTYPE` while the other holds it. Mixing kinds on one key is a
/// usage error.
///
/// The namespace's names are shared, not copied: the options build them
/// once, and every lock's key names point at them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyNames {
    /// Which script, keys and operation codes the lock's commands use.
    pub kind: LockKind,
    /// The lock key, whose value is the owner token: `{namespace:key}`.
    pub lock: String,
    /// The namespace's time-mixed fence floor, `{namespace}:fence-floor`:
    /// the last fence issued to any lock of the namespace, kept without a
    /// ttl (in a cluster, the locker points it at the floor of the lock's
    /// slot).
    pub fence: Arc<str>,
    /// The namespace's fence counter for [`Fencing::Counter`](crate::Fencing::Counter):
    /// `{namespace}:fence-counter`, one key per namespace that never expires.
    pub counter: Arc<str>,
    /// Fair mode's waiter, whose own channel [`channel`](Self::channel) names.
    waiter: Option<Arc<str>>,
}

impl KeyNames {
    /// Derives the Redis names for `key` under `namespace`.
    ///
    /// The braces are a hash tag: the lock key and its channel share a
    /// cluster slot. The fence floor and counter are the namespace's.
    pub fn new(namespace: &str, key: &str) -> Self {
        Self::in_namespace(&Namespace::new(namespace), key, LockKind::Plain)
    }

    /// The names of `kind`'s lock on `key` under `namespace`; for
    /// [`LockKind::Fair`], follow with [`for_waiter`](Self::for_waiter).
    pub fn with_kind(namespace: &str, key: &str, kind: LockKind) -> Self {
        Self::in_namespace(&Namespace::new(namespace), key, kind)
    }

    /// [`with_kind`](Self::with_kind) with the namespace's names already
    /// built (the options'): only the lock key is new.
    pub(crate) fn in_namespace(namespace: &Namespace, key: &str, kind: LockKind) -> Self {
        // Built by concatenation: this runs once per acquire, and
        // `format!` costs several times as much.
        let name = &*namespace.name;
        let mut lock = String::with_capacity(name.len() + key.len() + 3);
        lock.push('{');
        if !name.is_empty() {
            lock.push_str(name);
            lock.push(':');
        }
        lock.push_str(key);
        lock.push('}');
        Self {
            kind,
            lock,
            fence: Arc::clone(&namespace.fence_floor),
            counter: Arc::clone(&namespace.fence_counter),
            waiter: None,
        }
    }

    /// Points [`channel`](Self::channel) at the one a fair lock's release
    /// wakes `token` on (`{ns:key}:released:<token>`), when the kind is
    /// [`LockKind::Fair`]; any other kind is returned unchanged.
    pub fn for_waiter(mut self, token: &str) -> Self {
        if matches!(self.kind, LockKind::Fair { .. }) {
            self.waiter = Some(Arc::from(token));
        }
        self
    }

    /// The pub/sub channel a release announces itself on,
    /// `{namespace:key}:released` (fair mode: the waiter's, see
    /// [`for_waiter`](Self::for_waiter)). Built on each call: only a
    /// waiter, or a release while this locker has waiters, needs it.
    pub fn channel(&self) -> String {
        const SUFFIX: &str = ":released";
        let waiter = self.waiter.as_deref();
        let mut channel = String::with_capacity(
            self.lock.len() + SUFFIX.len() + waiter.map_or(0, |token| token.len() + 1),
        );
        channel.push_str(&self.lock);
        channel.push_str(SUFFIX);
        if let Some(token) = waiter {
            channel.push(':');
            channel.push_str(token);
        }
        channel
    }

    /// The `KEYS` of a call of the kind's family script, in order (see
    /// the table above); for [`LockKind::Plain`] the lock key alone (the
    /// lock script's own layout is in [`op`]).
    pub fn script_keys(&self) -> Vec<String> {
        let suffixed = |suffix: &str| format!("{}{suffix}", self.lock);
        match self.kind {
            LockKind::Plain => vec![self.lock.clone()],
            LockKind::Fair { .. } => vec![
                self.lock.clone(),
                suffixed(":queue"),
                suffixed(":waiters"),
                self.fence.to_string(),
            ],
            LockKind::Read | LockKind::Write { .. } => vec![
                self.lock.clone(),
                suffixed(":readers"),
                suffixed(":intent"),
                self.fence.to_string(),
            ],
            LockKind::Permit { .. } => vec![self.lock.clone(), self.fence.to_string()],
        }
    }

    /// The fence key the acquire operation of `fencing` uses.
    pub fn fence_key(&self, fencing: crate::Fencing) -> &str {
        match fencing {
            crate::Fencing::Counter => &self.counter,
            _ => &self.fence,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_match_the_embedded_sources() {
        for script in ALL {
            let digest = sha1_of(script.source);
            assert_eq!(script.sha1, digest, "{} digest is stale", script.name);
            assert_eq!(script.sha1.len(), 40);
        }
    }

    #[test]
    fn key_names_share_the_lock_hash_tag_but_the_namespace_ones() {
        let names = KeyNames::new("lock", "orders:42");
        assert_eq!(names.lock, "{lock:orders:42}");
        assert_eq!(&*names.fence, "{lock}:fence-floor");
        assert_eq!(names.channel(), "{lock:orders:42}:released");
        assert_eq!(&*names.counter, "{lock}:fence-counter");
        assert_eq!(KeyNames::new("", "a").lock, "{a}");
        assert_eq!(names.fence_key(crate::Fencing::Counter), &*names.counter);
        assert_eq!(names.fence_key(crate::Fencing::TimeMixed), &*names.fence);
        assert_eq!(names.kind, LockKind::Plain);
    }

    #[test]
    fn family_keys_are_the_locks_and_the_namespace_floor() {
        let ms = std::time::Duration::from_millis;
        let fair = KeyNames::with_kind(
            "lock",
            "a",
            LockKind::Fair {
                waiter_ttl: ms(100),
            },
        )
        .for_waiter("t1");
        assert_eq!(fair.channel(), "{lock:a}:released:t1");
        assert_eq!(
            fair.script_keys(),
            [
                "{lock:a}",
                "{lock:a}:queue",
                "{lock:a}:waiters",
                "{lock}:fence-floor"
            ]
        );
        let write = KeyNames::with_kind("lock", "a", LockKind::Write { intent_ttl: ms(9) })
            .for_waiter("t1");
        assert_eq!(write.channel(), "{lock:a}:released");
        assert_eq!(
            write.script_keys(),
            [
                "{lock:a}",
                "{lock:a}:readers",
                "{lock:a}:intent",
                "{lock}:fence-floor"
            ]
        );
        assert_eq!(
            KeyNames::with_kind("lock", "a", LockKind::Read).script_keys(),
            write.script_keys()
        );
        let permit = KeyNames::with_kind("lock", "a", LockKind::Permit { permits: 3 });
        assert_eq!(permit.script_keys(), ["{lock:a}", "{lock}:fence-floor"]);
        assert_eq!(permit.kind.script(), SEMAPHORE);
        assert_eq!(LockKind::Read.script(), RWLOCK);
        assert_eq!(fair.kind.script(), FAIR);
        assert_eq!(fair.kind.waiter_ttl(), Some(ms(100)));
        assert_eq!(LockKind::Read.waiter_ttl(), None);
    }

    #[test]
    fn family_sources_are_the_prelude_and_the_body() {
        let prelude = include_str!("scripts/family_prelude.lua");
        for (script, body) in [
            (FAIR, include_str!("scripts/fair.lua")),
            (RWLOCK, include_str!("scripts/rwlock.lua")),
            (SEMAPHORE, include_str!("scripts/semaphore.lua")),
        ] {
            assert_eq!(script.source, format!("{prelude}{body}"), "{}", script.name);
        }
        let mut digests: Vec<_> = ALL.iter().map(|script| script.sha1).collect();
        digests.dedup();
        assert_eq!(digests.len(), ALL.len());
    }

    /// Independent check of the build script: the SHA1 of the empty
    /// string and of "abc" are published test vectors (FIPS 180-2).
    fn sha1_of(text: &str) -> String {
        let known = [
            ("", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
            ("abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        ];
        for (input, expected) in known {
            assert_eq!(sha1_smol::Sha1::from(input).digest().to_string(), expected);
        }
        sha1_smol::Sha1::from(text).digest().to_string()
    }
}
