//! Real `redis-server` processes for integration tests, each on its own
//! free loopback port, so a test can freeze, kill, restart or fail over
//! its server without touching anyone else's.
// Each test binary uses a different subset of this module.
#![allow(dead_code, unreachable_pub)]

use std::{
    net::TcpListener,
    path::PathBuf,
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

const HOW_TO_GET_REDIS: &str = "redis-server not found: install it with \
    `apt-get install redis-server` (scripts/test.sh does), or set REDIS_SERVER_BIN";

fn binary() -> PathBuf {
    if let Ok(path) = std::env::var("REDIS_SERVER_BIN") {
        return PathBuf::from(path);
    }
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let candidate = PathBuf::from(dir).join("redis-server");
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!("{HOW_TO_GET_REDIS}");
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
    child: Option<Child>,
    replica_of: Option<u16>,
}

impl RedisServer {
    /// Starts a server with no persistence on a free port and waits for PING.
    pub fn start() -> Self {
        Self::spawn(free_port(), None)
    }

    /// Starts a replica of `primary` (asynchronous replication).
    pub fn replica_of(primary: &Self) -> Self {
        let replica = Self::spawn(free_port(), Some(primary.port));
        // Wait until the initial sync is done, so later writes stream.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let info: String = replica.query(&["INFO", "replication"]);
            if info.contains("master_link_status:up") {
                break;
            }
            assert!(Instant::now() < deadline, "replica never synced:\n{info}");
            thread::sleep(Duration::from_millis(20));
        }
        replica
    }

    fn spawn(port: u16, replica_of: Option<u16>) -> Self {
        // A replica writes the initial sync's RDB file to its working
        // directory even with `--save ""`: keep it out of the repository.
        let dir = std::env::temp_dir().join(format!("redis-lock-test-{port}"));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let mut command = Command::new(binary());
        command
            .arg("--dir")
            .arg(&dir)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(primary) = replica_of {
            command.args(["--replicaof", "127.0.0.1", &primary.to_string()]);
        }
        let child = command
            .spawn()
            .unwrap_or_else(|error| panic!("{HOW_TO_GET_REDIS} ({error})"));
        let server = Self {
            port,
            child: Some(child),
            replica_of,
        };
        server.wait_ready();
        server
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.try_query::<String>(&["PING"]).is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} did not answer PING within 10 s",
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

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server is running").id()
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status()
            .expect("kill(1) runs");
        assert!(status.success(), "kill {signal} failed");
    }

    /// Freezes the process (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a paused process (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills and starts the server again on the same port, empty.
    pub fn restart(&mut self) {
        self.kill();
        let fresh = Self::spawn(self.port, self.replica_of);
        *self = fresh;
    }

    /// Makes a replica a primary (`REPLICAOF NO ONE`), as a failover would.
    pub fn promote(&self) {
        let _: String = self.query(&["REPLICAOF", "NO", "ONE"]);
    }

    fn try_query<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let client = redis::Client::open(self.url())?;
        let mut conn = client.get_connection_with_timeout(Duration::from_secs(1))?;
        conn.set_read_timeout(Some(Duration::from_secs(2)))?;
        let mut command = redis::cmd(args[0]);
        for arg in &args[1..] {
            command.arg(*arg);
        }
        command.query(&mut conn)
    }

    /// Runs a command on a fresh blocking connection and converts the reply.
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
        if let Some(mut child) = self.child.take() {
            // A paused process must be thawed to die promptly on some kernels.
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
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
        let fake_primary = Self {
            port: proxy.port,
            child: None,
            replica_of: None,
        };
        let replica = Self::replica_of(&fake_primary);
        (replica, proxy)
    }
}
