//! A data node: a single server, a primary, or a replica of one.

use std::{
    cell::Cell,
    time::{Duration, Instant},
};

use crate::{Binaries, Launch, Process, StartError};

/// How long a replica may take to come online and acknowledge a write.
const SYNC: Duration = Duration::from_secs(10);

/// One data node without persistence (unless its arguments ask for it),
/// killed on drop.
#[derive(Debug)]
pub struct Server {
    process: Process,
    /// The port it replicates from while it is a replica; `promote` clears
    /// it, so that a restart brings it back as a primary.
    replica_of: Cell<Option<u16>>,
    /// Its arguments after the defaults.
    args: Vec<String>,
}

impl Server {
    /// Starts a server on a port from the walk and waits until it answers.
    pub fn start(binaries: &Binaries) -> Result<Self, StartError> {
        Self::start_with(binaries, &[])
    }

    /// Starts a server like [`Self::start`], with `args` after the
    /// defaults (so `--appendonly yes` overrides `--appendonly no`).
    pub fn start_with(binaries: &Binaries, args: &[&str]) -> Result<Self, StartError> {
        Self::launch(&Launch::server(binaries), None, args)
    }

    /// Starts a server as `launch` says (its environment, its readiness),
    /// replicating from `replica_of` when given, with `args` after the
    /// defaults. Returns once it answers, before any sync.
    pub fn launch(
        launch: &Launch<'_>,
        replica_of: Option<u16>,
        args: &[&str],
    ) -> Result<Self, StartError> {
        let args: Vec<String> = args.iter().map(|&arg| arg.to_owned()).collect();
        let process = launch.start(|_, _| with_replicaof(&args, replica_of))?;
        Ok(Self {
            process,
            replica_of: Cell::new(replica_of),
            args,
        })
    }

    /// Starts a replica of `primary` and waits until it acknowledges a
    /// write, so later writes stream to it (asynchronously, as in
    /// production) and `WAIT` counts it without delay.
    pub fn replica_of(binaries: &Binaries, primary: &Self) -> Result<Self, StartError> {
        Self::replica_linked_through(binaries, primary, primary.port())
    }

    /// A replica of `primary` that connects to `link_port`, which is the
    /// primary's own port or a relay to it.
    pub fn replica_linked_through(
        binaries: &Binaries,
        primary: &Self,
        link_port: u16,
    ) -> Result<Self, StartError> {
        let replica = Self::launch(&Launch::server(binaries), Some(link_port), &[])?;
        let online = format!("port={},state=online", replica.port());
        let deadline = Instant::now() + SYNC;
        let mut info = String::new();
        while !info.contains(&online) {
            if Instant::now() > deadline {
                return Err(StartError::Setup {
                    what: format!("the replica on port {}", replica.port()),
                    why: format!("the primary never counted it online:\n{info}"),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
            info = primary
                .try_query(&["INFO", "replication"])
                .unwrap_or_default();
        }
        // Even online, a replica that synced without disk gets the command
        // stream (and WAIT's GETACK) only after its first periodic ACK, up
        // to a second later: a test's first WAIT could time out on it. A
        // write that every replica has acknowledged proves the stream flows.
        let replicas = info.matches("state=online").count();
        while primary.acknowledged_write(replicas) < replicas {
            if Instant::now() > deadline {
                return Err(StartError::Setup {
                    what: format!("the replica on port {}", replica.port()),
                    why: "it never acknowledged a write".to_owned(),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(replica)
    }

    /// How many replicas acknowledged a write within 500 ms (0 when the
    /// primary did not answer).
    fn acknowledged_write(&self, replicas: usize) -> usize {
        let Ok(mut conn) = self.connection() else {
            return 0;
        };
        redis::pipe()
            .cmd("SET")
            .arg("fixture:replica-sync")
            .arg(1)
            .ignore()
            .cmd("DEL")
            .arg("fixture:replica-sync")
            .ignore()
            .cmd("WAIT")
            .arg(replicas)
            .arg(500)
            .query::<(usize,)>(&mut conn)
            .map_or(0, |(acked,)| acked)
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port())
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.process.port()
    }

    /// The process.
    pub fn process(&self) -> &Process {
        &self.process
    }

    /// Freezes the process (SIGSTOP): connections stay open, nothing
    /// answers.
    ///
    /// # Panics
    /// If it was killed.
    pub fn pause(&self) {
        self.process
            .pause()
            .unwrap_or_else(|error| panic!("SIGSTOP to port {}: {error}", self.port()));
    }

    /// Thaws a paused process (SIGCONT).
    ///
    /// # Panics
    /// If it was killed.
    pub fn resume(&self) {
        self.process
            .resume()
            .unwrap_or_else(|error| panic!("SIGCONT to port {}: {error}", self.port()));
    }

    /// Kills the process (SIGKILL, which also ends a paused one) and waits
    /// for it.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Kills the server and starts it again on the same port with an empty
    /// dataset, as a primary if it was promoted, else in its first role.
    ///
    /// # Panics
    /// If it does not come back, with its log.
    pub fn restart(&mut self) {
        self.start_again(true);
    }

    /// Kills the server and starts it again on the same port with the
    /// dataset its directory holds (an RDB written by `SAVE`), as a node
    /// with persistence comes back. Returns once it answers, which may be
    /// while it is still loading.
    ///
    /// # Panics
    /// If it does not come back, with its log.
    pub fn restart_keeping_data(&mut self) {
        self.start_again(false);
    }

    fn start_again(&mut self, fresh: bool) {
        let args = with_replicaof(&self.args, self.replica_of.get());
        if let Err(error) = self.process.restart_with(fresh, |_, _| args) {
            panic!("the server did not restart: {error}");
        }
    }

    /// Makes a replica a primary (`REPLICAOF NO ONE`), as a failover would.
    pub fn promote(&self) {
        let _: String = self.query(&["REPLICAOF", "NO", "ONE"]);
        self.replica_of.set(None);
    }

    /// Runs a command on a fresh blocking connection (1 s to connect, 2 s
    /// for the reply) and converts the reply.
    pub fn try_query<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        self.process.try_query(args)
    }

    /// Like [`Self::try_query`].
    ///
    /// # Panics
    /// On an error, naming the command and the port.
    pub fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        self.process.query(args)
    }

    /// Runs a command and returns the raw reply.
    ///
    /// # Panics
    /// On an error, as [`Self::query`].
    pub fn cmd(&self, args: &[&str]) -> redis::Value {
        self.query(args)
    }

    /// A blocking connection: 1 s to connect, 2 s for each reply.
    pub fn connection(&self) -> redis::RedisResult<redis::Connection> {
        crate::connect(self.port())
    }
}

/// `args`, then `--replicaof 127.0.0.1 PORT` when `replica_of` is given.
fn with_replicaof(args: &[String], replica_of: Option<u16>) -> Vec<String> {
    let mut all = args.to_vec();
    if let Some(primary) = replica_of {
        all.extend(["--replicaof", "127.0.0.1", &primary.to_string()].map(str::to_owned));
    }
    all
}
