//! The client processes of a real run: each with its proxies, started,
//! reached and told what to do.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
};

use tokio::io::AsyncWriteExt;

use super::{ClientProc, Seed};
use crate::chaos::{
    ChaosError,
    deploy::MASTER,
    procs::Processes,
    proxy::{self, Link},
    target::Target as RunTarget,
    wire::{ClientArgs, ClientCommand, ClientLine, Reach, since},
};
use crate::{
    client::client_seed,
    config::{FaultTarget, Topology},
    history::{Entry, Process},
};

impl Seed<'_> {
    /// How clients reach the deployment, and the ports they link to: the
    /// port a client dials, and the real one its link forwards to (a
    /// node's announced proxy port leads straight to the node).
    pub(super) fn reach(&self, target: &RunTarget) -> (Reach, Vec<(u16, u16)>) {
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
    pub(super) fn oracle_ports(&self, target: &RunTarget) -> Vec<u16> {
        match (target, &self.deployment) {
            (RunTarget::Url { port, .. }, _) => vec![*port],
            (_, Some(deployment)) => deployment.nodes.iter().map(|n| n.port).collect(),
            (_, None) => Vec::new(),
        }
    }

    /// The oracle's nodes, in order: each its client port, and the port
    /// it announces (the one a cluster's `ASK` names).
    pub(super) fn oracle_nodes(&self, target: &RunTarget) -> Vec<(u16, u16)> {
        match (target, &self.deployment) {
            (RunTarget::Url { port, .. }, _) => vec![(*port, *port)],
            (_, Some(deployment)) => deployment
                .nodes
                .iter()
                .map(|n| (n.port, n.reached_at()))
                .collect(),
            (_, None) => Vec::new(),
        }
    }

    pub(super) async fn spawn_client(
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
            plants: self.plants.to_vec(),
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
            // Inside the runtime (`spawn_client` is awaited on it).
            stdin: pipes
                .stdin
                .and_then(|stdin| tokio::process::ChildStdin::from_std(stdin).ok()),
            links,
        });
        Ok(())
    }

    /// Tells client `client` `command` on its stdin (a few dozen bytes:
    /// the pipe's buffer holds them even while the client is stopped).
    pub(super) async fn command(&mut self, client: usize, command: ClientCommand) {
        if let Some(stdin) = self.clients.get_mut(client).and_then(|c| c.stdin.as_mut())
            && let Ok(mut text) = serde_json::to_string(&command)
        {
            text.push('\n');
            // A crashed client reads nothing: nothing to tell it.
            let _ = stdin.write_all(text.as_bytes()).await;
            let _ = stdin.flush().await;
        }
    }

    /// The links a fault on `target` acts on.
    pub(super) fn links_of(&self, target: FaultTarget) -> Vec<Link> {
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
}
