//! What the world does to a node's keyspace from outside its connections,
//! and what it reads from it: eviction under memory pressure, active
//! expiry, `MIGRATE` of a slot's keys, and the oracle's reads (a key's
//! value, ttl and true expiry). Each takes the true time and reads the
//! node's own clock; a primary replicates what it deletes or restores.

use std::time::Duration;

use lock_core::internal::cluster::slot_of;

use super::{
    db::{Effect, Value},
    node::{CLOCK_BASE_UNIX_MS, NodeHandle, Role},
};

impl NodeHandle {
    /// Memory pressure under a `volatile-*` eviction policy: evicts one key
    /// by `volatile-ttl` (see [`Db::evict_volatile_ttl`](super::db::Db::evict_volatile_ttl)) at true time
    /// `now`. A primary replicates the eviction as a `DEL`, as Redis does,
    /// so its replicas lose the key too. Returns the key and, for a string,
    /// its value.
    pub fn evict(&self, now: Duration) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
        let mut node = self.0.borrow_mut();
        let time = node.time_at(now);
        let (key, value) = node.db.evict_volatile_ttl(time)?;
        node.touch();
        if node.role == Role::Primary {
            node.propagate(vec![Effect::Del { key: key.clone() }]);
        }
        let value = match value {
            Value::Str(bytes) => Some(bytes),
            Value::List(_) | Value::ZSet(_) => None,
        };
        Some((key, value))
    }

    /// Redis's active expiry, run at true time `now`: deletes every key the
    /// node's clock has passed, and a primary replicates each deletion as a
    /// `DEL`. Redis does this in the background within about 100 ms of an
    /// expiry, as the node's cron does here (a primary's, every 100 ms);
    /// the world runs it before a backward clock step too, so that a key
    /// which expired does not come back to life when the clock reads an
    /// earlier time (lazy expiry alone would revive it).
    pub fn expire_due(&self, now: Duration) {
        let mut node = self.0.borrow_mut();
        let time = node.time_at(now);
        let due = node.db.expire_due(time);
        if due.is_empty() {
            return;
        }
        node.touch();
        if node.role == Role::Primary {
            node.propagate(due.into_iter().map(|key| Effect::Del { key }).collect());
        }
    }

    /// Whether `key` is live on this node at true time `now`.
    pub fn has_key(&self, key: &[u8], now: Duration) -> bool {
        let node = self.0.borrow();
        let time = node.time_at(now);
        node.db.exists(key, time)
    }

    /// How many live keys of `slot` the node holds at true time `now`.
    pub fn keys_in_slot(&self, slot: u16, now: Duration) -> usize {
        let node = self.0.borrow();
        let time = node.time_at(now);
        node.db.count_in_slot(slot, time)
    }

    /// `MIGRATE` of the first live key of `slot` (in key order) from this
    /// node to `target` at true time `now`; returns the key moved, `None`
    /// when the slot has no live key here.
    pub fn migrate_one(&self, slot: u16, target: &Self, now: Duration) -> Option<Vec<u8>> {
        let key = {
            let source = self.0.borrow();
            let time = source.time_at(now);
            source.db.first_key_in_slot(slot, time)?
        };
        self.migrate(&key, target, now).then_some(key)
    }

    /// `MIGRATE` of `key` from this node to `target` at true time `now`:
    /// the target restores it with the ttl it had left (on the target's
    /// clock, as `RESTORE` does), then this node deletes it; each
    /// replicates its side. False when the key is not live here (Redis
    /// answers `NOKEY`).
    pub fn migrate(&self, key: &[u8], target: &Self, now: Duration) -> bool {
        let (value, pttl) = {
            let mut source = self.0.borrow_mut();
            let time = source.time_at(now);
            let Some((value, pttl)) = source.db.dump(key, time) else {
                return false;
            };
            source.db.del(key, time);
            source.touch();
            if source.role == Role::Primary {
                source.propagate(vec![Effect::Del { key: key.to_vec() }]);
            }
            (value, pttl)
        };
        let mut destination = target.0.borrow_mut();
        let time = destination.time_at(now);
        let effects = destination
            .db
            .restore(key, value, pttl.map(|ms| time.ms + ms));
        destination.touch();
        if destination.role == Role::Primary {
            destination.propagate(effects);
        }
        true
    }

    /// An atomic slot migration's snapshot: `target` loads every live key
    /// of `slot` this node holds at true time `now`, with its absolute
    /// expiry (Valkey sends the slot as an AOF rewrite, expiries as
    /// `PEXPIREAT`, read on the target's clock as a replica reads them),
    /// and replicates what it loaded to its own replicas.
    pub fn copy_slot(&self, slot: u16, target: &Self, now: Duration) {
        let effects: Vec<Effect> = {
            let source = self.0.borrow();
            let time = source.time_at(now);
            source
                .db
                .snapshot(time)
                .into_iter()
                .filter(|effect| effect.key().is_some_and(|key| slot_of(key) == slot))
                .collect()
        };
        let mut destination = target.0.borrow_mut();
        for effect in &effects {
            destination.db.apply(effect);
        }
        destination.touch();
        if destination.role == Role::Primary {
            destination.propagate(effects);
        }
    }

    /// Deletes every key of `slot` (a node that no longer owns the slot
    /// drops its keys; a primary replicates each deletion). Returns the
    /// keys, in key order.
    pub fn drop_slot(&self, slot: u16, now: Duration) -> Vec<Vec<u8>> {
        let mut node = self.0.borrow_mut();
        let time = node.time_at(now);
        let mut keys = Vec::new();
        while let Some(key) = node.db.first_key_in_slot(slot, time) {
            node.db.del(&key, time);
            keys.push(key);
        }
        node.touch();
        if node.role == Role::Primary && !keys.is_empty() {
            let effects = keys
                .iter()
                .map(|key| Effect::Del { key: key.clone() })
                .collect();
            node.propagate(effects);
        }
        keys
    }

    /// The oracle: the string at `key` and its remaining ttl (ms) on the
    /// node's own clock at true time `now`, if the key is live.
    pub fn peek(&self, key: &str, now: Duration) -> Option<(String, Option<u64>)> {
        let node = self.0.borrow();
        let time = node.time_at(now);
        let value = node.db.get(key.as_bytes(), time).ok().flatten()?;
        let pttl = node.db.pttl(key.as_bytes(), time);
        Some((
            String::from_utf8_lossy(value).into_owned(),
            u64::try_from(pttl).ok(),
        ))
    }

    /// The true time at which `key`, live at true time `now`, expires on
    /// this node's clock (as its clock runs at `now`), if it has an expiry.
    pub fn expires_at_true(&self, key: &str, now: Duration) -> Option<Duration> {
        let node = self.0.borrow();
        let time = node.time_at(now);
        let pttl = node.db.pttl(key.as_bytes(), time);
        if pttl < 0 {
            return None;
        }
        let at_ms = time.ms + pttl;
        let local_ns = i128::from(at_ms - CLOCK_BASE_UNIX_MS) * 1_000_000;
        Some(node.clock.true_time_of(local_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_primary_replicates_an_eviction_as_a_del() {
        let primary = NodeHandle::for_tests(None);
        let (link, mut stream) = tokio::sync::mpsc::unbounded_channel();
        primary.0.borrow_mut().streams.insert(1, link);
        primary.set_for_tests("lock", "owner", Some(1_000));
        primary.set_for_tests("counter", "7", None);
        assert_eq!(
            primary.evict(Duration::from_millis(10)),
            Some((b"lock".to_vec(), Some(b"owner".to_vec())))
        );
        assert_eq!(
            stream.try_recv().ok(),
            Some((
                1,
                vec![Effect::Del {
                    key: b"lock".to_vec()
                }]
            ))
        );
        assert_eq!(primary.evict(Duration::from_millis(10)), None);
        assert!(primary.peek("counter", Duration::from_millis(10)).is_some());
    }

    #[test]
    fn a_replica_evicts_alone() {
        let replica = NodeHandle::for_tests(Some("redis-1"));
        replica.set_for_tests("lock", "owner", Some(1_000));
        assert!(replica.evict(Duration::ZERO).is_some());
        assert_eq!(replica.offset(), 0, "nothing streamed, nothing counted");
    }

    #[test]
    fn active_expiry_before_a_step_back_replicates_its_deletions() {
        let primary = NodeHandle::for_tests(None);
        let (link, mut stream) = tokio::sync::mpsc::unbounded_channel();
        primary.0.borrow_mut().streams.insert(1, link);
        primary.set_for_tests("gone", "v", Some(100));
        primary.set_for_tests("live", "v", Some(1_000));
        primary.expire_due(Duration::from_millis(200));
        let (_, effects) = stream.try_recv().expect("a DEL streamed");
        assert_eq!(
            effects,
            vec![Effect::Del {
                key: b"gone".to_vec()
            }]
        );
        primary
            .clock()
            .jump(Duration::from_millis(200), -150_000_000);
        assert!(primary.peek("gone", Duration::from_millis(200)).is_none());
        assert!(primary.peek("live", Duration::from_millis(200)).is_some());
    }
}
