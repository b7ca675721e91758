//! The Lua scripts, the one copy the adapter and the simulator share.
//!
//! Each script is a `.lua` file next to this module, embedded with
//! `include_str!`; its SHA1 is computed by the build script, so an
//! `EVALSHA` digest can never drift from the text it names.

include!(concat!(env!("OUT_DIR"), "/script_sha1.rs"));

/// A Lua script together with the digest `EVALSHA` addresses it by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Script {
    /// A short name for logs: `acquire`, `renew` or `release`.
    pub name: &'static str,
    /// The Lua source, byte for byte what `SCRIPT LOAD` receives.
    pub source: &'static str,
    /// The lowercase hex SHA1 of `source`.
    pub sha1: &'static str,
}

/// Sets the lock key if it is free and issues a fencing token.
///
/// `KEYS = [lock, fence]`, `ARGV = [token, ttl_ms, fencing_mode]`; replies
/// `{1, "fence"}` when granted or `{0, pttl_ms}` when held by another owner.
pub const ACQUIRE: Script = Script {
    name: "acquire",
    source: include_str!("scripts/acquire.lua"),
    sha1: ACQUIRE_SHA1,
};

/// Resets the ttl of the lock key if the caller still owns it.
///
/// `KEYS = [lock]`, `ARGV = [token, ttl_ms]`; replies `1` (renewed) or `0`
/// (missing or another owner's).
pub const RENEW: Script = Script {
    name: "renew",
    source: include_str!("scripts/renew.lua"),
    sha1: RENEW_SHA1,
};

/// Deletes the lock key if the caller owns it, then publishes on its channel.
///
/// `KEYS = [lock]`, `ARGV = [token, channel]`; replies `1` (deleted) or `0`
/// (missing or another owner's, left untouched).
pub const RELEASE: Script = Script {
    name: "release",
    source: include_str!("scripts/release.lua"),
    sha1: RELEASE_SHA1,
};

/// Every script, in a fixed order, for loading them all at once.
pub const ALL: [Script; 3] = [ACQUIRE, RENEW, RELEASE];

/// The Redis names one lock uses, all in the same cluster hash slot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyNames {
    /// The lock key, whose value is the owner token: `{namespace:key}`.
    pub lock: String,
    /// The key holding the last fencing token issued: `{namespace:key}:fence`.
    pub fence: String,
    /// The pub/sub channel a release announces itself on: `{namespace:key}:released`.
    pub channel: String,
}

impl KeyNames {
    /// Derives the Redis names for `key` under `namespace`.
    ///
    /// The braces are a hash tag: the lock and fence keys share a cluster
    /// slot, so one script may touch both.
    pub fn new(namespace: &str, key: &str) -> Self {
        let tag = if namespace.is_empty() {
            format!("{{{key}}}")
        } else {
            format!("{{{namespace}:{key}}}")
        };
        Self {
            fence: format!("{tag}:fence"),
            channel: format!("{tag}:released"),
            lock: tag,
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
        assert_eq!(KeyNames::new("", "a").lock, "{a}");
    }

    /// Independent check of the build script: the SHA1 of the empty
    /// string and of "abc" are published test vectors (FIPS 180-2).
    fn sha1_of(text: &str) -> String {
        // The build script and this test use the same well-known crate;
        // the vectors below pin it to the standard.
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
