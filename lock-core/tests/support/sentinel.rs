//! A Sentinel group of real processes: one primary, one replica and three
//! `redis-sentinel`s on free loopback ports, with a small
//! `down-after-milliseconds`, and the failovers a lock must survive.
//!
//! Helpers print how long each change took (`--nocapture` shows it): those
//! numbers feed the simulator's model.
#![allow(dead_code, unreachable_pub)]

use std::{
    fs,
    time::{Duration, Instant},
};

use super::process::{Binary, Process, Ready, wait_for};

/// How long a failover may take before a helper gives up.
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
    /// Replicas of the primary. With two, a failover leaves the new
    /// primary one replica at once (the sentinels repoint the other), so
    /// `WAIT 1` keeps working; with one, the new primary has none until
    /// the old primary is back as its replica.
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
pub struct SentinelGroup {
    /// The primary first, then the replica (roles change on failover).
    servers: Vec<Process>,
    sentinels: Vec<Process>,
}

impl SentinelGroup {
    /// The default group: 1 primary, 1 replica, 3 sentinels, down after 1 s.
    pub fn start() -> Self {
        Self::start_with(&SentinelSetup::default())
    }

    /// Starts a group and waits until every sentinel knows the primary, the
    /// replica and every other sentinel, so a failover can run at once.
    pub fn start_with(setup: &SentinelSetup) -> Self {
        let started = Instant::now();
        let primary = start_server(setup, None);
        let mut servers = vec![];
        for _ in 0..setup.replicas.max(1) {
            let replica = start_server(setup, Some(primary.port()));
            wait_for("the replica syncs", SETTLE, || {
                let info: String = replica.try_query(&["INFO", "replication"]).ok()?;
                info.contains("master_link_status:up").then_some(())
            });
            servers.push(replica);
        }
        let quorum = setup.sentinels / 2 + 1;
        let sentinels = (0..setup.sentinels)
            .map(|_| start_sentinel(setup, primary.port(), quorum))
            .collect();
        servers.insert(0, primary);
        let group = Self { servers, sentinels };
        group.wait_known();
        eprintln!(
            "sentinel: 1 primary, {} replicas, {} sentinels ready in {:?}",
            setup.replicas.max(1),
            setup.sentinels,
            started.elapsed()
        );
        group
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
    pub fn server(&self, port: u16) -> &Process {
        self.servers
            .iter()
            .find(|server| server.port() == port)
            .unwrap_or_else(|| panic!("no data node on port {port}"))
    }

    /// The data nodes' ports (primary first at start; roles change).
    pub fn server_ports(&self) -> Vec<u16> {
        self.servers.iter().map(Process::port).collect()
    }

    /// The primary every live sentinel names, once they agree.
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

    /// Waits until every sentinel sees the master up, its replica, and all
    /// the other sentinels.
    fn wait_known(&self) {
        let others = self.sentinels.len() - 1;
        for sentinel in &self.sentinels {
            wait_for("a sentinel knows the whole group", SETTLE, || {
                let fields: Vec<String> = sentinel
                    .try_query(&["SENTINEL", "MASTER", MASTER_NAME])
                    .ok()?;
                let field = |name: &str| {
                    fields
                        .chunks(2)
                        .find(|pair| pair[0] == name)
                        .map(|pair| pair[1].clone())
                };
                let replicas = (self.servers.len() - 1).to_string();
                let ready = field("flags").as_deref() == Some("master")
                    && field("num-slaves") == Some(replicas)
                    && field("num-other-sentinels") == Some(others.to_string());
                ready.then_some(())
            });
        }
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

fn start_server(setup: &SentinelSetup, replica_of: Option<u16>) -> Process {
    Process::start(Binary::Server, Ready::AnswersAsItself, |port, dir| {
        let dir_text = dir.display().to_string();
        let mut args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "no",
            // A primary otherwise waits 5 s for more replicas before a sync.
            "--repl-diskless-sync-delay",
            "0",
            "--dir",
            &dir_text,
            "--logfile",
            &format!("{dir_text}/log.txt"),
        ]
        .map(str::to_owned)
        .to_vec();
        if let Some(min) = setup.min_replicas_to_write {
            args.extend(
                [
                    "--min-replicas-to-write",
                    &min.to_string(),
                    "--min-replicas-max-lag",
                    "1",
                ]
                .map(str::to_owned),
            );
        }
        if let Some(primary) = replica_of {
            args.extend(["--replicaof", "127.0.0.1", &primary.to_string()].map(str::to_owned));
        }
        args
    })
}

fn start_sentinel(setup: &SentinelSetup, primary: u16, quorum: usize) -> Process {
    Process::start(Binary::Sentinel, Ready::AnswersAsItself, |port, dir| {
        // A sentinel needs a config file it can rewrite.
        let config = dir.join("sentinel.conf");
        let down = setup.down_after.as_millis();
        fs::write(
            &config,
            format!(
                "port {port}\n\
                 bind 127.0.0.1\n\
                 dir {dir}\n\
                 logfile {dir}/log.txt\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {primary} {quorum}\n\
                 sentinel down-after-milliseconds {MASTER_NAME} {down}\n\
                 sentinel failover-timeout {MASTER_NAME} 10000\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n",
                dir = dir.display()
            ),
        )
        .expect("write sentinel.conf");
        vec![config.display().to_string()]
    })
}
