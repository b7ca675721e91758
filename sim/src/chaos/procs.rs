//! The processes a real run starts, how a server among them proves it is
//! up (answering as itself: the `servers` crate's check), and the
//! guarantee that none outlives the run.
//!
//! Every child is started through `sim chaos-exec`, which asks the kernel
//! to kill it when the controller's thread dies (`PR_SET_PDEATHSIG`) and
//! then becomes the real program; every child leads its own process group,
//! so a signal reaches all of it. [`Processes`] kills every group it
//! started when it is dropped: at the normal end, on an error, and while
//! a panic unwinds. A `SIGKILL` of the controller itself leaves the
//! kernel's death signal to do the same.
//!
//! The controller runs one current-thread runtime: whatever it awaits
//! while a run lasts must not block that thread (a blocked runtime stops
//! every proxy, the oracle and the fault clock at once, a fault no
//! schedule drew). So a kill during a run is awaited ([`Processes::kill`]
//! polls for the child's exit), as is a server's readiness (`await_started`
//! looks at it from a blocking thread); only [`Processes::kill_all`], after the runtime
//! is done, waits by blocking.

use std::{
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use rustix::process::{Pid, Signal};
/// The loopback ports a run's servers take: the `servers` crate's walk
/// below the kernel's ephemeral range, or `--base-port` and up.
pub use servers::Ports;

use super::error::ChaosError;

/// A started process.
#[derive(Debug)]
struct Started {
    /// What it is, for errors (`redis-0`, `client-1`).
    name: String,
    /// The child (the leader of its process group).
    child: Child,
}

/// Every process a run started, killed on drop.
#[derive(Debug, Default)]
pub struct Processes {
    started: Vec<Started>,
    /// Where each started pid is appended (for a test that checks they
    /// are all gone afterwards).
    pids_file: Option<PathBuf>,
}

/// A handle on one started process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcId(usize);

impl Processes {
    /// A registry that also appends every pid it starts to `pids_file`.
    pub fn with_pids_file(pids_file: Option<PathBuf>) -> Self {
        Self {
            started: Vec::new(),
            pids_file,
        }
    }

    /// Starts `program` with `args` as `name`, in its own process group,
    /// killed with the controller. Its stdin and stdout are piped when
    /// asked; stderr goes to `log`.
    pub fn spawn(
        &mut self,
        name: &str,
        program: &str,
        args: &[String],
        pipes: bool,
        log: &Path,
    ) -> Result<(ProcId, PipedChild), ChaosError> {
        self.spawn_with_env(name, program, args, pipes, log, &[])
    }

    /// [`spawn`](Self::spawn) with `env` added to the child's environment
    /// (`LD_PRELOAD`, say).
    pub fn spawn_with_env(
        &mut self,
        name: &str,
        program: &str,
        args: &[String],
        pipes: bool,
        log: &Path,
        env: &[(&str, &Path)],
    ) -> Result<(ProcId, PipedChild), ChaosError> {
        let exe = std::env::current_exe().map_err(|source| ChaosError::Io {
            what: "the sim binary's own path".to_owned(),
            source,
        })?;
        let log_file = std::fs::File::create(log).map_err(|source| ChaosError::Io {
            what: log.display().to_string(),
            source,
        })?;
        let mut command = Command::new(exe);
        command
            .arg("chaos-exec")
            .arg(program)
            .args(args)
            .process_group(0)
            .envs(env.iter().copied())
            .stderr(log_file);
        if pipes {
            command.stdin(Stdio::piped()).stdout(Stdio::piped());
        } else {
            command.stdin(Stdio::null()).stdout(Stdio::null());
        }
        let mut child = command.spawn().map_err(|source| ChaosError::Io {
            what: format!("starting {name}"),
            source,
        })?;
        // The pipes go to the caller; the guard keeps the child to kill it.
        let piped = take_pipes(&mut child);
        if let Some(path) = &self.pids_file {
            use std::io::Write as _;
            let written = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut file| writeln!(file, "{}", child.id()));
            if let Err(source) = written {
                // Killed now, reaped by `kill_all` (outside the runtime).
                let _ = child.kill();
                self.started.push(Started {
                    name: name.to_owned(),
                    child,
                });
                return Err(ChaosError::Io {
                    what: path.display().to_string(),
                    source,
                });
            }
        }
        self.started.push(Started {
            name: name.to_owned(),
            child,
        });
        Ok((ProcId(self.started.len() - 1), piped))
    }

    /// Sends `signal` to the whole process group of `id`.
    pub fn signal(&self, id: ProcId, signal: Signal) {
        if let Some(pid) = self.pid(id) {
            // A group already gone has nothing left to signal.
            let _ = rustix::process::kill_process_group(pid, signal);
        }
    }

    /// Kills `id`'s group and reaps it, without blocking the runtime: the
    /// child's exit is polled every millisecond (a `SIGKILL`ed process
    /// exits within a few), so that what comes next (a restart on the
    /// same port) finds it gone.
    pub async fn kill(&mut self, id: ProcId) {
        self.signal(id, Signal::KILL);
        let Some(started) = self.started.get_mut(id.0) else {
            return;
        };
        // `try_wait` fails only for a child already reaped: gone either way.
        while let Ok(None) = started.child.try_wait() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Whether `id` has exited, with its status.
    pub fn exited(&mut self, id: ProcId) -> Option<std::process::ExitStatus> {
        self.started
            .get_mut(id.0)
            .and_then(|started| started.child.try_wait().ok().flatten())
    }

    /// `id`'s name.
    pub fn name(&self, id: ProcId) -> &str {
        self.started.get(id.0).map_or("?", |s| s.name.as_str())
    }

    /// `id`'s process id (the leader of its group).
    pub fn pid_of(&self, id: ProcId) -> Option<u32> {
        self.started.get(id.0).map(|started| started.child.id())
    }

    /// The pids of every process started, for a test that checks they are
    /// gone.
    pub fn pids(&self) -> Vec<u32> {
        self.started.iter().map(|s| s.child.id()).collect()
    }

    fn pid(&self, id: ProcId) -> Option<Pid> {
        self.started
            .get(id.0)
            .and_then(|started| Pid::from_raw(started.child.id() as i32))
    }

    /// Kills every group and reaps every child, blocking until they are
    /// gone: for the end of a run, outside its runtime, and for `Drop`.
    pub fn kill_all(&mut self) {
        for index in 0..self.started.len() {
            self.signal(ProcId(index), Signal::KILL);
        }
        for started in &mut self.started {
            let _ = started.child.wait();
        }
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// A `Child` carrying `child`'s pipes, which `child` gives up.
fn take_pipes(child: &mut Child) -> PipedChild {
    PipedChild {
        stdin: child.stdin.take(),
        stdout: child.stdout.take(),
    }
}

/// The pipes of a started child.
#[derive(Debug)]
pub struct PipedChild {
    /// Its stdin, if piped.
    pub stdin: Option<std::process::ChildStdin>,
    /// Its stdout, if piped.
    pub stdout: Option<std::process::ChildStdout>,
}

/// `sim chaos-exec PROGRAM ARGS…`: dies with its parent, then becomes
/// `PROGRAM`. Returns only on failure.
pub fn exec_child(program: &str, args: &[String]) -> std::io::Error {
    if let Err(error) = rustix::process::set_parent_process_death_signal(Some(Signal::KILL)) {
        return error.into();
    }
    // The parent may have died before the death signal was armed.
    if rustix::process::getppid().is_none_or(|ppid| ppid.as_raw_nonzero().get() == 1) {
        return std::io::Error::other("the controller is gone");
    }
    Command::new(program).args(args).exec()
}

/// How long a server or sentinel may take to answer as itself.
const STARTUP: Duration = Duration::from_secs(10);

/// Where a started process's output goes: the log its arguments name
/// (`DIR/NAME.log`; appended to across restarts) and its stderr
/// (`DIR/NAME.stderr`), and how much of the log was there before.
pub(super) struct Output {
    log: PathBuf,
    /// Its stderr.
    pub stderr: PathBuf,
    seen: u64,
}

impl Output {
    /// The output of `name`, whose files are in `dir`.
    pub(super) fn new(dir: &Path, name: &str) -> Self {
        let log = dir.join(format!("{name}.log"));
        let seen = std::fs::metadata(&log).map_or(0, |meta| meta.len());
        Self {
            log,
            stderr: dir.join(format!("{name}.stderr")),
            seen,
        }
    }

    /// What this start wrote: its part of the log, then its stderr.
    fn text(&self) -> String {
        let log = std::fs::read(&self.log).unwrap_or_default();
        let start = usize::try_from(self.seen).map_or(log.len(), |seen| seen.min(log.len()));
        String::from_utf8_lossy(&log[start..]).into_owned()
            + &std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

/// Waits until the process `id`, started as `name` on `port`, answers as
/// itself. A process that lost its port to another is
/// [`ChaosError::PortTaken`] (its start may move to the next port);
/// anything else names its last line of output.
pub(super) async fn await_started(
    procs: &mut Processes,
    id: ProcId,
    port: u16,
    name: String,
    output: &Output,
) -> Result<Option<servers::Identity>, ChaosError> {
    let pid = procs
        .pid_of(id)
        .ok_or_else(|| ChaosError::Internal(format!("{name} has no pid")))?;
    let deadline = tokio::time::Instant::now() + STARTUP;
    // The servers crate's readiness (`INFO server` names this pid), looked
    // at from a blocking thread, and waited for on the runtime's timer: the
    // controller's runtime never blocks.
    while procs.exited(id).is_none() && tokio::time::Instant::now() < deadline {
        let answers = tokio::task::spawn_blocking(move || servers::answers_as_itself(port, pid))
            .await
            .map_err(|error| ChaosError::Internal(format!("{name}'s readiness check: {error}")))?;
        if let Some(identity) = answers {
            return Ok(identity);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let text = output.text();
    if servers::port_taken(&text) {
        return Err(ChaosError::PortTaken {
            port,
            source: std::io::Error::from(std::io::ErrorKind::AddrInUse),
        });
    }
    let last = text.lines().last().unwrap_or("no output").to_owned();
    Err(ChaosError::Start {
        what: name,
        why: last,
    })
}
