//! The keyspace of one simulated node, and the plain commands on it.
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

use super::frame::{bulk, error, ok, parse_i64};

/// A node's clock reading: Unix time as the node believes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeTime {
    /// Unix milliseconds.
    pub ms: i64,
    /// Unix microseconds.
    pub us: i64,
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

    fn purge(&mut self, key: &[u8], now: NodeTime) {
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

    /// Deletes `key` if it holds a string equal to `value`: 1 if deleted,
    /// 0 if missing or different, `WRONGTYPE` for another type.
    fn del_if_equal(&mut self, key: &[u8], value: &[u8], now: NodeTime) -> Answer {
        match self.get(key, now) {
            Ok(Some(stored)) if stored == value => {
                self.del(key, now);
                (Frame::Integer(1), vec![Effect::Del { key: key.to_vec() }])
            }
            Ok(_) => (Frame::Integer(0), Vec::new()),
            Err(frame) => (frame, Vec::new()),
        }
    }

    /// Runs a plain data command. Returns `None` for commands that are not
    /// data commands (the connection layer handles those).
    pub fn execute(&mut self, args: &[Vec<u8>], now: NodeTime) -> Option<Answer> {
        let name = args.first()?.to_ascii_uppercase();
        Some(match name.as_slice() {
            b"GET" => self.get_command(args, now),
            b"SET" => self.set_command(args, now),
            b"DEL" => self.del_command(args, now),
            // `DELIFEQ key value` (Valkey 9.0): deletes the key if it holds
            // a string equal to `value`. The connection refuses it on a node
            // that presents as another server.
            b"DELIFEQ" => {
                if args.len() != 3 {
                    return Some(wrong_args(args));
                }
                self.del_if_equal(&args[1], &args[2], now)
            }
            b"DELEX" => self.delex_command(args, now),
            b"MGET" => self.mget_command(args, now),
            b"EXISTS" => self.exists_command(args, now),
            b"PEXPIRE" | b"EXPIRE" => self.expire_command(&name, args, now),
            b"PEXPIREAT" | b"EXPIREAT" => self.expire_at_command(&name, args, now),
            b"ZADD" | b"ZCARD" | b"ZSCORE" | b"ZREM" | b"ZRANGE" | b"ZRANGEBYSCORE"
            | b"ZREMRANGEBYSCORE" => self.sorted_set_command(&name, args, now),
            b"PTTL" | b"TTL" => self.ttl_command(&name, args, now),
            b"INCR" => {
                if args.len() != 2 {
                    return Some(wrong_args(args));
                }
                match self.incr(&args[1], now) {
                    Ok((value, effect)) => (Frame::Integer(value), vec![effect]),
                    Err(frame) => (frame, Vec::new()),
                }
            }
            b"LPUSH" => self.lpush_command(args, now),
            b"FLUSHALL" | b"FLUSHDB" => {
                self.entries.clear();
                (ok(), vec![Effect::Flush])
            }
            b"TIME" => (
                Frame::Array(vec![
                    bulk((now.us / 1_000_000).to_string().as_bytes()),
                    bulk((now.us % 1_000_000).to_string().as_bytes()),
                ]),
                Vec::new(),
            ),
            _ => return None,
        })
    }

    /// `GET key`.
    fn get_command(&self, args: &[Vec<u8>], now: NodeTime) -> Answer {
        if args.len() != 2 {
            return wrong_args(args);
        }
        match self.get(&args[1], now) {
            Ok(Some(value)) => (bulk(value), Vec::new()),
            Ok(None) => (Frame::Null, Vec::new()),
            Err(frame) => (frame, Vec::new()),
        }
    }

    /// `SET key value [NX|XX|IFEQ value] [GET] [PX ms|EX s]`.
    fn set_command(&mut self, args: &[Vec<u8>], now: NodeTime) -> Answer {
        if args.len() < 3 {
            return wrong_args(args);
        }
        let options = match SetOptions::parse(&args[3..], now) {
            Ok(options) => options,
            Err(answer) => return answer,
        };
        // IFEQ reads the key as a string: WRONGTYPE, setting
        // nothing, for another type (with or without GET).
        let current_matches = match options.if_equal {
            None => true,
            Some(expected) => match self.get(&args[1], now) {
                Ok(current) => current == Some(expected),
                Err(frame) => return (frame, Vec::new()),
            },
        };
        // SET … GET answers the old value (nil if none) instead of
        // OK, and fails with WRONGTYPE, setting nothing, if the old
        // value is not a string (Redis 7 also allows it with NX).
        let old = if options.get {
            match self.get(&args[1], now) {
                Ok(old) => Some(old.map(<[u8]>::to_vec)),
                Err(frame) => return (frame, Vec::new()),
            }
        } else {
            None
        };
        let reply = |set: bool| match &old {
            Some(Some(value)) => bulk(value),
            Some(None) => Frame::Null,
            None if set => ok(),
            None => Frame::Null,
        };
        let exists = self.live(&args[1], now).is_some();
        if (options.nx && exists) || (options.xx && !exists) || !current_matches {
            return (reply(false), Vec::new());
        }
        let effect = self.set(&args[1], &args[2], options.expires_at);
        (reply(true), vec![effect])
    }

    /// `DEL key …`.
    fn del_command(&mut self, args: &[Vec<u8>], now: NodeTime) -> Answer {
        if args.len() < 2 {
            return wrong_args(args);
        }
        let mut effects = Vec::new();
        for key in &args[1..] {
            if self.del(key, now) {
                effects.push(Effect::Del { key: key.clone() });
            }
        }
        (Frame::Integer(effects.len() as i64), effects)
    }

    /// `DELEX key [IFEQ value]` (Redis 8.4; of its conditions, only
    /// `IFEQ`). The connection refuses it on other servers.
    fn delex_command(&mut self, args: &[Vec<u8>], now: NodeTime) -> Answer {
        match args.len() {
            2 => {
                let deleted = self.del(&args[1], now);
                let effects = if deleted {
                    vec![Effect::Del {
                        key: args[1].clone(),
                    }]
                } else {
                    Vec::new()
                };
                (Frame::Integer(i64::from(deleted)), effects)
            }
            4 if args[2].eq_ignore_ascii_case(b"IFEQ") => {
                self.del_if_equal(&args[1], &args[3], now)
            }
            _ => syntax_error(),
        }
    }

    /// `MGET key …`.
    fn mget_command(&self, args: &[Vec<u8>], now: NodeTime) -> Answer {
        if args.len() < 2 {
            return wrong_args(args);
        }
        // A key of another type reads as nil, as in Redis.
        let values = args[1..]
            .iter()
            .map(|key| match self.get(key, now) {
                Ok(Some(value)) => bulk(value),
                _ => Frame::Null,
            })
            .collect();
        (Frame::Array(values), Vec::new())
    }

    /// `EXISTS key …`.
    fn exists_command(&self, args: &[Vec<u8>], now: NodeTime) -> Answer {
        if args.len() < 2 {
            return wrong_args(args);
        }
        let count = args[1..]
            .iter()
            .filter(|key| self.live(key, now).is_some())
            .count();
        (Frame::Integer(count as i64), Vec::new())
    }

    /// `PEXPIRE key ms` and `EXPIRE key s` (`name`, upper case).
    fn expire_command(&mut self, name: &[u8], args: &[Vec<u8>], now: NodeTime) -> Answer {
        if args.len() != 3 {
            return wrong_args(args);
        }
        let Some(amount) = parse_i64(&args[2]) else {
            return not_integer();
        };
        let ms = if name == b"EXPIRE" {
            amount.checked_mul(1000)
        } else {
            Some(amount)
        };
        let Some(at) = ms.and_then(|ms| now.ms.checked_add(ms)) else {
            return invalid_expire_time(args);
        };
        if self.expire_at(&args[1], at, now) {
            (
                Frame::Integer(1),
                vec![Effect::ExpireAt {
                    key: args[1].clone(),
                    at,
                }],
            )
        } else {
            (Frame::Integer(0), Vec::new())
        }
    }

    /// `PEXPIREAT key unix-ms` and `EXPIREAT key unix-s` (`name`, upper
    /// case).
    fn expire_at_command(&mut self, name: &[u8], args: &[Vec<u8>], now: NodeTime) -> Answer {
        if args.len() != 3 {
            return wrong_args(args);
        }
        let Some(amount) = parse_i64(&args[2]) else {
            return not_integer();
        };
        let at = if name == b"EXPIREAT" {
            amount.checked_mul(1000)
        } else {
            Some(amount)
        };
        let Some(at) = at else {
            return invalid_expire_time(args);
        };
        if !self.exists(&args[1], now) {
            (Frame::Integer(0), Vec::new())
        } else if at <= now.ms {
            // A deadline already passed deletes the key (Redis
            // replicates that as a DEL).
            self.del(&args[1], now);
            (
                Frame::Integer(1),
                vec![Effect::Del {
                    key: args[1].clone(),
                }],
            )
        } else {
            self.expire_at(&args[1], at, now);
            (
                Frame::Integer(1),
                vec![Effect::ExpireAt {
                    key: args[1].clone(),
                    at,
                }],
            )
        }
    }

    /// `PTTL key` and `TTL key` (`name`, upper case).
    fn ttl_command(&self, name: &[u8], args: &[Vec<u8>], now: NodeTime) -> Answer {
        if args.len() != 2 {
            return wrong_args(args);
        }
        let pttl = self.pttl(&args[1], now);
        let reply = if name == b"TTL" && pttl >= 0 {
            (pttl + 500) / 1000
        } else {
            pttl
        };
        (Frame::Integer(reply), Vec::new())
    }

    /// `LPUSH key value …`.
    fn lpush_command(&mut self, args: &[Vec<u8>], now: NodeTime) -> Answer {
        if args.len() < 3 {
            return wrong_args(args);
        }
        self.purge(&args[1], now);
        let values: Vec<Vec<u8>> = args[2..].to_vec();
        match self.entries.get(&args[1]).map(|s| &s.value) {
            Some(Value::Str(_) | Value::ZSet(_)) => (error(WRONGTYPE), Vec::new()),
            _ => {
                let effect = Effect::Push {
                    key: args[1].clone(),
                    values,
                };
                self.apply(&effect);
                let len = match self.entries.get(&args[1]).map(|s| &s.value) {
                    Some(Value::List(list)) => list.len(),
                    _ => 0,
                };
                (Frame::Integer(len as i64), vec![effect])
            }
        }
    }

    /// The sorted-set commands: `ZADD` (`NX`, `XX`, `GT`, `LT`, `CH`,
    /// `INCR`), `ZCARD`, `ZSCORE`, `ZREM`, `ZRANGE` (by index, `REV`,
    /// `BYSCORE`, `LIMIT`, `WITHSCORES`; not `BYLEX`), `ZRANGEBYSCORE`
    /// (`WITHSCORES`, `LIMIT`) and `ZREMRANGEBYSCORE`. A set left empty is
    /// deleted, as Redis deletes it.
    fn sorted_set_command(&mut self, name: &[u8], args: &[Vec<u8>], now: NodeTime) -> Answer {
        let min_arity = match name {
            b"ZCARD" => 2,
            b"ZSCORE" | b"ZREM" => 3,
            b"ZADD" | b"ZRANGE" | b"ZRANGEBYSCORE" | b"ZREMRANGEBYSCORE" => 4,
            _ => return (error("ERR unknown command"), Vec::new()),
        };
        let exact = matches!(name, b"ZCARD" | b"ZSCORE" | b"ZREMRANGEBYSCORE");
        if args.len() < min_arity || (exact && args.len() != min_arity) {
            return wrong_args(args);
        }
        let key = &args[1];
        let set = match self.zset(key, now) {
            Ok(set) => set.cloned(),
            Err(frame) => return (frame, Vec::new()),
        };
        match name {
            b"ZCARD" => (
                Frame::Integer(set.map_or(0, |set| set.len() as i64)),
                Vec::new(),
            ),
            b"ZSCORE" => match set.and_then(|set| set.score(&args[2])) {
                Some(score) => (bulk(format_score(score).as_bytes()), Vec::new()),
                None => (Frame::Null, Vec::new()),
            },
            b"ZADD" => self.zadd(key, set, &args[2..], now),
            b"ZREM" => {
                let Some(set) = set else {
                    return (Frame::Integer(0), Vec::new());
                };
                let mut removed: Vec<Vec<u8>> = Vec::new();
                for member in &args[2..] {
                    if set.score(member).is_some() && !removed.contains(member) {
                        removed.push(member.clone());
                    }
                }
                self.remove_members(key, removed)
            }
            b"ZREMRANGEBYSCORE" => {
                let (Some(min), Some(max)) = (parse_bound(&args[2]), parse_bound(&args[3])) else {
                    return (error("ERR min or max is not a float"), Vec::new());
                };
                let Some(set) = set else {
                    return (Frame::Integer(0), Vec::new());
                };
                let removed = set
                    .ordered()
                    .into_iter()
                    .filter(|(score, _)| in_range(*score, min, max))
                    .map(|(_, member)| member.to_vec())
                    .collect();
                self.remove_members(key, removed)
            }
            _ => zrange(name, args, set.as_ref()),
        }
    }

    /// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member …`, the set as it
    /// stands (`None`: missing) and the arguments after the key.
    fn zadd(&mut self, key: &[u8], set: Option<ZSet>, rest: &[Vec<u8>], now: NodeTime) -> Answer {
        let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
            (false, false, false, false, false, false);
        let mut at = 0;
        while let Some(option) = rest.get(at) {
            match option.to_ascii_uppercase().as_slice() {
                b"NX" => nx = true,
                b"XX" => xx = true,
                b"GT" => gt = true,
                b"LT" => lt = true,
                b"CH" => ch = true,
                b"INCR" => incr = true,
                _ => break,
            }
            at += 1;
        }
        let pairs = &rest[at..];
        if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
            return (error("ERR syntax error"), Vec::new());
        }
        if nx && xx {
            return (
                error("ERR XX and NX options at the same time are not compatible"),
                Vec::new(),
            );
        }
        if (gt && lt) || (nx && (gt || lt)) {
            return (
                error("ERR GT, LT, and/or NX options at the same time are not compatible"),
                Vec::new(),
            );
        }
        if incr && pairs.len() > 2 {
            return (
                error("ERR INCR option supports a single increment-element pair"),
                Vec::new(),
            );
        }
        // Every score is checked before anything changes.
        let mut scores = Vec::new();
        for pair in pairs.chunks(2) {
            match parse_score(&pair[0]) {
                Some(score) => scores.push((score, pair[1].clone())),
                None => return (error("ERR value is not a valid float"), Vec::new()),
            }
        }
        let mut current = set.unwrap_or_default();
        let (mut added, mut changed) = (0, 0);
        let mut written: Vec<(f64, Vec<u8>)> = Vec::new();
        let mut incremented: Option<f64> = None;
        for (score, member) in scores {
            let old = current.score(&member);
            if (nx && old.is_some()) || (xx && old.is_none()) {
                continue;
            }
            let new = match (incr, old) {
                (true, Some(old)) => old + score,
                _ => score,
            };
            if new.is_nan() {
                return (
                    error("ERR resulting score is not a number (NaN)"),
                    Vec::new(),
                );
            }
            if let Some(old) = old
                && ((gt && new <= old) || (lt && new >= old))
            {
                continue;
            }
            if incr {
                incremented = Some(new);
            }
            match old {
                None => added += 1,
                Some(old) if old != new => changed += 1,
                Some(_) => continue,
            }
            current.scores.insert(member.clone(), new);
            written.push((new, member));
        }
        let effects = if written.is_empty() {
            Vec::new()
        } else {
            let effect = Effect::ZAdd {
                key: key.to_vec(),
                members: written,
            };
            self.purge(key, now);
            self.apply(&effect);
            vec![effect]
        };
        let reply = if incr {
            match incremented {
                Some(score) => bulk(format_score(score).as_bytes()),
                None => Frame::Null,
            }
        } else {
            Frame::Integer(if ch { added + changed } else { added })
        };
        (reply, effects)
    }

    /// Removes `members` from the sorted set at `key`: how many, and the
    /// effect (none when nothing was removed).
    fn remove_members(&mut self, key: &[u8], members: Vec<Vec<u8>>) -> Answer {
        let count = members.len() as i64;
        if members.is_empty() {
            return (Frame::Integer(0), Vec::new());
        }
        let effect = Effect::ZRem {
            key: key.to_vec(),
            members,
        };
        self.apply(&effect);
        (Frame::Integer(count), vec![effect])
    }

    /// INCR: the new value and its effect.
    pub fn incr(&mut self, key: &[u8], now: NodeTime) -> Result<(i64, Effect), Frame> {
        let current = match self.get(key, now)? {
            None => 0,
            Some(bytes) => parse_i64(bytes)
                .ok_or_else(|| error("ERR value is not an integer or out of range"))?,
        };
        let next = current
            .checked_add(1)
            .ok_or_else(|| error("ERR increment or decrement would overflow"))?;
        let expires_at = self.live(key, now).and_then(|stored| stored.expires_at);
        Ok((next, self.set(key, next.to_string().as_bytes(), expires_at)))
    }
}

/// What a data command answers, and the effects it had (what a primary
/// replicates and its AOF logs).
type Answer = (Frame, Vec<Effect>);

/// The `ERR wrong number of arguments` answer to the command in `args`.
fn wrong_args(args: &[Vec<u8>]) -> Answer {
    let name = String::from_utf8_lossy(&args[0]).to_lowercase();
    (
        error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        )),
        Vec::new(),
    )
}

fn not_integer() -> Answer {
    (
        error("ERR value is not an integer or out of range"),
        Vec::new(),
    )
}

fn syntax_error() -> Answer {
    (error("ERR syntax error"), Vec::new())
}

/// The answer to an expiry command (in `args`) whose deadline does not fit.
fn invalid_expire_time(args: &[Vec<u8>]) -> Answer {
    let name = String::from_utf8_lossy(&args[0]).to_lowercase();
    (
        error(&format!("ERR invalid expire time in '{name}' command")),
        Vec::new(),
    )
}

/// The options of one `SET`, after its key and value.
#[derive(Default)]
struct SetOptions<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    /// The deadline `PX` or `EX` asks for, on the node's clock.
    expires_at: Option<i64>,
    /// `IFEQ value` (Valkey 8.1): set only if the key holds a string equal
    /// to `value`. The connection refuses it on a node that presents as
    /// Redis 7.
    if_equal: Option<&'a [u8]>,
}

impl<'a> SetOptions<'a> {
    /// Reads `options`, or returns the error Redis answers.
    fn parse(options: &'a [Vec<u8>], now: NodeTime) -> Result<Self, Answer> {
        let mut parsed = Self::default();
        let mut options = options.iter();
        while let Some(option) = options.next() {
            match option.to_ascii_uppercase().as_slice() {
                b"NX" => parsed.nx = true,
                b"XX" => parsed.xx = true,
                b"GET" => parsed.get = true,
                b"IFEQ" => match options.next() {
                    Some(value) if parsed.if_equal.is_none() => {
                        parsed.if_equal = Some(value.as_slice());
                    }
                    _ => return Err(syntax_error()),
                },
                unit @ (b"PX" | b"EX") => {
                    let Some(amount) = options.next().and_then(|a| parse_i64(a)) else {
                        return Err(not_integer());
                    };
                    // Redis refuses a ttl whose deadline would
                    // not fit in its clock's 64 bits, too.
                    let at = if unit == b"EX" {
                        amount.checked_mul(1000)
                    } else {
                        Some(amount)
                    }
                    .filter(|ms| *ms > 0)
                    .and_then(|ms| now.ms.checked_add(ms));
                    let Some(at) = at else {
                        return Err((
                            error("ERR invalid expire time in 'set' command"),
                            Vec::new(),
                        ));
                    };
                    parsed.expires_at = Some(at);
                }
                _ => return Err(syntax_error()),
            }
        }
        // IFEQ excludes NX and XX (Valkey 8.1.8 answers a syntax
        // error to either).
        if (parsed.nx && parsed.xx) || (parsed.if_equal.is_some() && (parsed.nx || parsed.xx)) {
            return Err(syntax_error());
        }
        Ok(parsed)
    }
}

/// The options of one `ZRANGE` or `ZRANGEBYSCORE`, after its bounds.
struct RangeOptions {
    by_score: bool,
    rev: bool,
    with_scores: bool,
    /// `LIMIT offset count`.
    limit: Option<(i64, i64)>,
}

impl RangeOptions {
    /// Reads `options` of `ZRANGEBYSCORE` (`by_score_command`) or
    /// `ZRANGE`, or returns the error Redis answers.
    fn parse(options: &[Vec<u8>], by_score_command: bool) -> Result<Self, Answer> {
        let mut parsed = Self {
            by_score: by_score_command,
            rev: false,
            with_scores: false,
            limit: None,
        };
        let mut options = options.iter();
        while let Some(option) = options.next() {
            match option.to_ascii_uppercase().as_slice() {
                b"WITHSCORES" => parsed.with_scores = true,
                b"BYSCORE" if !by_score_command => parsed.by_score = true,
                b"REV" if !by_score_command => parsed.rev = true,
                b"LIMIT" => {
                    let (Some(offset), Some(count)) = (options.next(), options.next()) else {
                        return Err(syntax_error());
                    };
                    let (Some(offset), Some(count)) = (parse_i64(offset), parse_i64(count)) else {
                        return Err(not_integer());
                    };
                    parsed.limit = Some((offset, count));
                }
                _ => return Err(syntax_error()),
            }
        }
        if parsed.limit.is_some() && !parsed.by_score {
            return Err((
                error(
                    "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
                ),
                Vec::new(),
            ));
        }
        Ok(parsed)
    }
}

/// `ZRANGE` and `ZRANGEBYSCORE` (`name`, upper case) on `set` (`None`:
/// missing).
fn zrange(name: &[u8], args: &[Vec<u8>], set: Option<&ZSet>) -> Answer {
    let options = match RangeOptions::parse(&args[4..], name == b"ZRANGEBYSCORE") {
        Ok(options) => options,
        Err(answer) => return answer,
    };
    let members = if options.by_score {
        range_by_score(&args[2], &args[3], set, &options)
    } else {
        range_by_index(&args[2], &args[3], set, options.rev)
    };
    let members = match members {
        Ok(members) => members,
        Err(answer) => return answer,
    };
    let mut reply = Vec::new();
    for (score, member) in members {
        reply.push(bulk(&member));
        if options.with_scores {
            reply.push(bulk(format_score(score).as_bytes()));
        }
    }
    (Frame::Array(reply), Vec::new())
}

/// The members of `set` whose scores lie between the bounds `first` and
/// `second` (max first with `REV`), in order, then `LIMIT`ed.
fn range_by_score(
    first: &[u8],
    second: &[u8],
    set: Option<&ZSet>,
    options: &RangeOptions,
) -> Result<Vec<(f64, Vec<u8>)>, Answer> {
    // With REV the bounds come max first.
    let (low, high) = if options.rev {
        (second, first)
    } else {
        (first, second)
    };
    let (Some(min), Some(max)) = (parse_bound(low), parse_bound(high)) else {
        return Err((error("ERR min or max is not a float"), Vec::new()));
    };
    let mut found: Vec<(f64, Vec<u8>)> = set
        .map(ZSet::ordered)
        .unwrap_or_default()
        .into_iter()
        .filter(|(score, _)| in_range(*score, min, max))
        .map(|(score, member)| (score, member.to_vec()))
        .collect();
    if options.rev {
        found.reverse();
    }
    Ok(match options.limit {
        Some((offset, _)) if offset < 0 => Vec::new(),
        Some((offset, count)) => {
            let skipped = found.into_iter().skip(offset as usize);
            if count < 0 {
                skipped.collect()
            } else {
                skipped.take(count as usize).collect()
            }
        }
        None => found,
    })
}

/// The members of `set` from index `start` to `stop` (Redis's inclusive,
/// negative-from-the-end indexes), reversed first with `rev`.
fn range_by_index(
    start: &[u8],
    stop: &[u8],
    set: Option<&ZSet>,
    rev: bool,
) -> Result<Vec<(f64, Vec<u8>)>, Answer> {
    let (Some(start), Some(stop)) = (parse_i64(start), parse_i64(stop)) else {
        return Err(not_integer());
    };
    let mut all: Vec<(f64, Vec<u8>)> = set
        .map(ZSet::ordered)
        .unwrap_or_default()
        .into_iter()
        .map(|(score, member)| (score, member.to_vec()))
        .collect();
    if rev {
        all.reverse();
    }
    Ok(match index_range(start, stop, all.len()) {
        Some((from, to)) => all.drain(from..=to).collect(),
        None => Vec::new(),
    })
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

/// A score as Redis 7.0 replies it: `%.17g` (17 significant digits, the
/// exponent form outside 1e-4..1e17), `inf` and `-inf`.
pub fn format_score(score: f64) -> String {
    if score.is_infinite() {
        return if score > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if score == 0.0 {
        return "0".to_owned();
    }
    let scientific = format!("{score:.16e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .unwrap_or((scientific.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let trim = |text: &str| -> String {
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            text.to_owned()
        }
    };
    if !(-4..17).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exponent.abs())
    } else {
        let decimals = usize::try_from(16 - exponent).unwrap_or(0);
        trim(&format!("{score:.decimals$}"))
    }
}

/// A score argument as Redis reads one: a decimal or exponent float, or
/// `inf`, `+inf`, `-inf` (any case); never NaN. Negative zero is zero.
fn parse_score(text: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(text).ok()?;
    let lower = text.to_ascii_lowercase();
    let score = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ if lower.contains("inf") || lower.contains("nan") || text.trim() != text => {
            return None;
        }
        _ => text.parse::<f64>().ok()?,
    };
    Some(score + 0.0)
}

/// One end of a score range: the score and whether it is excluded
/// (`(x`).
type Bound = (f64, bool);

fn parse_bound(text: &[u8]) -> Option<Bound> {
    match text.strip_prefix(b"(") {
        Some(rest) => Some((parse_score(rest)?, true)),
        None => Some((parse_score(text)?, false)),
    }
}

fn in_range(score: f64, (min, min_open): Bound, (max, max_open): Bound) -> bool {
    let above = if min_open { score > min } else { score >= min };
    let below = if max_open { score < max } else { score <= max };
    above && below
}

/// `ZRANGE`'s index range over `len` members, negative indexes counting
/// from the end: the inclusive positions, or `None` when empty.
fn index_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (start + len).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        stop + len
    } else {
        stop.min(len - 1)
    };
    if start > stop || start >= len {
        return None;
    }
    Some((start as usize, stop as usize))
}

/// Whether a command writes (and so is refused by a replica).
pub fn is_write(name: &[u8]) -> bool {
    matches!(
        name.to_ascii_uppercase().as_slice(),
        b"SET"
            | b"DEL"
            | b"DELIFEQ"
            | b"DELEX"
            | b"PEXPIRE"
            | b"EXPIRE"
            | b"INCR"
            | b"LPUSH"
            | b"PEXPIREAT"
            | b"EXPIREAT"
            | b"ZADD"
            | b"ZREM"
            | b"ZREMRANGEBYSCORE"
            | b"FLUSHALL"
            | b"FLUSHDB"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> NodeTime {
        NodeTime { ms, us: ms * 1000 }
    }

    fn run(db: &mut Db, args: &[&str], now: i64) -> Frame {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        db.execute(&args, at(now)).expect("a data command").0
    }

    #[test]
    fn set_nx_px_expires_on_the_node_clock() {
        let mut db = Db::default();
        assert_eq!(
            run(&mut db, &["SET", "k", "a", "NX", "PX", "100"], 1_000),
            ok()
        );
        assert_eq!(
            run(&mut db, &["SET", "k", "b", "NX", "PX", "100"], 1_050),
            Frame::Null
        );
        assert_eq!(run(&mut db, &["PTTL", "k"], 1_050), Frame::Integer(50));
        assert_eq!(run(&mut db, &["GET", "k"], 1_099), bulk(b"a"));
        assert_eq!(
            run(&mut db, &["GET", "k"], 1_100),
            Frame::Null,
            "gone at the deadline"
        );
        assert_eq!(run(&mut db, &["PTTL", "k"], 1_100), Frame::Integer(-2));
        assert_eq!(
            run(&mut db, &["SET", "k", "b", "NX", "PX", "100"], 1_100),
            ok()
        );
    }

    #[test]
    fn set_ifeq_sets_only_over_an_equal_string() {
        let mut db = Db::default();
        let renew = ["SET", "k", "a", "IFEQ", "a", "PX", "500"];
        assert_eq!(run(&mut db, &renew, 0), Frame::Null, "no key: nothing set");
        assert_eq!(run(&mut db, &["EXISTS", "k"], 0), Frame::Integer(0));
        run(&mut db, &["SET", "k", "a", "PX", "100"], 0);
        assert_eq!(run(&mut db, &renew, 50), ok());
        assert_eq!(run(&mut db, &["PTTL", "k"], 50), Frame::Integer(500));
        let theirs = ["SET", "k", "b", "IFEQ", "b", "PX", "900"];
        assert_eq!(run(&mut db, &theirs, 60), Frame::Null);
        assert_eq!(run(&mut db, &["GET", "k"], 60), bulk(b"a"));
        assert_eq!(run(&mut db, &["PTTL", "k"], 60), Frame::Integer(490));
        assert_eq!(
            run(&mut db, &["SET", "k", "c", "IFEQ", "a", "GET"], 70),
            bulk(b"a")
        );
        assert_eq!(run(&mut db, &["PTTL", "k"], 70), Frame::Integer(-1));
        assert_eq!(run(&mut db, &renew, 600), Frame::Null, "c is not a");
        run(&mut db, &["LPUSH", "l", "x"], 0);
        assert_eq!(
            run(&mut db, &["SET", "l", "a", "IFEQ", "a"], 0),
            error(WRONGTYPE)
        );
        for bad in [
            &["SET", "k", "a", "IFEQ"][..],
            &["SET", "k", "a", "IFEQ", "a", "NX"],
            &["SET", "k", "a", "XX", "IFEQ", "a"],
            &["SET", "k", "a", "IFEQ", "a", "IFEQ", "a"],
        ] {
            assert_eq!(run(&mut db, bad, 0), error("ERR syntax error"), "{bad:?}");
        }
    }

    #[test]
    fn wrong_types_and_bad_arguments_are_errors() {
        let mut db = Db::default();
        run(&mut db, &["LPUSH", "l", "x"], 0);
        assert_eq!(run(&mut db, &["GET", "l"], 0), error(WRONGTYPE));
        assert_eq!(
            run(&mut db, &["SET", "k", "v", "PX", "soon"], 0),
            error("ERR value is not an integer or out of range")
        );
        assert_eq!(
            run(&mut db, &["SET", "k", "v", "BOGUS"], 0),
            error("ERR syntax error")
        );
        assert!(matches!(run(&mut db, &["GET"], 0), Frame::Error(_)));
        run(&mut db, &["SET", "s", "abc"], 0);
        assert!(matches!(run(&mut db, &["INCR", "s"], 0), Frame::Error(_)));
        for huge in [
            &["SET", "k", "v", "EX", "9223372036854775807"][..],
            &["SET", "k", "v", "PX", "9223372036854775807"],
            &["PEXPIRE", "s", "9223372036854775807"],
            &["EXPIRE", "s", "-9223372036854775808"],
        ] {
            assert!(
                matches!(run(&mut db, huge, 1_000), Frame::Error(e) if e.starts_with("ERR invalid expire time")),
                "{huge:?}"
            );
        }
    }

    #[test]
    fn volatile_ttl_eviction_takes_the_nearest_expiry_and_spares_persistent_keys() {
        let mut db = Db::default();
        run(&mut db, &["SET", "persistent", "p"], 0);
        run(&mut db, &["SET", "late", "l", "PX", "900"], 0);
        run(&mut db, &["SET", "soon", "s", "PX", "300"], 0);
        run(&mut db, &["SET", "expired", "e", "PX", "50"], 0);
        let evicted = db.evict_volatile_ttl(at(100));
        assert_eq!(evicted, Some((b"soon".to_vec(), Value::Str(b"s".to_vec()))));
        let evicted = db.evict_volatile_ttl(at(100));
        assert_eq!(evicted, Some((b"late".to_vec(), Value::Str(b"l".to_vec()))));
        assert_eq!(
            db.evict_volatile_ttl(at(100)),
            None,
            "only persistent keys left"
        );
        assert_eq!(run(&mut db, &["GET", "persistent"], 100), bulk(b"p"));
    }

    #[test]
    fn active_expiry_deletes_what_the_clock_passed_so_a_step_back_cannot_revive_it() {
        let mut db = Db::default();
        run(&mut db, &["SET", "k", "v", "PX", "100"], 0);
        run(&mut db, &["SET", "live", "v", "PX", "500"], 0);
        // Lazy expiry alone: the clock steps back and the key is live again.
        let mut lazy = db.clone();
        assert_eq!(run(&mut lazy, &["GET", "k"], 50), bulk(b"v"));
        assert_eq!(db.expire_due(at(200)), vec![b"k".to_vec()]);
        assert_eq!(run(&mut db, &["GET", "k"], 50), Frame::Null);
        assert_eq!(run(&mut db, &["GET", "live"], 50), bulk(b"v"));
    }

    #[test]
    fn snapshots_replay_into_an_equal_keyspace() {
        let mut db = Db::default();
        run(&mut db, &["SET", "a", "1", "PX", "500"], 0);
        run(&mut db, &["SET", "b", "2"], 0);
        run(&mut db, &["LPUSH", "l", "x", "y"], 0);
        run(&mut db, &["SET", "gone", "3", "PX", "5"], 0);
        let mut replica = Db::default();
        for effect in db.snapshot(at(10)) {
            replica.apply(&effect);
        }
        assert_eq!(run(&mut replica, &["GET", "a"], 10), bulk(b"1"));
        assert_eq!(run(&mut replica, &["PTTL", "a"], 10), Frame::Integer(490));
        assert_eq!(run(&mut replica, &["GET", "gone"], 10), Frame::Null);
        db.del(b"gone", at(10));
        assert_eq!(replica, db);
    }

    #[test]
    fn sorted_sets_replicate_and_snapshot_with_their_expiry() {
        let mut db = Db::default();
        let mut replica = Db::default();
        let mut effects = Vec::new();
        for command in [
            &["ZADD", "q", "2", "b", "1", "a", "3", "c"][..],
            &["PEXPIREAT", "q", "5000"],
            &["ZADD", "q", "XX", "9", "a"],
            &["ZREM", "q", "b"],
            &["ZREMRANGEBYSCORE", "q", "-inf", "(9"],
        ] {
            let args: Vec<Vec<u8>> = command.iter().map(|a| a.as_bytes().to_vec()).collect();
            effects.extend(db.execute(&args, at(0)).expect("a data command").1);
        }
        for effect in &effects {
            replica.apply(effect);
        }
        assert_eq!(replica, db);
        assert_eq!(
            run(&mut replica, &["ZRANGE", "q", "0", "-1", "WITHSCORES"], 0),
            Frame::Array(vec![bulk(b"a"), bulk(b"9")])
        );
        let mut synced = Db::default();
        for effect in db.snapshot(at(10)) {
            synced.apply(&effect);
        }
        assert_eq!(synced, db);
        assert_eq!(run(&mut synced, &["PTTL", "q"], 10), Frame::Integer(4990));
        assert_eq!(run(&mut db, &["ZREM", "q", "a"], 0), Frame::Integer(1));
        assert_eq!(
            run(&mut db, &["EXISTS", "q"], 0),
            Frame::Integer(0),
            "an emptied set is gone"
        );
    }

    #[test]
    fn scores_print_as_redis_prints_them() {
        for (score, text) in [
            (0.1, "0.10000000000000001"),
            (1e20, "1e+20"),
            (1.5e-7, "1.4999999999999999e-07"),
            (1_700_000_000_000_001.0, "1700000000000001"),
            (3.0, "3"),
            (-2.5, "-2.5"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(format_score(score), text);
        }
    }
}
