//! Failovers on a real run: a replica promoted (by the controller, by
//! Sentinel, by a cluster takeover), the old primary demoted, replicas
//! re-pointed.

use std::time::Duration;

use super::{
    Seed,
    node_ops::{cluster_owner, key_owner, replica_of, until_master},
};

/// How long a cluster replica's takeover may take to complete (it answers
/// `ROLE master`) before the failover counts as not done.
const TAKEOVER_WITHIN: Duration = Duration::from_secs(2);
use crate::chaos::{ChaosError, deploy::admin, procs::Processes, sentinel, wire::ClientCommand};
use crate::{
    config::Topology,
    history::{Op, Process},
};

impl Seed<'_> {
    /// Promotes the most up-to-date replica and records the failover.
    /// Without a stale window the old primary dies now, silently (see
    /// [`Self::silence`]); with one it stays up and writable, its clients
    /// still connected, until [`Self::demote`].
    pub(super) async fn failover(
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
            self.recorder
                .record(Process::Controller, Op::NoFailover { primary: old });
            return Ok(());
        }
        let old_owner = key_owner(self.deployment()?.nodes[old].port).await;
        if window.is_none() {
            self.silence(old).await?;
        }
        let deployment = self.deployment()?;
        if window.is_none()
            && let Some(id) = deployment.nodes[old].proc.take()
        {
            procs.kill(id).await;
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
            self.command(client, ClientCommand::Primary { node: new })
                .await;
        }
        self.record_failover(old, new, new_port, old_owner).await;
        Ok(())
    }

    /// Records a failover from node `old` to node `new` as the simulated
    /// world does, with the lock key's owner read back from the new primary
    /// (at `new_port`).
    pub(super) async fn record_failover(
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
    pub(super) async fn sentinel_failover(
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
            self.silence(old).await?;
            if let Some(id) = self.deployment()?.nodes[old].proc.take() {
                procs.kill(id).await;
            }
            return Ok(());
        }
        sentinel::failover(self.deployment()?, &adoption).await
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
    pub(super) async fn shard_failover(
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
        if replicas.is_empty()
            && let Some(old) = old
        {
            self.recorder
                .record(Process::Controller, Op::NoFailover { primary: old });
            return Ok(None);
        }
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
                    // Recorded once it has completed: `TAKEOVER` answers
                    // OK before the replica has taken the new epoch.
                    if let Some(old) = old
                        && until_master(port, TAKEOVER_WITHIN).await
                    {
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
    pub(super) async fn demote(&mut self, old: usize) -> Result<(), ChaosError> {
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
    pub(super) async fn repoint(&mut self, index: usize, port: u16, primary: u16) {
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
