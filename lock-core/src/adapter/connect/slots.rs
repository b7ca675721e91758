//! Redis Cluster building blocks, pure functions all: the slot of a key,
//! the [`SlotMap`] of which shard serves which slots, and the
//! [`Redirect`]s (`MOVED`, `ASK`) a node answers with when it does not.
//!
//! A cluster splits the key space into 16384 slots; each shard (a primary
//! and its replicas) serves some of them. A key's slot is CRC16 (XMODEM) of
//! the key modulo 16384, or of its hash tag, the part between the first `{`
//! and the next `}` if that part is not empty: the lock, fence and channel
//! keys share a tag so they always share a slot (and a shard).

mod slot_map;

pub use slot_map::{Node, Shard, SlotMap, SlotMapError};

pub use super::dial::NodeAddress;

/// How many hash slots a cluster has.
pub const SLOTS: u16 = 16_384;

const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);

/// The hash slot of `key`: CRC16/XMODEM of its [hash tag](hash_tag)
/// modulo 16384, as `CLUSTER KEYSLOT` computes it.
pub fn slot_of(key: impl AsRef<[u8]>) -> u16 {
    CRC16.checksum(hash_tag(key.as_ref())) % SLOTS
}

/// The part of `key` that is hashed: what lies between the first `{` and
/// the first `}` after it, if that is not empty; otherwise the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&byte| byte == b'{') else {
        return key;
    };
    let rest = &key[open + 1..];
    match rest.iter().position(|&byte| byte == b'}') {
        Some(close) if close > 0 => &rest[..close],
        _ => key,
    }
}

/// Which redirection a node answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectKind {
    /// `MOVED`: the slot belongs to another node now; update the slot map
    /// and send this and later commands there.
    Moved,
    /// `ASK`: the slot is migrating and this key is already on the target;
    /// send this one command there, preceded by `ASKING`, and leave the slot
    /// map as it is.
    Ask,
}

/// A `MOVED` or `ASK` reply: the slot and where to go instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// `MOVED` or `ASK`.
    pub kind: RedirectKind,
    /// The key's slot.
    pub slot: u16,
    /// The node to ask instead.
    pub to: NodeAddress,
}

impl Redirect {
    /// Reads a redirection from a command's error; `None` if the error is
    /// not `MOVED` or `ASK`, or is malformed. `origin_host` is the host the
    /// command went to, which an empty host in the reply stands for.
    pub fn from_error(error: &redis::RedisError, origin_host: &str) -> Option<Self> {
        let code = error.code()?;
        let detail = error.detail()?;
        Self::parse_parts(code, detail, origin_host)
    }

    /// Reads a redirection from the text of an error reply, as in
    /// `MOVED 3999 127.0.0.1:6381`, `ASK 3999 :6381` (same host) or
    /// `MOVED 3999 2001:db8::1:6381`.
    pub fn parse(line: &str, origin_host: &str) -> Option<Self> {
        let line = line.trim().trim_start_matches('-');
        let (code, detail) = line.split_once(' ')?;
        Self::parse_parts(code, detail, origin_host)
    }

    fn parse_parts(code: &str, detail: &str, origin_host: &str) -> Option<Self> {
        let kind = match code {
            "MOVED" => RedirectKind::Moved,
            "ASK" => RedirectKind::Ask,
            _ => return None,
        };
        let mut words = detail.split_ascii_whitespace();
        let slot: u16 = words.next()?.parse().ok()?;
        let to = NodeAddress::parse(words.next()?, origin_host)?;
        if slot >= SLOTS || words.next().is_some() {
            return None;
        }
        Some(Self { kind, slot, to })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crc_is_xmodem() {
        // The CRC catalogue's check value for CRC-16/XMODEM, and the
        // examples of the Redis cluster specification.
        assert_eq!(CRC16.checksum(b"123456789"), 0x31C3);
        assert_eq!(slot_of("123456789"), 0x31C3 % SLOTS);
        assert_eq!(slot_of("somekey"), 11_058);
        assert_eq!(slot_of("foo{hash_tag}"), 2_515);
        assert_eq!(slot_of("bar{hash_tag}"), 2_515);
    }

    #[test]
    fn hash_tags_follow_the_specification() {
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        // An empty tag hashes the whole key.
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"{}"), b"{}");
        // An unclosed brace is part of the key.
        assert_eq!(hash_tag(b"foo{bar"), b"foo{bar");
        assert_eq!(hash_tag(b"plain"), b"plain");
        assert_eq!(hash_tag(b""), b"");
        assert_eq!(slot_of("{user1000}.following"), slot_of("user1000"));
    }

    #[test]
    fn every_slot_is_below_16384() {
        for key in 0..20_000_u32 {
            assert!(slot_of(key.to_be_bytes()) < SLOTS);
        }
    }

    #[test]
    fn redirects_parse_with_every_host_form() {
        let moved = Redirect::parse("MOVED 3999 127.0.0.1:6381", "10.0.0.1").expect("moved");
        assert_eq!(moved.kind, RedirectKind::Moved);
        assert_eq!(moved.slot, 3999);
        assert_eq!(moved.to, NodeAddress::new("127.0.0.1", 6381));

        let ask = Redirect::parse("-ASK 3999 :6380", "10.0.0.1").expect("ask");
        assert_eq!(ask.kind, RedirectKind::Ask);
        assert_eq!(ask.to, NodeAddress::new("10.0.0.1", 6380));

        let v6 = Redirect::parse("MOVED 1 2001:db8::1:6379", "x").expect("ipv6");
        assert_eq!(v6.to, NodeAddress::new("2001:db8::1", 6379));
        assert_eq!(v6.to.to_string(), "[2001:db8::1]:6379");
        let bracketed = Redirect::parse("MOVED 1 [::1]:7000", "x").expect("brackets");
        assert_eq!(bracketed.to, NodeAddress::new("::1", 7000));

        let named = Redirect::parse("MOVED 16383 redis-2.example:6379", "x").expect("a name");
        assert_eq!(named.to, NodeAddress::new("redis-2.example", 6379));
    }

    #[test]
    fn malformed_redirects_are_none() {
        for line in [
            "MOVED",
            "MOVED 3999",
            "MOVED x 127.0.0.1:6379",
            "MOVED 16384 127.0.0.1:6379",
            "MOVED 1 127.0.0.1",
            "MOVED 1 127.0.0.1:port",
            "MOVED 1 127.0.0.1:6379 extra",
            "TRYAGAIN Multiple keys request during rehashing of slot",
            "CROSSSLOT Keys in request don't hash to the same slot",
        ] {
            assert_eq!(Redirect::parse(line, "h"), None, "{line}");
        }
    }

    #[test]
    fn redirects_come_out_of_redis_errors() {
        let error = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::Ask),
            "An error was signalled by the server",
            "12 :7001".to_owned(),
        ));
        let redirect = Redirect::from_error(&error, "127.0.0.1");
        assert_eq!(
            redirect,
            Some(Redirect {
                kind: RedirectKind::Ask,
                slot: 12,
                to: NodeAddress::new("127.0.0.1", 7001),
            }),
            "{error:?}"
        );
    }
}
