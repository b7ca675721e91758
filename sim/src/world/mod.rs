//! The turmoil world: builds the hosts of one scenario seed, injects its
//! fault schedule at exact sim times, and hands the history to the checkers.
//!
//! Hosts: `redis-0` … (redis-0 starts as the primary; in a cluster, each
//! shard's first node), `sentinel-0` … (in
//! the Sentinel topology), `client-0` … (the real lock adapter), and
//! `storage` (the fenced resource). The world itself
//! plays the fault controller: it steps the simulation one tick at a time
//! and applies each fault between ticks, so a fault lands at the same
//! instant on every replay.

mod adoption;
mod atomic_migration;
mod cluster;
mod faults;
mod oracle;

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::{Duration, UNIX_EPOCH},
};

use lock_core::internal::cluster::slot_of;

use crate::{
    checker,
    client::{self, ClientSetup, Deadlines, Discovery, client_host, redis_host},
    clock::ClockControl,
    config::{FaultTarget, Scenario, Topology},
    freeze::FreezeSwitch,
    history::{Op, Process, Recorder},
    outcome::{ConcreteFault, SeedOutcome},
    rng::Rng,
    scenario::names::fault_kind,
    server::{
        NodeConfig, NodeHandle,
        cluster::ClusterHandle,
        sentinel::{self, SentinelHandle, sentinel_host},
    },
    storage,
};

pub use crate::{clock::TICK, schedule::draw_schedule};
pub use adoption::{Adoption, SentinelDraws};

pub use crate::net::BASE_LATENCY;

/// A slot migration under way (`cluster.rs` starts, steps and ends it;
/// it lives here, beside the world that holds it, so that this file
/// imports nothing from its children).
#[derive(Debug, Clone, Copy)]
struct Migration {
    slot: u16,
    from: usize,
    to: usize,
}

/// An atomic slot migration under way (`atomic_migration.rs` starts,
/// cuts over and ends it), and whether its cut-over began.
#[derive(Debug, Clone, Copy)]
struct AtomicMigration {
    migration: Migration,
    cutting_over: bool,
}

/// How a world runs: knobs of the harness itself.
#[derive(Debug, Clone, Copy)]
pub struct WorldOptions {
    /// Skip the idle part of each step exactly (turmoil's `skip_idle`),
    /// and jump whole steps in which no host has work, up to the next
    /// fault or the next change of the oracle. On by default; the history
    /// is the same either way, byte for byte (tests/equivalence.rs).
    pub skip_idle: bool,
    /// Run the clients with a deliberately broken validity rule (counted
    /// from the reply instead of the send), to prove the checkers catch it.
    pub broken_validity: bool,
    /// Run fair-mode clients with a waiter ttl ten times the scenario's
    /// (the server keeps a dead waiter's place that long), to prove F4
    /// catches a place that outlives the ttl it is held to.
    pub stretched_waiter_ttl: bool,
}

impl Default for WorldOptions {
    fn default() -> Self {
        Self {
            skip_idle: true,
            broken_validity: false,
            stretched_waiter_ttl: false,
        }
    }
}

/// Runs `scenario` with `seed`, injecting exactly `schedule`, and checks it.
pub fn run_schedule(scenario: &Scenario, seed: u64, schedule: &[ConcreteFault]) -> SeedOutcome {
    run_with(scenario, seed, schedule, WorldOptions::default())
}

/// Runs one seed with the schedule drawn from it.
pub fn run_seed(scenario: &Scenario, seed: u64) -> SeedOutcome {
    run_schedule(scenario, seed, &draw_schedule(scenario, seed))
}

/// What the world does at one instant, for fault `.0` of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Action {
    Begin(usize),
    /// A step inside a lasting fault (a slot migration moves a key).
    Step(usize),
    End(usize),
}

impl Action {
    /// Schedule position, then begin before steps before end.
    fn order(self) -> (usize, u8) {
        match self {
            Self::Begin(index) => (index, 0),
            Self::Step(index) => (index, 1),
            Self::End(index) => (index, 2),
        }
    }
}

/// Runs one seed with harness knobs.
pub fn run_with(
    scenario: &Scenario,
    seed: u64,
    schedule: &[ConcreteFault],
    options: WorldOptions,
) -> SeedOutcome {
    let mut world = World::build(scenario, seed, options);
    let error = world.run(scenario, schedule, options);
    let history = world.recorder.snapshot();
    let mut verdict = checker::check(scenario, schedule, &history);
    world.add_node_facts(&mut verdict.facts);
    if let Some(error) = error {
        verdict.facts.insert(format!("host-error: {error}"));
    }
    SeedOutcome {
        seed,
        schedule: schedule.to_vec(),
        history,
        verdict,
    }
}

/// The schedule's beginnings, and the ends of its lasting faults, in
/// stable order: time, then schedule position, begin before end.
fn actions_of(schedule: &[ConcreteFault]) -> Vec<(Duration, Action)> {
    let mut actions: Vec<(Duration, Action)> = Vec::new();
    for (index, fault) in schedule.iter().enumerate() {
        actions.push((fault.at, Action::Begin(index)));
        if let Some(duration) = fault.duration
            && fault_kind(fault.kind).lasts()
        {
            actions.push((fault.at + duration, Action::End(index)));
        }
    }
    actions.sort_by_key(|(at, action)| (*at, action.order()));
    actions
}

/// `span` rounded down to whole ticks.
fn whole_ticks(span: Duration) -> Duration {
    let ticks = span.as_nanos() / TICK.as_nanos();
    TICK * u32::try_from(ticks).unwrap_or(u32::MAX)
}

/// Adds the scenario's Redis nodes to `sim` (their names to `hosts`), each
/// a replica of its primary from the start.
fn add_nodes(
    sim: &mut turmoil::Sim<'_>,
    hosts: &mut Vec<String>,
    scenario: &Scenario,
    seed: u64,
    cluster: Option<&ClusterHandle>,
) -> Vec<NodeHandle> {
    let replication_lag = scenario.topology.replication_lag();
    let mut nodes = Vec::new();
    for index in 0..scenario.topology.node_count() {
        let replica_of = match (&scenario.topology, cluster) {
            (Topology::PrimaryReplica { .. } | Topology::Sentinel { .. }, _) if index > 0 => {
                Some(redis_host(0))
            }
            (Topology::Cluster { .. }, Some(cluster)) => {
                let primary = cluster.primary_of(cluster.shard_of(index));
                (primary != index).then(|| redis_host(primary))
            }
            _ => None,
        };
        let node = NodeHandle::new(NodeConfig {
            index,
            replica_of,
            replication_lag,
            seed: Rng::fork(seed, 0x2ED1 + index as u64).next_u64(),
            flavour: match scenario.server.flavour {
                crate::config::ServerFlavour::Redis70 => crate::server::Flavour::Redis7,
                crate::config::ServerFlavour::Valkey81 => crate::server::Flavour::Valkey81,
                crate::config::ServerFlavour::Valkey91 => crate::server::Flavour::Valkey91,
                crate::config::ServerFlavour::Redis82 => crate::server::Flavour::Redis82,
                crate::config::ServerFlavour::Redis84 => crate::server::Flavour::Redis84,
            },
            persistence: scenario.server.persistence,
        });
        let host = redis_host(index);
        let serving = node.clone();
        sim.host(host.as_str(), move || crate::server::serve(serving.clone()));
        hosts.push(host);
        nodes.push(node);
    }
    nodes
}

/// Adds the topology's sentinels, if any, to `sim` (their names to
/// `hosts`).
fn add_sentinels(
    sim: &mut turmoil::Sim<'_>,
    hosts: &mut Vec<String>,
    topology: &Topology,
) -> Vec<SentinelHandle> {
    let mut sentinels = Vec::new();
    for index in 0..topology.sentinel_count() {
        let sentinel = SentinelHandle::default();
        let serving = sentinel.clone();
        let host = sentinel_host(index);
        sim.host(host.as_str(), move || sentinel::serve(serving.clone()));
        hosts.push(host);
        sentinels.push(sentinel);
    }
    sentinels
}

/// What every client shares with the world.
struct ClientShared<'a> {
    recorder: &'a Recorder,
    discovery: &'a Discovery,
    broken_validity: bool,
    stretched_waiter_ttl: bool,
}

/// The world's handles on its clients, by index.
struct ClientHandles {
    clocks: Vec<ClockControl>,
    deadlines: Vec<Deadlines>,
    freezes: Vec<FreezeSwitch>,
}

/// Adds the scenario's clients to `sim` (their names to `hosts`).
fn add_clients(
    sim: &mut turmoil::Sim<'_>,
    hosts: &mut Vec<String>,
    scenario: &Scenario,
    seed: u64,
    shared: ClientShared<'_>,
) -> ClientHandles {
    let scenario_arc = Arc::new(scenario.clone());
    let mut handles = ClientHandles {
        clocks: Vec::new(),
        deadlines: Vec::new(),
        freezes: Vec::new(),
    };
    for index in 0..scenario.clients.count {
        let clock = ClockControl::default();
        let deadlines = Deadlines::default();
        let freeze = FreezeSwitch::default();
        let setup = ClientSetup {
            index,
            scenario: Arc::clone(&scenario_arc),
            seed: client::client_seed(seed, index),
            recorder: shared.recorder.clone(),
            clock: clock.clone(),
            discovery: shared.discovery.clone(),
            broken_validity: shared.broken_validity,
            stretched_waiter_ttl: shared.stretched_waiter_ttl,
            deadlines: deadlines.clone(),
        };
        let host = client_host(index);
        let switch = freeze.clone();
        sim.host(host.as_str(), move || {
            client::run(setup.clone(), switch.clone())
        });
        hosts.push(host);
        handles.clocks.push(clock);
        handles.deadlines.push(deadlines);
        handles.freezes.push(freeze);
    }
    handles
}

struct World<'a> {
    sim: turmoil::Sim<'a>,
    recorder: Recorder,
    discovery: Discovery,
    nodes: Vec<NodeHandle>,
    /// The sentinels (Sentinel topology): whom each names as primary.
    sentinels: Vec<SentinelHandle>,
    /// Draws what a failover leaves to chance: which sentinel leads it,
    /// and when each other one adopts it.
    failover_draws: SentinelDraws,
    client_clocks: Vec<ClockControl>,
    /// Each client's deadlines on its own clock, remapped when it changes.
    client_deadlines: Vec<Deadlines>,
    freezes: Vec<FreezeSwitch>,
    hosts: Vec<String>,
    lock_key: String,
    last_oracle: Option<(usize, Option<String>)>,
    /// What the last oracle sample saw: the nodes' activity, the primary,
    /// and until when no key expires; the oracle stands still while all hold.
    /// Faults clear it (a clock change moves expiries).
    oracle_unchanged: Option<(u64, usize, Duration)>,
    /// Redlock: the oracle is the majority's owner, not one primary's.
    redlock: bool,
    /// The deployment (failovers read the sentinels' lag from it).
    topology: Topology,
    /// Targets resolved when a fault began (by schedule position), so its
    /// end undoes the same host.
    resolved: BTreeMap<usize, FaultTarget>,
    /// The Redis Cluster's slot table (cluster topology).
    cluster: Option<ClusterHandle>,
    /// Draws what a cluster fault leaves to chance (a migration's target).
    cluster_rng: Rng,
    /// Slot migrations under way, by schedule position.
    migrations: BTreeMap<usize, Migration>,
    /// Atomic slot migrations under way, by schedule position.
    atomic_migrations: BTreeMap<usize, AtomicMigration>,
    /// Primaries a shard failover deposed, by schedule position.
    deposed: BTreeMap<usize, usize>,
    /// Cluster nodes made unreachable (down or partitioned), by schedule
    /// position: the node, and when the cluster failed it, once it has.
    unreachable: BTreeMap<usize, (usize, Option<Duration>)>,
    /// Cluster nodes reachable again whose failure the others have not
    /// cleared yet, by schedule position.
    recovering: BTreeMap<usize, usize>,
    /// Draws how long a cluster takes to fail an unreachable node and to
    /// clear the failure once it is back.
    detection_rng: Rng,
    /// Sentinel failovers whose other replicas are not yet re-pointed at
    /// the promoted one, by schedule position: (old primary, new primary).
    reconfigs: BTreeMap<usize, (usize, usize)>,
    /// Steps the last action planned, for the run loop to queue.
    planned: Vec<(Duration, Action)>,
    /// How many faults now cut what one host sends another, by (from, to):
    /// a link is healed only when the last of them ends.
    cuts: BTreeMap<(String, String), u32>,
}

impl World<'_> {
    fn build(scenario: &Scenario, seed: u64, options: WorldOptions) -> Self {
        let mut builder = turmoil::Builder::new();
        builder
            .rng_seed(seed)
            .epoch(UNIX_EPOCH)
            .tick_duration(TICK)
            .simulation_duration(scenario.duration + Duration::from_secs(60))
            .min_message_latency(Duration::ZERO)
            .max_message_latency(BASE_LATENCY)
            // A partition cuts TCP as a real network does: what it took is
            // retransmitted after the heal (see scenarios/README.md).
            .tcp_retransmit(true)
            .skip_idle(options.skip_idle);
        let mut sim = builder.build();
        let recorder = Recorder::default();
        let discovery = Discovery::default();
        let mut hosts = Vec::new();

        // Hosts are added in a fixed order (nodes, sentinels, storage,
        // clients): turmoil's order is part of the replay.
        let cluster = scenario
            .topology
            .cluster_shape()
            .map(|(shards, replicas)| ClusterHandle::new(shards, replicas));
        let nodes = add_nodes(&mut sim, &mut hosts, scenario, seed, cluster.as_ref());
        let lock_key = client::key_names().lock;
        if let Some(cluster) = &cluster {
            cluster.attach(&nodes);
            discovery.set_primary(cluster.owner(slot_of(&lock_key)));
        }
        let sentinels = add_sentinels(&mut sim, &mut hosts, &scenario.topology);
        let storage_recorder = recorder.clone();
        sim.host(storage::HOST, move || {
            storage::serve(storage_recorder.clone())
        });
        hosts.push(storage::HOST.to_owned());
        let clients = add_clients(
            &mut sim,
            &mut hosts,
            scenario,
            seed,
            ClientShared {
                recorder: &recorder,
                discovery: &discovery,
                broken_validity: options.broken_validity,
                stretched_waiter_ttl: options.stretched_waiter_ttl,
            },
        );

        Self {
            sim,
            recorder,
            discovery,
            nodes,
            sentinels,
            failover_draws: SentinelDraws::new(seed),
            client_clocks: clients.clocks,
            client_deadlines: clients.deadlines,
            freezes: clients.freezes,
            hosts,
            lock_key,
            last_oracle: None,
            oracle_unchanged: None,
            redlock: matches!(scenario.topology, Topology::Redlock { .. }),
            topology: scenario.topology.clone(),
            resolved: BTreeMap::new(),
            cluster,
            cluster_rng: Rng::fork(seed, 0xC1A5),
            migrations: BTreeMap::new(),
            atomic_migrations: BTreeMap::new(),
            deposed: BTreeMap::new(),
            unreachable: BTreeMap::new(),
            recovering: BTreeMap::new(),
            detection_rng: Rng::fork(seed, 0xDE7E),
            reconfigs: BTreeMap::new(),
            planned: Vec::new(),
            cuts: BTreeMap::new(),
        }
    }

    /// Steps the world to the scenario's end, applying `schedule` on the
    /// way; returns the host error that stopped it early, if one did.
    fn run(
        &mut self,
        scenario: &Scenario,
        schedule: &[ConcreteFault],
        options: WorldOptions,
    ) -> Option<String> {
        let mut actions = actions_of(schedule);
        let mut next = 0;
        while self.sim.elapsed() < scenario.duration {
            let now = self.sim.elapsed();
            next = self.apply_due(&mut actions, next, schedule, now);
            if options.skip_idle {
                // Jump the steps in which no host has work, but stop where
                // the world acts or samples something that changes with no
                // host running: the next fault, the end, a key's expiry.
                let idle_until = self.sim.idle_until();
                let next_action = actions.get(next).map_or(Duration::MAX, |(at, _)| *at);
                let limit = idle_until.min(next_action).min(scenario.duration);
                let until = if limit > now {
                    let limit = limit.min(self.next_oracle_change(now));
                    now + whole_ticks(limit.saturating_sub(now))
                } else {
                    now
                };
                if until > now {
                    // The skipped step at `now` changes nothing: sample first.
                    self.sample_oracle(now);
                    if let Err(failure) = self.sim.skip_to(until) {
                        return Some(failure.to_string());
                    }
                    continue;
                }
            }
            if let Err(failure) = self.sim.step() {
                return Some(failure.to_string());
            }
            // Hosts stamp what they do during the step [now, now + TICK) from
            // `now` on; the state they leave is stamped with the step's start
            // too, so the oracle never lags a client's view by a tick.
            self.sample_oracle(now);
        }
        None
    }

    /// Applies every action from `actions[next]` on that is due at `now`,
    /// queueing the steps they plan; returns the position of the first
    /// action not yet due.
    fn apply_due(
        &mut self,
        actions: &mut Vec<(Duration, Action)>,
        mut next: usize,
        schedule: &[ConcreteFault],
        now: Duration,
    ) -> usize {
        if actions.get(next).is_some_and(|(at, _)| *at <= now) {
            // A fault may wake a host's tasks directly (a promotion wakes
            // the replication loop): skipped hosts must be up to date.
            self.sim.catch_up();
        }
        while let Some((at, action)) = actions.get(next).copied()
            && at <= now
        {
            match action {
                Action::Begin(index) => self.begin(index, &schedule[index]),
                Action::Step(index) => self.step(index),
                Action::End(index) => self.end(index, &schedule[index]),
            }
            next += 1;
            // Steps a fault planned when it began join the queue in order.
            for step in self.planned.drain(..) {
                let position = next
                    + actions[next..].partition_point(|(at, action)| {
                        (*at, action.order()) <= (step.0, step.1.order())
                    });
                actions.insert(position, step);
            }
        }
        next
    }

    /// What only the simulated nodes saw, as facts for the verdict: grants
    /// behind a fence, acknowledgements of a deposed primary, native
    /// releases, group commit, cluster redirections.
    fn add_node_facts(&self, facts: &mut BTreeSet<String>) {
        if self.nodes.iter().any(|node| node.grants_behind_floor() > 0) {
            // Fences only Redis saw: a grant while the server clock was behind
            // an earlier fence, ordered by the time-mixed floor alone.
            facts.insert("grant-while-clock-behind-fence".to_owned());
        }
        for node in &self.nodes {
            // What a primary acknowledged after a failover replaced it, before
            // its demotion: the stale window bit (its resync discards these).
            let acks = node.deposed_acks();
            let seen = [
                (acks.grants, "grant-on-deposed-primary"),
                (acks.renewals, "renewal-on-deposed-primary"),
                (acks.short_waits, "wait-short-on-deposed-primary"),
            ];
            for (count, fact) in seen {
                if count > 0 {
                    facts.insert(fact.to_owned());
                }
            }
        }
        if self.nodes.iter().any(|node| node.native_releases() > 0) {
            // A release went as DELIFEQ (Valkey 9.1) or DELEX … IFEQ (Redis 8.4).
            facts.insert("native-release".to_owned());
        }
        if self.nodes.iter().any(|node| node.batched_calls() > 0) {
            // Group commit ran: operations of several locks shared a call.
            facts.insert("batched-script-call".to_owned());
        }
        for node in &self.nodes {
            // A cluster redirected a command: the migration or failover bit.
            let redirects = node.redirects();
            let seen = [
                (redirects.moved, "answered-moved"),
                (redirects.ask, "answered-ask"),
                (redirects.try_again, "answered-tryagain"),
                (redirects.cross_slot, "answered-crossslot"),
                (redirects.cluster_down, "answered-clusterdown"),
            ];
            for (count, fact) in seen {
                if count > 0 {
                    facts.insert(fact.to_owned());
                }
            }
        }
    }

    fn now(&self) -> Duration {
        self.sim.elapsed()
    }

    fn record(&self, op: Op) {
        let now = self.now();
        self.recorder.record(now, now, Process::Controller, op);
    }
}
