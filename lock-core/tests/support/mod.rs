//! Real `redis-server` processes for integration tests, each on its own
//! free loopback port, so a test can freeze, kill, restart or fail over
//! its server without touching anyone else's.
//!
//! There is no skipping: a test that cannot start a server fails and says
//! how to get one.
// Each test binary uses a different subset of this module, and `pub` here
// only means "visible to the test file that declares `mod support;`".
#![allow(dead_code, unreachable_pub)]

pub mod cluster;
pub mod pki;
pub mod process;
pub mod sentinel;
pub mod states;
#[cfg(feature = "tls")]
pub mod tls;
#[cfg(feature = "redis")]
pub mod workload;

use std::{
    cell::Cell,
    fs,
    net::TcpListener,
    path::PathBuf,
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

const HOW_TO_GET_REDIS: &str = "redis-server not found: install it with \
    `apt-get install redis-server` (scripts/test.sh does), or set REDIS_SERVER_BIN";

/// The server family a test run must be talking to, from `LOCK_TEST_SERVER`
/// (`redis` or `valkey`; unset checks nothing). `scripts/test.sh` sets it for
/// each pass of its server matrix, so that a pass meant for Valkey cannot
/// quietly run against a `redis-server` found first on `PATH`.
const FAMILY_VAR: &str = "LOCK_TEST_SERVER";

/// Panics unless `info` (an `INFO server` reply of the process on `port`)
/// comes from the family `LOCK_TEST_SERVER` names.
pub fn check_family(info: &str, port: u16) {
    let Ok(wanted) = std::env::var(FAMILY_VAR) else {
        return;
    };
    let valkey = info.contains("valkey_version:");
    let is = if valkey { "valkey" } else { "redis" };
    assert!(
        wanted == "redis" || wanted == "valkey",
        "{FAMILY_VAR}={wanted}: expected `redis` or `valkey`"
    );
    assert_eq!(
        is, wanted,
        "the server on port {port} is {is}, but {FAMILY_VAR}={wanted}: put the \
         {wanted} binaries first on PATH (scripts/test.sh does)"
    );
}

/// How long a server may take to answer its first command.
const STARTUP: Duration = Duration::from_secs(10);

/// How many free ports `start` tries before giving up.
const PORT_ATTEMPTS: usize = 5;

fn binary() -> PathBuf {
    if let Ok(path) = std::env::var("REDIS_SERVER_BIN") {
        return PathBuf::from(path);
    }
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|dir| PathBuf::from(dir).join("redis-server"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("{HOW_TO_GET_REDIS}"))
}

/// Where the servers the tests start keep their data, configs and logs: a
/// tmpfs when the machine has one (`/dev/shm`), else the temporary
/// directory. On a disk, a server's `fsync` (a sentinel's config rewrite at
/// each failover, a replica's received RDB) waits, under the machine's own
/// writes (the build just before, the tests beside), for a journal commit of
/// everything dirty: seconds, in which a sentinel answered nothing (a 2 s
/// read timed out) or a failover came 15 s late.
pub fn scratch_root() -> std::path::PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("the OS hands out a free loopback port")
        .port()
}

/// One `redis-server` process owned by a test. Killed on drop.
pub struct RedisServer {
    port: u16,
    /// The primary's port while this server is a replica; `promote` clears it.
    replica_of: Cell<Option<u16>>,
    /// Scratch directory for the log and a replica's sync file, so nothing
    /// lands in the repository. Removed on drop.
    dir: PathBuf,
    /// Arguments after the defaults (later arguments win in redis-server).
    extra_args: Vec<String>,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server with no persistence on a free port and waits until it
    /// answers.
    pub fn start() -> Self {
        Self::start_on_free_port(None, &[])
    }

    /// Starts a server like [`Self::start`], with `args` after the defaults
    /// (so `--appendonly yes` overrides the default `--appendonly no`).
    pub fn start_with(args: &[&str]) -> Self {
        Self::start_on_free_port(None, args)
    }

    /// Starts a replica of `primary` and waits until it acknowledges a
    /// write, so later writes stream to it (asynchronously, as in
    /// production) and `WAIT` counts it without delay.
    pub fn replica_of(primary: &Self) -> Self {
        Self::replica_linked_through(primary, primary.port)
    }

    /// A replica of `primary` that connects to `link_port`, which is the
    /// primary's own port or a relay to it.
    fn replica_linked_through(primary: &Self, link_port: u16) -> Self {
        let replica = Self::start_on_free_port(Some(link_port), &[]);
        let online = format!("port={},state=online", replica.port);
        let deadline = Instant::now() + STARTUP;
        let mut info = String::new();
        while !info.contains(&online) {
            assert!(
                Instant::now() < deadline,
                "the primary never counted the replica on port {} online:\n{info}",
                replica.port
            );
            thread::sleep(Duration::from_millis(20));
            info = primary.query(&["INFO", "replication"]);
        }
        // Even online, a replica that synced without disk gets the command
        // stream (and WAIT's GETACK) only after its first periodic ACK, up
        // to a second later: a test's first WAIT could time out on it. A
        // write that every replica has acknowledged proves the stream flows.
        let replicas = info.matches("state=online").count();
        let mut conn = primary.connection().expect("connect to the primary");
        loop {
            let acked: usize = redis::pipe()
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
                .expect("SET, DEL, WAIT on the primary")
                .0;
            if acked >= replicas {
                return replica;
            }
            assert!(
                Instant::now() < deadline,
                "the replica on port {} never acknowledged a write",
                replica.port
            );
        }
    }

    fn start_on_free_port(replica_of: Option<u16>, extra_args: &[&str]) -> Self {
        // A port that was free when probed can be taken before redis-server
        // binds it (by another test's server, or as the local end of an
        // outgoing connection): then try another one.
        let mut last_log = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let port = free_port();
            let mut server = Self {
                port,
                replica_of: Cell::new(replica_of),
                dir: scratch_root().join(format!("redis-lock-test-{}-{port}", std::process::id())),
                extra_args: extra_args.iter().map(|arg| (*arg).to_owned()).collect(),
                child: None,
            };
            match server.launch(true) {
                Ok(()) => return server,
                Err(log) if log.contains("Address already in use") => last_log = log,
                Err(log) => panic!("redis-server on port {port} exited at startup:\n{log}"),
            }
        }
        panic!("redis-server found no free port in {PORT_ATTEMPTS} attempts:\n{last_log}");
    }

    /// Starts the process on `self.port` and waits until it answers: with
    /// an empty dataset if `fresh`, else with what its directory holds.
    /// `Err` carries the log of a process that exited.
    fn launch(&mut self, fresh: bool) -> Result<(), String> {
        if fresh {
            // A fresh directory: a replica's old sync file must not be loaded.
            let _ = fs::remove_dir_all(&self.dir);
        }
        fs::create_dir_all(&self.dir).expect("a scratch directory");
        let log = self.dir.join("redis.log");
        let mut command = Command::new(binary());
        command
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(&log)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            // A primary otherwise waits 5 s for more replicas before a sync.
            .args(["--repl-diskless-sync-delay", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(primary) = self.replica_of.get() {
            command.args(["--replicaof", "127.0.0.1", &primary.to_string()]);
        }
        command.args(&self.extra_args);
        let child = command
            .spawn()
            .unwrap_or_else(|error| panic!("{HOW_TO_GET_REDIS} ({error})"));
        let pid = child.id();
        self.child = Some(child);

        // Ready means *this* process answers: if another server holds the
        // port, ours is about to exit and must not be mistaken for it.
        let ours = format!("process_id:{pid}\r\n");
        let deadline = Instant::now() + STARTUP;
        loop {
            let child = self.child.as_mut().expect("spawned above");
            if let Some(status) = child.try_wait().expect("wait on redis-server") {
                self.child = None;
                let log = fs::read_to_string(&log).unwrap_or_default();
                return Err(format!("{status}\n{log}"));
            }
            let info = self.try_query::<String>(&["INFO", "server"]);
            if let Ok(info) = info.as_deref()
                && info.contains(&ours)
            {
                check_family(info, self.port);
                return Ok(());
            }
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} did not answer within {STARTUP:?}",
                self.port
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("the server is running").id();
        // kill(1) rather than libc: the workspace forbids unsafe code.
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("kill(1) runs");
        assert!(status.success(), "kill {signal} {pid} failed");
    }

    /// Freezes the process (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a paused process (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// Kills the process (SIGKILL, which also ends a paused one) and waits
    /// for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server and starts it again on the same port with an empty
    /// dataset, as a primary if it was promoted, else in its first role.
    pub fn restart(&mut self) {
        self.kill();
        if let Err(log) = self.launch(true) {
            panic!("redis-server did not restart on port {}:\n{log}", self.port);
        }
    }

    /// Kills the server and starts it again on the same port with the
    /// dataset its directory holds (an RDB written by `SAVE`), as a node
    /// with persistence comes back. Returns once it answers, which may be
    /// while it is still loading.
    pub fn restart_keeping_data(&mut self) {
        self.kill();
        if let Err(log) = self.launch(false) {
            panic!("redis-server did not restart on port {}:\n{log}", self.port);
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
        let mut conn = self.connection()?;
        let (name, rest) = args.split_first().expect("a command name");
        let mut command = redis::cmd(name);
        for arg in rest {
            command.arg(*arg);
        }
        command.query(&mut conn)
    }

    /// A blocking connection: 1 s to connect, 2 s for each reply.
    fn connection(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        let conn = client.get_connection_with_timeout(Duration::from_secs(1))?;
        conn.set_read_timeout(Some(Duration::from_secs(2)))?;
        Ok(conn)
    }

    /// Like [`Self::try_query`], but panics on an error.
    pub fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        self.try_query(args)
            .unwrap_or_else(|error| panic!("{args:?} on port {}: {error}", self.port))
    }

    /// Runs a command and returns the raw reply.
    pub fn cmd(&self, args: &[&str]) -> redis::Value {
        self.query(args)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A server for tests that only need *a* Redis: `REDIS_URL` if set,
/// otherwise a spawned one.
pub enum AnyRedis {
    /// From `REDIS_URL`.
    External(String),
    /// Spawned for this test.
    Spawned(RedisServer),
}

impl AnyRedis {
    /// Its URL.
    pub fn url(&self) -> String {
        match self {
            Self::External(url) => url.clone(),
            Self::Spawned(server) => server.url(),
        }
    }
}

/// `REDIS_URL` if set, otherwise a fresh `redis-server`.
pub fn redis_url_or_spawn() -> AnyRedis {
    match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => AnyRedis::External(url),
        _ => AnyRedis::Spawned(RedisServer::start()),
    }
}

/// The key's PTTL (-2: missing, -1: no ttl).
/// The arguments of a `MONITOR` line, unquoted:
/// `1700000000.000001 [0 lua] "SET" "k"` gives `["SET", "k"]`.
pub fn monitor_args(line: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut arg = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => arg.extend(chars.next()),
                '"' => break,
                c => arg.push(c),
            }
        }
        args.push(arg);
    }
    args
}

pub fn pttl(server: &RedisServer, key: &str) -> i64 {
    server.query(&["PTTL", key])
}

/// The key's value, if any.
pub fn get(server: &RedisServer, key: &str) -> Option<String> {
    server.query(&["GET", key])
}

/// A TCP relay on loopback that can silently drop what it carries: a
/// replication link that loses data, as a network partition would.
pub struct LinkProxy {
    port: u16,
    dropping: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl LinkProxy {
    /// Relays a free port to `target_port`, one thread per direction.
    pub fn start(target_port: u16) -> Self {
        use std::{
            io::{Read, Write},
            net::TcpStream,
            sync::{
                Arc,
                atomic::{AtomicBool, Ordering},
            },
        };
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a relay port");
        let port = listener.local_addr().expect("relay address").port();
        let dropping = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&dropping);
        thread::spawn(move || {
            for inbound in listener.incoming().flatten() {
                let Ok(outbound) = TcpStream::connect(("127.0.0.1", target_port)) else {
                    continue;
                };
                for (mut from, mut to) in [
                    (
                        inbound.try_clone().expect("clone"),
                        outbound.try_clone().expect("clone"),
                    ),
                    (outbound, inbound),
                ] {
                    let flag = Arc::clone(&flag);
                    thread::spawn(move || {
                        let mut buffer = [0u8; 16 * 1024];
                        while let Ok(read) = from.read(&mut buffer) {
                            if read == 0 {
                                break;
                            }
                            if !flag.load(Ordering::SeqCst)
                                && to.write_all(&buffer[..read]).is_err()
                            {
                                break;
                            }
                        }
                    });
                }
            }
        });
        Self { port, dropping }
    }

    /// From now on, every byte in either direction is lost.
    pub fn drop_everything(&self) {
        self.dropping
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl RedisServer {
    /// Starts a replica of `primary` whose replication link runs through a
    /// [`LinkProxy`] the test can cut.
    pub fn replica_via(primary: &Self) -> (Self, LinkProxy) {
        let proxy = LinkProxy::start(primary.port);
        let replica = Self::replica_linked_through(primary, proxy.port);
        (replica, proxy)
    }
}
