//! One Redis-family process (`redis-server`, `redis-sentinel`) on a free
//! loopback port with its own scratch directory, killed on drop: the unit
//! the TLS, cluster and Sentinel fixtures are built from.
#![allow(dead_code, unreachable_pub)]

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

/// How long a process may take to become ready.
const STARTUP: Duration = Duration::from_secs(10);

/// How many free ports `start` tries before giving up.
const PORT_ATTEMPTS: usize = 5;

/// A binary the fixtures need, and how to get it.
#[derive(Debug, Clone, Copy)]
pub enum Binary {
    /// `redis-server` (Debian package `redis-server`).
    Server,
    /// `redis-sentinel` (Debian package `redis-sentinel`).
    Sentinel,
    /// `redis-cli` (Debian package `redis-tools`).
    Cli,
}

impl Binary {
    fn name(self) -> &'static str {
        match self {
            Self::Server => "redis-server",
            Self::Sentinel => "redis-sentinel",
            Self::Cli => "redis-cli",
        }
    }

    fn package(self) -> &'static str {
        match self {
            Self::Server => "redis-server",
            Self::Sentinel => "redis-sentinel",
            Self::Cli => "redis-tools",
        }
    }

    /// The binary's path: `REDIS_SERVER_BIN` for the server if set, else
    /// found on `PATH`. Panics with the install hint if it is missing.
    pub fn path(self) -> PathBuf {
        if let (Self::Server, Ok(path)) = (self, std::env::var("REDIS_SERVER_BIN")) {
            return PathBuf::from(path);
        }
        std::env::var("PATH")
            .unwrap_or_default()
            .split(':')
            .map(|dir| PathBuf::from(dir).join(self.name()))
            .find(|candidate| candidate.is_file())
            .unwrap_or_else(|| {
                panic!(
                    "{} not found: install it with `apt-get install {}` (scripts/test.sh does)",
                    self.name(),
                    self.package()
                )
            })
    }
}

/// How a fresh process proves it is up and is the one holding its port.
#[derive(Debug, Clone, Copy)]
pub enum Ready {
    /// `INFO server` over plain TCP names this process's pid.
    AnswersAsItself,
    /// Its own log file contains this line (for TLS-only servers). A process
    /// that lost the port race exits instead of logging it.
    Logs(&'static str),
}

/// A running process, killed on drop.
pub struct Process {
    binary: Binary,
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl Process {
    /// Starts `binary` on a free port with the arguments `args(port, dir)`
    /// returns (`dir` is its fresh scratch directory), retrying on another
    /// port if the chosen one was taken, and waits until it is `ready`.
    pub fn start(binary: Binary, ready: Ready, args: impl Fn(u16, &Path) -> Vec<String>) -> Self {
        let path = binary.path();
        let mut last_log = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let port = super::free_port();
            let dir = super::scratch_root().join(format!(
                "redis-lock-test-{}-{}-{port}",
                binary.name(),
                std::process::id()
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).expect("a scratch directory");
            let child = Command::new(&path)
                .args(args(port, &dir))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|error| panic!("cannot run {}: {error}", path.display()));
            let mut process = Self {
                binary,
                port,
                dir,
                child: Some(child),
            };
            match process.wait_ready(ready) {
                Ok(()) => return process,
                Err(log) if log.contains("Address already in use") => last_log = log,
                Err(log) => panic!("{} on port {port} exited at startup:\n{log}", binary.name()),
            }
        }
        panic!(
            "{} found no free port in {PORT_ATTEMPTS} attempts:\n{last_log}",
            binary.name()
        );
    }

    fn wait_ready(&mut self, ready: Ready) -> Result<(), String> {
        let pid = self.pid();
        let ours = format!("process_id:{pid}\r\n");
        let deadline = Instant::now() + STARTUP;
        loop {
            let child = self.child.as_mut().expect("just spawned");
            if let Some(status) = child.try_wait().expect("wait on the process") {
                self.child = None;
                return Err(format!("{status}\n{}", self.log()));
            }
            let up = match ready {
                Ready::AnswersAsItself => {
                    let info = self.try_query::<String>(&["INFO", "server"]);
                    let ours = info.as_deref().is_ok_and(|info| info.contains(&ours));
                    if let (true, Ok(info)) = (ours, info.as_deref()) {
                        super::check_family(info, self.port);
                    }
                    ours
                }
                Ready::Logs(line) => self.log().contains(line),
            };
            if up {
                return Ok(());
            }
            assert!(
                Instant::now() < deadline,
                "{} on port {} was not ready within {STARTUP:?}:\n{}",
                self.binary.name(),
                self.port,
                self.log()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its scratch directory (config files, logs, cluster state).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The process id. Panics if it was killed.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the process is running").id()
    }

    /// Whether it was killed.
    pub fn is_killed(&self) -> bool {
        self.child.is_none()
    }

    /// The contents of `log.txt` in its directory, where the fixtures point
    /// every process's log.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("log.txt")).unwrap_or_default()
    }

    /// Kills it with SIGKILL and waits for it: no clean shutdown, no goodbye
    /// to its peers.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Runs a command over plain TCP on a fresh blocking connection (1 s to
    /// connect, 2 s for the reply) and converts the reply.
    pub fn try_query<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?;
        let mut conn = client.get_connection_with_timeout(Duration::from_secs(1))?;
        conn.set_read_timeout(Some(Duration::from_secs(2)))?;
        command(args).query(&mut conn)
    }

    /// Like [`Self::try_query`], but panics on an error.
    pub fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        self.try_query(args).unwrap_or_else(|error| {
            panic!(
                "{args:?} on {} port {}: {error}",
                self.binary.name(),
                self.port
            )
        })
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A redis-rs command from its words.
pub fn command(args: &[&str]) -> redis::Cmd {
    let (name, rest) = args.split_first().expect("a command name");
    let mut command = redis::cmd(name);
    for arg in rest {
        command.arg(*arg);
    }
    command
}

/// Polls `check` every 10 ms until it returns `Some`, panicking with
/// `what` and the last state after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?}: {what}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `redis-cli` with `args`, panicking with its output if it fails.
pub fn redis_cli(args: &[&str]) -> String {
    let output = Command::new(Binary::Cli.path())
        .args(args)
        .output()
        .expect("redis-cli runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "redis-cli {args:?} failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}
