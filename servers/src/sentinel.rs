//! A Sentinel group of real processes: one primary, its replicas and a
//! few sentinels on ports from the walk, with a small
//! `down-after-milliseconds`, and the failovers a lock must survive.
//!
//! Helpers print how long each change took (`--nocapture` shows it): those
//! numbers feed the simulator's model.

use std::time::{Duration, Instant};

use crate::{Binaries, Launch, Process, Server, StartError, settle, wait_for};

/// How long a failover, or the group's start, may take.
const SETTLE: Duration = Duration::from_secs(30);

/// The master name the sentinels monitor.
pub const MASTER_NAME: &str = "lockmaster";

/// How the group is set up.
#[derive(Debug, Clone)]
pub struct SentinelSetup {
    /// `down-after-milliseconds`: how long the primary must be silent before
    /// a sentinel thinks it down.
    pub down_after: Duration,
    /// Sentinels in the group (the quorum is a majority of them).
    pub sentinels: usize,
    /// `min-replicas-to-write` on the data nodes (with
    /// `min-replicas-max-lag 1`); `None` leaves it off, as Redis does.
    pub min_replicas_to_write: Option<u32>,
    /// Replicas of the primary (at least one). With two, a failover leaves
    /// the new primary one replica at once (the sentinels repoint the
    /// other), so `WAIT 1` keeps working; with one, the new primary has
    /// none until the old primary is back as its replica.
    pub replicas: usize,
}

impl Default for SentinelSetup {
    fn default() -> Self {
        Self {
            down_after: Duration::from_millis(1_000),
            sentinels: 3,
            min_replicas_to_write: None,
            replicas: 1,
        }
    }
}

/// A running group, every process killed on drop.
#[derive(Debug)]
pub struct SentinelGroup {
    /// The primary first, then the replicas (roles change on failover).
    servers: Vec<Server>,
    sentinels: Vec<Process>,
}

impl SentinelGroup {
    /// Starts a group and waits until every sentinel knows the primary, the
    /// replicas and every other sentinel, so a failover can run at once.
    pub fn start(binaries: &Binaries, setup: &SentinelSetup) -> Result<Self, StartError> {
        let started = Instant::now();
        let min_replicas = setup.min_replicas_to_write.map(|min| min.to_string());
        let mut args = vec![];
        if let Some(min) = &min_replicas {
            args = vec![
                "--min-replicas-to-write",
                min,
                "--min-replicas-max-lag",
                "1",
            ];
        }
        let launch = Launch::server(binaries);
        let primary = Server::launch(&launch, None, &args)?;
        let mut servers = vec![primary];
        for _ in 0..setup.replicas.max(1) {
            let replica = Server::launch(&launch, Some(servers[0].port()), &args)?;
            settle("the replica syncs", SETTLE, || {
                let info: String = replica
                    .try_query(&["INFO", "replication"])
                    .map_err(|error| error.to_string())?;
                info.contains("master_link_status:up")
                    .then_some(())
                    .ok_or(info)
            })?;
            servers.push(replica);
        }
        let quorum = setup.sentinels / 2 + 1;
        let config = format!(
            "bind 127.0.0.1\n\
             sentinel monitor {MASTER_NAME} 127.0.0.1 {primary} {quorum}\n\
             sentinel down-after-milliseconds {MASTER_NAME} {down}\n\
             sentinel failover-timeout {MASTER_NAME} 10000\n\
             sentinel parallel-syncs {MASTER_NAME} 1\n",
            primary = servers[0].port(),
            down = setup.down_after.as_millis(),
        );
        // A sentinel needs a config file it can rewrite.
        let launch = Launch::sentinel(binaries).file("sentinel.conf", config);
        let sentinels = (0..setup.sentinels)
            .map(|_| launch.start(|_, dir| vec![dir.join("sentinel.conf").display().to_string()]))
            .collect::<Result<Vec<Process>, StartError>>()?;
        let group = Self { servers, sentinels };
        group.wait_known()?;
        eprintln!(
            "sentinel: 1 primary, {} replicas, {} sentinels ready in {:?}",
            setup.replicas.max(1),
            setup.sentinels,
            started.elapsed()
        );
        Ok(group)
    }

    /// The master name to resolve.
    pub fn master_name(&self) -> &'static str {
        MASTER_NAME
    }

    /// The sentinels' ports.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(Process::port).collect()
    }

    /// `redis://127.0.0.1:PORT/` for every sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|sentinel| format!("redis://127.0.0.1:{}/", sentinel.port()))
            .collect()
    }

    /// The sentinel processes.
    pub fn sentinels(&self) -> &[Process] {
        &self.sentinels
    }

    /// The data node on `port`.
    ///
    /// # Panics
    /// If no data node of the group listens there.
    pub fn server(&self, port: u16) -> &Server {
        self.servers
            .iter()
            .find(|server| server.port() == port)
            .unwrap_or_else(|| panic!("no data node on port {port}"))
    }

    /// The data nodes' ports (primary first at start; roles change).
    pub fn server_ports(&self) -> Vec<u16> {
        self.servers.iter().map(Server::port).collect()
    }

    /// The primary every live sentinel names, once they agree.
    ///
    /// # Panics
    /// If they do not agree within 30 s.
    pub fn master_port(&self) -> u16 {
        wait_for("the sentinels agree on the master", SETTLE, || {
            self.agreed_master()
        })
    }

    fn agreed_master(&self) -> Option<u16> {
        let mut named = self
            .sentinels
            .iter()
            .filter(|sentinel| !sentinel.is_killed())
            .map(master_named_by);
        let first = named.next()??;
        named.all(|port| port == Some(first)).then_some(first)
    }

    /// Forces a failover with `SENTINEL FAILOVER` (the primary stays up) and
    /// waits until every sentinel names the replica and it says it is a
    /// primary. Returns the new primary's port.
    ///
    /// # Panics
    /// If that does not happen within 30 s.
    pub fn failover(&self) -> u16 {
        let old = self.master_port();
        let started = Instant::now();
        let _: String = self.sentinels[0].query(&["SENTINEL", "FAILOVER", MASTER_NAME]);
        let new = self.wait_new_master(old);
        eprintln!(
            "sentinel: SENTINEL FAILOVER named {new} in {:?}",
            started.elapsed()
        );
        new
    }

    /// Kills the primary with SIGKILL and waits until the sentinels agree
    /// on the promoted replica. Returns its port.
    ///
    /// # Panics
    /// If they do not within 30 s.
    pub fn kill_master(&mut self) -> u16 {
        let old = self.master_port();
        let started = Instant::now();
        self.servers
            .iter_mut()
            .find(|server| server.port() == old)
            .expect("the master is a data node")
            .kill();
        let new = self.wait_new_master(old);
        eprintln!(
            "sentinel: kill -9 of {old}: {new} named after {:?}",
            started.elapsed()
        );
        new
    }

    fn wait_new_master(&self, old: u16) -> u16 {
        let new = wait_for("the sentinels name a new master", SETTLE, || {
            self.agreed_master().filter(|&port| port != old)
        });
        wait_for("the new master says it is one", SETTLE, || {
            let role: redis::Value = self.server(new).try_query(&["ROLE"]).ok()?;
            is_master(&role).then_some(())
        });
        new
    }

    /// Waits until every sentinel sees the master up, its replicas, and all
    /// the other sentinels.
    fn wait_known(&self) -> Result<(), StartError> {
        let others = (self.sentinels.len() - 1).to_string();
        let replicas = (self.servers.len() - 1).to_string();
        for sentinel in &self.sentinels {
            settle("a sentinel knows the whole group", SETTLE, || {
                let fields: Vec<String> = sentinel
                    .try_query(&["SENTINEL", "MASTER", MASTER_NAME])
                    .map_err(|error| error.to_string())?;
                let field = |name: &str| {
                    fields
                        .chunks(2)
                        .find(|pair| pair[0] == name)
                        .map(|pair| pair[1].as_str())
                };
                let ready = field("flags") == Some("master")
                    && field("num-slaves") == Some(&replicas)
                    && field("num-other-sentinels") == Some(&others);
                ready.then_some(()).ok_or_else(|| format!("{fields:?}"))
            })?;
        }
        Ok(())
    }
}

/// Whether a `ROLE` reply says master.
pub fn is_master(role: &redis::Value) -> bool {
    matches!(role, redis::Value::Array(items)
        if matches!(items.first(), Some(redis::Value::BulkString(role)) if role == b"master"))
}

/// The port `sentinel` names for the master, if it answers.
fn master_named_by(sentinel: &Process) -> Option<u16> {
    let address: Option<(String, u16)> = sentinel
        .try_query(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME])
        .ok()?;
    address.map(|(_, port)| port)
}
