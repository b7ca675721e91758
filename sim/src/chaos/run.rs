//! One seed of one scenario against real processes: start the deployment,
//! the proxies, the storage and the client processes; apply the seed's
//! fault schedule in real time; record one history; stop everything.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Write},
    net::Ipv4Addr,
    process::ChildStdin,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use rustix::process::Signal;
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt},
    net::TcpListener,
};

use super::{
    ChaosError, Target as RunTarget,
    batches::BatchWatch,
    cut::{self, Proxy},
    deploy::{Deployment, MASTER, admin},
    procs::{Ports, ProcId, Processes},
    proxy::{self, Link},
    wire::{ClientArgs, ClientCommand, ClientLine, Reach, mono_ns, since},
};
use crate::{
    checker,
    client::{KEY, client_seed},
    config::{FaultKind, FaultTarget, Scenario, Topology, WorkloadKind},
    history::{Entry, History, Op, Phase, Process},
    outcome::{ConcreteFault, SeedOutcome},
    rng::Rng,
    scenario::names::fault_kind,
    world::SentinelDraws,
};

/// The history entries, from every source, before ordering.
#[derive(Debug, Clone, Default)]
struct Entries(Arc<Mutex<Vec<Entry>>>);

impl Entries {
    fn push(&self, entry: Entry) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(entry);
    }

    fn take(&self) -> Vec<Entry> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The controller's own recorder: stamps with the shared clock now.
#[derive(Debug, Clone)]
struct Recorder {
    entries: Entries,
    epoch: u64,
}

impl Recorder {
    fn record(&self, process: Process, op: Op) {
        self.record_at(mono_ns(), process, op);
    }

    /// A slot migration moved `key` from node `from` to node `to`.
    fn record_migrated(&self, key: String, from: usize, to: usize) {
        self.record(Process::Controller, Op::Migrated { key, from, to });
    }

    fn record_at(&self, mono: u64, process: Process, op: Op) {
        let at = since(self.epoch, mono);
        self.entries.push(Entry {
            at,
            local: at,
            process,
            op,
        });
    }
}

/// One client process.
struct ClientProc {
    id: ProcId,
    stdin: Option<ChildStdin>,
    /// Its links: real port → proxy.
    links: BTreeMap<u16, Link>,
}

/// The lock key in Redis (as the adapter names it).
pub(super) fn lock_key() -> String {
    lock_core::scripts::KeyNames::new("lock", KEY).lock
}

/// Everything a running seed holds.
struct Seed<'a> {
    scenario: &'a Scenario,
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
    migrations: BTreeMap<usize, super::migrate::Migration>,
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
        let start = tokio::time::Instant::now();
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
/// (`super::DataDir`).
#[derive(Debug, Clone, Copy)]
pub(super) struct RunDirs<'a> {
    /// Logs, configs of the controller's own, reports' inputs: kept when
    /// the run fails.
    pub logs: &'a std::path::Path,
    /// The servers' data directories: removed whatever the outcome.
    pub data: &'a std::path::Path,
}

/// Runs seed `seed` of `scenario` with `schedule` on real processes.
pub(super) async fn run_seed(
    scenario: &Scenario,
    seed: u64,
    schedule: &[ConcreteFault],
    target: &RunTarget,
    procs: &mut Processes,
    ports: &mut Ports,
    dirs: RunDirs<'_>,
) -> Result<SeedOutcome, ChaosError> {
    let RunDirs { logs: dir, data } = dirs;
    let deployment = match target {
        RunTarget::Started => Some(
            Deployment::start(
                &scenario.topology,
                scenario.server.persistence,
                seed,
                procs,
                ports,
                dir.to_path_buf(),
                data.to_path_buf(),
            )
            .await?,
        ),
        RunTarget::Url { .. } => None,
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
        deployment,
        clients: Vec::new(),
        storage_port,
        recorder,
        resolved: BTreeMap::new(),
        rng: Rng::fork(seed, 0x5E47_1E11),
        sentinel_draws: SentinelDraws::new(seed),
        migrations: BTreeMap::new(),
        cut_off: BTreeMap::new(),
        repoints: BTreeMap::new(),
        bus_cut: BTreeMap::new(),
    };
    let (reach, ports_to_link) = seed_state.reach(target);
    let epoch = mono_ns();
    seed_state.recorder.epoch = epoch;
    let storage_task = tokio::spawn(serve_storage(storage, seed_state.recorder.clone()));
    // The read-write lock's and the semaphore's keys are not one owner's
    // string: their checkers (F1, F2) read the clients' holds alone.
    let one_owner = matches!(
        scenario.clients.workload.kind,
        WorkloadKind::Mutex | WorkloadKind::Fair
    );
    let oracle_task = one_owner.then(|| {
        tokio::spawn(oracle(
            scenario.topology.clone(),
            seed_state.oracle_ports(target),
            seed_state.recorder.clone(),
        ))
    });
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
        procs.kill(client.id);
    }
    storage_task.abort();
    if let Some(task) = oracle_task {
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
    let mut verdict = checker::check_real(scenario, schedule, &history, super::REAL_SLACK);
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

/// Whether a fault of `kind` with a duration has an end to apply.
fn lasts(kind: FaultKind) -> bool {
    !matches!(
        kind,
        FaultKind::Crash | FaultKind::Evict | FaultKind::ClockJump
    )
}

impl Seed<'_> {
    fn deployment(&mut self) -> Result<&mut Deployment, ChaosError> {
        self.deployment.as_mut().ok_or_else(|| {
            ChaosError::Internal("a server-side fault reached a run against --target".to_owned())
        })
    }

    /// How clients reach the deployment, and the ports they link to: the
    /// port a client dials, and the real one its link forwards to (a
    /// node's announced proxy port leads straight to the node).
    fn reach(&self, target: &RunTarget) -> (Reach, Vec<(u16, u16)>) {
        let mut ports = Vec::new();
        let reach = match (target, &self.deployment) {
            (RunTarget::Url { port, .. }, _) => {
                ports.push((*port, *port));
                Reach::Primary {
                    nodes: vec![*port],
                    primary: 0,
                }
            }
            (RunTarget::Started, Some(deployment)) => {
                let nodes: Vec<u16> = deployment.nodes.iter().map(|n| n.port).collect();
                for node in &deployment.nodes {
                    ports.push((node.port, node.port));
                    if node.announce.is_some() {
                        ports.push((node.reached_at(), node.port));
                    }
                }
                match &self.scenario.topology {
                    Topology::Single | Topology::PrimaryReplica { .. } => Reach::Primary {
                        nodes,
                        primary: deployment.primary,
                    },
                    Topology::Redlock { .. } => Reach::Redlock { nodes },
                    Topology::Sentinel { .. } => Reach::Sentinel {
                        sentinels: deployment.sentinel_ports(),
                        master: MASTER.to_owned(),
                    },
                    Topology::Cluster { .. } => Reach::Cluster { nodes },
                }
            }
            (RunTarget::Started, None) => Reach::Primary {
                nodes: Vec::new(),
                primary: 0,
            },
        };
        ports.push((self.storage_port, self.storage_port));
        (reach, ports)
    }

    /// The ports the oracle reads (every node, in order).
    fn oracle_ports(&self, target: &RunTarget) -> Vec<u16> {
        match (target, &self.deployment) {
            (RunTarget::Url { port, .. }, _) => vec![*port],
            (_, Some(deployment)) => deployment.nodes.iter().map(|n| n.port).collect(),
            (_, None) => Vec::new(),
        }
    }

    async fn spawn_client(
        &mut self,
        index: usize,
        seed: u64,
        reach: &Reach,
        real_ports: &[(u16, u16)],
        procs: &mut Processes,
        dir: &std::path::Path,
    ) -> Result<(), ChaosError> {
        let mut links = BTreeMap::new();
        for &(dialed, port) in real_ports {
            let link = proxy::start(port, seed)
                .await
                .map_err(|source| ChaosError::Io {
                    what: format!("starting client-{index}'s proxy to port {port}"),
                    source,
                })?;
            links.insert(dialed, link);
        }
        let args = ClientArgs {
            scenario: self.scenario.clone(),
            index,
            seed: client_seed(seed, index),
            epoch_ns: self.recorder.epoch,
            reach: reach.clone(),
            links: links
                .iter()
                .map(|(real, link)| (*real, link.port))
                .collect(),
            storage: self.storage_port,
        };
        let json = serde_json::to_string(&args).map_err(|e| ChaosError::Internal(e.to_string()))?;
        let exe = std::env::current_exe().map_err(|source| ChaosError::Io {
            what: "the sim binary's own path".to_owned(),
            source,
        })?;
        let name = format!("client-{index}");
        let (id, pipes) = procs.spawn(
            &name,
            &exe.display().to_string(),
            &["chaos-client".to_owned(), json],
            true,
            &dir.join(format!("{name}.stderr")),
        )?;
        if let Some(stdout) = pipes.stdout {
            let recorder = self.recorder.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { return };
                    if let Ok(parsed) = serde_json::from_str::<ClientLine>(&line) {
                        let at = since(recorder.epoch, parsed.mono);
                        recorder.entries.push(Entry {
                            at,
                            local: parsed.local,
                            process: Process::Client(index),
                            op: parsed.op,
                        });
                    }
                }
            });
        }
        self.clients.push(ClientProc {
            id,
            stdin: pipes.stdin,
            links,
        });
        Ok(())
    }

    fn command(&mut self, client: usize, command: ClientCommand) {
        if let Some(stdin) = self.clients.get_mut(client).and_then(|c| c.stdin.as_mut())
            && let Ok(mut text) = serde_json::to_string(&command)
        {
            text.push('\n');
            // A crashed client reads nothing: nothing to tell it.
            let _ = stdin.write_all(text.as_bytes());
            let _ = stdin.flush();
        }
    }

    /// The links a fault on `target` acts on.
    fn links_of(&self, target: FaultTarget) -> Vec<Link> {
        if let FaultTarget::Redis(n) = target {
            let Some(node) = self.deployment.as_ref().and_then(|d| d.nodes.get(n)) else {
                return Vec::new();
            };
            return self
                .clients
                .iter()
                .flat_map(|c| {
                    c.links
                        .iter()
                        .filter(|(dialed, _)| node.answers_on(**dialed))
                        .map(|(_, link)| link.clone())
                })
                .collect();
        }
        let port = match target {
            FaultTarget::Client(n) => {
                return self
                    .clients
                    .get(n)
                    .map(|c| c.links.values().cloned().collect())
                    .unwrap_or_default();
            }
            FaultTarget::Storage => Some(self.storage_port),
            FaultTarget::Redis(_) | FaultTarget::Primary => None,
        };
        let Some(port) = port else {
            return Vec::new();
        };
        self.clients
            .iter()
            .filter_map(|c| c.links.get(&port).cloned())
            .collect()
    }

    /// Makes the death of node `n` silent to the clients, as a host that
    /// dies is in the simulator (cut off first, then crashed): their links
    /// to it hold both directions for good, so an open connection hears
    /// no FIN from the kill and hangs until the client's own timeout, and
    /// the client then dials whichever node it is told is primary.
    ///
    /// Its replication is held too ([`cut::death_acts`]): what the dying
    /// node had sent its replicas but the proxy had not yet passed on never
    /// arrives, as a simulated replica's queue is dropped at the death.
    fn silence(&self, n: usize) {
        let Some(deployment) = self.deployment.as_ref() else {
            return;
        };
        let acts = cut::death_acts(&deployment.shape(), n);
        self.act_on_proxies(&acts, false, true, Duration::ZERO);
    }

    fn resolve(&self, target: FaultTarget) -> FaultTarget {
        match target {
            FaultTarget::Primary => {
                FaultTarget::Redis(self.deployment.as_ref().map_or(0, |d| d.primary))
            }
            other => other,
        }
    }

    /// Asks the deployment which node is primary now (Sentinel and
    /// Cluster move it themselves).
    async fn refresh_primary(&mut self) {
        let topology = self.scenario.topology.clone();
        let Some(deployment) = self.deployment.as_mut() else {
            return;
        };
        let port = match topology {
            Topology::Sentinel { .. } => {
                let mut found = None;
                for sentinel in deployment.sentinel_ports() {
                    let Ok(mut conn) = admin(sentinel).await else {
                        continue;
                    };
                    let answer: redis::RedisResult<(String, u16)> = redis::cmd("SENTINEL")
                        .arg("GET-MASTER-ADDR-BY-NAME")
                        .arg(MASTER)
                        .query_async(&mut conn)
                        .await;
                    if let Ok((_, port)) = answer {
                        found = Some(port);
                        break;
                    }
                }
                found
            }
            Topology::Cluster { .. } => cluster_owner(deployment).await.map(|(port, _)| port),
            _ => None,
        };
        if let Some(port) = port
            && let Some(index) = deployment.nodes.iter().position(|n| n.answers_on(port))
        {
            deployment.primary = index;
        }
    }

    fn record_fault(&self, fault: &ConcreteFault, target: FaultTarget, phase: Phase) {
        self.recorder.record(
            Process::Controller,
            Op::Fault {
                kind: fault_kind(fault.kind).name.to_owned(),
                target: target.to_string(),
                phase,
            },
        );
    }

    async fn begin(
        &mut self,
        index: usize,
        fault: &ConcreteFault,
        procs: &mut Processes,
    ) -> Result<(), ChaosError> {
        if fault.target == FaultTarget::Primary {
            self.refresh_primary().await;
        }
        let target = self.resolve(fault.target);
        self.resolved.insert(index, target);
        self.record_fault(fault, target, Phase::Start);
        match (fault.kind, target) {
            (FaultKind::Pause, FaultTarget::Client(n)) => {
                if let Some(client) = self.clients.get(n) {
                    procs.signal(client.id, Signal::STOP);
                }
            }
            (FaultKind::Pause, FaultTarget::Redis(n)) => {
                if let Some(id) = self.deployment()?.nodes[n].proc {
                    procs.signal(id, Signal::STOP);
                }
            }
            (FaultKind::Crash, FaultTarget::Client(n)) => {
                if let Some(client) = self.clients.get(n) {
                    procs.kill(client.id);
                }
            }
            (FaultKind::Crash | FaultKind::Restart, FaultTarget::Redis(n)) => {
                if fault.kind == FaultKind::Crash {
                    self.silence(n);
                }
                let deployment = self.deployment()?;
                if let Some(id) = deployment.nodes[n].proc.take() {
                    procs.kill(id);
                }
                if fault.kind == FaultKind::Restart && fault.duration.is_none() {
                    deployment.start_node(procs, n)?;
                }
            }
            (
                FaultKind::Partition | FaultKind::PartitionOneway | FaultKind::Latency,
                FaultTarget::Redis(n),
            ) => {
                if fault.kind == FaultKind::Partition {
                    self.cut_off.insert(index, n);
                }
                self.cut_server(n, fault, true);
            }
            (FaultKind::Partition | FaultKind::PartitionOneway | FaultKind::Latency, _) => {
                self.cut_links(fault, target);
            }
            (FaultKind::ClockDrift | FaultKind::ClockJump, FaultTarget::Client(n)) => {
                self.move_clock(n, fault);
            }
            (FaultKind::Busy | FaultKind::Evict, FaultTarget::Redis(n)) => {
                self.load_node(n, fault, target).await?;
            }
            (FaultKind::Failover, FaultTarget::Redis(old))
                if matches!(self.scenario.topology, Topology::Sentinel { .. }) =>
            {
                self.sentinel_failover(old, fault.duration, procs).await?;
            }
            (FaultKind::Failover, FaultTarget::Redis(old)) => {
                self.failover(old, fault.duration, procs).await?;
            }
            (FaultKind::ShardFailover, FaultTarget::Redis(_)) => {
                if let Some(old) = self.shard_failover(fault.duration).await? {
                    self.bus_cut.insert(index, old);
                }
            }
            (FaultKind::SlotMigration, _) => self.begin_migration(index, fault).await?,
            (kind, target) => {
                return Err(ChaosError::Internal(format!(
                    "{} on {target} reached the controller unrefused",
                    fault_kind(kind).name
                )));
            }
        }
        Ok(())
    }

    /// A partition (both ways, or one way: a client's requests, a node's
    /// replies) or latency begins on `target`'s links.
    fn cut_links(&self, fault: &ConcreteFault, target: FaultTarget) {
        let delay = fault.delay.unwrap_or(Duration::from_millis(100));
        for link in self.links_of(target) {
            if fault.kind == FaultKind::Latency {
                link.set(|mode| mode.delay = delay);
            } else {
                let client = matches!(target, FaultTarget::Client(_));
                link.set(|mode| cut::hold_link(mode, fault.kind, client, true));
            }
        }
    }

    /// A partition (both ways, or one way: what the server sends) or
    /// latency of node `n` begins (`begin`) or ends, on every proxy that
    /// carries its traffic ([`cut::server_acts`]): its clients' links, its
    /// replication and its bus. Latency, as the simulator's, slows only
    /// the links that have carried traffic when it begins (turmoil sets
    /// the latency of the links that exist; a link made later keeps the
    /// base latency); its end clears them all.
    fn cut_server(&self, n: usize, fault: &ConcreteFault, begin: bool) {
        let Some(deployment) = self.deployment.as_ref() else {
            return;
        };
        let latency = fault.kind == FaultKind::Latency;
        let delay = fault.delay.unwrap_or(Duration::from_millis(100));
        let acts = cut::server_acts(&deployment.shape(), n, fault.kind);
        self.act_on_proxies(&acts, latency, begin, delay);
    }

    /// Applies `acts` ([`cut::apply`]) to the proxies each names.
    fn act_on_proxies(&self, acts: &[cut::Act], latency: bool, begin: bool, delay: Duration) {
        let Some(deployment) = self.deployment.as_ref() else {
            return;
        };
        for &act in acts {
            let links = match act.proxy {
                Proxy::Clients(node) => self.links_of(FaultTarget::Redis(node)),
                proxy => deployment.node_proxy(proxy).into_iter().cloned().collect(),
            };
            for link in links {
                let seen = link.seen();
                link.set(|mode| cut::apply(mode, act, latency, begin, delay, &seen));
            }
        }
    }

    /// Client `n`'s clock drifts or jumps forward (a monotonic clock never
    /// steps back), through its injected clock.
    fn move_clock(&mut self, n: usize, fault: &ConcreteFault) {
        if fault.kind == FaultKind::ClockDrift {
            let rate = fault.rate.unwrap_or_default();
            self.command(n, ClientCommand::Drift { rate });
        } else if let Some(offset) = fault.offset
            && !offset.negative
        {
            let ns = offset.magnitude.as_nanos() as i64;
            self.command(n, ClientCommand::Jump { ns });
        }
    }

    /// Node `n` runs a busy script, or evicts the lock key (an instant:
    /// its end is recorded at once).
    async fn load_node(
        &mut self,
        n: usize,
        fault: &ConcreteFault,
        target: FaultTarget,
    ) -> Result<(), ChaosError> {
        let port = self.deployment()?.nodes[n].port;
        if fault.kind == FaultKind::Busy {
            let duration = fault.duration.unwrap_or(Duration::from_millis(100));
            tokio::spawn(busy(port, duration));
            return Ok(());
        }
        if let Some((key, value)) = evict(port).await {
            self.recorder.record(
                Process::Controller,
                Op::Evicted {
                    node: n,
                    key,
                    value,
                },
            );
        }
        self.record_fault(fault, target, Phase::End);
        Ok(())
    }

    /// Slot migration `index` begins: its keys start moving.
    async fn begin_migration(
        &mut self,
        index: usize,
        fault: &ConcreteFault,
    ) -> Result<(), ChaosError> {
        let pick = self.rng.between(0, 1 << 16);
        let recorder = self.recorder.clone();
        let migration = super::migrate::begin(
            self.deployment()?,
            &lock_key(),
            pick,
            fault.duration.unwrap_or_default(),
            move |key, from, to| recorder.record_migrated(key, from, to),
        )
        .await?;
        if let Some(migration) = migration {
            self.migrations.insert(index, migration);
        }
        Ok(())
    }

    async fn end(
        &mut self,
        index: usize,
        fault: &ConcreteFault,
        procs: &mut Processes,
    ) -> Result<(), ChaosError> {
        let target = self
            .resolved
            .get(&index)
            .copied()
            .unwrap_or_else(|| self.resolve(fault.target));
        match (fault.kind, target) {
            (FaultKind::Pause, FaultTarget::Client(n)) => {
                if let Some(client) = self.clients.get(n) {
                    procs.signal(client.id, Signal::CONT);
                }
            }
            (FaultKind::Pause, FaultTarget::Redis(n)) => {
                if let Some(id) = self.deployment()?.nodes[n].proc {
                    procs.signal(id, Signal::CONT);
                }
            }
            (FaultKind::Restart, FaultTarget::Redis(n)) => {
                self.deployment()?.start_node(procs, n)?;
            }
            (
                FaultKind::Partition | FaultKind::PartitionOneway | FaultKind::Latency,
                FaultTarget::Redis(n),
            ) => {
                self.cut_off.remove(&index);
                self.cut_server(n, fault, false);
            }
            (FaultKind::Partition | FaultKind::PartitionOneway, _) => {
                let client = matches!(target, FaultTarget::Client(_));
                for link in self.links_of(target) {
                    link.set(|mode| cut::hold_link(mode, fault.kind, client, false));
                }
            }
            (FaultKind::Latency, _) => {
                for link in self.links_of(target) {
                    link.set(|mode| mode.delay = Duration::ZERO);
                }
            }
            (FaultKind::ClockDrift, FaultTarget::Client(n)) => {
                self.command(n, ClientCommand::Drift { rate: 0.0 });
            }
            (FaultKind::Failover, FaultTarget::Redis(old))
                if !matches!(self.scenario.topology, Topology::Sentinel { .. }) =>
            {
                self.demote(old).await?;
            }
            // The bus heals: the old primary hears of the new epoch and
            // rejoins as a replica of its shard's primary.
            (FaultKind::ShardFailover, _) => {
                if let Some(old) = self.bus_cut.remove(&index) {
                    self.deployment()?.cut_off_bus(old, false);
                }
            }
            (FaultKind::SlotMigration, _) => {
                if let Some(migration) = self.migrations.remove(&index) {
                    let recorder = self.recorder.clone();
                    super::migrate::finish(migration, move |key, from, to| {
                        recorder.record_migrated(key, from, to);
                    })
                    .await?;
                }
            }
            _ => {}
        }
        self.record_fault(fault, target, Phase::End);
        Ok(())
    }

    /// Promotes the most up-to-date replica and records the failover.
    /// Without a stale window the old primary dies now, silently (see
    /// [`Self::silence`]); with one it stays up and writable, its clients
    /// still connected, until [`Self::demote`].
    async fn failover(
        &mut self,
        old: usize,
        window: Option<Duration>,
        procs: &mut Processes,
    ) -> Result<(), ChaosError> {
        let cut_off: Vec<usize> = self.cut_off.values().copied().collect();
        // The replicas that could be promoted: up and not cut off.
        let candidates: Vec<usize> = self
            .deployment()?
            .nodes
            .iter()
            .enumerate()
            .filter(|(index, node)| {
                *index != old && node.proc.is_some() && !cut_off.contains(index)
            })
            .map(|(index, _)| index)
            .collect();
        // As the simulator's: with none, no failover, and the old primary
        // stays as it is. Killing it first left a node that the simulator
        // keeps serving dead for the rest of the run (`mix-failover-no-wait`
        // seed 163: the third failover, of the last live node, where every
        // real acquire after it failed and the simulator's clients were
        // granted 14).
        if candidates.is_empty() {
            return Ok(());
        }
        let old_owner = key_owner(self.deployment()?.nodes[old].port).await;
        if window.is_none() {
            self.silence(old);
        }
        let deployment = self.deployment()?;
        if window.is_none()
            && let Some(id) = deployment.nodes[old].proc.take()
        {
            procs.kill(id);
        }
        // The replica with the largest applied offset wins.
        let mut best: Option<(u64, usize)> = None;
        for &index in &candidates {
            let Ok(mut conn) = admin(deployment.nodes[index].port).await else {
                continue;
            };
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query_async(&mut conn)
                .await
                .unwrap_or_default();
            let offset = info
                .lines()
                .find_map(|l| l.strip_prefix("slave_repl_offset:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
            if best.is_none_or(|(o, _)| offset > o) {
                best = Some((offset, index));
            }
        }
        let Some((_, new)) = best else {
            return Ok(());
        };
        let mut conn = admin(deployment.nodes[new].port).await?;
        let _: redis::Value = redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query_async(&mut conn)
            .await
            .map_err(|e| ChaosError::Start {
                what: format!("REPLICAOF NO ONE on redis-{new}"),
                why: e.to_string(),
            })?;
        let new_port = deployment.nodes[new].port;
        let new_reached = deployment.nodes[new].reached_at();
        let others: Vec<(usize, u16)> = deployment
            .nodes
            .iter()
            .enumerate()
            .filter(|(index, node)| *index != new && *index != old && node.proc.is_some())
            .map(|(index, node)| (index, node.port))
            .collect();
        deployment.primary = new;
        for (index, port) in others {
            self.repoint(index, port, new_reached).await;
        }
        for client in 0..self.clients.len() {
            self.command(client, ClientCommand::Primary { node: new });
        }
        self.record_failover(old, new, new_port, old_owner).await;
        Ok(())
    }

    /// Records a failover from node `old` to node `new` as the simulated
    /// world does, with the lock key's owner read back from the new primary
    /// (at `new_port`).
    async fn record_failover(
        &self,
        old: usize,
        new: usize,
        new_port: u16,
        old_owner: Option<String>,
    ) {
        let new_owner = key_owner(new_port).await;
        self.recorder.record(
            Process::Controller,
            Op::Failover {
                old_primary: old,
                new_primary: new,
                old_owner,
                new_owner,
            },
        );
    }

    /// Sentinel: without a stale window the primary dies silently and the
    /// sentinels fail it over when they notice (`down-after-milliseconds`);
    /// with one, `SENTINEL FAILOVER` promotes a replica while the old
    /// primary is up, led by the sentinel the simulator draws, the others
    /// adopting it their drawn lags late ([`super::sentinel`]); whatever
    /// stale window follows is Sentinel's own.
    async fn sentinel_failover(
        &mut self,
        old: usize,
        window: Option<Duration>,
        procs: &mut Processes,
    ) -> Result<(), ChaosError> {
        let Topology::Sentinel { sentinel_lag, .. } = self.scenario.topology else {
            return Ok(());
        };
        let count = self.deployment()?.sentinels.len();
        // Drawn for every failover, as the simulator draws, so that a
        // later one meets the same draws on both sides.
        let adoption = self.sentinel_draws.next(count, sentinel_lag);
        if window.is_none() {
            self.silence(old);
            if let Some(id) = self.deployment()?.nodes[old].proc.take() {
                procs.kill(id);
            }
            return Ok(());
        }
        super::sentinel::failover(self.deployment()?, &adoption).await
    }

    /// Cluster: a replica of the shard owning the lock key's slot takes
    /// over (`CLUSTER FAILOVER TAKEOVER`: no agreement from the old
    /// primary or the others), and the failover is recorded; without a
    /// stale window the old primary stays up and hears of the new epoch
    /// over the bus at once, so it is demoted at once and resyncs from the
    /// new primary (through its replication proxy), as the simulator's
    /// forced failover demotes it, its clients still connected; with one
    /// it is cut off the cluster bus first, until the fault's end heals it.
    /// Returns the node it cut off the bus, if any.
    async fn shard_failover(
        &mut self,
        window: Option<Duration>,
    ) -> Result<Option<usize>, ChaosError> {
        let deployment = self.deployment()?;
        let Some((old_port, replicas)) = cluster_owner(deployment).await else {
            return Ok(None);
        };
        let old = deployment.nodes.iter().position(|n| n.port == old_port);
        let old_owner = key_owner(old_port).await;
        let deployment = self.deployment()?;
        // The stale window: the old primary is cut off the cluster bus
        // first, so the takeover's news cannot reach it; it keeps serving
        // its clients and believing it owns its slots until the window
        // ends and the bus heals (or, past the node timeout, it finds
        // itself cut off and stops).
        let cut = window.and(old);
        if let Some(old) = cut {
            deployment.cut_off_bus(old, true);
        }
        for port in replicas {
            let Ok(mut conn) = admin(port).await else {
                continue;
            };
            let done: redis::RedisResult<redis::Value> = redis::cmd("CLUSTER")
                .arg("FAILOVER")
                .arg("TAKEOVER")
                .query_async(&mut conn)
                .await;
            if done.is_ok() {
                if let Some(new) = deployment.nodes.iter().position(|n| n.port == port) {
                    deployment.primary = new;
                    if let Some(old) = old {
                        self.record_failover(old, new, port, old_owner).await;
                    }
                }
                return Ok(cut);
            }
        }
        Ok(cut)
    }

    /// The stale window is over: the old primary becomes a replica of the
    /// new one (its clients stay connected and meet `READONLY`).
    async fn demote(&mut self, old: usize) -> Result<(), ChaosError> {
        let deployment = self.deployment()?;
        let primary_port = deployment.nodes[deployment.primary].reached_at();
        if deployment.nodes[old].proc.is_some() {
            let port = deployment.nodes[old].port;
            self.repoint(old, port, primary_port).await;
        }
        Ok(())
    }

    /// Points node `index` (listening on `port`) at the primary reached at
    /// `primary` with `REPLICAOF`, retried every 20 ms in the background
    /// while the node refuses it, as Sentinel retries a replica's
    /// reconfiguration: a node running a busy script answers `BUSY` to
    /// everything, and the simulator re-points it all the same. Giving up
    /// at the first refusal left a busy replica following the dead primary
    /// for the rest of the run (`mix-failover-no-wait` seed 332: promoted
    /// by the next failover with none of its primary's writes since, it
    /// lost a key granted 483 ms before, where the simulator kept it). A
    /// later re-pointing of the node replaces one still retrying.
    async fn repoint(&mut self, index: usize, port: u16, primary: u16) {
        if let Some(pending) = self.repoints.remove(&index) {
            pending.abort();
        }
        if replica_of(port, primary).await {
            return;
        }
        let retrying = tokio::spawn(async move {
            // A busy script ends within the run; the run's end drops the
            // runtime, and this task with it.
            loop {
                tokio::time::sleep(Duration::from_millis(20)).await;
                if replica_of(port, primary).await {
                    return;
                }
            }
        });
        self.repoints.insert(index, retrying);
    }
}

/// Whether node `port` took `REPLICAOF 127.0.0.1 primary`.
async fn replica_of(port: u16, primary: u16) -> bool {
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
async fn cluster_owner(deployment: &Deployment) -> Option<(u16, Vec<u16>)> {
    let slot = lock_core::internal::cluster::slot_of(lock_key());
    super::migrate::slot_owner(deployment, slot).await
}

/// The lock key's owner on the node at `port` now (`None` if absent or
/// the node does not answer).
async fn key_owner(port: u16) -> Option<String> {
    let mut conn = admin(port).await.ok()?;
    redis::cmd("GET")
        .arg(lock_key())
        .query_async::<Option<String>>(&mut conn)
        .await
        .ok()
        .flatten()
}

/// Makes the node on `port` answer BUSY for `duration`: a script that
/// spins until then (Redis answers BUSY to others once it has run for
/// `busy-reply-threshold`).
async fn busy(port: u16, duration: Duration) {
    let Ok(mut conn) = admin(port).await else {
        return;
    };
    let script = "local t = redis.call('TIME') \
        local stop = tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(ARGV[1]) \
        while true do \
          local n = redis.call('TIME') \
          if tonumber(n[1]) * 1000000 + tonumber(n[2]) >= stop then return 1 end \
        end";
    let _: redis::RedisResult<redis::Value> = redis::cmd("EVAL")
        .arg(script)
        .arg(0)
        .arg(duration.as_micros() as u64)
        .query_async(&mut conn)
        .await;
}

/// Evicts under memory pressure: `maxmemory` just above what is used,
/// `volatile-ttl` (the key nearest expiry goes first: the lock's), and
/// filler keys with long ttls until the lock key is gone. Returns the
/// lock key and its value if it was evicted.
async fn evict(port: u16) -> Option<(String, Option<String>)> {
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

/// The fenced storage: accepts a write iff its fence is at least the
/// highest accepted, recording each decision when it is made.
async fn serve_storage(listener: TcpListener, recorder: Recorder) {
    let highest: Arc<Mutex<Option<u64>>> = Arc::default();
    while let Ok((stream, _)) = listener.accept().await {
        let recorder = recorder.clone();
        let highest = Arc::clone(&highest);
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut lines = tokio::io::BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let words: Vec<&str> = line.split_whitespace().collect();
                let answer = match words.as_slice() {
                    ["F", token, fence, value] => {
                        match (fence.parse::<u64>(), value.parse::<u64>()) {
                            (Ok(fence), Ok(value)) => {
                                let accepted = {
                                    let mut highest =
                                        highest.lock().unwrap_or_else(PoisonError::into_inner);
                                    let accepted = highest.is_none_or(|h| fence >= h);
                                    if accepted {
                                        *highest = Some(fence);
                                    }
                                    accepted
                                };
                                recorder.record(
                                    Process::Storage,
                                    Op::WriteOk {
                                        token: (*token).to_owned(),
                                        fence,
                                        value,
                                        accepted,
                                    },
                                );
                                if accepted { "1\n" } else { "0\n" }
                            }
                            _ => "E\n",
                        }
                    }
                    ["P", token, _] => {
                        recorder.record(
                            Process::Storage,
                            Op::RegisterWrite {
                                token: (*token).to_owned(),
                                phase: Phase::End,
                            },
                        );
                        "1\n"
                    }
                    _ => "E\n",
                };
                if write.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// The longest round trip of an oracle sample that is kept: a slower
/// answer says too little about when the key looked like that.
const ORACLE_RTT: Duration = Duration::from_millis(5);

/// Samples the authoritative view of the lock key every 2 ms, over direct
/// connections (no proxy): single, primary-replica and Sentinel read the
/// node that answers `role:master` (while a deposed primary says `master`
/// too, the one last seen promoted from replica), Redlock a majority (a
/// node that does not answer counted with the key it had, until its ttl),
/// a cluster the node that serves the key's slot (while the cluster is
/// down and every node answers `CLUSTERDOWN`, the key it last read, until
/// its ttl: nothing can write it meanwhile). Each sample is stamped when
/// it was sent, and kept only if the answer came within [`ORACLE_RTT`].
async fn oracle(topology: Topology, ports: Vec<u16>, recorder: Recorder) {
    let key = lock_key();
    let redlock = matches!(topology, Topology::Redlock { .. });
    let mut conns: Vec<Option<redis::aio::MultiplexedConnection>> = vec![None; ports.len()];
    let mut last: Option<(usize, Option<String>)> = None;
    // Primary-replica and Sentinel: the node last seen turning from
    // replica to master is the authority while a deposed primary still
    // says master too (the stale window).
    let follows_promotions = matches!(
        topology,
        Topology::PrimaryReplica { .. } | Topology::Sentinel { .. }
    );
    let mut was_master: Vec<Option<bool>> = vec![None; ports.len()];
    let mut promoted: Option<usize> = None;
    // Redlock: each node's key as last read, with the instant (the shared
    // monotonic clock) its ttl ends. A node that does not answer (down,
    // or stopped) still counts with it, as the simulator's oracle counts
    // a down node with the keys it had: it grants nobody else meanwhile,
    // and a restart that empties it shows at its first answer.
    let mut remembered: Vec<Option<(String, u64)>> = vec![None; ports.len()];
    // A cluster: the key as last read on the node serving its slot, and
    // when its ttl ends (the shared monotonic clock, ns).
    let mut last_read: Option<(usize, Option<(String, u64)>)> = None;
    loop {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let sent = mono_ns();
        let mut cluster_down = false;
        let mut views: Vec<Option<(Option<String>, i64)>> = Vec::with_capacity(ports.len());
        for (index, port) in ports.iter().enumerate() {
            if conns[index].is_none() {
                conns[index] = admin(*port).await.ok();
            }
            let view = match conns[index].as_mut() {
                Some(conn) => {
                    let pipe = redis::pipe()
                        .cmd("GET")
                        .arg(&key)
                        .cmd("PTTL")
                        .arg(&key)
                        .cmd("ROLE")
                        .clone();
                    let read = tokio::time::timeout(
                        Duration::from_millis(50),
                        pipe.query_async::<(Option<String>, i64, redis::Value)>(conn),
                    )
                    .await;
                    match read {
                        Ok(Ok((owner, pttl, role))) => {
                            let master = matches!(&role, redis::Value::Array(items)
                                if matches!(items.first(), Some(redis::Value::BulkString(b)) if b == b"master"));
                            if master && was_master[index] == Some(false) {
                                promoted = Some(index);
                            }
                            was_master[index] = Some(master);
                            (master || redlock).then_some((owner, pttl))
                        }
                        Ok(Err(error)) => {
                            cluster_down |= error.code() == Some("CLUSTERDOWN");
                            // An error reply (`MOVED`, `CLUSTERDOWN`) leaves
                            // the connection usable; anything else does not.
                            if error.code().is_none() {
                                conns[index] = None;
                            }
                            None
                        }
                        Err(_) => None,
                    }
                }
                None => None,
            };
            views.push(view);
        }
        if Duration::from_nanos(mono_ns().saturating_sub(sent)) > ORACLE_RTT {
            continue;
        }
        let sample = if redlock {
            let (owner, pttl) = redlock_sample(&mut views, &mut remembered, sent);
            Some((0, owner, pttl))
        } else {
            primary_sample(&views, follows_promotions.then_some(promoted).flatten())
        };
        let sample = match (sample, &last_read) {
            (Some(read), _) => {
                if matches!(topology, Topology::Cluster { .. }) {
                    last_read = Some(remember(&read, sent));
                }
                Some(read)
            }
            (None, Some(read)) if cluster_down => Some(recall(read, sent)),
            (None, _) => None,
        };
        let Some((primary, owner, pttl)) = sample else {
            continue;
        };
        let current = Some((primary, owner.clone()));
        if current != last {
            last = current;
            recorder.record_at(
                sent,
                Process::Controller,
                Op::Oracle {
                    primary,
                    owner,
                    pttl_ms: pttl.and_then(|p| u64::try_from(p).ok()),
                },
            );
        }
    }
}

/// What a sample read (node, owner, `PTTL`) at `sent` (the shared monotonic
/// clock, ns) says of later instants: the node, and the owner with the
/// instant its ttl ends (a key without a ttl never ends).
fn remember(
    read: &(usize, Option<String>, Option<i64>),
    sent: u64,
) -> (usize, Option<(String, u64)>) {
    let (node, owner, pttl) = read;
    let owner = owner.clone().map(|owner| {
        let ends = match pttl {
            Some(ms) if *ms >= 0 => {
                sent.saturating_add(Duration::from_millis(ms.unsigned_abs()).as_nanos() as u64)
            }
            _ => u64::MAX,
        };
        (owner, ends)
    });
    (*node, owner)
}

/// The key at `sent` as [`remember`]ed: its owner until its ttl ends, then
/// nobody's.
fn recall(
    read: &(usize, Option<(String, u64)>),
    sent: u64,
) -> (usize, Option<String>, Option<i64>) {
    let (node, owner) = read;
    match owner {
        Some((owner, ends)) if *ends > sent => {
            let left = (*ends - sent) / 1_000_000;
            let pttl = if *ends == u64::MAX { -1 } else { left as i64 };
            (*node, Some(owner.clone()), Some(pttl))
        }
        _ => (*node, None, None),
    }
}

/// One node's view of the lock key: its owner (if any) and `PTTL`; `None`
/// when the node did not answer (or, outside Redlock, is not a primary).
type View = Option<(Option<String>, i64)>;

/// Redlock's authority from one round of `views` read at `sent` (the
/// shared monotonic clock, ns): the owner a majority of nodes hold, and
/// the quorum-th longest of their `PTTL`s. A node that did not answer
/// counts with the key it had at its last answer (`remembered`: owner and
/// when its ttl ends), until that ttl ends, as the simulator counts a down
/// node: it grants nobody else meanwhile, and a restart that emptied it
/// shows at its first answer, which replaces what is remembered.
fn redlock_sample(
    views: &mut [View],
    remembered: &mut [Option<(String, u64)>],
    sent: u64,
) -> (Option<String>, Option<i64>) {
    for (view, memory) in views.iter_mut().zip(remembered.iter_mut()) {
        match view {
            Some((owner, pttl)) => {
                *memory = owner.clone().filter(|_| *pttl > 0).map(|owner| {
                    let ttl = Duration::from_millis(pttl.unsigned_abs());
                    (owner, sent.saturating_add(ttl.as_nanos() as u64))
                });
            }
            None => {
                *view = memory.as_ref().and_then(|(owner, ends)| {
                    let left = ends.saturating_sub(sent) / 1_000_000;
                    (left > 0).then(|| (Some(owner.clone()), left as i64))
                });
            }
        }
    }
    let quorum = views.len() / 2 + 1;
    let mut counts: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (owner, pttl) in views.iter().flatten() {
        if let Some(owner) = owner {
            counts.entry(owner.clone()).or_default().push(*pttl);
        }
    }
    let found = counts.into_iter().find_map(|(owner, mut pttls)| {
        (pttls.len() >= quorum).then(|| {
            pttls.sort_unstable_by(|a, b| b.cmp(a));
            (owner, pttls.get(quorum - 1).copied())
        })
    });
    match found {
        Some((owner, pttl)) => (Some(owner), pttl),
        None => (None, None),
    }
}

/// The authority among the nodes that say they are primary (`views`, by
/// index): the only one, or, while a deposed primary in its stale window
/// says master too, the one last seen promoted from replica (`promoted`,
/// when the topology follows promotions), as the simulator's primary of
/// record is from the promotion on; before any promotion was seen such a
/// round is skipped rather than guessed.
fn primary_sample(
    views: &[View],
    promoted: Option<usize>,
) -> Option<(usize, Option<String>, Option<i64>)> {
    let masters: Vec<(usize, &(Option<String>, i64))> = views
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.as_ref().map(|v| (i, v)))
        .collect();
    match masters.as_slice() {
        [] => None,
        [(index, (owner, pttl))] => Some((*index, owner.clone(), Some(*pttl))),
        several => several
            .iter()
            .find(|(index, _)| Some(*index) == promoted)
            .map(|(index, (owner, pttl))| (*index, owner.clone(), Some(*pttl))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn holds(owner: &str, pttl: i64) -> View {
        Some((Some(owner.to_owned()), pttl))
    }

    fn empty() -> View {
        Some((None, -2))
    }

    #[test]
    fn a_down_redlock_node_counts_with_the_key_it_last_had_until_its_ttl() {
        let mut remembered = vec![None; 3];
        let mut round = |views: &[View], at_ms: u64| {
            redlock_sample(&mut views.to_vec(), &mut remembered, at_ms * MS)
        };
        // Nodes 0 and 2 hold a's key, node 1 is empty: a has a majority.
        let first = round(&[holds("a", 1000), empty(), holds("a", 300)], 0);
        assert_eq!(first, (Some("a".to_owned()), Some(300)));
        // Node 2 stops answering: it still counts with a's key, 200 ms left.
        let down = round(&[holds("a", 900), empty(), None], 100);
        assert_eq!(down, (Some("a".to_owned()), Some(200)));
        // Past the ttl it had, it counts for nobody.
        assert_eq!(round(&[holds("a", 600), empty(), None], 400), (None, None));
        // Back and empty (a restart without persistence): nobody's.
        let mut remembered = vec![None; 3];
        let mut round = |views: &[View], at_ms: u64| {
            redlock_sample(&mut views.to_vec(), &mut remembered, at_ms * MS)
        };
        round(&[holds("a", 1000), empty(), holds("a", 1000)], 0);
        assert_eq!(
            round(&[holds("a", 900), empty(), empty()], 100),
            (None, None)
        );
        assert_eq!(round(&[holds("a", 800), empty(), None], 200), (None, None));
    }

    #[test]
    fn while_a_cluster_is_down_the_key_last_read_stays_until_its_ttl() {
        let read = remember(&(0, Some("a".to_owned()), Some(300)), 1000 * MS);
        assert_eq!(
            recall(&read, 1100 * MS),
            (0, Some("a".to_owned()), Some(200))
        );
        assert_eq!(recall(&read, 1300 * MS), (0, None, None));
        let forever = remember(&(1, Some("b".to_owned()), Some(-1)), 0);
        assert_eq!(
            recall(&forever, 9000 * MS),
            (1, Some("b".to_owned()), Some(-1))
        );
        let empty = remember(&(2, None, Some(-2)), 0);
        assert_eq!(recall(&empty, 5 * MS), (2, None, None));
    }

    #[test]
    fn two_primaries_answer_for_the_one_last_promoted_or_not_at_all() {
        let views = [holds("old", 500), None, holds("new", 900)];
        assert_eq!(primary_sample(&views, None), None);
        assert_eq!(
            primary_sample(&views, Some(2)),
            Some((2, Some("new".to_owned()), Some(900)))
        );
        assert_eq!(
            primary_sample(&[None, empty(), None], None),
            Some((1, None, Some(-2)))
        );
        assert_eq!(primary_sample(&[None, None], Some(0)), None);
    }
}
