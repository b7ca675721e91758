//! The processes a real run starts, and the guarantee that none outlives
//! it.
//!
//! Every child is started through `sim chaos-exec`, which asks the kernel
//! to kill it when the controller's thread dies (`PR_SET_PDEATHSIG`) and
//! then becomes the real program; every child leads its own process group,
//! so a signal reaches all of it. [`Processes`] kills every group it
//! started when it is dropped: at the normal end, on an error, and while
//! a panic unwinds. A `SIGKILL` of the controller itself leaves the
//! kernel's death signal to do the same.

use std::{
    net::{Ipv4Addr, TcpListener},
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::atomic::{AtomicU32, Ordering},
    time::Duration,
};

use rustix::process::{Pid, Signal};

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
                let _ = child.kill();
                let _ = child.wait();
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

    /// Kills `id`'s group and reaps it.
    pub fn kill(&mut self, id: ProcId) {
        self.signal(id, Signal::KILL);
        if let Some(started) = self.started.get_mut(id.0) {
            let _ = started.child.wait();
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

    /// Kills every group and reaps every child.
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

/// Finds `program` on `PATH`.
pub fn find_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Path::new(program).is_file().then(|| PathBuf::from(program));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|path| path.is_file())
    })
}

/// Hands out loopback ports: from a fixed base when the user asked for
/// one (each must be free, or the run stops with an error naming it), or
/// else free ports below the kernel's ephemeral range.
///
/// Not a bind to port 0: that port comes from the ephemeral range, and it
/// is free only until the listener that found it closes; a server started
/// on it a moment later can find it taken by any connection opened
/// meanwhile, whose local port the kernel draws from the same range (the
/// proxies' own connections upstream, a cluster's bus links: seen as
/// `port … is already in use` in a cluster run). No connection is ever
/// given a port below that range. The `Ports` of one process share one walk
/// over those ports, from an offset drawn from the process id with a
/// stride that visits every one of them once: two `Ports` in one process
/// (tests running side by side) never hand out the same port, runs in
/// parallel processes start far apart, and a port found taken (by a run
/// beside it) is skipped.
#[derive(Debug)]
pub struct Ports {
    base: Option<u16>,
    next: u16,
}

/// The lowest port handed out without a base.
const LOW: u16 = 16_384;

/// A stride coprime with any span of ports below 2^16 that is not a
/// multiple of its factors (7919 is prime): the walk visits every port of
/// the span before it repeats.
const STRIDE: u32 = 7_919;

/// The next step of this process's walk ([`Ports`]): shared, so that each
/// step is handed to one `Ports` only. Each `Ports` handing out its own
/// walk from step 0 let two tests of one process draw the same ports, each
/// port free when drawn and then bound by both (`ports_without_a_base…` and
/// a migration test failed so under load).
static WALK: AtomicU32 = AtomicU32::new(0);

impl Ports {
    /// Ports from `base` up, or below the ephemeral range.
    pub fn new(base: Option<u16>) -> Self {
        Self { base, next: 0 }
    }

    /// One free port.
    pub fn take(&mut self) -> Result<u16, ChaosError> {
        if let Some(base) = self.base {
            let port = base
                .checked_add(self.next)
                .ok_or(ChaosError::PortsExhausted { base })?;
            self.next += 1;
            TcpListener::bind((Ipv4Addr::LOCALHOST, port))
                .map_err(|source| ChaosError::PortTaken { port, source })?;
            return Ok(port);
        }
        let high = ephemeral_low();
        let span = u32::from(high.saturating_sub(LOW)).max(1);
        let offset = std::process::id().wrapping_mul(2_654_435_761) % span;
        while u32::from(self.next) < span {
            self.next += 1;
            let step = WALK.fetch_add(1, Ordering::Relaxed) % span;
            let port = LOW + ((offset + step * STRIDE) % span) as u16;
            if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
                return Ok(port);
            }
        }
        Err(ChaosError::Io {
            what: format!("finding a free loopback port in {LOW}..{high}"),
            source: std::io::Error::from(std::io::ErrorKind::AddrInUse),
        })
    }
}

/// The first port of the kernel's ephemeral range (Linux:
/// `net.ipv4.ip_local_port_range`, 32768 unless changed), never below
/// [`LOW`] + 1024.
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768u16)
        .max(LOW + 1_024)
}

/// Waits up to `limit` for `port` to accept a connection.
pub fn wait_listening(port: u16, limit: Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_without_a_base_are_free_and_below_the_ephemeral_range() {
        let mut ports = Ports::new(None);
        let mut held = Vec::new();
        for _ in 0..32 {
            let port = ports.take().expect("a free port");
            assert!(
                (LOW..ephemeral_low()).contains(&port),
                "{port} is not below the ephemeral range"
            );
            // Free when handed out; held from here on, as a server would.
            held.push((
                port,
                TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("free"),
            ));
        }
        let mut seen: Vec<u16> = held.iter().map(|(port, _)| *port).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), held.len(), "a port handed out twice");
    }
}
