//! Where a chaos run's partitions come from: the kernel, by iptables
//! rules inside a network namespace of the run's own, or, where the
//! machine refuses one, the controller's proxies.
//!
//! `sim chaos` and `sim agree` call [`enter`] before anything starts. On a
//! machine that allows unprivileged user namespaces it runs the program
//! again, the same process (`exec`, so its pid stays what its caller
//! waits on), under `unshare --net --map-root-user`: a private network
//! namespace, with only its own loopback, in which the run is root. Every
//! process of the run (servers, sentinels, clients, the oracle) lives in
//! it, so a partition is a `DROP` rule of iptables on the links it cuts:
//! what is sent meanwhile is lost and sent again when the kernel's
//! retransmission timer says, a connection dialled meanwhile waits on the
//! kernel's SYN retries, and neither time is the controller's. (The
//! namespace also gives the run every port: two runs never meet.)
//!
//! The proxies stay on each link: they carry latency and replication lag
//! (this kernel has no `netem`), a sentinel's drawn deafness, and a
//! partition where namespaces are refused ([`Network::Proxies`], with the
//! reason, printed in the run's summary).

use std::{
    os::unix::process::CommandExt,
    process::{Command, Stdio},
};

use crate::config::FaultKind;

/// The environment variable the program runs again with inside its
/// namespace: how [`enter`] knows it is already there.
const INSIDE: &str = "SIM_CHAOS_NETNS";

/// How a real run's partitions are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// iptables rules in the run's own network namespace: the kernel's
    /// TCP behaviour.
    Kernel,
    /// The controller's proxies hold the bytes and release them at
    /// measured retransmission times; why the kernel's way was not taken.
    Proxies(String),
}

impl Network {
    /// The mechanism of a partition, in words, for a run's summary.
    pub fn partitions(&self) -> String {
        match self {
            Self::Kernel => {
                "iptables DROP rules in the run's own network namespace (the kernel's retransmissions)"
                    .to_owned()
            }
            Self::Proxies(why) => format!(
                "the controller's proxies, holding bytes to measured retransmission times ({why})"
            ),
        }
    }
}

/// What the caller asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// The kernel's partitions where the machine allows them.
    Kernel,
    /// The proxies, in the machine's own network (`--network proxies`).
    Proxies,
}

/// Puts the program in a network namespace of its own, or says why not.
///
/// Outside one, with `want` [`Want::Kernel`]: when `unshare` can make one,
/// runs the program again inside it (does not return). Inside one (the
/// program ran again): brings its loopback up and checks that iptables
/// works there. Either way, what it returns names the mechanism the run
/// uses.
pub fn enter(want: Want) -> Network {
    if std::env::var_os(INSIDE).is_some() {
        return inside();
    }
    if want == Want::Proxies {
        return Network::Proxies("--network proxies".to_owned());
    }
    // Try first, so that a refusal leaves this process to go on with the
    // proxies instead of an `exec` that fails after the point of return.
    if let Err(why) = quiet(Command::new("unshare").args(["--net", "--map-root-user", "true"])) {
        return Network::Proxies(format!(
            "no network namespace: `unshare --net --map-root-user` {why}"
        ));
    }
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(error) => return Network::Proxies(format!("no path to this program: {error}")),
    };
    let error = Command::new("unshare")
        .args(["--net", "--map-root-user", "--"])
        .arg(program)
        .args(std::env::args_os().skip(1))
        .env(INSIDE, "1")
        .exec();
    Network::Proxies(format!("running again under unshare failed: {error}"))
}

/// Inside the namespace: loopback up, iptables answering.
fn inside() -> Network {
    if let Err(why) = quiet(Command::new("ip").args(["link", "set", "lo", "up"])) {
        return Network::Proxies(format!(
            "in its network namespace, `ip link set lo up` {why} (install iproute2)"
        ));
    }
    if let Err(why) = quiet(Command::new("iptables").args(["-w", "-n", "-L", "OUTPUT"])) {
        return Network::Proxies(format!(
            "in its network namespace, `iptables -L` {why} (install iptables)"
        ));
    }
    Network::Kernel
}

/// Runs `command` to its end, its output kept: what went wrong, in words.
fn quiet(command: &mut Command) -> Result<(), String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("could not run: {error}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Err(format!(
        "failed ({}): {}",
        output.status,
        stderr.lines().next().unwrap_or("").trim()
    ))
}

/// How a real run makes a fault of `kind` on a server (`server`) or a
/// client, in words, for its summary (partitions as `network` says).
pub fn mechanism(kind: FaultKind, server: bool, network: &Network) -> String {
    match kind {
        FaultKind::Pause => "SIGSTOP, then SIGCONT".to_owned(),
        FaultKind::Partition | FaultKind::PartitionOneway => network.partitions(),
        FaultKind::Latency => "the controller's proxies, delaying each byte".to_owned(),
        FaultKind::Restart => {
            "SIGKILL, then a start (a machine crash, by the lazy_aof library, with an AOF)"
                .to_owned()
        }
        FaultKind::Crash if server => format!(
            "its links cut for good (as a partition: {}), then SIGKILL",
            match network {
                Network::Kernel => "iptables",
                Network::Proxies(_) => "the proxies",
            }
        ),
        FaultKind::Crash => "SIGKILL".to_owned(),
        FaultKind::ClockDrift | FaultKind::ClockJump if server => {
            "the fake_clock library preloaded into the server, its offset file rewritten"
                .to_owned()
        }
        FaultKind::ClockDrift | FaultKind::ClockJump => {
            "the client's injected clock (the production adapter's Clock)".to_owned()
        }
        FaultKind::Busy => "a script that spins (the server answers BUSY)".to_owned(),
        FaultKind::Evict => "maxmemory with volatile-ttl, and filler keys".to_owned(),
        FaultKind::Failover => {
            "the old primary silenced and killed, or kept for its stale window; the controller or Sentinel promotes a replica"
                .to_owned()
        }
        FaultKind::ShardFailover => {
            "CLUSTER FAILOVER TAKEOVER on a replica of the lock's shard".to_owned()
        }
        FaultKind::SlotMigration => "CLUSTER SETSLOT and MIGRATE, key by key".to_owned(),
        FaultKind::AtomicSlotMigration => "CLUSTER MIGRATESLOTS (Valkey 9)".to_owned(),
    }
}
