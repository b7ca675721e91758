//! The turmoil world: builds the hosts of one scenario seed, injects its
//! fault schedule at exact sim times, and hands the history to the checkers.
//!
//! Hosts: `redis-0` … (redis-0 starts as the primary), `client-0` … (the
//! real lock adapter), and `storage` (the fenced resource). The world itself
//! plays the fault controller: it steps the simulation one tick at a time
//! and applies each fault between ticks, so a fault lands at the same
//! instant on every replay.

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, UNIX_EPOCH},
};

use lock_core::scripts::KeyNames;

use crate::{
    checker,
    client::{self, ClientSetup, Discovery, KEY, client_host, redis_host},
    clock::ClockControl,
    config::{FaultKind, Scenario, Target, Topology},
    freeze::FreezeSwitch,
    history::{Op, Phase, Process, Recorder},
    outcome::{ConcreteFault, SeedOutcome},
    redis::{NodeConfig, NodeHandle},
    rng::Rng,
    storage,
};

/// The simulation's time step. Timers resolve to it, so it must be far
/// below the smallest drift margin in use (ttl × drift_factor + 2 ms).
pub const TICK: Duration = Duration::from_millis(1);

/// The base one-way network delay: uniform-ish in [0, BASE_LATENCY].
pub const BASE_LATENCY: Duration = Duration::from_millis(2);

/// Knobs for tests of the harness itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorldOptions {
    /// Run the clients with a deliberately broken validity rule (counted
    /// from the reply instead of the send), to prove the checkers catch it.
    pub broken_validity: bool,
}

/// Draws the fault schedule of `seed` from the scenario's ranges.
pub fn draw_schedule(scenario: &Scenario, seed: u64) -> Vec<ConcreteFault> {
    let mut schedule = Vec::new();
    for (index, spec) in scenario.faults.iter().enumerate() {
        let mut rng = Rng::fork(seed, 0xFA17 + index as u64);
        let mut at = client::draw(&mut rng, spec.at);
        loop {
            if at >= scenario.duration {
                break;
            }
            let target = match spec.target {
                Target::Client(n) => format!("client:{n}"),
                Target::AnyClient => {
                    let count = scenario.clients.count.max(1) as u64;
                    format!("client:{}", rng.between(0, count - 1))
                }
                Target::Primary => "redis:primary".to_owned(),
                Target::Redis(n) => format!("redis:{n}"),
                Target::Storage => "storage".to_owned(),
            };
            schedule.push(ConcreteFault {
                kind: spec.kind,
                at,
                target,
                duration: spec.duration.map(|range| client::draw(&mut rng, range)),
                rate: spec.rate,
                offset: spec.offset,
                delay: spec.delay.map(|range| client::draw(&mut rng, range)),
            });
            match spec.every {
                Some(every) => at += client::draw(&mut rng, every).max(TICK),
                None => break,
            }
        }
    }
    schedule.sort_by_key(|fault| fault.at);
    schedule
}

/// Runs `scenario` with `seed`, injecting exactly `schedule`, and checks it.
pub fn run_schedule(scenario: &Scenario, seed: u64, schedule: &[ConcreteFault]) -> SeedOutcome {
    run_with(scenario, seed, schedule, WorldOptions::default())
}

/// Runs one seed with the schedule drawn from it.
pub fn run_seed(scenario: &Scenario, seed: u64) -> SeedOutcome {
    run_schedule(scenario, seed, &draw_schedule(scenario, seed))
}

/// What the world does at one instant.
#[derive(Debug, Clone)]
enum Action {
    Begin(usize),
    End(usize),
}

/// Runs one seed with harness knobs.
pub fn run_with(
    scenario: &Scenario,
    seed: u64,
    schedule: &[ConcreteFault],
    options: WorldOptions,
) -> SeedOutcome {
    let mut world = World::build(scenario, seed, options);
    let mut actions: Vec<(Duration, usize, Action)> = Vec::new();
    for (index, fault) in schedule.iter().enumerate() {
        actions.push((fault.at, index, Action::Begin(index)));
        if let Some(duration) = fault.duration
            && lasts(fault.kind)
        {
            actions.push((fault.at + duration, index, Action::End(index)));
        }
    }
    // Stable order: time, then schedule position, begin before end.
    actions.sort_by_key(|(at, index, action)| (*at, *index, matches!(action, Action::End(_))));
    let mut next = 0;
    let mut error = None;
    while world.sim.elapsed() < scenario.duration {
        let now = world.sim.elapsed();
        while let Some((at, _, action)) = actions.get(next)
            && *at <= now
        {
            match action {
                Action::Begin(index) => world.begin(&schedule[*index]),
                Action::End(index) => world.end(&schedule[*index]),
            }
            next += 1;
        }
        if let Err(failure) = world.sim.step() {
            error = Some(failure.to_string());
            break;
        }
        // Hosts stamp what they do during the step [now, now + TICK) from
        // `now` on; the state they leave is stamped with the step's start
        // too, so the oracle never lags a client's view by a tick.
        world.sample_oracle(now);
    }
    let history = world.recorder.snapshot();
    let mut verdict = checker::check(scenario, schedule, &history);
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

/// Whether a fault kind has an end (its `duration`).
fn lasts(kind: FaultKind) -> bool {
    matches!(
        kind,
        FaultKind::Pause
            | FaultKind::Partition
            | FaultKind::PartitionOneway
            | FaultKind::Latency
            | FaultKind::Busy
            | FaultKind::Restart
            | FaultKind::ClockDrift
    )
}

struct World<'a> {
    sim: turmoil::Sim<'a>,
    recorder: Recorder,
    discovery: Discovery,
    nodes: Vec<NodeHandle>,
    client_clocks: Vec<ClockControl>,
    freezes: Vec<FreezeSwitch>,
    hosts: Vec<String>,
    lock_key: String,
    last_oracle: Option<(usize, Option<String>)>,
    /// Redlock: the oracle is the majority's owner, not one primary's.
    redlock: bool,
    /// Targets resolved when a fault began, so its end undoes the same host.
    resolved: BTreeMap<(Duration, String), String>,
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
            .max_message_latency(BASE_LATENCY);
        let mut sim = builder.build();
        let recorder = Recorder::default();
        let discovery = Discovery::default();
        let scenario_arc = Arc::new(scenario.clone());
        let mut hosts = Vec::new();

        let node_count = scenario.topology.node_count();
        let replication_lag = match &scenario.topology {
            Topology::PrimaryReplica {
                replication_lag, ..
            } => Some(*replication_lag),
            _ => None,
        };
        let mut nodes = Vec::new();
        for index in 0..node_count {
            let replica_of = match scenario.topology {
                Topology::PrimaryReplica { .. } if index > 0 => Some(redis_host(0)),
                _ => None,
            };
            let node = NodeHandle::new(NodeConfig {
                index,
                replica_of,
                replication_lag,
                seed: Rng::fork(seed, 0x2ED1 + index as u64).next_u64(),
            });
            let host = redis_host(index);
            let serving = node.clone();
            sim.host(host.as_str(), move || crate::redis::serve(serving.clone()));
            hosts.push(host);
            nodes.push(node);
        }

        let storage_recorder = recorder.clone();
        sim.host(storage::HOST, move || {
            storage::serve(storage_recorder.clone())
        });
        hosts.push(storage::HOST.to_owned());

        let mut client_clocks = Vec::new();
        let mut freezes = Vec::new();
        for index in 0..scenario.clients.count {
            let clock = ClockControl::default();
            let freeze = FreezeSwitch::default();
            let setup = ClientSetup {
                index,
                scenario: Arc::clone(&scenario_arc),
                seed: Rng::fork(seed, 0xC11E + index as u64).next_u64(),
                recorder: recorder.clone(),
                clock: clock.clone(),
                discovery: discovery.clone(),
                broken_validity: options.broken_validity,
            };
            let host = client_host(index);
            let switch = freeze.clone();
            sim.host(host.as_str(), move || {
                client::run(setup.clone(), switch.clone())
            });
            hosts.push(host);
            client_clocks.push(clock);
            freezes.push(freeze);
        }

        Self {
            sim,
            recorder,
            discovery,
            nodes,
            client_clocks,
            freezes,
            hosts,
            lock_key: KeyNames::new("lock", KEY).lock,
            last_oracle: None,
            redlock: matches!(scenario.topology, Topology::Redlock { .. }),
            resolved: BTreeMap::new(),
        }
    }

    fn now(&self) -> Duration {
        self.sim.elapsed()
    }

    fn record(&self, op: Op) {
        let now = self.now();
        self.recorder.record(now, now, Process::Controller, op);
    }

    /// Resolves `redis:primary` to the node that is primary now.
    fn resolve(&self, target: &str) -> String {
        if target == "redis:primary" {
            format!("redis:{}", self.discovery.primary())
        } else {
            target.to_owned()
        }
    }

    fn host_of(target: &str) -> Option<String> {
        let (kind, index) = target.split_once(':').unwrap_or((target, ""));
        let index: Option<usize> = index.parse().ok();
        match (kind, index) {
            ("redis", Some(n)) => Some(redis_host(n)),
            ("client", Some(n)) => Some(client_host(n)),
            ("storage", _) => Some(storage::HOST.to_owned()),
            _ => None,
        }
    }

    fn index_of(target: &str) -> Option<usize> {
        target.split_once(':').and_then(|(_, n)| n.parse().ok())
    }

    fn clock_of(&self, target: &str) -> Option<ClockControl> {
        let index = Self::index_of(target)?;
        if target.starts_with("client") {
            self.client_clocks.get(index).cloned()
        } else {
            self.nodes.get(index).map(NodeHandle::clock)
        }
    }

    fn others(&self, host: &str) -> Vec<String> {
        self.hosts.iter().filter(|h| *h != host).cloned().collect()
    }

    fn begin(&mut self, fault: &ConcreteFault) {
        let now = self.now();
        let target = self.resolve(&fault.target);
        self.resolved
            .insert((fault.at, fault.target.clone()), target.clone());
        let Some(host) = Self::host_of(&target) else {
            return;
        };
        self.record(Op::Fault {
            kind: crate::scenario::kind_name(fault.kind).to_owned(),
            target: target.clone(),
            phase: Phase::Start,
        });
        let duration = fault.duration.unwrap_or_default();
        match fault.kind {
            FaultKind::Pause => {
                if let Some(freeze) = Self::index_of(&target).and_then(|i| self.freezes.get(i)) {
                    freeze.freeze_until(now + duration);
                }
            }
            FaultKind::Partition => {
                for other in self.others(&host) {
                    self.sim.partition(host.as_str(), other.as_str());
                }
            }
            FaultKind::PartitionOneway => {
                for other in self.others(&host) {
                    self.sim.partition_oneway(host.as_str(), other.as_str());
                }
            }
            FaultKind::Latency => {
                let delay = fault.delay.unwrap_or(Duration::from_millis(100));
                self.set_latency(&host, delay);
            }
            FaultKind::Failover => self.failover(),
            FaultKind::Restart => {
                // Down for `duration`, then back empty (no persistence).
                self.sim.crash(host.as_str());
                if fault.duration.is_none() {
                    self.sim.bounce(host.as_str());
                }
            }
            FaultKind::ClockDrift => {
                if let Some(clock) = self.clock_of(&target) {
                    clock.set_rate(now, fault.rate.unwrap_or_default());
                }
            }
            FaultKind::ClockJump => {
                if let (Some(clock), Some(offset)) = (self.clock_of(&target), fault.offset) {
                    let magnitude = offset.magnitude.as_nanos() as i128;
                    let signed = if offset.negative {
                        -magnitude
                    } else {
                        magnitude
                    };
                    // A client's clock is monotonic: it never steps back.
                    if !(target.starts_with("client") && signed < 0) {
                        clock.jump(now, signed);
                    }
                }
            }
            FaultKind::Busy => {
                if let Some(node) = Self::index_of(&target).and_then(|i| self.nodes.get(i)) {
                    node.busy_until(now + duration);
                }
            }
            FaultKind::Crash => {
                // Partition first so the death is silent (turmoil's crash
                // would otherwise close connections with a FIN).
                for other in self.others(&host) {
                    self.sim.partition(host.as_str(), other.as_str());
                }
                self.sim.crash(host.as_str());
            }
        }
    }

    fn end(&mut self, fault: &ConcreteFault) {
        let target = self
            .resolved
            .get(&(fault.at, fault.target.clone()))
            .cloned()
            .unwrap_or_else(|| self.resolve(&fault.target));
        let Some(host) = Self::host_of(&target) else {
            return;
        };
        match fault.kind {
            FaultKind::Partition => {
                for other in self.others(&host) {
                    self.sim.repair(host.as_str(), other.as_str());
                }
            }
            FaultKind::PartitionOneway => {
                for other in self.others(&host) {
                    self.sim.repair_oneway(host.as_str(), other.as_str());
                }
            }
            FaultKind::Latency => self.set_latency(&host, BASE_LATENCY),
            FaultKind::Restart => self.sim.bounce(host.as_str()),
            FaultKind::ClockDrift => {
                if let Some(clock) = self.clock_of(&target) {
                    clock.set_rate(self.now(), 0.0);
                }
            }
            FaultKind::Pause | FaultKind::Busy => {}
            FaultKind::Failover | FaultKind::ClockJump | FaultKind::Crash => return,
        }
        self.record(Op::Fault {
            kind: crate::scenario::kind_name(fault.kind).to_owned(),
            target,
            phase: Phase::End,
        });
    }

    /// Sets the one-way delay of every existing link of `host` (turmoil
    /// then delivers each message exactly that late). Links turmoil has
    /// not created yet (no traffic so far) keep the base latency.
    fn set_latency(&self, host: &str, delay: Duration) {
        let ip = self.sim.lookup(host);
        let mut pairs = Vec::new();
        self.sim.links(|links| {
            for link in links {
                let (a, b) = link.pair();
                if a == ip || b == ip {
                    pairs.push((a, b));
                }
            }
        });
        for (a, b) in pairs {
            self.sim.set_link_latency(a, b, delay);
        }
    }

    /// Kills the primary silently and promotes the most up-to-date live
    /// replica, as a Sentinel would; clients find the new primary on their
    /// next connect.
    fn failover(&mut self) {
        let now = self.now();
        let old = self.discovery.primary();
        // Like Sentinel, promote the live replica that applied the most of
        // the old primary's stream (ties: the lowest index).
        let Some(new) = (0..self.nodes.len())
            .filter(|&n| n != old && self.sim.is_host_running(redis_host(n).as_str()))
            .max_by_key(|&n| (self.nodes[n].offset(), std::cmp::Reverse(n)))
        else {
            return;
        };
        let old_owner = self.nodes[old]
            .peek(&self.lock_key, now)
            .map(|(owner, _)| owner);
        let old_host = redis_host(old);
        for other in self.others(&old_host) {
            self.sim.partition(old_host.as_str(), other.as_str());
        }
        self.sim.crash(old_host.as_str());
        self.nodes[new].promote();
        for (index, node) in self.nodes.iter().enumerate() {
            if index != new && index != old {
                node.replicate_from(redis_host(new));
            }
        }
        self.discovery.set_primary(new);
        let new_owner = self.nodes[new]
            .peek(&self.lock_key, now)
            .map(|(owner, _)| owner);
        self.record(Op::Failover {
            new_primary: new,
            old_owner,
            new_owner,
        });
    }

    /// Redlock's authoritative view: the owner whose key a majority of the
    /// live nodes hold, with the time until fewer than a majority hold it
    /// (the majority-th longest pttl); nobody without a majority. A node
    /// that is down still counts with the keys it had, expiring on its own
    /// clock: it grants nobody else meanwhile. A restart empties it when it
    /// comes back.
    fn majority_view(&self, now: Duration) -> Option<(String, Option<u64>)> {
        let quorum = self.nodes.len() / 2 + 1;
        let mut holders: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for node in &self.nodes {
            if let Some((owner, pttl)) = node.peek(&self.lock_key, now) {
                holders
                    .entry(owner)
                    .or_default()
                    .push(pttl.unwrap_or(u64::MAX));
            }
        }
        holders.into_iter().find_map(|(owner, mut pttls)| {
            (pttls.len() >= quorum).then(|| {
                pttls.sort_unstable_by(|a, b| b.cmp(a));
                (
                    owner,
                    pttls.get(quorum - 1).copied().filter(|&p| p != u64::MAX),
                )
            })
        })
    }

    /// Records the authoritative primary's view of the lock key whenever it
    /// changes (owner or primary).
    fn sample_oracle(&mut self, now: Duration) {
        let (primary, peeked) = if self.redlock {
            (0, self.majority_view(now))
        } else {
            let primary = self.discovery.primary();
            (primary, self.nodes[primary].peek(&self.lock_key, now))
        };
        let owner = peeked.as_ref().map(|(owner, _)| owner.clone());
        let current = Some((primary, owner.clone()));
        if current != self.last_oracle {
            self.last_oracle = current;
            self.recorder.record(
                now,
                now,
                Process::Controller,
                Op::Oracle {
                    primary,
                    owner,
                    pttl_ms: peeked.and_then(|(_, pttl)| pttl),
                },
            );
        }
    }
}
