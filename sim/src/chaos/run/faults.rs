//! Each fault of a real run's schedule, begun and ended on the real
//! processes and their proxies.

use std::time::Duration;

use rustix::process::Signal;

use super::{
    Seed,
    node_ops::{busy, cluster_owner, evict, lock_key},
};
use crate::chaos::{
    ChaosError, atomic_migrate,
    cut::{self, Proxy},
    deploy::{MASTER, admin},
    fake_clock,
    firewall::Rule,
    migrate,
    procs::Processes,
    wire::{ClientCommand, mono_ns},
};
use crate::{
    config::{FaultKind, FaultTarget, Topology},
    history::{Op, Phase, Process},
    outcome::ConcreteFault,
    scenario::names::fault_kind,
};

impl Seed<'_> {
    /// Makes the death of node `n` silent to the clients, as a host that
    /// dies is in the simulator (cut off first, then crashed): their links
    /// to it hold both directions for good, so an open connection hears
    /// no FIN from the kill and hangs until the client's own timeout, and
    /// the client then dials whichever node it is told is primary.
    ///
    /// Its replication is held too ([`cut::death_acts`]): what the dying
    /// node had sent its replicas but the proxy had not yet passed on never
    /// arrives, as a simulated replica's queue is dropped at the death.
    pub(super) async fn silence(&mut self, n: usize) -> Result<(), ChaosError> {
        let Some(deployment) = self.deployment.as_ref() else {
            return Ok(());
        };
        let acts = cut::death_acts(&deployment.shape(), n);
        if let Some(firewall) = self.firewall {
            // For good: the next run's reset empties the chain.
            let rules = self.rules_of(&acts);
            return firewall.cut(&rules, &format!("death-{n}")).await;
        }
        self.act_on_proxies(&acts, false, true, Duration::ZERO);
        Ok(())
    }

    /// Asks the deployment which node is primary now (Sentinel and
    /// Cluster move it themselves).
    pub(super) async fn refresh_primary(&mut self) {
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

    pub(super) async fn begin(
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
        if fault.kind == FaultKind::Pause {
            // Begun once the kernel shows the process stopped: a pause
            // that did not take is not recorded, and the run proves
            // nothing of it (validity: a fault that never began).
            let id = match target {
                FaultTarget::Client(n) => self.clients.get(n).map(|client| client.id),
                FaultTarget::Redis(n) => self.deployment()?.nodes[n].proc,
                _ => None,
            };
            if let Some(id) = id {
                procs.signal(id, Signal::STOP);
                if stopped(procs.pid_of(id)).await {
                    self.record_fault(fault, target, Phase::Start);
                }
            }
            return Ok(());
        }
        if let FaultTarget::Redis(n) = target
            && fake_clock::is_server_clock(fault.kind, target)
        {
            return self.move_server_clock(n, fault, target);
        }
        // A partition made by the firewall is recorded once its rules are
        // in place (`iptables-restore` returned), its end once their
        // deletion was sent: the history never claims a cut that was not
        // yet, or no longer, there.
        let kernel_cut = self.firewall.is_some()
            && matches!(
                fault.kind,
                FaultKind::Partition | FaultKind::PartitionOneway
            );
        if !kernel_cut {
            self.record_fault(fault, target, Phase::Start);
        }
        match (fault.kind, target) {
            (FaultKind::Crash, FaultTarget::Client(n)) => {
                if let Some(client) = self.clients.get(n) {
                    procs.kill(client.id).await;
                }
            }
            (FaultKind::Crash | FaultKind::Restart, FaultTarget::Redis(n)) => {
                if fault.kind == FaultKind::Crash {
                    self.silence(n).await?;
                }
                let deployment = self.deployment()?;
                if let Some(id) = deployment.nodes[n].proc.take() {
                    procs.kill(id).await;
                }
                if fault.kind == FaultKind::Restart && fault.duration.is_none() {
                    deployment.start_node(procs, n).await?;
                }
            }
            (
                FaultKind::Partition | FaultKind::PartitionOneway | FaultKind::Latency,
                FaultTarget::Redis(n),
            ) => {
                if fault.kind == FaultKind::Partition {
                    self.cut_off.insert(index, n);
                }
                self.cut_server(index, n, fault, true).await?;
            }
            (FaultKind::Partition | FaultKind::PartitionOneway | FaultKind::Latency, _) => {
                self.cut_links(index, fault, target).await?;
            }
            (FaultKind::ClockDrift | FaultKind::ClockJump, FaultTarget::Client(n)) => {
                self.move_clock(n, fault).await;
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
            (FaultKind::AtomicSlotMigration, _) => self.begin_atomic_migration(index).await?,
            (kind, target) => {
                return Err(ChaosError::Internal(format!(
                    "{} on {target} reached the controller unrefused",
                    fault_kind(kind).name
                )));
            }
        }
        if kernel_cut {
            self.record_fault(fault, target, Phase::Start);
        }
        Ok(())
    }

    /// A partition (both ways, or one way: a client's requests, a node's
    /// replies) or latency begins on `target`'s links: fault `index` of
    /// the schedule. A partition is the firewall's when the run has one.
    pub(super) async fn cut_links(
        &mut self,
        index: usize,
        fault: &ConcreteFault,
        target: FaultTarget,
    ) -> Result<(), ChaosError> {
        let delay = fault.delay.unwrap_or(Duration::from_millis(100));
        let client = matches!(target, FaultTarget::Client(_));
        if fault.kind != FaultKind::Latency && self.firewall.is_some() {
            let one_way = fault.kind == FaultKind::PartitionOneway;
            let (up, down) = (!one_way || client, !one_way || !client);
            let rules = self
                .links_of(target)
                .iter()
                .flat_map(|link| Rule::link(link.port, None, up, down))
                .collect();
            return self.firewall_cut(index, rules).await;
        }
        for link in self.links_of(target) {
            if fault.kind == FaultKind::Latency {
                link.set(|mode| mode.delay = delay);
            } else {
                link.set(|mode| cut::hold_link(mode, fault.kind, client, true));
            }
        }
        Ok(())
    }

    /// A partition (both ways, or one way: what the server sends) or
    /// latency of node `n` begins (`begin`) or ends, on every proxy that
    /// carries its traffic ([`cut::server_acts`]): its clients' links, its
    /// replication and its bus; fault `index` of the schedule. A partition
    /// is the firewall's when the run has one. Latency, as the
    /// simulator's, slows only the links that have carried traffic when it
    /// begins (turmoil sets the latency of the links that exist; a link
    /// made later keeps the base latency); its end clears them all.
    pub(super) async fn cut_server(
        &mut self,
        index: usize,
        n: usize,
        fault: &ConcreteFault,
        begin: bool,
    ) -> Result<(), ChaosError> {
        let Some(deployment) = self.deployment.as_ref() else {
            return Ok(());
        };
        let latency = fault.kind == FaultKind::Latency;
        let delay = fault.delay.unwrap_or(Duration::from_millis(100));
        let acts = cut::server_acts(&deployment.shape(), n, fault.kind);
        if !latency && self.firewall.is_some() {
            if begin {
                let rules = self.rules_of(&acts);
                return self.firewall_cut(index, rules).await;
            }
            return self
                .firewall_heal(index, fault, FaultTarget::Redis(n))
                .await;
        }
        self.act_on_proxies(&acts, latency, begin, delay);
        Ok(())
    }

    /// The firewall rules that cut what `acts` name: each act's proxy
    /// ports, narrowed to its scope's source address.
    fn rules_of(&self, acts: &[cut::Act]) -> Vec<Rule> {
        let Some(deployment) = self.deployment.as_ref() else {
            return Vec::new();
        };
        let mut rules = Vec::new();
        for &act in acts {
            let ports: Vec<u16> = match act.proxy {
                Proxy::Clients(node) => self
                    .links_of(FaultTarget::Redis(node))
                    .iter()
                    .map(|link| link.port)
                    .collect(),
                proxy => deployment
                    .node_proxy(proxy)
                    .map(|link| link.port)
                    .into_iter()
                    .collect(),
            };
            let peer = match act.scope {
                cut::Scope::Every => None,
                cut::Scope::From(address) => Some(address),
            };
            for port in ports {
                rules.extend(Rule::link(port, peer, act.up, act.down));
            }
        }
        rules
    }

    /// Puts fault `index`'s `rules` in place.
    async fn firewall_cut(&mut self, index: usize, rules: Vec<Rule>) -> Result<(), ChaosError> {
        let Some(firewall) = self.firewall else {
            return Ok(());
        };
        firewall.cut(&rules, &format!("f{index}")).await?;
        self.fired.insert(index, rules);
        Ok(())
    }

    /// Takes fault `index`'s rules away, and records how many packets they
    /// dropped ([`Op::Dropped`]): the evidence that the partition cut
    /// something.
    async fn firewall_heal(
        &mut self,
        index: usize,
        fault: &ConcreteFault,
        target: FaultTarget,
    ) -> Result<(), ChaosError> {
        let (Some(firewall), Some(rules)) = (self.firewall, self.fired.remove(&index)) else {
            return Ok(());
        };
        let (healed, packets) = firewall.heal(&rules, &format!("f{index}")).await?;
        // The fault's end is stamped there too (`end`): a grant the heal
        // lets through may come back before the deletion's process exits.
        self.healed.insert(index, healed);
        self.recorder.record_at(
            healed,
            Process::Controller,
            Op::Dropped {
                kind: fault_kind(fault.kind).name.to_owned(),
                target: target.to_string(),
                packets,
            },
        );
        Ok(())
    }

    /// Applies `acts` ([`cut::apply`]) to the proxies each names.
    pub(super) fn act_on_proxies(
        &self,
        acts: &[cut::Act],
        latency: bool,
        begin: bool,
        delay: Duration,
    ) {
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
    pub(super) async fn move_clock(&mut self, n: usize, fault: &ConcreteFault) {
        if fault.kind == FaultKind::ClockDrift {
            let rate = fault.rate.unwrap_or_default();
            self.command(n, ClientCommand::Drift { rate }).await;
        } else if let Some(offset) = fault.offset
            && !offset.negative
        {
            let ns = offset.magnitude.as_nanos() as i64;
            self.command(n, ClientCommand::Jump { ns }).await;
        }
    }

    /// Node `n`'s clock jumps or starts drifting, through its clock file
    /// ([`fake_clock`]). The fault is recorded as begun, stamped when the
    /// file was written, once the node's `TIME` reads its clock as the
    /// model has it (watched by a task of its own so the schedule goes on
    /// meanwhile). A node down or restarting is dialled again until it
    /// answers, as late as the run's end: its clock file outlives a
    /// restart, and the simulator's node clock steps while the node is
    /// down. A node that never answers again leaves it unrecorded, and the
    /// run inconclusive unless the schedule took the node away for good
    /// (validity).
    fn move_server_clock(
        &mut self,
        n: usize,
        fault: &ConcreteFault,
        target: FaultTarget,
    ) -> Result<(), ChaosError> {
        let deployment = self.deployment()?;
        let port = deployment.nodes[n].port;
        let clocks = deployment.clocks.as_mut().ok_or_else(|| {
            ChaosError::Internal("a server clock fault on a run without faked clocks".to_owned())
        })?;
        let observer = clocks.observer(n)?;
        let written = mono_ns();
        if fault.kind == FaultKind::ClockDrift {
            clocks.drift(n, fault.rate.unwrap_or_default())?;
        } else if let Some(offset) = fault.offset {
            let magnitude = offset.magnitude.as_nanos() as i128;
            clocks.jump(
                n,
                if offset.negative {
                    -magnitude
                } else {
                    magnitude
                },
            )?;
        }
        let recorder = self.recorder.clone();
        let op = Op::Fault {
            kind: fault_kind(fault.kind).name.to_owned(),
            target: target.to_string(),
            phase: Phase::Start,
        };
        tokio::spawn(async move {
            loop {
                if let Ok(mut conn) = admin(port).await
                    && observer.until_agrees(&mut conn).await
                {
                    recorder.record_at(written, Process::Controller, op);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        Ok(())
    }

    /// Node `n` runs a busy script, or evicts the lock key (an instant:
    /// its end is recorded at once).
    pub(super) async fn load_node(
        &mut self,
        n: usize,
        fault: &ConcreteFault,
        target: FaultTarget,
    ) -> Result<(), ChaosError> {
        let port = self.deployment()?.nodes[n].port;
        if fault.kind == FaultKind::Busy {
            let duration = fault.duration.unwrap_or(Duration::from_millis(100));
            tokio::spawn(busy(port, duration, self.scripts.clone()));
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
    pub(super) async fn begin_migration(
        &mut self,
        index: usize,
        fault: &ConcreteFault,
    ) -> Result<(), ChaosError> {
        let pick = self.rng.between(0, 1 << 16);
        let recorder = self.recorder.clone();
        let migration = migrate::begin(
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

    /// Atomic slot migration `index` begins: Valkey moves the slot by
    /// itself, and its keys are recorded as moved once the target took it.
    pub(super) async fn begin_atomic_migration(&mut self, index: usize) -> Result<(), ChaosError> {
        let pick = self.rng.between(0, 1 << 16);
        let recorder = self.recorder.clone();
        let migration = atomic_migrate::begin(
            self.deployment()?,
            &lock_key(),
            pick,
            move |key, from, to| recorder.record_migrated(key, from, to),
        )
        .await?;
        if let Some(migration) = migration {
            self.atomic_migrations.insert(index, migration);
        }
        Ok(())
    }

    pub(super) async fn end(
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
                // Restarts of one node overlap (a mix draws them at
                // random): the first to end brought it back, and this one
                // restarts it again, as the simulator's bounce of a
                // running host does. Starting it beside itself found its
                // port taken (`sim agree`, 2026-11-29: mix-redlock-unsafe
                // seed 3).
                let deployment = self.deployment()?;
                if let Some(id) = deployment.nodes[n].proc.take() {
                    procs.kill(id).await;
                }
                deployment.start_node(procs, n).await?;
            }
            (
                FaultKind::Partition | FaultKind::PartitionOneway | FaultKind::Latency,
                FaultTarget::Redis(n),
            ) => {
                self.cut_off.remove(&index);
                self.cut_server(index, n, fault, false).await?;
            }
            (FaultKind::Partition | FaultKind::PartitionOneway, _) if self.firewall.is_some() => {
                self.firewall_heal(index, fault, target).await?;
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
                self.command(n, ClientCommand::Drift { rate: 0.0 }).await;
            }
            (FaultKind::ClockDrift, FaultTarget::Redis(n)) => {
                if let Some(clocks) = self.deployment()?.clocks.as_mut() {
                    clocks.drift(n, 0.0)?;
                }
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
                    migrate::finish(migration, move |key, from, to| {
                        recorder.record_migrated(key, from, to);
                    })
                    .await?;
                }
            }
            _ => {}
        }
        match self.healed.remove(&index) {
            Some(healed) => self.record_fault_at(healed, fault, target, Phase::End),
            None => self.record_fault(fault, target, Phase::End),
        }
        Ok(())
    }
}

/// Whether the process `pid` shows stopped (state `T` in
/// `/proc/PID/stat`) within 200 ms of its `SIGSTOP`: the kernel's word
/// that a pause took, polled every millisecond (a read of procfs, from
/// memory, does not hold the controller up).
async fn stopped(pid: Option<u32>) -> bool {
    let Some(pid) = pid else {
        return false;
    };
    let path = format!("/proc/{pid}/stat");
    for _ in 0..200 {
        if let Ok(stat) = std::fs::read_to_string(&path)
            // The state follows the command's closing parenthesis.
            && let Some((_, after)) = stat.rsplit_once(')')
            && after.trim_start().starts_with('T')
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_shows_stopped_only_while_it_is_stopped() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep runs");
        let pid = child.id();
        let signal = |signal| {
            let pid = rustix::process::Pid::from_raw(pid as i32).expect("a live pid");
            rustix::process::kill_process(pid, signal).expect("signal sent");
        };
        assert!(!runtime.block_on(stopped(Some(pid))), "running");
        signal(Signal::STOP);
        assert!(runtime.block_on(stopped(Some(pid))), "stopped");
        signal(Signal::CONT);
        assert!(!runtime.block_on(stopped(Some(pid))), "continued");
        assert!(!runtime.block_on(stopped(None)));
        let _ = child.kill();
        let _ = child.wait();
    }
}
