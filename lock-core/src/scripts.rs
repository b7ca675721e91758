//! The Lua script, the one copy the adapter and the simulator share.
//!
//! [`LOCK`] runs every lock operation — acquire, renew, release — one or
//! many per call: a batch of operations that fall due together costs one
//! `EVALSHA` (group commit). Its source is `scripts/lock.lua` next to this
//! module, embedded with `include_str!`; its SHA1 is computed by the build
//! script, so an `EVALSHA` digest can never drift from the text it names.
//!
//! The unfenced acquire needs no script on Redis 7.0 and later: it is a
//! plain `SET key token NX PX ttl GET`.

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

/// Every script, for loading them all at once.
pub const ALL: [Script; 1] = [LOCK];

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

/// The Redis names one lock uses.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyNames {
    /// The lock key, whose value is the owner token: `{namespace:key}`.
    pub lock: String,
    /// The time-mixed fence floor, in the lock's hash slot:
    /// `{namespace:key}:fence`. It expires one ttl after the server instant
    /// of the last fence it stands for.
    pub fence: String,
    /// The namespace's fence counter for [`Fencing::Counter`](crate::Fencing::Counter):
    /// `{namespace}:fence-counter`, one key per namespace that never expires.
    pub counter: String,
    /// The pub/sub channel a release announces itself on: `{namespace:key}:released`.
    pub channel: String,
}

impl KeyNames {
    /// Derives the Redis names for `key` under `namespace`.
    ///
    /// The braces are a hash tag: the lock key, its fence floor and its
    /// channel share a cluster slot, so one script may touch them together.
    pub fn new(namespace: &str, key: &str) -> Self {
        // Built by concatenation: this runs once per acquire, and
        // `format!` costs several times as much.
        let mut lock = String::with_capacity(namespace.len() + key.len() + 3);
        lock.push('{');
        if !namespace.is_empty() {
            lock.push_str(namespace);
            lock.push(':');
        }
        lock.push_str(key);
        lock.push('}');
        let suffixed = |suffix: &str| {
            let mut name = String::with_capacity(lock.len() + suffix.len());
            name.push_str(&lock);
            name.push_str(suffix);
            name
        };
        let mut counter = String::with_capacity(namespace.len() + 15);
        counter.push('{');
        counter.push_str(namespace);
        counter.push_str("}:fence-counter");
        Self {
            fence: suffixed(":fence"),
            channel: suffixed(":released"),
            counter,
            lock,
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
    fn key_names_share_one_hash_tag() {
        let names = KeyNames::new("lock", "orders:42");
        assert_eq!(names.lock, "{lock:orders:42}");
        assert_eq!(names.fence, "{lock:orders:42}:fence");
        assert_eq!(names.channel, "{lock:orders:42}:released");
        assert_eq!(names.counter, "{lock}:fence-counter");
        assert_eq!(KeyNames::new("", "a").lock, "{a}");
        assert_eq!(names.fence_key(crate::Fencing::Counter), names.counter);
        assert_eq!(names.fence_key(crate::Fencing::TimeMixed), names.fence);
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
