//! The check of a locker's own nodes:
//! [`Locker::check_deployment`](crate::Locker::check_deployment).
//!
//! Which nodes: the one node of a single-node locker; every Redlock node;
//! the primary the sentinels name at the time of the check; every primary
//! that owns cluster slots in the locker's slot table. Each is checked over
//! a short-lived connection of its own, opened through the locker's
//! connector (or, in a cluster, its dialer), so TLS, credentials and a
//! simulator's network apply as they do to the locks, and the locks'
//! connections never carry `CONFIG` or `INFO`.

use std::{fmt, time::Duration};

use futures_util::future::{Either, select};
use redis::aio::MultiplexedConnection;

use super::{CheckError, CheckOptions, DeploymentReport, Severity};
use crate::adapter::{
    connect::{
        error::ConnectError,
        node::{CheckTarget, Endpoint},
    },
    lock::session::Session,
    wire::route::ClusterRouter,
};

/// What [`Locker::check_deployment`](crate::Locker::check_deployment)
/// found on each node the locker uses.
#[derive(Debug)]
#[non_exhaustive]
pub struct LockerReport {
    /// One entry per node, in the locker's order (cluster primaries by
    /// address).
    pub nodes: Vec<NodeReport>,
}

/// One node's part of a [`LockerReport`].
#[derive(Debug)]
#[non_exhaustive]
pub struct NodeReport {
    /// The node: `host:port` where the locker knows it (from its URL, the
    /// sentinels or the slot table), else `node N` (a locker built from
    /// connectors). A Sentinel primary reads `host:port (the primary of
    /// NAME)`.
    pub node: String,
    /// Its report, or why it could not be checked.
    pub result: Result<DeploymentReport, CheckError>,
}

impl LockerReport {
    /// Returns true if every node was checked, completely, and is safe
    /// ([`DeploymentReport::is_safe`]); false for a locker with no node.
    pub fn is_safe(&self) -> bool {
        !self.nodes.is_empty()
            && self
                .nodes
                .iter()
                .all(|node| node.result.as_ref().is_ok_and(DeploymentReport::is_safe))
    }

    /// The most severe finding over every node that was checked.
    pub fn worst(&self) -> Option<Severity> {
        self.nodes
            .iter()
            .filter_map(|node| node.result.as_ref().ok())
            .filter_map(DeploymentReport::worst)
            .max()
    }

    /// The report of the node named `node`, if it was checked.
    pub fn report(&self, node: &str) -> Option<&DeploymentReport> {
        self.nodes
            .iter()
            .find(|entry| entry.node == node)
            .and_then(|entry| entry.result.as_ref().ok())
    }
}

impl fmt::Display for LockerReport {
    /// Each node's report under its name, or why it was not checked.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nodes.is_empty() {
            return write!(f, "no node to check");
        }
        for (index, node) in self.nodes.iter().enumerate() {
            if index > 0 {
                writeln!(f)?;
            }
            match &node.result {
                Ok(report) => writeln!(f, "node {}:\n{report}", node.node)?,
                Err(error) => writeln!(f, "node {}: not checked: {error}", node.node)?,
            }
        }
        Ok(())
    }
}

/// Checks every node `session` uses, at once; `timeout` bounds each
/// connection's opening and each command.
pub(crate) async fn check_nodes(
    session: &Session,
    opts: &CheckOptions,
    timeout: Duration,
) -> LockerReport {
    let targets = match &session.cluster {
        Some(router) => cluster_targets(router),
        None => session.check_targets.clone(),
    };
    let nodes = futures_util::future::join_all(
        targets
            .iter()
            .map(|target| check_node(target, opts, timeout)),
    )
    .await;
    LockerReport { nodes }
}

fn cluster_targets(router: &ClusterRouter) -> Vec<CheckTarget> {
    router
        .primaries()
        .into_iter()
        .map(|(address, endpoint)| CheckTarget {
            name: address.to_string(),
            endpoint,
            resolved: None,
        })
        .collect()
}

async fn check_node(target: &CheckTarget, opts: &CheckOptions, timeout: Duration) -> NodeReport {
    let result = run(&target.endpoint, opts, timeout).await;
    let resolved = target.resolved.as_ref().and_then(|current| {
        current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    });
    let node = match resolved {
        Some(address) => format!("{address} ({})", target.name),
        None => target.name.clone(),
    };
    NodeReport { node, result }
}

async fn run(
    endpoint: &Endpoint,
    opts: &CheckOptions,
    timeout: Duration,
) -> Result<DeploymentReport, CheckError> {
    let connect = async {
        let stream = endpoint.connector.connect().await?;
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(timeout));
        MultiplexedConnection::new_with_config(&endpoint.redis, stream, config)
            .await
            .map_err(ConnectError::Handshake)
    };
    // redis-rs's response timeout does not cover the handshake.
    let (mut conn, task) = tokio::time::timeout(timeout, connect)
        .await
        .map_err(|_| CheckError::Connect(ConnectError::Timeout(timeout)))?
        .map_err(CheckError::Connect)?;
    // The connection's task carries the replies: poll it alongside.
    let check = std::pin::pin!(super::check_deployment(&mut conn, opts));
    let task = std::pin::pin!(task);
    match select(check, task).await {
        Either::Left((result, _)) => result,
        // The socket closed: the check's next command fails with that.
        Either::Right(((), check)) => check.await,
    }
}
