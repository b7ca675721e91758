//! What a real run runs against, and how.

use std::{path::PathBuf, time::Duration};

use super::ChaosError;

/// What a real run runs against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A deployment the harness starts and owns.
    Started,
    /// A user's own single Redis, given as a URL: client-side faults only.
    Url {
        /// The host (loopback or not).
        host: String,
        /// The port.
        port: u16,
    },
}

impl Target {
    /// Parses `redis://HOST:PORT`.
    pub fn parse_url(url: &str) -> Result<Self, ChaosError> {
        let bad = || ChaosError::BadTarget(url.to_owned());
        let rest = url.strip_prefix("redis://").ok_or_else(bad)?;
        let rest = rest.trim_end_matches('/');
        let (host, port) = rest.rsplit_once(':').ok_or_else(bad)?;
        let port = port.parse().map_err(|_| bad())?;
        if host != "127.0.0.1" && host != "localhost" {
            // The proxies and clients dial loopback only.
            return Err(ChaosError::BadTarget(format!(
                "{url} (only a Redis on this machine, 127.0.0.1, is supported)"
            )));
        }
        Ok(Self::Url {
            host: host.to_owned(),
            port,
        })
    }
}

/// How a real run goes.
#[derive(Debug, Clone)]
pub struct RealOptions {
    /// What to run against.
    pub target: Target,
    /// Fixed ports from here up (else the kernel picks free ones).
    pub base_port: Option<u16>,
    /// Where logs, configs and node directories go.
    pub work_dir: PathBuf,
    /// Append every started pid here (for tests).
    pub pids_file: Option<PathBuf>,
    /// Where each flavour's server is (`DIR/FLAVOUR/path/redis-server`,
    /// as `scripts/servers.sh` makes it): `super::flavour`.
    pub servers: PathBuf,
    /// How partitions are made ([`super::netns::enter`] says).
    pub network: super::netns::Network,
    /// The bugs planted in the run ([`super::plant`]): positive controls
    /// for the checkers, never evidence for the lock.
    pub plants: Vec<super::plant::Plant>,
}

/// How long a client's events take to reach the history, at most, on a
/// loaded machine: the slack the checkers give real timing (the
/// simulator's is one tick).
pub const REAL_SLACK: Duration = Duration::from_millis(25);
