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
/// Replies with one entry per operation, in order: `{1, fence}` or
/// `{0, pttl}` for an acquire, `1`/`0` for a renew or a release, or an
/// error reply for an operation that failed (and changed nothing).
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
/// | [`ACQUIRE`](op::ACQUIRE) | lock, fence | code, token, ttl (ms), fencing mode |
/// | [`ACQUIRE_COMPAT`](op::ACQUIRE_COMPAT) | lock, fence | code, token, ttl (ms), fencing mode |
/// | [`RENEW`](op::RENEW) | lock | code, token, ttl (ms) |
/// | [`RELEASE`](op::RELEASE) | lock | code, token |
pub mod op {
    /// Acquire with `SET … NX PX … GET` (Redis 7.0 and later).
    pub const ACQUIRE: &str = "a";
    /// Acquire with `GET`, then `SET` (servers before 7.0).
    pub const ACQUIRE_COMPAT: &str = "A";
    /// Reset the ttl of our key.
    pub const RENEW: &str = "r";
    /// Delete our key and publish on its channel.
    pub const RELEASE: &str = "d";
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
        let tag = if namespace.is_empty() {
            format!("{{{key}}}")
        } else {
            format!("{{{namespace}:{key}}}")
        };
        Self {
            fence: format!("{tag}:fence"),
            channel: format!("{tag}:released"),
            counter: format!("{{{namespace}}}:fence-counter"),
            lock: tag,
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
