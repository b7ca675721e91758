//! Redis Cluster routing: each lock's commands go to the primary that owns
//! its slot, over one multiplexed connection per node.
//!
//! The lock key and its channel share a hash tag, and the namespace's fence
//! floor and counter have one key per slot ([`floor_key`], [`counter_key`]),
//! so every command of a lock touches one slot. The router keeps the slot table
//! (read with `CLUSTER SHARDS`, or `CLUSTER SLOTS` on older servers) and
//! the connections; a command that meets `MOVED` updates the table and goes
//! to the new owner, `ASK` sends it once to the migration's target behind
//! `ASKING`, and `TRYAGAIN` (a migration splits a multi-key call) retries
//! after a short fixed delay. All of it happens inside the call, so the
//! lock machine's command timeout bounds it; the machine only ever sees
//! the final reply, and a renewal that never got one never extends the
//! lock.
//!
//! This is the adapter's own routing rather than redis-rs's cluster
//! client: that one retries with jitter the simulator cannot seed, waits at
//! least 1.28 s on `TRYAGAIN`, and sends `WAIT` to every primary, where the
//! lock needs it on its own shard only.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, OnceLock, PoisonError},
    time::Duration,
};

use futures_util::task::AtomicWaker;
use redis::{RedisConnectionInfo, Value};
use tokio::sync::Notify;

use crate::Failure;
use crate::adapter::connect::{
    attempts::{ATTEMPT_DELAY, in_turn},
    connector::{ConnectFuture, Connector},
    dial::{Dialer, NodeAddress},
    error::ConnectError,
    node::{Endpoint, Live, NodeSlot},
    slots::{Redirect, RedirectKind, SLOTS, SlotMap, slot_of},
};

/// Redirections one command follows before it gives up.
pub(crate) const MAX_REDIRECTS: u32 = 5;

/// How long to wait before retrying after `TRYAGAIN` (a fixed schedule,
/// so retries replay exactly).
pub(crate) fn try_again_delay(attempt: u32) -> Duration {
    Duration::from_millis(5).saturating_mul(1 << attempt.min(4))
}

/// How often the slot table is read again even if nothing asked for it.
pub(crate) const REFRESH_EVERY: Duration = Duration::from_secs(10);

/// How soon after one refresh another may start.
pub(crate) const REFRESH_AT_MOST_EVERY: Duration = Duration::from_millis(100);

/// Dials one address.
pub(crate) struct DialerConnector {
    pub(crate) dialer: Arc<dyn Dialer>,
    pub(crate) address: NodeAddress,
}

impl Connector for DialerConnector {
    fn connect(&self) -> ConnectFuture<'_> {
        self.dialer.dial(&self.address.host, self.address.port)
    }
}

/// One cluster node the locker talks to.
pub(crate) struct ClusterNode {
    pub(crate) address: NodeAddress,
    pub(crate) slot: NodeSlot,
    pub(crate) endpoint: Endpoint,
}

#[derive(Default)]
pub(crate) struct Table {
    /// Slot → the address of its primary, as last learned.
    pub(crate) owners: Vec<Option<NodeAddress>>,
    pub(crate) nodes: BTreeMap<NodeAddress, Arc<ClusterNode>>,
    /// Someone asked for the table to be read again.
    pub(crate) refresh_wanted: bool,
    /// Connection attempts that failed in a row, per node (from the driver).
    pub(crate) failures: BTreeMap<NodeAddress, u32>,
}

/// The slot table and the connections, shared by callers and the driver.
pub(crate) struct ClusterRouter {
    pub(crate) dialer: Arc<dyn Dialer>,
    pub(crate) redis: RedisConnectionInfo,
    pub(crate) seeds: Vec<NodeAddress>,
    pub(crate) tls: bool,
    pub(crate) table: Mutex<Table>,
    /// Woken when a connection opens or fails, or the table changes.
    pub(crate) changed: Notify,
    /// The driver, to open connections and read the table.
    pub(crate) driver: AtomicWaker,
}

impl ClusterRouter {
    pub(crate) fn new(
        dialer: Arc<dyn Dialer>,
        redis: RedisConnectionInfo,
        seeds: Vec<NodeAddress>,
        tls: bool,
    ) -> Self {
        Self {
            dialer,
            redis,
            seeds,
            tls,
            table: Mutex::new(Table {
                owners: vec![None; usize::from(SLOTS)],
                ..Table::default()
            }),
            changed: Notify::new(),
            driver: AtomicWaker::new(),
        }
    }

    pub(crate) fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Installs a freshly read slot map: every primary gets a node (and a
    /// connection, which the driver opens).
    pub(crate) fn install(&self, map: &SlotMap) {
        let mut table = self.table();
        for (first, last, shard) in map.ranges() {
            for slot in first..=last {
                table.owners[usize::from(slot)] = Some(shard.primary.address.clone());
            }
            let address = shard.primary.address.clone();
            self.ensure_node(&mut table, address);
        }
        drop(table);
        self.changed.notify_waiters();
        self.driver.wake();
    }

    fn ensure_node(&self, table: &mut Table, address: NodeAddress) -> Arc<ClusterNode> {
        Arc::clone(table.nodes.entry(address.clone()).or_insert_with(|| {
            Arc::new(ClusterNode {
                endpoint: Endpoint {
                    connector: Arc::new(DialerConnector {
                        dialer: Arc::clone(&self.dialer),
                        address: address.clone(),
                    }),
                    redis: self.redis.clone(),
                },
                slot: NodeSlot::new(),
                address,
            })
        }))
    }

    /// The primaries that own slots, as last learned: each once, by
    /// address, with its endpoint.
    pub(crate) fn primaries(&self) -> Vec<(NodeAddress, Endpoint)> {
        let table = self.table();
        let owners: std::collections::BTreeSet<&NodeAddress> =
            table.owners.iter().flatten().collect();
        owners
            .into_iter()
            .filter_map(|address| {
                let node = table.nodes.get(address)?;
                Some((address.clone(), node.endpoint.clone()))
            })
            .collect()
    }

    /// The primary `slot` belongs to, as last learned.
    pub(crate) fn owner(&self, slot: u16) -> Option<NodeAddress> {
        self.table()
            .owners
            .get(usize::from(slot))
            .cloned()
            .flatten()
    }

    /// Records a `MOVED`: `slot` belongs to `to` now.
    pub(crate) fn learn(&self, slot: u16, to: NodeAddress) {
        let mut table = self.table();
        if let Some(owner) = table.owners.get_mut(usize::from(slot)) {
            *owner = Some(to.clone());
        }
        self.ensure_node(&mut table, to);
        table.refresh_wanted = true;
        drop(table);
        self.driver.wake();
    }

    /// Asks the driver to read the slot table again.
    pub(crate) fn request_refresh(&self) {
        self.table().refresh_wanted = true;
        self.driver.wake();
    }

    /// Drops the connection to `address` if it is still `generation`.
    pub(crate) fn break_connection(&self, address: &NodeAddress, generation: u64) {
        let node = self.table().nodes.get(address).cloned();
        if let Some(node) = node
            && node.slot.break_generation(generation)
        {
            tracing::debug!(%address, generation, "dropping the connection");
            self.driver.wake();
        }
    }

    /// The connection to `address`, waiting for the driver to open it.
    /// Fails as a connection failure once an attempt to open it failed.
    pub(crate) async fn connection(&self, address: &NodeAddress) -> Result<Live, Failure> {
        loop {
            let notified = self.changed.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let (node, failed) = {
                let mut table = self.table();
                let node = self.ensure_node(&mut table, address.clone());
                let failed = table.failures.get(address).copied().unwrap_or(0) > 0;
                (node, failed)
            };
            if let Some(live) = node.slot.live() {
                return Ok(live);
            }
            if failed {
                return Err(Failure::Connection);
            }
            self.driver.wake();
            notified.await;
        }
    }

    /// Waits until the table or a connection changes.
    pub(crate) async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Any node to talk to for things every node answers (the slot table,
    /// pub/sub): a connected node if there is one, else a seed.
    pub(crate) fn any_node(&self) -> (Option<Live>, Vec<NodeAddress>) {
        let table = self.table();
        let live = table.nodes.values().find_map(|node| node.slot.live());
        let mut addresses: Vec<NodeAddress> = table.nodes.keys().cloned().collect();
        addresses.extend(self.seeds.iter().cloned());
        (live, addresses)
    }
}

/// Reads the slot table from `conn`: `CLUSTER SHARDS`, or `CLUSTER SLOTS`
/// on servers that do not know it.
pub(crate) async fn read_map(
    conn: &mut redis::aio::MultiplexedConnection,
    origin: &str,
    tls: bool,
) -> Result<SlotMap, String> {
    let shards = redis::cmd("CLUSTER")
        .arg("SHARDS")
        .query_async::<Value>(conn)
        .await;
    match shards {
        Ok(reply) => SlotMap::from_cluster_shards(&reply, origin, tls).map_err(|e| e.to_string()),
        Err(error) if SlotMap::shards_unsupported(&error) => {
            let reply = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query_async::<Value>(conn)
                .await
                .map_err(|error| error.to_string())?;
            SlotMap::from_cluster_slots(&reply, origin).map_err(|e| e.to_string())
        }
        Err(error) => Err(error.to_string()),
    }
}

/// Reads the slot table from the first of `candidates` that answers, on a
/// short connection of its own, each bounded by `timeout`.
///
/// They are asked in order: a candidate that fails is followed by the next
/// at once, and one that has not answered within 250 ms gets the next asked
/// beside it, so a silent seed node costs that delay, not the timeout,
/// while another answers.
pub(crate) async fn fetch_map(
    dialer: &dyn Dialer,
    redis: &RedisConnectionInfo,
    candidates: &[NodeAddress],
    tls: bool,
    timeout: Duration,
) -> Result<SlotMap, ConnectError> {
    let ask = |index: usize| {
        let address: &NodeAddress = &candidates[index];
        let attempt = async move {
            let stream = dialer
                .dial(&address.host, address.port)
                .await
                .map_err(|error| error.to_string())?;
            let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
            let (mut conn, task) =
                redis::aio::MultiplexedConnection::new_with_config(redis, stream, config)
                    .await
                    .map_err(|error| error.to_string())?;
            // redis-rs's connection task runs beside the command here.
            let task = std::pin::pin!(task);
            tokio::select! {
                map = read_map(&mut conn, &address.host, tls) => map,
                () = task => Err("the connection closed".to_owned()),
            }
        };
        async move {
            match tokio::time::timeout(timeout, attempt).await {
                Ok(Ok(map)) if !map.shards().is_empty() => Ok(map),
                Ok(Ok(_)) => Err(format!("{address}: the slot table is empty")),
                Ok(Err(error)) => Err(format!("{address}: {error}")),
                Err(_) => Err(format!("{address}: no answer within {timeout:?}")),
            }
        }
    };
    in_turn(ATTEMPT_DELAY, candidates.len(), ask)
        .await
        .map_err(|failures| {
            let last = failures.last().map_or("no seed node given", String::as_str);
            ConnectError::Cluster(format!("no node gave the slot table (last: {last})"))
        })
}

/// Opens streams to any node of the cluster (for the pub/sub connection:
/// every node hears every `PUBLISH`).
pub(crate) struct AnyNodeConnector {
    pub(crate) router: Arc<ClusterRouter>,
}

impl Connector for AnyNodeConnector {
    fn connect(&self) -> ConnectFuture<'_> {
        Box::pin(async move {
            let (_, candidates) = self.router.any_node();
            let mut last = std::io::Error::other("no cluster node known");
            for address in candidates {
                match self.router.dialer.dial(&address.host, address.port).await {
                    Ok(stream) => return Ok(stream),
                    Err(error) => last = error,
                }
            }
            Err(last)
        })
    }
}

/// A redirection read from an error, if it is one.
pub(crate) fn redirect_of(error: &redis::RedisError, origin: &NodeAddress) -> Option<Redirect> {
    Redirect::from_error(error, &origin.host)
}

/// Whether a redirection moves the slot (update the table) or asks once.
pub(crate) fn is_moved(redirect: &Redirect) -> bool {
    redirect.kind == RedirectKind::Moved
}

/// The counter key of [`Fencing::Counter`](crate::Fencing::Counter) in a
/// cluster: one per namespace and slot, in the slot of the lock it serves,
/// so the acquire's script touches one slot. At most 16384 keys per
/// namespace, whatever the number of lock names.
pub(crate) fn counter_key(namespace: &str, lock_key: &str) -> String {
    per_slot_key(namespace, "fence-counter", lock_key)
}

/// The time-mixed fence floor in a cluster: one per namespace and slot, in
/// the slot of the lock it serves, as [`counter_key`] is.
pub(crate) fn floor_key(namespace: &str, lock_key: &str) -> String {
    per_slot_key(namespace, "fence-floor", lock_key)
}

/// `{namespace:what:n}`, with the n that puts it in `lock_key`'s slot.
fn per_slot_key(namespace: &str, what: &'static str, lock_key: &str) -> String {
    let slot = slot_of(lock_key);
    let suffix = suffixes(namespace, what)[usize::from(slot)];
    format!("{{{namespace}:{what}:{suffix}}}")
}

/// For each slot, the smallest n such that `{namespace:what:n}` hashes to
/// it; computed once per namespace and `what`.
fn suffixes(namespace: &str, what: &'static str) -> Arc<Vec<u32>> {
    type Tables = BTreeMap<(String, &'static str), Arc<Vec<u32>>>;
    static TABLES: OnceLock<Mutex<Tables>> = OnceLock::new();
    let tables = TABLES.get_or_init(Mutex::default);
    let id = (namespace.to_owned(), what);
    if let Some(table) = tables
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&id)
    {
        return Arc::clone(table);
    }
    let mut suffixes = vec![u32::MAX; usize::from(SLOTS)];
    let mut missing = usize::from(SLOTS);
    let mut n: u32 = 0;
    while missing > 0 {
        let slot = usize::from(slot_of(format!("{namespace}:{what}:{n}")));
        if suffixes[slot] == u32::MAX {
            suffixes[slot] = n;
            missing -= 1;
        }
        n += 1;
    }
    let table = Arc::new(suffixes);
    tables
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id, Arc::clone(&table));
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_and_floor_keys_share_their_locks_slot() {
        for key in ["{lock:orders:1}", "{lock:orders:2}", "{lock:x}", "{lock:}"] {
            let counter = counter_key("lock", key);
            assert_eq!(slot_of(&counter), slot_of(key), "{counter} for {key}");
            let floor = floor_key("lock", key);
            assert_eq!(slot_of(&floor), slot_of(key), "{floor} for {key}");
            assert_ne!(floor, counter);
        }
        // One of each per slot: two locks of one slot share them.
        assert_eq!(counter_key("lock", "{a}x"), counter_key("lock", "{a}y"));
        assert_eq!(floor_key("lock", "{a}x"), floor_key("lock", "{a}y"));
    }

    #[test]
    fn try_again_backs_off_on_a_fixed_schedule() {
        assert_eq!(try_again_delay(0), Duration::from_millis(5));
        assert_eq!(try_again_delay(3), Duration::from_millis(40));
        assert_eq!(try_again_delay(9), Duration::from_millis(80));
    }
}
