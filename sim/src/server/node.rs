//! A simulated Redis node's state: its configuration, its role, its
//! keyspace and replication offsets, and the [`NodeHandle`] the world and
//! the node's tasks share.
//!
//! The state is private to the `server` module: its siblings (connections,
//! replication, the cluster bus) change it through the fields and
//! transitions they are given here (`pub(super)`), and the world only
//! through the handle's methods. This file imports none of its siblings
//! that run the node ([`conn`](super::conn),
//! [`replication`](super::replication), [`bus`](super::bus)): they import
//! it, never the other way round.

use std::{
    cell::RefCell,
    collections::{BTreeMap, BTreeSet},
    rc::{Rc, Weak},
    time::Duration,
};

use lock_core::internal::cluster::slot_of;
use tokio::sync::{Notify, mpsc::UnboundedSender};

use super::{
    cluster::ClusterHandle,
    cmd::pubsub::Subscribers,
    db::{Db, Effect, NodeTime},
    flavour::Flavour,
};
use crate::{clock::ClockControl, config::DurationRange, rng::Rng};

/// The port every node listens on.
pub const PORT: u16 = 6379;

/// Unix time (ms) at which every node's clock reads local zero: 2026-01-01.
pub const CLOCK_BASE_UNIX_MS: i64 = 1_767_225_600_000;

/// How a node starts.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Its index (`redis-N`).
    pub index: usize,
    /// The primary it replicates, if it starts as a replica.
    pub replica_of: Option<String>,
    /// The delay before a replica applies each write.
    pub replication_lag: Option<DurationRange>,
    /// The seed of its lag draws.
    pub seed: u64,
    /// The server it presents as (its `INFO server`, and the commands it
    /// knows beyond Redis 7's).
    pub flavour: Flavour,
    /// What it writes to disk: what a restart keeps.
    pub persistence: crate::config::Persistence,
}

impl NodeConfig {
    /// `redis-0`, a primary on its own (no replica of anything, no lag),
    /// seeded with 1: the node the tests that drive one node use.
    pub fn standalone(flavour: Flavour, persistence: crate::config::Persistence) -> Self {
        Self {
            index: 0,
            replica_of: None,
            replication_lag: None,
            seed: 1,
            flavour,
            persistence,
        }
    }
}

/// A node's role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Accepts writes and streams them to replicas.
    Primary,
    /// Applies its primary's stream; refuses writes.
    Replica {
        /// The primary's host name.
        of: String,
    },
}

/// The node's state.
#[derive(Debug)]
pub struct Node {
    pub(super) index: usize,
    pub(super) clock: ClockControl,
    pub(super) role: Role,
    pub(super) db: Db,
    pub(super) scripts: BTreeSet<String>,
    pub(super) busy_until: Duration,
    /// Primary: writes produced so far. Replica: writes applied.
    pub(super) offset: u64,
    /// The history its offsets count in (Redis's replication ID): a
    /// primary's own, or, on a replica, the one it last synced from.
    pub(super) replid: u64,
    /// The history it continued when it was promoted, and the offset up
    /// to which it shares it (Redis's `replid2`, `second_replid_offset`):
    /// a replica of that history up to there resyncs partially.
    pub(super) replid2: Option<(u64, u64)>,
    /// How many histories it began (a promotion, a restart), for the next
    /// [`replid`](Self::replid).
    pub(super) histories: u64,
    /// When its replication cron runs: at this phase of every
    /// [`REPLICATION_CRON`](super::flavour::REPLICATION_CRON) of true
    /// time (see [`Flavour::full_sync_waits_for_cron`]).
    pub(super) cron_phase: Duration,
    /// Whether the deployment's first sync is behind it (a primary's from
    /// the start): `sim chaos` starts a run's clients only once every
    /// replica's link is up, so that first sync waits for nothing here.
    pub(super) deployed: bool,
    /// Replica link id → offset it acknowledged.
    pub(super) acked: BTreeMap<u64, u64>,
    /// Replica link id → where its stream goes.
    pub(super) streams: BTreeMap<u64, UnboundedSender<(u64, Vec<Effect>)>>,
    /// Its connections' subscriptions.
    pub(super) subscribers: Subscribers,
    pub(super) next_id: u64,
    pub(super) lag: Option<DurationRange>,
    pub(super) rng: Rng,
    /// Wakes the replication loop when the world changes the role, so it
    /// need not poll the role every few milliseconds.
    pub(super) role_changed: Rc<Notify>,
    /// Wakes pending `WAIT`s when a replica acknowledges.
    pub(super) acks_changed: Rc<Notify>,
    /// Grants this node issued while its clock was behind the time-mixed
    /// fence floor (an observation for the reports; never reset).
    pub(super) grants_behind_floor: u64,
    /// Counts what may have changed the keyspace (commands, replicated
    /// writes, restarts): while it stands still, only time expires keys.
    /// Bump it with [`Node::touch`].
    pub(super) activity: u64,
    /// Wakes the expiry cron when the keyspace may have changed (a new or
    /// moved expiry, or a role change), so that it need only wake when a
    /// key falls due.
    pub(super) keyspace_changed: Rc<Notify>,
    /// A failover named another primary, but this one has not been
    /// demoted yet: it still acts as a primary for the clients connected
    /// to it (the stale window).
    pub(super) deposed: bool,
    /// What it acknowledged while deposed (observations for the reports;
    /// never reset).
    pub(super) deposed_acks: DeposedAcks,
    /// Bumped to close every client connection (a demotion: Sentinel's
    /// `CLIENT KILL` after `REPLICAOF`).
    pub(super) clients_generation: u64,
    /// Wakes the connections when `clients_generation` moves.
    pub(super) clients_killed: Rc<Notify>,
    /// The cluster it belongs to (Redis Cluster topology).
    pub(super) cluster: Option<ClusterHandle>,
    /// Every node of its cluster, by index (for the replication offsets
    /// `CLUSTER SHARDS` reports).
    pub(super) peers: Vec<Weak<RefCell<Self>>>,
    /// The redirections it answered (observations for the reports; never
    /// reset).
    pub(super) redirects: Redirects,
    /// Its end of the cluster bus (Redis Cluster), to relay `PUBLISH`.
    pub(super) bus: Option<Rc<turmoil::net::UdpSocket>>,
    /// Script calls that carried several operations (group commit; an
    /// observation for the reports, never reset).
    pub(super) batched_calls: u64,
    /// The server it presents as.
    pub(super) flavour: Flavour,
    /// What it writes to disk.
    pub(super) persistence: crate::config::Persistence,
    /// The keyspace as of the last AOF fsync (`aof-everysec`): what a
    /// restart comes back with.
    pub(super) fsynced_db: Db,
    /// The write offset `WAITAOF`'s local count reports: what the last
    /// fsync covered, or, on a flavour that
    /// [acknowledges unsynced writes](Flavour::acks_unsynced_aof), what
    /// it last acknowledged without one.
    pub(super) fsynced_offset: u64,
    /// `WAITAOF`s waiting for the local count (see `aof_cron`).
    pub(super) aof_waiters: u32,
    /// Wakes the waiting `WAITAOF`s after an fsync.
    pub(super) aof_synced: Rc<Notify>,
    /// `DELIFEQ` / `DELEX` calls that ran (an observation for the reports,
    /// never reset).
    pub(super) native_releases: u64,
    /// Client writes wait (an atomic slot migration's cut-over: Valkey's
    /// `pauseActions(PAUSE_DURING_SLOT_MIGRATION, …)`), to run once the
    /// pause ends, redirections checked again.
    pub(super) writes_paused: bool,
    /// Wakes the writes that wait when the pause ends.
    pub(super) writes_resumed: Rc<Notify>,
}

/// How many cluster redirections a node answered, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Redirects {
    /// `MOVED`.
    pub moved: u64,
    /// `ASK`.
    pub ask: u64,
    /// `TRYAGAIN`.
    pub try_again: u64,
    /// `CROSSSLOT`.
    pub cross_slot: u64,
    /// `CLUSTERDOWN`.
    pub cluster_down: u64,
}

/// What a deposed primary acknowledged in its stale window: writes that
/// the demotion's resync throws away.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeposedAcks {
    /// Lock grants.
    pub grants: u64,
    /// Lock renewals.
    pub renewals: u64,
    /// `WAIT`s answered with fewer replicas than asked for.
    pub short_waits: u64,
}

/// The world's and the host's shared handle on one node.
#[derive(Debug, Clone)]
pub struct NodeHandle(pub(super) Rc<RefCell<Node>>);

impl NodeHandle {
    /// A node, not yet serving (the world starts its host with [`serve`](super::serve)).
    pub fn new(config: NodeConfig) -> Self {
        let deployed = config.replica_of.is_none();
        Self(Rc::new(RefCell::new(Node {
            index: config.index,
            clock: ClockControl::default(),
            role: match config.replica_of {
                Some(of) => Role::Replica { of },
                None => Role::Primary,
            },
            db: Db::default(),
            scripts: BTreeSet::new(),
            busy_until: Duration::ZERO,
            offset: 0,
            replid: history_id(config.index, 0),
            replid2: None,
            histories: 0,
            // A stream of its own: the other draws stay where they were.
            cron_phase: Rng::fork(config.seed, 0x5CC0_C504).duration(DurationRange {
                min: Duration::ZERO,
                max: super::flavour::REPLICATION_CRON - Duration::from_micros(1),
            }),
            deployed,
            acked: BTreeMap::new(),
            streams: BTreeMap::new(),
            subscribers: Subscribers::default(),
            next_id: 0,
            lag: config.replication_lag,
            rng: Rng::new(config.seed),
            role_changed: Rc::default(),
            acks_changed: Rc::default(),
            grants_behind_floor: 0,
            activity: 0,
            keyspace_changed: Rc::default(),
            deposed: false,
            deposed_acks: DeposedAcks::default(),
            clients_generation: 0,
            clients_killed: Rc::default(),
            cluster: None,
            peers: Vec::new(),
            redirects: Redirects::default(),
            bus: None,
            batched_calls: 0,
            flavour: config.flavour,
            persistence: config.persistence,
            fsynced_db: Db::default(),
            fsynced_offset: 0,
            aof_waiters: 0,
            aof_synced: Rc::default(),
            native_releases: 0,
            writes_paused: false,
            writes_resumed: Rc::default(),
        })))
    }

    /// The node's clock, for drift and jump faults.
    pub fn clock(&self) -> ClockControl {
        self.0.borrow().clock.clone()
    }

    /// The node's index.
    pub fn index(&self) -> usize {
        self.0.borrow().index
    }

    /// The node's role now.
    pub fn role(&self) -> Role {
        self.0.borrow().role.clone()
    }

    /// How much the node did that may have changed its keyspace (a
    /// counter: equal readings mean nothing did in between).
    pub fn activity(&self) -> u64 {
        self.0.borrow().activity
    }

    /// The replication offset: writes produced (primary) or applied (replica).
    pub fn offset(&self) -> u64 {
        self.0.borrow().offset
    }

    /// Makes the node a primary: it stops replicating and accepts writes.
    pub fn promote(&self) {
        self.set_role(Role::Primary);
    }

    /// Makes the node a replica of `host` (it resyncs from it).
    pub fn replicate_from(&self, host: String) {
        self.set_role(Role::Replica { of: host });
    }

    /// Marks a primary that a failover replaced but left running: it
    /// still takes writes from its clients until [`demote`](Self::demote).
    pub fn depose(&self) {
        self.0.borrow_mut().deposed = true;
    }

    /// Whether a failover replaced this primary and it has not been
    /// demoted yet.
    pub fn is_deposed(&self) -> bool {
        self.0.borrow().deposed
    }

    /// The cluster redirections the node answered so far.
    pub fn redirects(&self) -> Redirects {
        self.0.borrow().redirects
    }

    /// How many script calls carried several lock operations at once.
    pub fn batched_calls(&self) -> u64 {
        self.0.borrow().batched_calls
    }

    /// How many `DELIFEQ` / `DELEX` calls the node ran.
    pub fn native_releases(&self) -> u64 {
        self.0.borrow().native_releases
    }

    /// What the node acknowledged while deposed.
    pub fn deposed_acks(&self) -> DeposedAcks {
        self.0.borrow().deposed_acks
    }

    /// Reconfigures a deposed primary as a replica of `host`, as the
    /// sentinels do once they reach it (`REPLICAOF`, then `CLIENT KILL`):
    /// its resync replaces everything it had not replicated, and every
    /// client connection is closed, so clients reconnect and ask again.
    /// Subscribed connections close too: this Redis does not relay
    /// `PUBLISH` through replication, so they would hear nothing more.
    pub fn demote(&self, host: String) {
        let killed = {
            let mut node = self.0.borrow_mut();
            node.deposed = false;
            node.clients_generation += 1;
            Rc::clone(&node.clients_killed)
        };
        self.replicate_from(host);
        killed.notify_waiters();
    }

    /// Reconfigures a primary as a replica of `host` the way `REPLICAOF`
    /// alone does (an operator's or an orchestrator's failover without
    /// Sentinel) and a cluster does (a forced failover, or a deposed primary
    /// rejoining): its resync replaces everything it had not replicated,
    /// and its clients stay connected, to be answered `READONLY` (in a
    /// cluster, `MOVED`) from now on.
    pub fn demote_keeping_clients(&self, host: String) {
        self.0.borrow_mut().deposed = false;
        self.replicate_from(host);
    }

    /// The generation of client connections now (see [`demote`](Self::demote)).
    pub(super) fn clients_generation(&self) -> u64 {
        self.0.borrow().clients_generation
    }

    /// Waits until the node closes its client connections.
    pub(super) async fn clients_killed(&self) {
        let killed = Rc::clone(&self.0.borrow().clients_killed);
        killed.notified().await;
    }

    fn set_role(&self, role: Role) {
        let changed = {
            let mut node = self.0.borrow_mut();
            if role == Role::Primary {
                node.deposed = false;
                if matches!(node.role, Role::Replica { .. }) {
                    // Promoted: its history goes on under a new ID, and a
                    // replica of the old one up to here resyncs partially.
                    node.replid2 = Some((node.replid, node.offset));
                    node.new_history();
                }
            }
            node.role = role;
            node.keyspace_changed.notify_one();
            Rc::clone(&node.role_changed)
        };
        changed.notify_waiters();
    }

    /// Waits until the world changes the node's role.
    pub(super) async fn role_change(&self) {
        let changed = Rc::clone(&self.0.borrow().role_changed);
        changed.notified().await;
    }

    /// Records that replica link `link` applied the stream up to `offset`,
    /// and wakes the `WAIT`s.
    pub(super) fn acknowledge(&self, link: u64, offset: u64) {
        let changed = {
            let mut node = self.0.borrow_mut();
            node.acked.insert(link, offset);
            Rc::clone(&node.acks_changed)
        };
        changed.notify_waiters();
    }

    /// How many grants this node issued while its clock was behind the
    /// time-mixed fence floor: the floor, not the clock, ordered them.
    pub fn grants_behind_floor(&self) -> u64 {
        self.0.borrow().grants_behind_floor
    }

    /// Tells the expiry cron that the node's clock changed rate or
    /// stepped: its keys fall due at other true times.
    pub fn clock_changed(&self) {
        self.0.borrow().keyspace_changed.notify_one();
    }

    /// Answers every command with BUSY until true time `until`.
    pub fn busy_until(&self, until: Duration) {
        let mut node = self.0.borrow_mut();
        node.busy_until = node.busy_until.max(until);
    }

    /// Makes client writes wait, from now until
    /// [`resume_writes`](Self::resume_writes).
    pub fn pause_writes(&self) {
        self.0.borrow_mut().writes_paused = true;
    }

    /// Ends a [`pause_writes`](Self::pause_writes): the writes that waited
    /// run now.
    pub fn resume_writes(&self) {
        let resumed = {
            let mut node = self.0.borrow_mut();
            node.writes_paused = false;
            Rc::clone(&node.writes_resumed)
        };
        resumed.notify_waiters();
    }

    /// If client writes are paused: what wakes them when they resume.
    pub(super) fn write_pause(&self) -> Option<Rc<Notify>> {
        let node = self.0.borrow();
        node.writes_paused.then(|| Rc::clone(&node.writes_resumed))
    }

    /// A pass of the server's event loop (a client's read, or a cron
    /// tick), after the last pass wrote its writes to the AOF: on a flavour
    /// that [acknowledges unsynced writes](Flavour::acks_unsynced_aof), the
    /// waiting `WAITAOF`s' local count is acknowledged here, fsynced or
    /// not. Valkey 8.1.8 answered a `WAITAOF 1 0` 0.3 ms after a `SET`
    /// sent alone, and 1.6 to 103 ms after one it was pipelined behind
    /// (the next event, or the 100 ms cron), in both cases before the
    /// `SET`'s fsync.
    pub(super) fn loop_pass(&self) {
        let synced = {
            let mut state = self.0.borrow_mut();
            if state.aof_waiters == 0 || !state.flavour.acks_unsynced_aof() {
                return;
            }
            // Acknowledged, not on disk: `fsynced_db` stays as it was.
            state.fsynced_offset = state.offset;
            Rc::clone(&state.aof_synced)
        };
        synced.notify_waiters();
    }

    /// Forgets everything a restart loses: data (without persistence all
    /// of it; with `aof-everysec` what the last fsync did not cover; with
    /// `aof-always` nothing), scripts, replication links, subscriptions.
    /// Role and clock are configuration and stay.
    pub(super) fn reset(&self) {
        let mut node = self.0.borrow_mut();
        node.touch();
        node.db = match node.persistence {
            crate::config::Persistence::None => Db::default(),
            crate::config::Persistence::AofEverysec => node.fsynced_db.clone(),
            crate::config::Persistence::AofAlways => std::mem::take(&mut node.db),
        };
        node.fsynced_db = node.db.clone();
        node.fsynced_offset = 0;
        node.aof_waiters = 0;
        node.scripts.clear();
        node.offset = 0;
        // Its offsets start again: a history no replica shares.
        node.new_history();
        node.replid2 = None;
        node.acked.clear();
        node.streams.clear();
        node.subscribers.clear();
        node.bus = None;
    }
}

/// Replication ID number `history` of node `index`: unique in a world.
fn history_id(index: usize, history: u64) -> u64 {
    ((index as u64) << 32) | history
}

impl Node {
    /// Begins a history of its own (a promotion, a restart).
    fn new_history(&mut self) {
        self.histories += 1;
        self.replid = history_id(self.index, self.histories);
    }

    /// Whether a replica at `offset` of history `replid` can resync
    /// partially from this primary (Redis's `primaryTryPartialResynchronization`):
    /// it follows this node's history, or the one this node continued on
    /// its promotion, no further than they are shared. Otherwise it needs
    /// a full sync (its history diverged: a deposed primary's writes its
    /// successor never had, or a restart).
    pub(super) fn continues(&self, replid: u64, offset: u64) -> bool {
        (replid == self.replid && offset <= self.offset)
            || self
                .replid2
                .is_some_and(|(id, upto)| id == replid && offset <= upto)
    }

    /// Whether this node, made a replica of `primary` now, would resync
    /// partially (see [`continues`](Self::continues)).
    #[cfg(test)]
    pub(super) fn continues_on(&self, primary: &NodeHandle) -> bool {
        primary.0.borrow().continues(self.replid, self.offset)
    }

    /// The node's clock reading at true time `now`.
    pub(super) fn time_at(&self, now: Duration) -> NodeTime {
        let local_ns = self.clock.local_ns(now);
        let ms = CLOCK_BASE_UNIX_MS + (local_ns.div_euclid(1_000_000)) as i64;
        let us = CLOCK_BASE_UNIX_MS * 1000 + (local_ns.div_euclid(1_000)) as i64;
        NodeTime { ms, us }
    }

    /// Records a primary's write and streams it to every replica.
    pub(super) fn propagate(&mut self, effects: Vec<Effect>) {
        if effects.is_empty() {
            return;
        }
        self.offset += 1;
        if self.persistence == crate::config::Persistence::AofAlways {
            // On disk before the reply.
            self.fsynced_offset = self.offset;
        }
        let offset = self.offset;
        self.forward_exports(&effects);
        self.streams
            .retain(|_, stream| stream.send((offset, effects.clone())).is_ok());
    }

    /// An atomic slot migration's stream: the effects on a slot this node
    /// exports are applied by the target, which replicates them to its own
    /// replicas as any write of its own (Valkey feeds the export from the
    /// replication stream: `clusterFeedSlotExportJobs`). Here they reach
    /// the target at once, where the real stream takes a one-way delay:
    /// the target does not serve the slot before the cut-over, and by then
    /// the real one has caught up too (the source's `PAUSED` marker).
    fn forward_exports(&self, effects: &[Effect]) {
        let Some(cluster) = &self.cluster else {
            return;
        };
        let exports = cluster.state().exports_of(self.index);
        for (slot, to) in exports {
            let forwarded: Vec<Effect> = effects
                .iter()
                .filter(|effect| effect.key().is_some_and(|key| slot_of(key) == slot))
                .cloned()
                .collect();
            let Some(target) = self.peers.get(to).and_then(Weak::upgrade) else {
                continue;
            };
            let mut target = target.borrow_mut();
            // A target demoted meanwhile fails the migration at the
            // cut-over; it applies only its new primary's stream.
            if forwarded.is_empty() || target.role != Role::Primary {
                continue;
            }
            for effect in &forwarded {
                target.db.apply(effect);
            }
            target.touch();
            target.propagate(forwarded);
        }
    }

    /// An AOF fsync: everything written so far is on disk (`aof-everysec`
    /// does one a second). Nothing without AOF.
    pub(super) fn fsync(&mut self) {
        match self.persistence {
            crate::config::Persistence::None => {}
            crate::config::Persistence::AofEverysec => {
                self.fsynced_db = self.db.clone();
                self.fsynced_offset = self.offset;
            }
            crate::config::Persistence::AofAlways => self.fsynced_offset = self.offset,
        }
    }

    /// Marks that the keyspace may have changed: counts it
    /// ([`Node::activity`]) and wakes the expiry cron.
    pub(super) fn touch(&mut self) {
        self.activity += 1;
        self.keyspace_changed.notify_one();
    }

    /// The true time of the earliest expiry stored on this node (as its
    /// clock runs at true time `now`), if a key has one: when the expiry
    /// cron has work next.
    pub(super) fn earliest_expiry(&self, now: Duration) -> Option<Duration> {
        let at_ms = self.db.earliest_expiry()?;
        let local_ns = i128::from(at_ms - CLOCK_BASE_UNIX_MS) * 1_000_000;
        // Already due (a clock that jumped past it): now.
        Some(self.clock.true_time_of(local_ns).max(now))
    }

    pub(super) fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

#[cfg(test)]
impl NodeHandle {
    /// `redis-0` as the unit tests build it: a primary, or a replica of
    /// `replica_of`, without lag or persistence, seeded with 1.
    pub(super) fn for_tests(replica_of: Option<&str>) -> Self {
        Self::new(NodeConfig {
            replica_of: replica_of.map(str::to_owned),
            ..NodeConfig::standalone(Flavour::default(), crate::config::Persistence::None)
        })
    }

    /// Stores the string `key` with `px` ms of ttl from the node's clock
    /// at true time zero, as a write does, without streaming it.
    pub(super) fn set_for_tests(&self, key: &str, value: &str, px: Option<i64>) {
        let mut state = self.0.borrow_mut();
        let time = state.time_at(Duration::ZERO);
        state
            .db
            .set(key.as_bytes(), value.as_bytes(), px.map(|px| time.ms + px));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_persistence(persistence: crate::config::Persistence) -> NodeHandle {
        NodeHandle::new(NodeConfig::standalone(Flavour::Valkey81, persistence))
    }

    /// A primary's write, as a command does it.
    fn write(node: &NodeHandle, key: &str) {
        node.set_for_tests(key, "v", None);
        node.0.borrow_mut().propagate(vec![Effect::Del {
            key: b"marker".to_vec(),
        }]);
    }

    #[test]
    fn a_restart_keeps_what_its_persistence_fsynced() {
        use crate::config::Persistence;
        let at = Duration::ZERO;
        // Without persistence: nothing.
        let none = with_persistence(Persistence::None);
        write(&none, "a");
        none.0.borrow_mut().fsync();
        none.reset();
        assert!(none.peek("a", at).is_none());
        // everysec: what the last fsync covered, not what came after.
        let everysec = with_persistence(Persistence::AofEverysec);
        write(&everysec, "a");
        everysec.0.borrow_mut().fsync();
        assert_eq!(everysec.0.borrow().fsynced_offset, 1);
        write(&everysec, "b");
        assert_eq!(everysec.0.borrow().fsynced_offset, 1, "b is not on disk");
        everysec.reset();
        assert!(everysec.peek("a", at).is_some());
        assert!(everysec.peek("b", at).is_none(), "lost with the page cache");
        // always: everything, fsynced with each write.
        let always = with_persistence(Persistence::AofAlways);
        write(&always, "a");
        assert_eq!(always.0.borrow().fsynced_offset, 1);
        always.reset();
        assert!(always.peek("a", at).is_some());
    }

    #[test]
    fn valkey_acknowledges_a_waiting_waitaof_without_an_fsync() {
        use crate::config::Persistence;
        for (flavour, acks) in [(Flavour::Valkey81, true), (Flavour::Redis84, false)] {
            let node = NodeHandle::new(NodeConfig::standalone(flavour, Persistence::AofEverysec));
            write(&node, "a");
            node.0.borrow_mut().aof_waiters = 1;
            node.loop_pass();
            let offset = node.0.borrow().fsynced_offset;
            assert_eq!(
                offset,
                u64::from(acks),
                "{flavour:?}: WAITAOF's local count"
            );
            node.reset();
            assert!(
                node.peek("a", Duration::ZERO).is_none(),
                "{flavour:?}: the acknowledged write was never fsynced"
            );
        }
    }

    /// Runs `node`'s expiry cron in a turmoil host for `span` of
    /// simulated time.
    fn run_cron(node: &NodeHandle, span: Duration) {
        let mut sim = turmoil::Builder::new().build();
        let cron = node.clone();
        sim.client("redis-0", async move {
            let _ = tokio::time::timeout(span, super::super::expire_cron(cron)).await;
            Ok(())
        });
        sim.run().expect("the cron runs");
    }

    #[test]
    fn a_primarys_cron_expires_its_keys_and_replicates_each_deletion() {
        let primary = NodeHandle::for_tests(None);
        let (link, mut stream) = tokio::sync::mpsc::unbounded_channel();
        primary.0.borrow_mut().streams.insert(1, link);
        primary.set_for_tests("gone", "v", Some(150));
        primary.set_for_tests("live", "v", Some(1_000));
        run_cron(&primary, Duration::from_millis(350));
        // Within a cron period (100 ms) of its expiry, as Redis's `hz 10`.
        let (_, effects) = stream.try_recv().expect("a DEL streamed");
        assert_eq!(
            effects,
            vec![Effect::Del {
                key: b"gone".to_vec()
            }]
        );
        assert!(stream.try_recv().is_err(), "only the expired key");
        assert!(!primary.0.borrow().db.contains_stored(b"gone"));
        assert!(primary.0.borrow().db.contains_stored(b"live"));
    }

    #[test]
    fn a_replicas_cron_deletes_nothing() {
        // A replica waits for its primary's DEL (reads hide the key).
        let replica = NodeHandle::for_tests(Some("redis-1"));
        replica.set_for_tests("gone", "v", Some(150));
        run_cron(&replica, Duration::from_millis(350));
        assert!(replica.0.borrow().db.contains_stored(b"gone"));
        assert!(replica.peek("gone", Duration::from_millis(350)).is_none());
    }

    #[test]
    fn a_deposed_primary_serves_until_its_demotion_closes_its_clients() {
        let old = NodeHandle::for_tests(None);
        old.depose();
        assert!(old.is_deposed());
        assert_eq!(old.role(), Role::Primary, "still a primary to its clients");
        let generation = old.clients_generation();
        old.demote("redis-1".to_owned());
        assert!(!old.is_deposed());
        assert_eq!(
            old.role(),
            Role::Replica {
                of: "redis-1".to_owned()
            }
        );
        assert_ne!(
            old.clients_generation(),
            generation,
            "its clients are cut off"
        );
        let again = NodeHandle::for_tests(Some("redis-0"));
        again.0.borrow_mut().deposed = true;
        again.promote();
        assert!(!again.is_deposed(), "a promotion ends a deposition");
    }
}
