//! One-shot commands the controller sends a node: who owns the lock key,
//! re-pointing a replica, the cluster's owner of the key's slot, a busy
//! script, an eviction under memory pressure.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use crate::chaos::deploy::{Deployment, admin};

/// The lock key in Redis (as the adapter names it).
pub(in crate::chaos) fn lock_key() -> String {
    crate::client::key_names().lock
}

/// The planted bug `fence-counter-reset`: every 200 ms, `DEL` of the
/// namespace's fence counter on each node of `ports` (a replica's
/// `READONLY` and a cluster node's `MOVED` are ignored: the primary that
/// holds it deletes it). Runs until aborted.
pub(super) async fn reset_fence_counter(ports: Vec<u16>) {
    let counter = crate::client::key_names().counter.to_string();
    let mut conns = vec![None; ports.len()];
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        for (&port, conn) in ports.iter().zip(&mut conns) {
            if conn.is_none() {
                *conn = admin(port).await.ok();
            }
            if let Some(conn) = conn {
                let _: redis::RedisResult<redis::Value> =
                    redis::cmd("DEL").arg(&counter).query_async(conn).await;
            }
        }
    }
}

/// Whether node `port` took `REPLICAOF 127.0.0.1 primary`.
pub(super) async fn replica_of(port: u16, primary: u16) -> bool {
    let Ok(mut conn) = admin(port).await else {
        return false;
    };
    redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary)
        .query_async::<redis::Value>(&mut conn)
        .await
        .is_ok()
}

/// The port of the primary owning the lock key's slot, and its replicas'
/// ports, from `CLUSTER NODES` of the first node that answers.
pub(super) async fn cluster_owner(deployment: &Deployment) -> Option<(u16, Vec<u16>)> {
    let slot = lock_core::internal::cluster::slot_of(lock_key());
    crate::chaos::migrate::slot_owner(deployment, slot).await
}

/// The lock key's owner on the node at `port` now (`None` if absent or
/// the node does not answer).
pub(super) async fn key_owner(port: u16) -> Option<String> {
    let mut conn = admin(port).await.ok()?;
    redis::cmd("GET")
        .arg(lock_key())
        .query_async::<Option<String>>(&mut conn)
        .await
        .ok()
        .flatten()
}

/// The busy scripts the controller has sent and not yet had answered, by
/// node (client port): while one is outstanding on a node that answered
/// `BUSY`, its script still runs (the reply comes once it ends), however
/// seldom the node answers anyone else meanwhile.
#[derive(Debug, Clone, Default)]
pub(super) struct Scripts(Arc<Mutex<BTreeMap<u16, usize>>>);

impl Scripts {
    /// Whether a busy script sent to node `port` is not answered yet.
    pub(super) fn outstanding(&self, port: u16) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&port)
    }

    fn sent(&self, port: u16) {
        *self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(port)
            .or_default() += 1;
    }

    fn answered(&self, port: u16) {
        let mut scripts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = scripts.get_mut(&port) {
            *count -= 1;
            if *count == 0 {
                scripts.remove(&port);
            }
        }
    }
}

/// Makes the node on `port` answer BUSY for `duration` of true time: a
/// script that spins until then (Redis answers BUSY to others once it has
/// run for `busy-reply-threshold`). The script reads the server's wall
/// clock (`TIME`), which a server clock fault shifts: it counts the steps
/// between its readings, each at most [`BUSY_STEP`] and never back, so
/// that a jump neither ends it early nor stretches it (a node whose clock
/// stepped back 2 s spun 2 s past its end, longer than the simulator's
/// node was busy, and a clock fault on it showed no evidence before the
/// run's end: mix-redlock-unsafe seed 9).
/// The script is outstanding in `scripts` from its send to its reply.
pub(super) async fn busy(port: u16, duration: Duration, scripts: Scripts) {
    let Ok(mut conn) = admin(port).await else {
        return;
    };
    let script = "local function now() \
          local t = redis.call('TIME') \
          return tonumber(t[1]) * 1000000 + tonumber(t[2]) \
        end \
        local left = tonumber(ARGV[1]) \
        local cap = tonumber(ARGV[2]) \
        local last = now() \
        while left > 0 do \
          local n = now() \
          local step = n - last \
          if step < 0 then step = 0 elseif step > cap then step = cap end \
          left = left - step \
          last = n \
        end \
        return 1";
    scripts.sent(port);
    let _: redis::RedisResult<redis::Value> = redis::cmd("EVAL")
        .arg(script)
        .arg(0)
        .arg(duration.as_micros() as u64)
        .arg(BUSY_STEP.as_micros() as u64)
        .query_async(&mut conn)
        .await;
    scripts.answered(port);
}

/// The most true time one step of the busy script counts between two
/// readings of its clock: its loop reads `TIME` every microsecond or so,
/// so a longer step is a clock fault's jump, or the process descheduled
/// (whose time beyond this is not counted: the script runs that much
/// longer).
const BUSY_STEP: Duration = Duration::from_millis(10);

/// Evicts under memory pressure: `maxmemory` just above what is used,
/// `volatile-ttl` (the key nearest expiry goes first: the lock's), and
/// filler keys with long ttls until the lock key is gone. Returns the
/// lock key and its value if it was evicted.
pub(super) async fn evict(port: u16) -> Option<(String, Option<String>)> {
    let mut conn = admin(port).await.ok()?;
    let key = lock_key();
    let value: Option<String> = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .ok()?;
    let value = value?;
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await
        .ok()?;
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())?;
    let _: redis::RedisResult<()> = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("volatile-ttl")
        .arg("maxmemory")
        .arg(used + 64 * 1024)
        .query_async(&mut conn)
        .await;
    let filler = "x".repeat(4096);
    let mut evicted = false;
    for n in 0..200 {
        let _: redis::RedisResult<()> = redis::cmd("SET")
            .arg(format!("chaos-filler-{n}"))
            .arg(&filler)
            .arg("EX")
            .arg(3600)
            .query_async(&mut conn)
            .await;
        let now: Option<String> = redis::cmd("GET")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .ok()?;
        if now.as_deref() != Some(value.as_str()) {
            evicted = now.is_none();
            break;
        }
    }
    let _: redis::RedisResult<()> = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(0)
        .query_async(&mut conn)
        .await;
    let fillers: Vec<String> = (0..200).map(|n| format!("chaos-filler-{n}")).collect();
    let _: redis::RedisResult<()> = redis::cmd("DEL").arg(&fillers).query_async(&mut conn).await;
    evicted.then_some((key, Some(value)))
}

/// Whether the node on `port` answers `ROLE` as a primary.
pub(super) async fn is_master(port: u16) -> bool {
    let Ok(mut conn) = admin(port).await else {
        return false;
    };
    let role = tokio::time::timeout(
        Duration::from_millis(200),
        redis::cmd("ROLE").query_async::<redis::Value>(&mut conn),
    )
    .await;
    matches!(role, Ok(Ok(redis::Value::Array(items)))
        if matches!(items.first(), Some(redis::Value::BulkString(b)) if b == b"master"))
}

/// Waits up to `within` for the node on `port` to answer `ROLE` as a
/// primary (a takeover's promotion is asynchronous); whether it did.
pub(super) async fn until_master(port: u16, within: Duration) -> bool {
    let until = tokio::time::Instant::now() + within;
    loop {
        if is_master(port).await {
            return true;
        }
        if tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
