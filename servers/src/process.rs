//! One server process: started on ports from the walk, ready when it
//! answers as itself, started again elsewhere when its port was taken,
//! killed on drop.

use std::{
    ffi::OsString,
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    thread,
    time::{Duration, Instant},
};

use crate::{Binaries, FindError, Identity, PortError, Ports, Want};

/// Where servers keep their data, configs and logs: the machine's tmpfs
/// (`/dev/shm`) when it has one, else the temporary directory.
///
/// On a disk, a server's `fsync` (a sentinel's config rewrite at each
/// failover, a replica's received RDB, a cluster node's `nodes.conf`)
/// waits, under the machine's own writes (a build beside the tests), for a
/// journal commit of everything dirty: seconds, in which a sentinel
/// answered nothing (a 2 s read timed out) or a failover came 15 s late.
pub fn scratch_root() -> PathBuf {
    tmpfs().unwrap_or_else(std::env::temp_dir)
}

/// The machine's tmpfs (`/dev/shm`), when it has one.
pub fn tmpfs() -> Option<PathBuf> {
    let shm = std::path::Path::new("/dev/shm");
    shm.is_dir().then(|| shm.to_path_buf())
}

/// How long a process may take to answer its first command.
const STARTUP: Duration = Duration::from_secs(10);

/// How many sets of ports a start tries before giving up.
const PORT_ATTEMPTS: usize = 8;

/// How many lines of its log a process dropped during a panic prints.
const LOG_TAIL: usize = 12;

/// Why a process could not be started, or did not answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// No binary to run.
    #[error(transparent)]
    Find(#[from] FindError),
    /// No port to run it on.
    #[error(transparent)]
    Port(#[from] PortError),
    /// The binary could not be run.
    #[error("cannot run {}: {source}", .program.display())]
    Spawn {
        /// The program.
        program: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A scratch directory or file could not be written.
    #[error("{what}: {source}")]
    Io {
        /// What was being written.
        what: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The process exited before it answered.
    #[error("{role} on port {port} exited at startup ({status}); its log:\n{log}")]
    Exited {
        /// What it is (`redis-server`, `sentinel`).
        role: &'static str,
        /// Its first port.
        port: u16,
        /// How it exited.
        status: String,
        /// Its log.
        log: String,
    },
    /// Every set of ports tried was taken before the process bound it.
    #[error("{role} found no free port in {PORT_ATTEMPTS} attempts; the last log:\n{log}")]
    NoFreePort {
        /// What it is.
        role: &'static str,
        /// The last attempt's log.
        log: String,
    },
    /// The process neither answered nor exited in time.
    #[error("{role} on port {port} did not answer within {waited:?}; its log:\n{log}")]
    NotReady {
        /// What it is.
        role: &'static str,
        /// Its first port.
        port: u16,
        /// How long it was given.
        waited: Duration,
        /// Its log.
        log: String,
    },
    /// The process is another server than the one wanted.
    #[error(
        "the {role} on port {port} is {found}, but {want} is wanted: put the {want} \
         binaries first on PATH (scripts/test.sh does), or name them"
    )]
    WrongServer {
        /// What it is.
        role: &'static str,
        /// Its port.
        port: u16,
        /// What its `INFO server` says.
        found: Identity,
        /// What was wanted.
        want: Want,
    },
    /// A topology did not come together.
    #[error("{what}: {why}")]
    Setup {
        /// What was being set up.
        what: String,
        /// What went wrong.
        why: String,
    },
}

/// How a fresh process proves it is up and is the one holding its port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// `INFO server` over plain TCP names this process's pid.
    AnswersAsItself,
    /// Its log contains this line (for TLS-only servers). A process that
    /// lost the port race exits instead of logging it.
    Logs(&'static str),
}

/// What a started process's first seconds came to ([`await_ready`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Startup {
    /// It is up: with what `INFO server` says it is, when it was asked.
    Ready(Option<Identity>),
    /// It exited, with this status.
    Exited(String),
    /// It neither answered nor exited within the limit.
    TimedOut,
}

/// Waits up to `limit` until the process `pid`, listening on `port`, is
/// `ready`, or exits (`exited` says when). For a caller that spawns its
/// processes itself (the chaos controller's own process groups);
/// [`Launch`] does it for everyone else.
pub fn await_ready(
    port: u16,
    pid: u32,
    ready: Ready,
    limit: Duration,
    mut exited: impl FnMut() -> Option<ExitStatus>,
    log: impl Fn() -> String,
) -> Startup {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = exited() {
            return Startup::Exited(status.to_string());
        }
        match ready {
            Ready::AnswersAsItself => {
                if let Some(identity) = answers_as_itself(port, pid) {
                    return Startup::Ready(identity);
                }
            }
            Ready::Logs(line) => {
                if log().contains(line) {
                    return Startup::Ready(None);
                }
            }
        }
        if Instant::now() >= deadline {
            return Startup::TimedOut;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// One look at whether the process `pid` answers on `port`: `INFO
/// server` names its pid (then `Some`, with what it says it is). A blocking
/// call of at most 3 s (a connection's timeouts); an async caller runs it
/// with `spawn_blocking`.
pub fn answers_as_itself(port: u16, pid: u32) -> Option<Option<Identity>> {
    // Ready means *this* process answers: if another server holds the
    // port, ours is about to exit and must not be mistaken for it.
    let ours = format!("process_id:{pid}\r\n");
    let info = crate::query_port::<String>(port, &["INFO", "server"]).ok()?;
    info.contains(&ours).then(|| Identity::from_info(&info))
}

/// Whether a server's log says it lost its port to another process.
pub fn port_taken(log: &str) -> bool {
    log.contains("Address already in use")
}

/// What a process runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// A data node: the server with this crate's defaults.
    Server,
    /// A sentinel: the server with `--sentinel` after its config file.
    Sentinel,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Self::Server => "redis-server",
            Self::Sentinel => "sentinel",
        }
    }
}

/// How to start a [`Process`]: which binaries, as what, on how many ports,
/// and how it proves it is up.
#[derive(Debug, Clone)]
pub struct Launch<'a> {
    binaries: &'a Binaries,
    role: Role,
    ports: usize,
    ready: Ready,
    env: Vec<(OsString, OsString)>,
    files: Vec<(String, String)>,
}

impl<'a> Launch<'a> {
    /// A data node on one port. Its arguments follow the defaults, which
    /// they override (later arguments win in the server): `--port P
    /// --bind 127.0.0.1 --dir D --logfile D/log.txt --save ""
    /// --appendonly no --protected-mode no --repl-diskless-sync-delay 0`
    /// (a primary otherwise waits 5 s for more replicas before a sync).
    pub fn server(binaries: &'a Binaries) -> Self {
        Self {
            binaries,
            role: Role::Server,
            ports: 1,
            ready: Ready::AnswersAsItself,
            env: Vec::new(),
            files: Vec::new(),
        }
    }

    /// A sentinel: its arguments (a config file it may rewrite) come first,
    /// then `--sentinel --port P --dir D --logfile D/log.txt`.
    pub fn sentinel(binaries: &'a Binaries) -> Self {
        Self {
            role: Role::Sentinel,
            ..Self::server(binaries)
        }
    }

    /// Draws `ports` ports for each attempt (a client port first, then a
    /// cluster bus port, a TLS port, ...).
    #[must_use]
    pub fn ports(mut self, ports: usize) -> Self {
        self.ports = ports.max(1);
        self
    }

    /// How the process proves it is up.
    #[must_use]
    pub fn ready(mut self, ready: Ready) -> Self {
        self.ready = ready;
        self
    }

    /// Adds `key=value` to the process's environment (`LD_PRELOAD`, say).
    #[must_use]
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Writes `contents` to the file `name` in the process's directory
    /// before each start (a sentinel's config, a certificate).
    #[must_use]
    pub fn file(mut self, name: impl Into<String>, contents: impl Into<String>) -> Self {
        self.files.push((name.into(), contents.into()));
        self
    }

    /// Starts the process with the arguments `args(ports, dir)` returns
    /// (`dir` is its fresh scratch directory on tmpfs), on ports from the
    /// walk, and waits until it is ready. When its ports were taken before
    /// it bound them, it starts again on the next ones.
    pub fn start(
        &self,
        args: impl Fn(&[u16], &Path) -> Vec<String>,
    ) -> Result<Process, StartError> {
        let mut walk = Ports::walk();
        let mut last_log = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let ports = (0..self.ports)
                .map(|_| walk.take())
                .collect::<Result<Vec<u16>, PortError>>()?;
            let dir = scratch_root().join(format!(
                "servers-{}-{}-{}",
                std::process::id(),
                self.role.name(),
                ports[0]
            ));
            let mut process = Process {
                role: self.role,
                program: self.binaries.server().to_path_buf(),
                env: self.env.clone(),
                files: self.files.clone(),
                want: self.binaries.want(),
                ready: self.ready,
                args: Vec::new(),
                ports,
                dir,
                child: None,
                identity: None,
            };
            process.args = process.command_line(&args(&process.ports, &process.dir));
            match process.launch(true) {
                Ok(()) => return Ok(process),
                Err(StartError::Exited { log, .. }) if port_taken(&log) => last_log = log,
                Err(error) => return Err(error),
            }
        }
        Err(StartError::NoFreePort {
            role: self.role.name(),
            log: last_log,
        })
    }
}

/// A running server or sentinel, killed on drop (its scratch directory
/// removed with it). One dropped while its thread panics (a failing test)
/// prints the tail of its log first.
#[derive(Debug)]
pub struct Process {
    role: Role,
    program: PathBuf,
    env: Vec<(OsString, OsString)>,
    files: Vec<(String, String)>,
    want: Option<Want>,
    ready: Ready,
    /// The whole command line after the program.
    args: Vec<String>,
    ports: Vec<u16>,
    dir: PathBuf,
    child: Option<Child>,
    identity: Option<Identity>,
}

impl Process {
    /// The command line: the defaults of its role around `args`.
    fn command_line(&self, args: &[String]) -> Vec<String> {
        let port = self.ports[0].to_string();
        let dir = self.dir.display().to_string();
        let log = self.log_path().display().to_string();
        let placed = ["--port", &port, "--dir", &dir, "--logfile", &log].map(str::to_owned);
        match self.role {
            Role::Server => {
                let defaults = [
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--protected-mode",
                    "no",
                    "--repl-diskless-sync-delay",
                    "0",
                ]
                .map(str::to_owned);
                placed
                    .into_iter()
                    .chain(defaults)
                    .chain(args.iter().cloned())
                    .collect()
            }
            Role::Sentinel => args
                .iter()
                .cloned()
                .chain(["--sentinel".to_owned()])
                .chain(placed)
                .collect(),
        }
    }

    /// Where its log goes: [`read_log`] reads it there.
    fn log_path(&self) -> PathBuf {
        self.dir.join("log.txt")
    }

    /// Starts the process on its ports and waits until it is ready: with
    /// an empty directory if `fresh`, else with what it holds.
    fn launch(&mut self, fresh: bool) -> Result<(), StartError> {
        if fresh {
            // A fresh directory: an old sync file or nodes.conf must not be
            // loaded.
            let _ = fs::remove_dir_all(&self.dir);
        }
        let io = |what: &str, dir: &Path| {
            let what = format!("{what} {}", dir.display());
            move |source| StartError::Io { what, source }
        };
        fs::create_dir_all(&self.dir).map_err(io("creating", &self.dir))?;
        for (name, contents) in &self.files {
            let path = self.dir.join(name);
            fs::write(&path, contents).map_err(io("writing", &path))?;
        }
        let logged = fs::metadata(self.log_path()).map_or(0, |meta| meta.len());
        // What the server prints before its log is open (a bad argument).
        let output_path = self.dir.join("output.txt");
        let output = fs::File::create(&output_path).map_err(io("creating", &output_path))?;
        let error_output = output.try_clone().map_err(io("cloning", &output_path))?;
        let child = Command::new(&self.program)
            .args(&self.args)
            .envs(self.env.iter().map(|(key, value)| (key, value)))
            .stdin(Stdio::null())
            .stdout(output)
            .stderr(error_output)
            .spawn()
            .map_err(|source| StartError::Spawn {
                program: self.program.clone(),
                source,
            })?;
        let pid = child.id();
        let mut child = child;
        let dir = self.dir.clone();
        let startup = await_ready(
            self.port(),
            pid,
            self.ready,
            STARTUP,
            || child.try_wait().ok().flatten(),
            // A restart keeping its directory appends to the same log:
            // only this start's lines can say it is ready.
            || read_log_since(&dir, logged),
        );
        match startup {
            Startup::Ready(identity) => {
                self.child = Some(child);
                self.identity = identity;
                self.check_identity()
            }
            Startup::Exited(status) => Err(StartError::Exited {
                role: self.role.name(),
                port: self.port(),
                status,
                log: self.log(),
            }),
            Startup::TimedOut => {
                self.child = Some(child);
                Err(StartError::NotReady {
                    role: self.role.name(),
                    port: self.port(),
                    waited: STARTUP,
                    log: self.log(),
                })
            }
        }
    }

    fn check_identity(&self) -> Result<(), StartError> {
        match (self.want, self.identity) {
            (Some(want), Some(found)) if !want.admits(&found) => Err(StartError::WrongServer {
                role: self.role.name(),
                port: self.port(),
                found,
                want,
            }),
            _ => Ok(()),
        }
    }

    /// Its first port (the client port).
    pub fn port(&self) -> u16 {
        self.ports[0]
    }

    /// Every port it was given, in the order its launch drew them.
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// Its scratch directory (data, configs, log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What its `INFO server` said at start (`None` for a process that
    /// proved itself by its log).
    pub fn identity(&self) -> Option<Identity> {
        self.identity
    }

    /// The process id, unless it was killed.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether it was killed.
    pub fn is_killed(&self) -> bool {
        self.child.is_none()
    }

    /// Its log, then whatever it printed before the log was open.
    pub fn log(&self) -> String {
        read_log(&self.dir)
    }

    /// Kills it with SIGKILL (which also ends a paused one) and waits for
    /// it: no clean shutdown, no goodbye to its peers.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes it (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) -> std::io::Result<()> {
        self.signal(rustix::process::Signal::STOP)
    }

    /// Thaws a paused process (SIGCONT).
    pub fn resume(&self) -> std::io::Result<()> {
        self.signal(rustix::process::Signal::CONT)
    }

    fn signal(&self, signal: rustix::process::Signal) -> std::io::Result<()> {
        let pid = self
            .pid()
            .and_then(|pid| rustix::process::Pid::from_raw(i32::try_from(pid).ok()?))
            .ok_or_else(|| std::io::Error::other(format!("{} was killed", self.role.name())))?;
        rustix::process::kill_process(pid, signal).map_err(std::io::Error::from)
    }

    /// Kills it and starts it again on the same ports with the same
    /// arguments: with an empty directory if `fresh`, else with what its
    /// directory holds (an RDB written by `SAVE`, an AOF). Returns once it
    /// answers, which may be while it is still loading.
    pub fn restart(&mut self, fresh: bool) -> Result<(), StartError> {
        self.kill();
        self.launch(fresh)
    }

    /// [`restart`](Self::restart) with the arguments `args(ports, dir)`
    /// returns in place of its first ones (a promoted replica comes back
    /// as a primary).
    pub fn restart_with(
        &mut self,
        fresh: bool,
        args: impl FnOnce(&[u16], &Path) -> Vec<String>,
    ) -> Result<(), StartError> {
        self.args = self.command_line(&args(&self.ports, &self.dir));
        self.restart(fresh)
    }

    /// Runs a command on a fresh blocking connection (1 s to connect, 2 s
    /// for the reply) and converts the reply.
    pub fn try_query<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        crate::query_port(self.port(), args)
    }

    /// Like [`Self::try_query`].
    ///
    /// # Panics
    /// On an error, naming the command and the port: for tests.
    pub fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        self.try_query(args).unwrap_or_else(|error| {
            panic!(
                "{args:?} on {} port {}: {error}",
                self.role.name(),
                self.port()
            )
        })
    }
}

/// The log of the process whose directory is `dir`, then whatever it
/// printed before the log was open.
fn read_log(dir: &Path) -> String {
    read_log_since(dir, 0)
}

/// [`read_log`] from byte `since` of the log on.
fn read_log_since(dir: &Path, since: u64) -> String {
    let log = fs::read(dir.join("log.txt")).unwrap_or_default();
    let since = usize::try_from(since).map_or(log.len(), |since| since.min(log.len()));
    let output = fs::read_to_string(dir.join("output.txt")).unwrap_or_default();
    String::from_utf8_lossy(&log[since..]).into_owned() + &output
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        if thread::panicking() {
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(LOG_TAIL)..];
            eprintln!(
                "-- the last lines of the {} on port {}'s log:\n{}",
                self.role.name(),
                self.port(),
                tail.join("\n")
            );
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}
