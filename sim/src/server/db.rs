//! The keyspace of one simulated node: values, expiry, and the effects
//! that replicate them. Storage only: the commands that read and write it
//! live in [`cmd`](super::cmd), one family a file.
//!
//! # Expiry
//!
//! Like Redis, a key's expiry is stored as an **absolute** time on the
//! node's own clock (Unix milliseconds as that node reads them). A key is
//! gone once the node's clock reaches that time, whatever true time it is:
//! a node whose clock jumps forward expires its keys early, and a node whose
//! clock runs slow keeps them late. Expired keys are treated as missing on
//! every access (Redis's lazy expiry; its active expiry only frees memory).
//!
//! Every write reports its *effects*: the primary streams exactly these to
//! its replicas, with expiry as an absolute time (what Redis replicates as
//! `PEXPIREAT`), so a replica with a different clock disagrees about when a
//! key dies — as a real one would.

use std::collections::BTreeMap;

use redis_protocol::resp2::types::OwnedFrame as Frame;

use super::frame::error;

/// A node's clock reading: Unix time as the node believes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeTime {
    /// Unix milliseconds.
    pub ms: i64,
    /// Unix microseconds.
    pub us: i64,
}

#[cfg(test)]
impl NodeTime {
    /// The reading `ms` Unix milliseconds (and the microseconds of that
    /// millisecond's start), for tests.
    pub(crate) fn at(ms: i64) -> Self {
        Self { ms, us: ms * 1000 }
    }
}

/// A stored value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A string.
    Str(Vec<u8>),
    /// A list (only so that WRONGTYPE can be exercised).
    List(Vec<Vec<u8>>),
    /// A sorted set (the lock family's queues and leases).
    ZSet(ZSet),
}

/// A sorted set: members with scores, ordered by (score, member) as Redis
/// orders them. The lock family keeps a handful of members per key, so the
/// order is computed when asked rather than kept in a second index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ZSet {
    scores: BTreeMap<Vec<u8>, f64>,
}

// Scores are never NaN: every way in (`ZADD`, an increment, a replicated
// effect) refuses one, so equality is reflexive.
impl Eq for ZSet {}

impl ZSet {
    /// The members in Redis's order: by score, ties by member bytes.
    pub fn ordered(&self) -> Vec<(f64, &[u8])> {
        let mut members: Vec<(f64, &[u8])> = self
            .scores
            .iter()
            .map(|(member, score)| (*score, member.as_slice()))
            .collect();
        members.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(b.1)));
        members
    }

    /// How many members.
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// Whether it has no member (Redis deletes such a key).
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// A member's score.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// Sets `member`'s score (never NaN: see `Eq` above), adding it if new.
    pub fn insert(&mut self, member: Vec<u8>, score: f64) {
        self.scores.insert(member, score);
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Stored {
    value: Value,
    /// Absolute expiry on this node's clock, in Unix ms.
    expires_at: Option<i64>,
}

/// A write as it is replicated.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Set a string with an optional absolute expiry.
    Set {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
        /// Unix ms on the writer's clock.
        expires_at: Option<i64>,
    },
    /// Delete a key.
    Del {
        /// The key.
        key: Vec<u8>,
    },
    /// Set an absolute expiry.
    ExpireAt {
        /// The key.
        key: Vec<u8>,
        /// Unix ms on the writer's clock.
        at: i64,
    },
    /// Add members to a sorted set (created if missing), or set their
    /// scores.
    ZAdd {
        /// The key.
        key: Vec<u8>,
        /// `(score, member)`, the scores as they now stand.
        members: Vec<(f64, Vec<u8>)>,
    },
    /// Remove members from a sorted set; a set left empty is deleted.
    ZRem {
        /// The key.
        key: Vec<u8>,
        /// The members removed.
        members: Vec<Vec<u8>>,
    },
    /// Prepend to a list.
    Push {
        /// The key.
        key: Vec<u8>,
        /// The values, in push order.
        values: Vec<Vec<u8>>,
    },
    /// Empty the keyspace.
    Flush,
}

impl Effect {
    /// The key it writes; none for a flush, which writes them all.
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            Self::Set { key, .. }
            | Self::Del { key }
            | Self::ExpireAt { key, .. }
            | Self::ZAdd { key, .. }
            | Self::ZRem { key, .. }
            | Self::Push { key, .. } => Some(key),
            Self::Flush => None,
        }
    }
}

/// The error Redis gives for an operation on the wrong type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// The keyspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Db {
    entries: BTreeMap<Vec<u8>, Stored>,
}

impl Db {
    fn live(&self, key: &[u8], now: NodeTime) -> Option<&Stored> {
        self.entries
            .get(key)
            .filter(|stored| stored.expires_at.is_none_or(|at| now.ms < at))
    }

    /// Drops `key` if it is stored but expired (lazy expiry), so that a
    /// write that follows starts from a missing key, not from the dead one.
    pub fn purge(&mut self, key: &[u8], now: NodeTime) {
        if self.live(key, now).is_none() {
            self.entries.remove(key);
        }
    }

    /// Whether `key` is live.
    pub fn exists(&self, key: &[u8], now: NodeTime) -> bool {
        self.live(key, now).is_some()
    }

    /// How many live keys have cluster slot `slot`.
    pub fn count_in_slot(&self, slot: u16, now: NodeTime) -> usize {
        self.entries
            .iter()
            .filter(|(key, stored)| {
                stored.expires_at.is_none_or(|at| now.ms < at)
                    && lock_core::internal::cluster::slot_of(key) == slot
            })
            .count()
    }

    /// The smallest live key whose cluster slot is `slot`.
    pub fn first_key_in_slot(&self, slot: u16, now: NodeTime) -> Option<Vec<u8>> {
        self.entries
            .iter()
            .find(|(key, stored)| {
                stored.expires_at.is_none_or(|at| now.ms < at)
                    && lock_core::internal::cluster::slot_of(key) == slot
            })
            .map(|(key, _)| key.clone())
    }

    /// A live key's value and remaining ttl in ms (`DUMP` and `PTTL`, as
    /// `MIGRATE` sends them).
    pub fn dump(&self, key: &[u8], now: NodeTime) -> Option<(Value, Option<i64>)> {
        let stored = self.live(key, now)?;
        Some((
            stored.value.clone(),
            stored.expires_at.map(|at| at - now.ms),
        ))
    }

    /// `RESTORE … REPLACE`: stores `value` at `key` with an absolute
    /// expiry; returns the effects to replicate.
    pub fn restore(&mut self, key: &[u8], value: Value, expires_at: Option<i64>) -> Vec<Effect> {
        match value {
            Value::Str(bytes) => vec![self.set(key, &bytes, expires_at)],
            value => {
                let mut effects = vec![Effect::Del { key: key.to_vec() }];
                effects.push(match value {
                    Value::List(values) => Effect::Push {
                        key: key.to_vec(),
                        values: values.into_iter().rev().collect(),
                    },
                    Value::ZSet(set) => zadd_all(key, &set),
                    Value::Str(_) => unreachable!("strings are restored above"),
                });
                if let Some(at) = expires_at {
                    effects.push(Effect::ExpireAt {
                        key: key.to_vec(),
                        at,
                    });
                }
                for effect in &effects {
                    self.apply(effect);
                }
                effects
            }
        }
    }

    /// The string at `key`, `Ok(None)` if missing, `Err` on a wrong type.
    pub fn get(&self, key: &[u8], now: NodeTime) -> Result<Option<&[u8]>, Frame> {
        match self.live(key, now).map(|stored| &stored.value) {
            None => Ok(None),
            Some(Value::Str(bytes)) => Ok(Some(bytes)),
            Some(Value::List(_) | Value::ZSet(_)) => Err(error(WRONGTYPE)),
        }
    }

    /// The sorted set at `key`, `Ok(None)` if missing, `Err` on a wrong
    /// type.
    pub fn zset(&self, key: &[u8], now: NodeTime) -> Result<Option<&ZSet>, Frame> {
        match self.live(key, now).map(|stored| &stored.value) {
            None => Ok(None),
            Some(Value::ZSet(set)) => Ok(Some(set)),
            Some(_) => Err(error(WRONGTYPE)),
        }
    }

    /// The value at `key`, if live, whatever its type.
    pub fn value(&self, key: &[u8], now: NodeTime) -> Option<&Value> {
        self.live(key, now).map(|stored| &stored.value)
    }

    /// The absolute expiry (Unix ms on the node's clock) of a live key, if
    /// it has one.
    pub fn expires_at(&self, key: &[u8], now: NodeTime) -> Option<i64> {
        self.live(key, now).and_then(|stored| stored.expires_at)
    }

    /// Remaining ttl in ms: -2 missing, -1 no expiry (Redis's PTTL).
    pub fn pttl(&self, key: &[u8], now: NodeTime) -> i64 {
        match self.live(key, now) {
            None => -2,
            Some(Stored {
                expires_at: None, ..
            }) => -1,
            Some(Stored {
                expires_at: Some(at),
                ..
            }) => at - now.ms,
        }
    }

    /// Sets a string; returns the effect to replicate.
    pub fn set(&mut self, key: &[u8], value: &[u8], expires_at: Option<i64>) -> Effect {
        self.entries.insert(
            key.to_vec(),
            Stored {
                value: Value::Str(value.to_vec()),
                expires_at,
            },
        );
        Effect::Set {
            key: key.to_vec(),
            value: value.to_vec(),
            expires_at,
        }
    }

    /// Deletes a key if live; returns whether it was.
    pub fn del(&mut self, key: &[u8], now: NodeTime) -> bool {
        self.purge(key, now);
        self.entries.remove(key).is_some()
    }

    /// Sets an absolute expiry on a live key; returns whether it existed.
    pub fn expire_at(&mut self, key: &[u8], at: i64, now: NodeTime) -> bool {
        self.purge(key, now);
        match self.entries.get_mut(key) {
            Some(stored) => {
                stored.expires_at = Some(at);
                true
            }
            None => false,
        }
    }

    /// Evicts the key Redis's `volatile-ttl` policy picks under memory
    /// pressure: of the live keys with an expiry, the one that expires
    /// first (ties: the smallest key). Redis samples `maxmemory-samples`
    /// (5) keys and evicts the best of the sample, which on a keyspace this
    /// small is the best of all. Keys without a ttl are never candidates.
    /// Returns the key and its value, `None` when no key has a ttl.
    pub fn evict_volatile_ttl(&mut self, now: NodeTime) -> Option<(Vec<u8>, Value)> {
        let key = self
            .entries
            .iter()
            .filter_map(|(key, stored)| {
                let at = stored.expires_at?;
                (now.ms < at).then_some((at, key))
            })
            .min()
            .map(|(_, key)| key.clone())?;
        let stored = self.entries.remove(&key)?;
        Some((key, stored.value))
    }

    /// Deletes every key whose expiry the clock has reached, as Redis's
    /// active expiry does in the background; returns the keys deleted.
    pub fn expire_due(&mut self, now: NodeTime) -> Vec<Vec<u8>> {
        let due: Vec<Vec<u8>> = self
            .entries
            .iter()
            .filter(|(_, stored)| stored.expires_at.is_some_and(|at| now.ms >= at))
            .map(|(key, _)| key.clone())
            .collect();
        for key in &due {
            self.entries.remove(key);
        }
        due
    }

    /// The earliest absolute expiry (Unix ms on the node's clock) of any
    /// stored key, expired or not.
    pub fn earliest_expiry(&self) -> Option<i64> {
        self.entries
            .values()
            .filter_map(|stored| stored.expires_at)
            .min()
    }

    /// Whether `key` is stored, expired or not (no lazy expiry): what only
    /// an active expiry or a `DEL` removes.
    #[cfg(test)]
    pub(super) fn contains_stored(&self, key: &[u8]) -> bool {
        self.entries.contains_key(key)
    }

    /// Applies a replicated effect (on a replica, or when loading a sync).
    pub fn apply(&mut self, effect: &Effect) {
        match effect {
            Effect::Set {
                key,
                value,
                expires_at,
            } => {
                self.set(key, value, *expires_at);
            }
            Effect::Del { key } => {
                self.entries.remove(key);
            }
            Effect::ExpireAt { key, at } => {
                if let Some(stored) = self.entries.get_mut(key) {
                    stored.expires_at = Some(*at);
                }
            }
            Effect::ZAdd { key, members } => {
                let stored = self.entries.entry(key.clone()).or_insert(Stored {
                    value: Value::ZSet(ZSet::default()),
                    expires_at: None,
                });
                if !matches!(stored.value, Value::ZSet(_)) {
                    // A primary never adds to a key of another type (it
                    // answers WRONGTYPE): a replica follows what it says.
                    stored.value = Value::ZSet(ZSet::default());
                }
                if let Value::ZSet(set) = &mut stored.value {
                    for (score, member) in members {
                        set.scores.insert(member.clone(), *score);
                    }
                }
            }
            Effect::ZRem { key, members } => {
                if let Some(Stored {
                    value: Value::ZSet(set),
                    ..
                }) = self.entries.get_mut(key)
                {
                    for member in members {
                        set.scores.remove(member);
                    }
                    if set.is_empty() {
                        self.entries.remove(key);
                    }
                }
            }
            Effect::Push { key, values } => {
                let stored = self.entries.entry(key.clone()).or_insert(Stored {
                    value: Value::List(Vec::new()),
                    expires_at: None,
                });
                if let Value::List(list) = &mut stored.value {
                    for value in values {
                        list.insert(0, value.clone());
                    }
                }
            }
            Effect::Flush => self.entries.clear(),
        }
    }

    /// The live keyspace as effects, for a replica's full sync.
    pub fn snapshot(&self, now: NodeTime) -> Vec<Effect> {
        let mut effects = vec![Effect::Flush];
        for (key, stored) in &self.entries {
            if stored.expires_at.is_some_and(|at| now.ms >= at) {
                continue;
            }
            match &stored.value {
                Value::Str(value) => effects.push(Effect::Set {
                    key: key.clone(),
                    value: value.clone(),
                    expires_at: stored.expires_at,
                }),
                Value::List(values) => effects.push(Effect::Push {
                    key: key.clone(),
                    values: values.iter().rev().cloned().collect(),
                }),
                Value::ZSet(set) => {
                    effects.push(zadd_all(key, set));
                    if let Some(at) = stored.expires_at {
                        effects.push(Effect::ExpireAt {
                            key: key.clone(),
                            at,
                        });
                    }
                }
            }
        }
        effects
    }
}

/// One effect that adds every member of `set` at `key`.
fn zadd_all(key: &[u8], set: &ZSet) -> Effect {
    Effect::ZAdd {
        key: key.to_vec(),
        members: set
            .ordered()
            .into_iter()
            .map(|(score, member)| (score, member.to_vec()))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volatile_ttl_eviction_takes_the_nearest_expiry_and_spares_persistent_keys() {
        let mut db = Db::default();
        db.set(b"persistent", b"p", None);
        db.set(b"late", b"l", Some(900));
        db.set(b"soon", b"s", Some(300));
        db.set(b"expired", b"e", Some(50));
        let evicted = db.evict_volatile_ttl(NodeTime::at(100));
        assert_eq!(evicted, Some((b"soon".to_vec(), Value::Str(b"s".to_vec()))));
        let evicted = db.evict_volatile_ttl(NodeTime::at(100));
        assert_eq!(evicted, Some((b"late".to_vec(), Value::Str(b"l".to_vec()))));
        assert_eq!(
            db.evict_volatile_ttl(NodeTime::at(100)),
            None,
            "only persistent keys left"
        );
        assert_eq!(
            db.get(b"persistent", NodeTime::at(100)),
            Ok(Some(&b"p"[..]))
        );
    }

    #[test]
    fn active_expiry_deletes_what_the_clock_passed_so_a_step_back_cannot_revive_it() {
        let mut db = Db::default();
        db.set(b"k", b"v", Some(100));
        db.set(b"live", b"v", Some(500));
        // Lazy expiry alone: the clock steps back and the key is live again.
        let lazy = db.clone();
        assert_eq!(lazy.get(b"k", NodeTime::at(50)), Ok(Some(&b"v"[..])));
        assert_eq!(db.expire_due(NodeTime::at(200)), vec![b"k".to_vec()]);
        assert_eq!(db.get(b"k", NodeTime::at(50)), Ok(None));
        assert_eq!(db.get(b"live", NodeTime::at(50)), Ok(Some(&b"v"[..])));
    }
}
