//! One seed of one scenario against real processes: start the deployment,
//! the proxies, the storage and the client processes; apply the seed's
//! fault schedule in real time; record one history; stop everything.
//!
//! By job: [`recorder`] stamps the history's entries; `clients` starts the
//! client processes and their proxies and talks to them; `faults` makes
//! each fault begin and end; `failover` promotes, demotes and re-points
//! nodes; [`node_ops`] holds the one-shot commands sent to a node; `storage`
//! is the fenced storage; `oracle` samples the authoritative view of the
//! lock key; `journal` records its every owner from the primary's
//! replication stream; `sentinel_watch` records Sentinel's own failovers; `stall`
//! records the controller's stalls. This file holds the seed's state and its course. Layering:
//! `clients`, `faults`, `failover` → this file → `recorder`, `node_ops`,
//! `storage`, `oracle`, `journal` (which import nothing from it).

mod clients;
mod failover;
mod faults;
mod journal;
mod node_ops;
mod oracle;
mod recorder;
mod sentinel_watch;
mod stall;
mod storage;

use std::{collections::BTreeMap, net::Ipv4Addr, time::Duration};

use rustix::process::Signal;
use tokio::net::TcpListener;

use self::{
    recorder::{Entries, Recorder},
    storage::serve_storage,
};
use super::{
    ChaosError,
    atomic_migrate::AtomicMigration,
    batches::BatchWatch,
    deploy::Deployment,
    dirs::DataDir,
    firewall::{Firewall, Rule},
    migrate::Migration,
    netns::Network,
    plant::Plant,
    procs::{Ports, ProcId, Processes},
    proxy::Link,
    target::{REAL_SLACK, RealOptions, Target as RunTarget},
    wire::{self, mono_ns},
};
use crate::{
    checker,
    config::{FaultKind, FaultTarget, Scenario, Topology, WorkloadKind},
    history::{Entry, History, Op, Phase, Process},
    outcome::{ConcreteFault, SeedOutcome},
    rng::Rng,
    scenario::names::fault_kind,
    schedule::draw_schedule,
    world::SentinelDraws,
};

/// One client process.
struct ClientProc {
    id: ProcId,
    /// Its stdin, written without blocking the runtime (a stopped client
    /// reads nothing, and a full pipe must not stop the controller).
    stdin: Option<tokio::process::ChildStdin>,
    /// Its links: real port → proxy.
    links: BTreeMap<u16, Link>,
}

/// Everything a running seed holds.
struct Seed<'a> {
    scenario: &'a Scenario,
    /// The bugs planted in this run (`sim chaos --plant`).
    plants: &'a [Plant],
    deployment: Option<Deployment>,
    clients: Vec<ClientProc>,
    storage_port: u16,
    recorder: Recorder,
    /// Faults resolved at their start, by schedule index.
    resolved: BTreeMap<usize, FaultTarget>,
    /// The controller's own draws (the key a slot migration picks).
    rng: Rng,
    /// The simulator's draws for this seed's Sentinel failovers (leader
    /// and lags), replayed on the real sentinels.
    sentinel_draws: SentinelDraws,
    /// Slot migrations under way, by schedule index.
    migrations: BTreeMap<usize, Migration>,
    /// Atomic slot migrations followed, by schedule index (dropped with
    /// the seed, which stops following them).
    atomic_migrations: BTreeMap<usize, AtomicMigration>,
    /// Nodes a partition (both ways) cuts off now, by schedule index: no
    /// failover promotes them, as the simulator promotes no node it cannot
    /// reach.
    cut_off: BTreeMap<usize, usize>,
    /// Re-pointings of a node still retrying (`Seed::repoint`), by node.
    repoints: BTreeMap<usize, tokio::task::JoinHandle<()>>,
    /// Nodes a cluster shard failover's stale window cuts off the bus now,
    /// by schedule index: its end heals the node its begin cut, and no
    /// other (a heal of another would end a hold a partition still needs).
    bus_cut: BTreeMap<usize, usize>,
    /// The run's firewall, when its partitions are the kernel's
    /// ([`super::netns::Network::Kernel`]) and it owns its deployment.
    firewall: Option<Firewall>,
    /// The rules of the partitions in place, by schedule index.
    fired: BTreeMap<usize, Vec<Rule>>,
    /// When each partition healed by the firewall was healed (the shared
    /// monotonic clock, ns), by schedule index, until its end is recorded.
    healed: BTreeMap<usize, u64>,
    /// The busy scripts sent and not answered yet (the oracle's evidence
    /// that a node answering `BUSY` still runs one).
    scripts: node_ops::Scripts,
}

impl Seed<'_> {
    /// Applies `schedule` in real time, its starts and ends in time order,
    /// then waits out the run; stops at the first fault that fails.
    async fn apply(
        &mut self,
        schedule: &[ConcreteFault],
        procs: &mut Processes,
    ) -> Result<(), ChaosError> {
        let mut events: Vec<(Duration, usize, bool)> = Vec::new();
        for (index, fault) in schedule.iter().enumerate() {
            events.push((fault.at, index, true));
            if let Some(duration) = fault.duration
                && lasts(fault.kind)
            {
                events.push((fault.at + duration, index, false));
            }
        }
        events.sort_by_key(|(at, index, start)| (*at, !*start, *index));
        // The schedule counts from the history's epoch, as the simulator's
        // faults and clients share time zero: counted from after the
        // clients' start (13 ms later in the 2026-11-29 archive), a fault
        // due in the run's last milliseconds was recorded past its end,
        // and dropped.
        let now = tokio::time::Instant::now();
        let start = now
            .checked_sub(wire::since(self.recorder.epoch, mono_ns()))
            .unwrap_or(now);
        for (at, index, begin) in events {
            if at >= self.scenario.duration {
                break;
            }
            tokio::time::sleep_until(start + at).await;
            let fault = &schedule[index];
            if begin {
                self.begin(index, fault, procs).await?;
            } else {
                self.end(index, fault, procs).await?;
            }
        }
        tokio::time::sleep_until(start + self.scenario.duration).await;
        Ok(())
    }
}

/// Where one real run writes: its logs, and its servers' data
/// ([`DataDir`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct RunDirs<'a> {
    /// Logs, configs of the controller's own, reports' inputs: kept when
    /// the run fails.
    pub logs: &'a std::path::Path,
    /// The servers' data directories: removed whatever the outcome.
    pub data: &'a std::path::Path,
    /// Where each flavour's server binary is (`super::flavour`).
    pub servers: &'a std::path::Path,
}

/// Runs seed `seed` of `scenario` on real processes; every process it
/// started is gone when it returns (or unwinds). Ctrl-C stops it with
/// [`ChaosError::Interrupted`].
pub fn run_seed(
    scenario: &Scenario,
    seed: u64,
    options: &RealOptions,
) -> Result<SeedOutcome, ChaosError> {
    let schedule = draw_schedule(scenario, seed);
    let dir = options
        .work_dir
        .join(format!("{}-{seed}-{}", scenario.name, std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|source| ChaosError::Io {
        what: dir.display().to_string(),
        source,
    })?;
    // Redis changes into its `--dir` before opening its log: absolute
    // paths only.
    let dir = dir.canonicalize().map_err(|source| ChaosError::Io {
        what: dir.display().to_string(),
        source,
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| ChaosError::Io {
            what: "starting the controller's runtime".to_owned(),
            source,
        })?;
    let data = DataDir::new(&dir)?;
    let mut procs = Processes::with_pids_file(options.pids_file.clone());
    let mut ports = Ports::new(options.base_port);
    let dirs = RunDirs {
        logs: &dir,
        data: data.path(),
        servers: &options.servers,
    };
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = run_on(scenario, seed, &schedule, options, &mut procs, &mut ports, dirs) => outcome,
            _ = tokio::signal::ctrl_c() => Err(ChaosError::Interrupted),
        }
    });
    // Outside the runtime: waiting for the children to die blocks.
    procs.kill_all();
    drop(runtime);
    drop(data);
    let outcome = outcome?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(outcome)
}

/// Runs seed `seed` of `scenario` with `schedule` on real processes,
/// inside the controller's runtime.
async fn run_on(
    scenario: &Scenario,
    seed: u64,
    schedule: &[ConcreteFault],
    options: &RealOptions,
    procs: &mut Processes,
    ports: &mut Ports,
    dirs: RunDirs<'_>,
) -> Result<SeedOutcome, ChaosError> {
    let target = &options.target;
    let dir = dirs.logs;
    let deployment = deploy(scenario, seed, schedule, target, procs, ports, dirs).await?;
    // The kernel's partitions: an empty chain but for the sentinels'
    // addresses, which no partition cuts.
    let firewall = match (&options.network, &deployment) {
        (Network::Kernel, Some(deployment)) => {
            let spared: Vec<_> = deployment.sentinels.iter().map(|s| s.source).collect();
            Some(Firewall::reset(&spared).await?)
        }
        _ => None,
    };
    let entries = Entries::default();
    // The epoch: true time zero of the history, once everything is up.
    let recorder = Recorder {
        entries: entries.clone(),
        epoch: 0,
    };
    let storage = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .map_err(|source| ChaosError::Io {
            what: "binding the storage port".to_owned(),
            source,
        })?;
    let storage_port = storage.local_addr().map_or(0, |a| a.port());
    let mut seed_state = Seed {
        scenario,
        plants: &options.plants,
        deployment,
        clients: Vec::new(),
        storage_port,
        recorder,
        resolved: BTreeMap::new(),
        rng: Rng::fork(seed, 0x5E47_1E11),
        sentinel_draws: SentinelDraws::new(seed),
        migrations: BTreeMap::new(),
        atomic_migrations: BTreeMap::new(),
        cut_off: BTreeMap::new(),
        repoints: BTreeMap::new(),
        bus_cut: BTreeMap::new(),
        firewall,
        fired: BTreeMap::new(),
        healed: BTreeMap::new(),
        scripts: node_ops::Scripts::default(),
    };
    let (reach, ports_to_link) = seed_state.reach(target);
    // The journal's handshake (a snapshot, a fork) before the epoch: the
    // schedule's times count from when the clients can start.
    let journal = seed_state.connect_journal().await?;
    let epoch = mono_ns();
    seed_state.recorder.epoch = epoch;
    let storage_task = tokio::spawn(serve_storage(
        storage,
        seed_state.recorder.clone(),
        options.plants.contains(&Plant::StorageIgnoresFences),
    ));
    let counter_reset = options.plants.contains(&Plant::FenceCounterReset).then(|| {
        tokio::spawn(node_ops::reset_fence_counter(
            seed_state.oracle_ports(target),
        ))
    });
    // The read-write lock's and the semaphore's keys are not one owner's
    // string: their checkers (F1, F2) read the clients' holds alone.
    let one_owner = one_owner(scenario);
    let oracle_task = one_owner.then(|| {
        tokio::spawn(oracle::oracle(
            scenario.topology.clone(),
            seed_state.oracle_nodes(target),
            seed_state.scripts.clone(),
            seed_state.recorder.clone(),
        ))
    });
    let journal_task = journal::start(journal, &seed_state.recorder).await?;
    let sentinel_task = seed_state.watch_sentinels();
    let stall_task = tokio::spawn(stall::watch(seed_state.recorder.clone()));
    // Several locks per client: watch for their operations sharing a
    // script call, the simulator's fact `batched-script-call`.
    let batch_watch =
        (scenario.clients.locks > 1).then(|| BatchWatch::start(&seed_state.oracle_ports(target)));
    for index in 0..scenario.clients.count {
        seed_state
            .spawn_client(index, seed, &reach, &ports_to_link, procs, dir)
            .await?;
    }
    let failure = seed_state.apply(schedule, procs).await.err();
    // Stop the clients first: the history ends here.
    for client in &seed_state.clients {
        procs.signal(client.id, Signal::KILL);
    }
    for client in &seed_state.clients {
        procs.kill(client.id).await;
    }
    storage_task.abort();
    for task in oracle_task
        .into_iter()
        .chain(sentinel_task)
        .chain(journal_task)
        .chain(counter_reset)
        .chain([stall_task])
    {
        task.abort();
    }
    let batched = batch_watch.is_some_and(BatchWatch::finish);
    // Let the reader threads drain what the clients wrote.
    tokio::time::sleep(Duration::from_millis(50)).await;
    if let Some(error) = failure {
        return Err(error);
    }
    Ok(checked(scenario, seed, schedule, entries.take(), batched))
}

/// Starts the deployment of `scenario` for `seed`, its nodes' clocks faked
/// when `schedule` has a server clock fault; none against `--target`.
async fn deploy(
    scenario: &Scenario,
    seed: u64,
    schedule: &[ConcreteFault],
    target: &RunTarget,
    procs: &mut Processes,
    ports: &mut Ports,
    dirs: RunDirs<'_>,
) -> Result<Option<Deployment>, ChaosError> {
    if !matches!(target, RunTarget::Started) {
        return Ok(None);
    }
    let server = super::flavour::find(scenario.server.flavour, dirs.servers).map_err(|why| {
        ChaosError::Start {
            what: format!("a {:?} server", scenario.server.flavour),
            why,
        }
    })?;
    let deployment = Deployment::start(
        server,
        &scenario.topology,
        scenario.server.persistence,
        super::fake_clock::needed(schedule),
        seed,
        procs,
        ports,
        dirs.logs.to_path_buf(),
        dirs.data.to_path_buf(),
    )
    .await?;
    Ok(Some(deployment))
}

/// The run's outcome: its one history, checked (`batched`: a call of the
/// lock script carried several operations).
fn checked(
    scenario: &Scenario,
    seed: u64,
    schedule: &[ConcreteFault],
    mut list: Vec<Entry>,
    batched: bool,
) -> SeedOutcome {
    // One history, ordered by the shared clock at the moment each event
    // happened (a stable sort keeps each process's own order on ties).
    list.retain(|entry| entry.at <= scenario.duration);
    list.sort_by_key(|entry| entry.at);
    let history = History { entries: list };
    let mut verdict = checker::check_real(scenario, schedule, &history, REAL_SLACK);
    if batched {
        verdict.facts.insert("batched-script-call".to_owned());
    }
    SeedOutcome {
        seed,
        schedule: schedule.to_vec(),
        history,
        verdict,
    }
}

/// Whether the lock key of `scenario`'s workload is one owner's string
/// (the mutex's and the fair lock's): what the oracle and the journal read.
fn one_owner(scenario: &Scenario) -> bool {
    matches!(
        scenario.clients.workload.kind,
        WorkloadKind::Mutex | WorkloadKind::Fair
    )
}

/// Whether a fault of `kind` with a duration has an end to apply.
fn lasts(kind: FaultKind) -> bool {
    !matches!(
        kind,
        FaultKind::Crash | FaultKind::Evict | FaultKind::ClockJump
    )
}

impl Seed<'_> {
    /// S5 needs every owner the lock key ever had: the primary's
    /// replication stream, followed from before the first client starts.
    /// Single node and primary-replica, mutex and fair, only (a sentinel
    /// would take the journal for a replica it may promote; a cluster or
    /// Redlock has no one primary; the family's kinds have no S5);
    /// elsewhere S5 is unchecked.
    async fn connect_journal(&self) -> Result<Option<journal::Follower>, ChaosError> {
        let followed = matches!(
            self.scenario.topology,
            Topology::Single | Topology::PrimaryReplica { .. }
        ) && one_owner(self.scenario);
        let Some(deployment) = self.deployment.as_ref().filter(|_| followed) else {
            return Ok(None);
        };
        let node = deployment.primary;
        let Some(primary) = deployment.nodes.get(node) else {
            return Ok(None);
        };
        let follower = journal::connect(node, primary.port, node_ops::lock_key()).await?;
        Ok(Some(follower))
    }

    /// Sentinel elects by itself: its failovers are recorded when they
    /// have completed ([`sentinel_watch`]), by a task this starts.
    fn watch_sentinels(&self) -> Option<tokio::task::JoinHandle<()>> {
        let deployment = self.deployment.as_ref()?;
        if !matches!(self.scenario.topology, Topology::Sentinel { .. }) {
            return None;
        }
        let nodes = deployment
            .nodes
            .iter()
            .map(|node| {
                let mut ports = vec![node.port];
                ports.extend(node.announce.as_ref().map(|link| link.port));
                ports
            })
            .collect();
        Some(tokio::spawn(sentinel_watch::watch(
            nodes,
            deployment.sentinel_ports(),
            deployment.primary,
            self.recorder.clone(),
        )))
    }

    fn deployment(&mut self) -> Result<&mut Deployment, ChaosError> {
        self.deployment.as_mut().ok_or_else(|| {
            ChaosError::Internal("a server-side fault reached a run against --target".to_owned())
        })
    }

    fn resolve(&self, target: FaultTarget) -> FaultTarget {
        match target {
            FaultTarget::Primary => {
                FaultTarget::Redis(self.deployment.as_ref().map_or(0, |d| d.primary))
            }
            other => other,
        }
    }

    fn record_fault(&self, fault: &ConcreteFault, target: FaultTarget, phase: Phase) {
        self.record_fault_at(mono_ns(), fault, target, phase);
    }

    /// As [`Self::record_fault`], stamped at `mono` (the shared monotonic
    /// clock, ns).
    fn record_fault_at(&self, mono: u64, fault: &ConcreteFault, target: FaultTarget, phase: Phase) {
        self.recorder.record_at(
            mono,
            Process::Controller,
            Op::Fault {
                kind: fault_kind(fault.kind).name.to_owned(),
                target: target.to_string(),
                phase,
            },
        );
    }
}
