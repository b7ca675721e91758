//! Injecting faults: making each fault of a seed's concrete schedule
//! (`crate::schedule` draws it) begin and end in the world at its exact
//! sim time.

use std::{cmp::Reverse, time::Duration};

use super::{BASE_LATENCY, World};

/// How long after promoting a replica Sentinel re-points the other
/// replicas at it: the promoted replica's next `INFO` (every second during
/// a failover) must show `role:master` first. Measured on Redis 7.0.15
/// (`sim chaos`, `sentinel-stale-primary-wait`): `+slave-reconf-sent`
/// 1.02–1.10 s after `+failover-state-send-slaveof-noone`, 8 runs of 8.
const SENTINEL_RECONF_DELAY: Duration = Duration::from_secs(1);
use crate::{
    client::{client_host, redis_host},
    clock::ClockControl,
    config::{FaultKind, FaultTarget, SignedDuration, Topology},
    history::{Op, Phase, Process},
    outcome::ConcreteFault,
    scenario::names::fault_kind,
    server::{NodeHandle, Role},
    storage,
};

/// Whether `fault` takes its Redis node away: a node down or cut off is
/// promoted by no failover, and one away for longer than the node timeout
/// is failed to the rest of a cluster.
fn takes_node_away(fault: &ConcreteFault) -> bool {
    match fault.kind {
        FaultKind::Partition | FaultKind::Crash => true,
        FaultKind::Restart => fault.duration.is_some(),
        _ => false,
    }
}

impl World<'_> {
    /// Resolves `redis:primary` to the node that is primary now.
    fn resolve(&self, target: FaultTarget) -> FaultTarget {
        match target {
            FaultTarget::Primary => FaultTarget::Redis(self.discovery.primary()),
            other => other,
        }
    }

    /// The host a resolved target names.
    fn host_of(target: FaultTarget) -> String {
        match target {
            FaultTarget::Client(n) => client_host(n),
            FaultTarget::Redis(n) => redis_host(n),
            FaultTarget::Storage => storage::HOST.to_owned(),
            // `resolve` turned it into a node.
            FaultTarget::Primary => unreachable!("redis:primary is resolved before use"),
        }
    }

    fn clock_of(&self, target: FaultTarget) -> Option<ClockControl> {
        match target {
            FaultTarget::Client(n) => self.client_clocks.get(n).cloned(),
            FaultTarget::Redis(n) => self.nodes.get(n).map(NodeHandle::clock),
            FaultTarget::Primary | FaultTarget::Storage => None,
        }
    }

    fn others(&self, host: &str) -> Vec<String> {
        self.hosts.iter().filter(|h| *h != host).cloned().collect()
    }

    /// Cuts what `from` sends `to` for one more fault. The link stays cut
    /// until every fault that cut it has healed it: partitions overlap
    /// (a mix draws them at random), and the end of one must not heal what
    /// another still cuts, as a real network's would not (a client's
    /// partition ending in a server's let the client reach the server
    /// again: `scenarios/README.md`, "Overlapping partitions").
    fn cut(&mut self, from: &str, to: &str) {
        let count = self
            .cuts
            .entry((from.to_owned(), to.to_owned()))
            .or_default();
        *count += 1;
        if *count == 1 {
            self.sim.partition_oneway(from, to);
        }
    }

    /// Ends one fault's cut of what `from` sends `to`; the link heals when
    /// no other fault cuts it.
    fn heal(&mut self, from: &str, to: &str) {
        let key = (from.to_owned(), to.to_owned());
        let Some(count) = self.cuts.get_mut(&key) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            self.cuts.remove(&key);
            self.sim.repair_oneway(from, to);
        }
    }

    /// Cuts `host` off from every other host, both ways, for one fault.
    fn isolate(&mut self, host: &str) {
        for other in self.others(host) {
            self.cut(host, &other);
            self.cut(&other, host);
        }
    }

    /// Makes fault `index` of the schedule, `fault`, begin now.
    pub(super) fn begin(&mut self, index: usize, fault: &ConcreteFault) {
        let now = self.now();
        self.oracle_unchanged = None;
        let target = self.resolve(fault.target);
        self.resolved.insert(index, target);
        let host = Self::host_of(target);
        self.record(Op::Fault {
            kind: fault_kind(fault.kind).name.to_owned(),
            target: target.to_string(),
            phase: Phase::Start,
        });
        let duration = fault.duration.unwrap_or_default();
        if let FaultTarget::Redis(node) = target
            && takes_node_away(fault)
        {
            self.node_unreachable(index, node);
        }
        if let FaultTarget::Redis(node) = target
            && matches!(
                fault.kind,
                FaultKind::Partition
                    | FaultKind::PartitionOneway
                    | FaultKind::Crash
                    | FaultKind::Restart
            )
        {
            self.break_atomic_migrations(node);
        }
        match fault.kind {
            FaultKind::Pause => {
                if let FaultTarget::Client(n) = target
                    && let Some(freeze) = self.freezes.get(n)
                {
                    freeze.freeze_until(now + duration);
                }
            }
            FaultKind::Partition => self.isolate(&host),
            FaultKind::PartitionOneway => {
                for other in self.others(&host) {
                    self.cut(&host, &other);
                }
            }
            FaultKind::Latency => {
                let delay = fault.delay.unwrap_or(Duration::from_millis(100));
                self.set_latency(&host, delay);
            }
            FaultKind::Failover => self.failover(index, fault.duration),
            FaultKind::ShardFailover => self.shard_failover(index, target, fault.duration),
            FaultKind::SlotMigration => self.begin_migration(index, now + duration),
            FaultKind::AtomicSlotMigration => self.begin_atomic_migration(index),
            FaultKind::Restart => {
                // Down for `duration`, then back with what its persistence
                // kept (empty without).
                self.sim.crash(host.as_str());
                if fault.duration.is_none() {
                    self.sim.bounce(host.as_str());
                }
            }
            FaultKind::ClockDrift => {
                if let Some(clock) = self.clock_of(target) {
                    clock.set_rate(now, fault.rate.unwrap_or_default());
                    self.remap_deadlines(target);
                }
            }
            FaultKind::ClockJump => {
                if let Some(offset) = fault.offset {
                    self.jump_clock(target, offset, now);
                }
            }
            FaultKind::Busy => {
                if let FaultTarget::Redis(n) = target
                    && let Some(node) = self.nodes.get(n)
                {
                    node.busy_until(now + duration);
                }
            }
            FaultKind::Crash => {
                // Partition first so the death is silent (turmoil's crash
                // would otherwise close connections with a FIN), for good:
                // no later heal delivers what the dead host had sent.
                self.isolate(&host);
                self.sim.crash(host.as_str());
            }
            FaultKind::Evict => {
                if let FaultTarget::Redis(n) = target {
                    self.evict(n, &host);
                }
                // Instantaneous: it ends where it began.
                self.record(Op::Fault {
                    kind: fault_kind(fault.kind).name.to_owned(),
                    target: target.to_string(),
                    phase: Phase::End,
                });
            }
        }
    }

    /// Steps `target`'s clock by `offset` now, unless it is a client's
    /// and would step back.
    fn jump_clock(&mut self, target: FaultTarget, offset: SignedDuration, now: Duration) {
        let Some(clock) = self.clock_of(target) else {
            return;
        };
        let magnitude = offset.magnitude.as_nanos() as i128;
        let signed = if offset.negative {
            -magnitude
        } else {
            magnitude
        };
        // A client's clock is monotonic: it never steps back.
        if matches!(target, FaultTarget::Client(_)) && signed < 0 {
            return;
        }
        if let FaultTarget::Redis(n) = target
            && signed < 0
            && let Some(node) = self.nodes.get(n)
        {
            // Redis's active expiry had deleted what the
            // clock passed: a step back must not revive it.
            node.expire_due(now);
        }
        clock.jump(now, signed);
        self.remap_deadlines(target);
    }

    /// Node `n` evicts one key under memory pressure (a process that is
    /// down holds no memory to free), and the history says which.
    fn evict(&mut self, n: usize, host: &str) {
        let Some(node) = self.nodes.get(n) else {
            return;
        };
        if !self.sim.is_host_running(host) {
            return;
        }
        if let Some((key, value)) = node.evict(self.now()) {
            self.record(Op::Evicted {
                node: n,
                key: String::from_utf8_lossy(&key).into_owned(),
                value: value.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
            });
        }
    }

    /// Makes fault `index` of the schedule, `fault`, end now, on the host
    /// it began on.
    pub(super) fn end(&mut self, index: usize, fault: &ConcreteFault) {
        self.oracle_unchanged = None;
        let target = self
            .resolved
            .get(&index)
            .copied()
            .unwrap_or_else(|| self.resolve(fault.target));
        let host = Self::host_of(target);
        self.node_reachable(index);
        match fault.kind {
            FaultKind::Partition => {
                for other in self.others(&host) {
                    self.heal(&host, &other);
                    self.heal(&other, &host);
                }
            }
            FaultKind::PartitionOneway => {
                for other in self.others(&host) {
                    self.heal(&host, &other);
                }
            }
            FaultKind::Latency => self.set_latency(&host, BASE_LATENCY),
            FaultKind::Restart => self.sim.bounce(host.as_str()),
            FaultKind::ClockDrift => {
                if let Some(clock) = self.clock_of(target) {
                    clock.set_rate(self.now(), 0.0);
                    self.remap_deadlines(target);
                }
            }
            FaultKind::Pause | FaultKind::Busy => {}
            // The stale window is over: the old primary is made a replica
            // of today's primary. Sentinel follows `REPLICAOF` with `CLIENT
            // KILL`, so its clients reconnect; without Sentinel, `REPLICAOF`
            // alone leaves them connected, and their next write meets
            // `READONLY`.
            FaultKind::Failover => {
                if let FaultTarget::Redis(n) = target
                    && let Some(node) = self.nodes.get(n)
                    && node.is_deposed()
                {
                    let primary = redis_host(self.discovery.primary());
                    if matches!(self.topology, Topology::Sentinel { .. }) {
                        node.demote(primary);
                    } else {
                        node.demote_keeping_clients(primary);
                    }
                }
            }
            FaultKind::ShardFailover => self.end_shard_failover(index),
            FaultKind::SlotMigration => self.finish_migration(index),
            FaultKind::AtomicSlotMigration => self.cut_over(index),
            FaultKind::ClockJump | FaultKind::Crash | FaultKind::Evict => {
                return;
            }
        }
        self.record(Op::Fault {
            kind: fault_kind(fault.kind).name.to_owned(),
            target: target.to_string(),
            phase: Phase::End,
        });
    }

    /// After a clock changed rate or stepped: a node's expiry cron looks
    /// again at when its keys fall due; for a client's, records where each
    /// deadline it holds (fixed on its own clock) now falls in true time.
    fn remap_deadlines(&self, target: FaultTarget) {
        if let FaultTarget::Redis(n) = target
            && let Some(node) = self.nodes.get(n)
        {
            node.clock_changed();
        }
        let FaultTarget::Client(n) = target else {
            return;
        };
        let (Some(clock), Some(deadlines)) =
            (self.client_clocks.get(n), self.client_deadlines.get(n))
        else {
            return;
        };
        let now = self.now();
        for (token, local) in deadlines.held() {
            self.recorder.record(
                now,
                clock.local(now),
                Process::Client(n),
                Op::Deadline {
                    token,
                    valid_until: clock.true_time_of(local.as_nanos() as i128),
                },
            );
        }
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

    /// Promotes the most up-to-date live replica, as a Sentinel would, and
    /// makes it the primary of record (the oracle's authoritative node,
    /// the node new connections reach). Without a `stale_window` the old
    /// primary dies silently; with one it stays up, writable, its clients
    /// still connected, until the fault's end demotes it. Under Sentinel
    /// the other replicas follow the old primary for
    /// [`SENTINEL_RECONF_DELAY`] more, and the sentinels announce the new
    /// primary from then on (see [`Self::announce`]); otherwise the other
    /// replicas are re-pointed at once.
    fn failover(&mut self, index: usize, stale_window: Option<Duration>) {
        let now = self.now();
        let old = self.discovery.primary();
        let Some(new) = self.failover_winner(old, 0..self.nodes.len()) else {
            self.record(Op::NoFailover { primary: old });
            return;
        };
        let old_owner = self.lock_owner_on(old, now);
        let old_host = redis_host(old);
        if stale_window.is_some() {
            self.nodes[old].depose();
        } else {
            self.isolate(&old_host);
            self.sim.crash(old_host.as_str());
        }
        self.nodes[new].promote();
        if matches!(self.topology, Topology::Sentinel { .. }) {
            // Sentinel re-points the other replicas only once the promoted
            // one reports `role:master` in its `INFO`, which it asks for
            // every second during a failover: until then they still
            // follow (and acknowledge `WAIT`s to) the old primary.
            self.reconfigs.insert(index, (old, new));
            self.planned
                .push((now + SENTINEL_RECONF_DELAY, super::Action::Step(index)));
        } else {
            self.reconfigure_replicas(old, new);
        }
        self.discovery.set_primary(new);
        self.announce(new);
        self.record_failover(old, new, old_owner, now);
    }

    /// The node a failover of `old` promotes among `candidates`, as
    /// Sentinel and a cluster's replicas elect one: the live replica that
    /// applied the most of the old primary's stream (ties: the lowest
    /// index). A primary deposed by an earlier failover is no replica (its
    /// stream diverged), and a replica cut off from the rest cannot win an
    /// election. `None`: no candidate qualifies.
    pub(super) fn failover_winner(
        &mut self,
        old: usize,
        candidates: impl IntoIterator<Item = usize>,
    ) -> Option<usize> {
        let unreachable = self.unreachable_nodes();
        candidates
            .into_iter()
            .filter(|&n| {
                n != old
                    && !self.nodes[n].is_deposed()
                    && !unreachable.contains(&n)
                    && self.sim.is_host_running(redis_host(n).as_str())
            })
            .max_by_key(|&n| (self.nodes[n].offset(), Reverse(n)))
    }

    /// Records failover from `old` to `new` at true time `now`, with the
    /// lock's owner on `old` before it (`old_owner`) and on `new` now.
    pub(super) fn record_failover(
        &mut self,
        old: usize,
        new: usize,
        old_owner: Option<String>,
        now: Duration,
    ) {
        let new_owner = self.lock_owner_on(new, now);
        self.record(Op::Failover {
            old_primary: old,
            new_primary: new,
            old_owner,
            new_owner,
        });
    }

    /// The owner token of the lock key on node `node` at true time `now`,
    /// if the key is live there (what a failover's record names).
    pub(super) fn lock_owner_on(&self, node: usize, now: Duration) -> Option<String> {
        self.nodes[node]
            .peek(&self.lock_key, now)
            .map(|(owner, _)| owner)
    }

    /// Points every replica still following `old` at `new`. A deposed
    /// primary keeps serving until its own demotion.
    pub(super) fn reconfigure_replicas(&mut self, old: usize, new: usize) {
        let old_host = redis_host(old);
        for (index, node) in self.nodes.iter().enumerate() {
            if index != new
                && index != old
                && !node.is_deposed()
                && node.role()
                    == (Role::Replica {
                        of: old_host.clone(),
                    })
            {
                node.replicate_from(redis_host(new));
            }
        }
    }

    /// The sentinels adopt `new` as the primary: a leader drawn among them
    /// at once, the others as the leader's hello reaches each.
    fn announce(&mut self, new: usize) {
        let Topology::Sentinel { sentinel_lag, .. } = self.topology else {
            return;
        };
        if self.sentinels.is_empty() {
            return;
        }
        // No sentinel names the new primary before the promoted replica's
        // `INFO` shows it promoted ([`SENTINEL_RECONF_DELAY`]): then the
        // leader publishes the new configuration and each other sentinel
        // adopts it when the leader's hello reaches it; the leader itself
        // switches last, at the failover's end, once it has re-pointed the
        // replicas (measured: the others 1.02–1.10 s after the promotion
        // was sent, the leader 2.02–2.23 s, 8 runs of 8).
        let now = self.now() + SENTINEL_RECONF_DELAY;
        let adoption = self.failover_draws.next(self.sentinels.len(), sentinel_lag);
        for (index, sentinel) in self.sentinels.iter().enumerate() {
            let lag = adoption.lags[index].unwrap_or(SENTINEL_RECONF_DELAY);
            sentinel.switch_at(now + lag, new);
        }
    }
}
