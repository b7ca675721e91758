//! A Redis Cluster of real processes (the `servers` crate's): N primaries
//! with optional replicas, with the faults a lock must survive: a
//! `CLUSTER FAILOVER`, a slot migration, a `kill -9` of a primary.
#![allow(dead_code, unreachable_pub)]

use std::{
    ops::{Deref, DerefMut},
    time::Duration,
};

// Each test binary uses a subset.
#[allow(unused_imports)]
pub use servers::cluster::{ClusterNode, ShardView};
use servers::cluster::{ClusterSetup, NODE_TIMEOUT};

/// Certificates for a cluster whose nodes also speak TLS.
pub struct ClusterTls {
    /// The CA every node's certificate chains to.
    pub pki: super::pki::Pki,
    /// What every node presents, to clients and to each other.
    pub node: super::pki::Identity,
    /// A client certificate the nodes accept.
    pub client: super::pki::Identity,
}

/// A running cluster ([`servers::Cluster`], whose methods it has), every
/// process killed on drop.
pub struct Cluster {
    cluster: servers::Cluster,
    tls: Option<ClusterTls>,
}

impl Cluster {
    /// Starts `primaries` primaries with `replicas` replicas each and waits
    /// until every node agrees on the layout and every replica is in sync.
    pub fn start(primaries: usize, replicas: usize) -> Self {
        Self::start_with(primaries, replicas, NODE_TIMEOUT)
    }

    /// Like [`Self::start`], with another `cluster-node-timeout`.
    pub fn start_with(primaries: usize, replicas: usize, node_timeout: Duration) -> Self {
        let setup = ClusterSetup {
            node_timeout,
            ..ClusterSetup::new(primaries, replicas)
        };
        Self::create(&setup, None)
    }

    /// Like [`Self::start`], with TLS on every node besides its plain port:
    /// a TLS port for clients (`tls-auth-clients optional`), and TLS on the
    /// cluster bus and replication links.
    pub fn start_tls(primaries: usize, replicas: usize) -> Self {
        let pki = super::pki::Pki::new("redis-lock cluster ca");
        let tls = ClusterTls {
            node: pki.node(&["127.0.0.1", "localhost"]),
            client: pki.client("redis-lock cluster client"),
            pki,
        };
        let setup = ClusterSetup {
            tls: Some(servers::cluster::TlsFiles {
                ca: tls.pki.ca_pem.clone(),
                cert: tls.node.cert_pem.clone(),
                key: tls.node.key_pem.clone(),
            }),
            ..ClusterSetup::new(primaries, replicas)
        };
        Self::create(&setup, Some(tls))
    }

    fn create(setup: &ClusterSetup, tls: Option<ClusterTls>) -> Self {
        let cluster = servers::Cluster::start(super::binaries(), setup)
            .unwrap_or_else(|error| panic!("{error}"));
        Self { cluster, tls }
    }

    /// The certificates of a cluster started with [`Self::start_tls`].
    pub fn tls(&self) -> Option<&ClusterTls> {
        self.tls.as_ref()
    }
}

impl Deref for Cluster {
    type Target = servers::Cluster;

    fn deref(&self) -> &servers::Cluster {
        &self.cluster
    }
}

impl DerefMut for Cluster {
    fn deref_mut(&mut self) -> &mut servers::Cluster {
        &mut self.cluster
    }
}

/// `redis-cli --cluster check`'s view of the shards: the operator's tool,
/// independent of the code under test.
pub fn cli_view(node: &ClusterNode) -> Vec<ShardView> {
    servers::cluster::cli_view(super::binaries(), node.port())
}
