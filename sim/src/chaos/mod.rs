//! Chaos runs: the same scenario files, fault schedules, history schema and
//! checkers as the simulator, against real processes on loopback.
//!
//! `sim chaos FILE|DIR` starts what a scenario's topology names from the
//! installed binaries (`redis-server`, `redis-sentinel`, a cluster made by
//! `redis-cli --cluster create`), one OS process per client running the
//! production adapter ([`client`]), and applies the fault schedule the
//! simulator draws for the same seed, in real time (`run.rs`). Nothing here
//! is deterministic, and nothing here is used by the simulator: this tree
//! reads the machine's clocks and the simulator's modules never import it.
//!
//! Layering, downwards only: `mod` → `run` → `batches`, `deploy`, `proxy`,
//! `procs`, `wire`, `lazy_aof`, `migrate`, `cut`, `sentinel`; `sentinel` → `deploy`;
//! `deploy` → `cut`; `cut` → `proxy`; `client` →
//! `wire`.

mod batches;
pub mod client;
mod cut;
mod deploy;
mod error;
pub mod lazy_aof;
mod migrate;
pub mod procs;
mod proxy;
mod run;
mod sentinel;
pub mod wire;

pub use error::ChaosError;

use std::{path::PathBuf, time::Duration};

use crate::{
    config::{FaultKind, FaultTarget, Scenario, Topology},
    outcome::{ConcreteFault, SeedOutcome},
    scenario::names::fault_kind,
    world,
};

/// What a real run runs against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A deployment the harness starts and owns.
    Started,
    /// A user's own single Redis, given as a URL: client-side faults only.
    Url {
        /// The host (loopback or not).
        host: String,
        /// The port.
        port: u16,
    },
}

impl Target {
    /// Parses `redis://HOST:PORT`.
    pub fn parse_url(url: &str) -> Result<Self, ChaosError> {
        let bad = || ChaosError::BadTarget(url.to_owned());
        let rest = url.strip_prefix("redis://").ok_or_else(bad)?;
        let rest = rest.trim_end_matches('/');
        let (host, port) = rest.rsplit_once(':').ok_or_else(bad)?;
        let port = port.parse().map_err(|_| bad())?;
        if host != "127.0.0.1" && host != "localhost" {
            // The proxies and clients dial loopback only.
            return Err(ChaosError::BadTarget(format!(
                "{url} (only a Redis on this machine, 127.0.0.1, is supported)"
            )));
        }
        Ok(Self::Url {
            host: host.to_owned(),
            port,
        })
    }
}

/// How a real run goes.
#[derive(Debug, Clone)]
pub struct RealOptions {
    /// What to run against.
    pub target: Target,
    /// Fixed ports from here up (else the kernel picks free ones).
    pub base_port: Option<u16>,
    /// Where logs, configs and node directories go.
    pub work_dir: PathBuf,
    /// Append every started pid here (for tests).
    pub pids_file: Option<PathBuf>,
}

/// Why fault `kind` on `target` cannot run on real processes, or `None`.
pub fn refusal(
    kind: FaultKind,
    target: FaultTarget,
    topology: &Topology,
    own: bool,
) -> Option<&'static str> {
    let server = matches!(target, FaultTarget::Redis(_) | FaultTarget::Primary);
    if !own && server {
        return Some(
            "--target runs against a Redis the harness did not start: only client-side faults (pause, crash, partition, latency, clock faults of a client) can be applied",
        );
    }
    if !own
        && matches!(
            kind,
            FaultKind::Failover
                | FaultKind::ShardFailover
                | FaultKind::SlotMigration
                | FaultKind::Restart
                | FaultKind::Busy
                | FaultKind::Evict
        )
    {
        return Some(
            "--target runs against a Redis the harness did not start: server-side faults cannot be applied",
        );
    }
    match kind {
        FaultKind::ClockDrift | FaultKind::ClockJump if server => Some(
            "a Redis server's clock can be changed only with privileges (the harness runs without root); the client's clock is injected, the server's is not",
        ),
        FaultKind::Pause | FaultKind::Crash if target == FaultTarget::Storage => {
            Some("the storage runs inside the controller and cannot be stopped apart from it")
        }
        FaultKind::Failover if !topology.can_fail_over() => Some("no replica to promote"),
        FaultKind::SlotMigration if !matches!(topology, Topology::Cluster { .. }) => {
            Some("only a Redis Cluster migrates slots")
        }
        FaultKind::Restart | FaultKind::Busy | FaultKind::Evict if !server => {
            Some("only a Redis node can be restarted, made busy or evict")
        }
        _ => None,
    }
}

/// Why a Sentinel failover cannot run as the simulator runs it while a
/// server partition is in effect.
const SENTINEL_PICK: &str = "under Sentinel, a failover while a node other than the primary may be cut off both ways: the simulator promotes no node it cannot reach, but real Sentinel picks the replica it promotes from the INFO it polls every 10 s, and a partition must spare the sentinels' own links (or they would fail the primary over by themselves), so nothing keeps the cut replica from being picked";

/// Under Sentinel, the first failover of `schedule` (sorted by start)
/// that begins while a partition (both ways) of a server is in effect
/// that does not surely cut off the primary of that moment (the node the
/// failover replaces, which neither side promotes): the failover and that
/// partition. A partition of `redis:primary` surely does when no failover
/// began between the two; one of `redis:0`, when none began before.
fn failover_beside_a_cut(schedule: &[ConcreteFault]) -> Option<(&ConcreteFault, &ConcreteFault)> {
    let failovers: Vec<Duration> = schedule
        .iter()
        .filter(|fault| fault.kind == FaultKind::Failover)
        .map(|fault| fault.at)
        .collect();
    let began_between =
        |from: Duration, to: Duration| failovers.iter().any(|at| from < *at && *at < to);
    let failover = |fault: &&ConcreteFault| fault.kind == FaultKind::Failover;
    schedule.iter().filter(failover).find_map(|failover| {
        schedule
            .iter()
            .filter(|cut| {
                cut.kind == FaultKind::Partition
                    && matches!(cut.target, FaultTarget::Redis(_) | FaultTarget::Primary)
                    && cut.at <= failover.at
                    && cut
                        .duration
                        .is_none_or(|duration| failover.at < cut.at + duration)
            })
            .find(|cut| {
                let old_primary = match cut.target {
                    FaultTarget::Primary => !began_between(cut.at, failover.at),
                    FaultTarget::Redis(0) => failovers.first() == Some(&failover.at),
                    _ => false,
                };
                !old_primary
            })
            .map(|cut| (failover, cut))
    })
}

/// Where fault number `index` of `file`'s text is written (its `kind`),
/// or the `[mix]` table's `kinds` for a drawn fault.
fn locate(text: &str, index: Option<usize>) -> (usize, usize) {
    let offset = match index {
        Some(index) => text.match_indices("[[fault]]").nth(index).map(|(at, _)| {
            let block = &text[at..];
            block.find("kind").map_or(at, |k| at + k)
        }),
        None => text
            .find("[mix]")
            .map(|at| text[at..].find("kinds").map_or(at, |k| at + k)),
    }
    .unwrap_or(0);
    locate_offset(text, offset)
}

/// The line and column (1-based) of byte `offset` of `text`.
fn locate_offset(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Checks every fault the given seeds of `scenario` would apply; the first
/// that real processes cannot take is refused with where it is written.
pub fn check_faults(
    file: &str,
    scenario: &Scenario,
    seeds: &[u64],
    target: &Target,
) -> Result<(), ChaosError> {
    let own = *target == Target::Started;
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let refuse = |kind: FaultKind, target: FaultTarget, why: &'static str, index: Option<usize>| {
        let (line, column) = locate(&text, index);
        ChaosError::Refused {
            file: file.to_owned(),
            line,
            column,
            kind: fault_kind(kind).name,
            target: target.to_string(),
            why,
        }
    };
    for (index, spec) in scenario.faults.iter().enumerate() {
        let target = match spec.target {
            crate::config::Target::Client(n) => FaultTarget::Client(n),
            crate::config::Target::AnyClient => FaultTarget::Client(0),
            crate::config::Target::Primary => FaultTarget::Primary,
            crate::config::Target::Redis(n) => FaultTarget::Redis(n),
            crate::config::Target::Storage => FaultTarget::Storage,
        };
        if let Some(why) = refusal(spec.kind, target, &scenario.topology, own) {
            return Err(refuse(spec.kind, target, why, Some(index)));
        }
    }
    if matches!(scenario.topology, Topology::Sentinel { .. }) {
        for &seed in seeds {
            if let Some((failover, cut)) =
                failover_beside_a_cut(&world::draw_schedule(scenario, seed))
            {
                let index = scenario
                    .faults
                    .iter()
                    .position(|spec| spec.kind == FaultKind::Failover)
                    .filter(|_| scenario.mix.is_none());
                return Err(refuse(failover.kind, cut.target, SENTINEL_PICK, index));
            }
        }
    }
    if scenario.mix.is_some() {
        for &seed in seeds {
            for fault in world::draw_schedule(scenario, seed) {
                if let Some(why) = refusal(fault.kind, fault.target, &scenario.topology, own) {
                    return Err(refuse(fault.kind, fault.target, why, None));
                }
            }
        }
    }
    Ok(())
}

/// The binaries a run of `scenario` needs, checked before anything starts.
pub fn check_binaries(scenario: &Scenario, target: &Target) -> Result<(), ChaosError> {
    if *target != Target::Started {
        return Ok(());
    }
    let mut needed = vec!["redis-server"];
    if matches!(scenario.topology, Topology::Sentinel { .. }) {
        needed.push("redis-sentinel");
    }
    if matches!(scenario.topology, Topology::Cluster { .. }) {
        needed.push("redis-cli");
    }
    for program in needed {
        if procs::find_program(program).is_none() {
            return Err(ChaosError::MissingBinary(program));
        }
    }
    Ok(())
}

/// Runs seed `seed` of `scenario` on real processes; every process it
/// started is gone when it returns (or unwinds). Ctrl-C stops it with
/// [`ChaosError::Interrupted`].
pub fn run_seed(
    scenario: &Scenario,
    seed: u64,
    options: &RealOptions,
) -> Result<(SeedOutcome, Vec<ConcreteFault>), ChaosError> {
    let schedule = world::draw_schedule(scenario, seed);
    let dir = options
        .work_dir
        .join(format!("{}-{seed}-{}", scenario.name, std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|source| ChaosError::Io {
        what: dir.display().to_string(),
        source,
    })?;
    // Redis changes into its `--dir` before opening its log: absolute
    // paths only.
    let dir = dir.canonicalize().map_err(|source| ChaosError::Io {
        what: dir.display().to_string(),
        source,
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| ChaosError::Io {
            what: "starting the controller's runtime".to_owned(),
            source,
        })?;
    let data = DataDir::new(&dir)?;
    let mut procs = procs::Processes::with_pids_file(options.pids_file.clone());
    let mut ports = procs::Ports::new(options.base_port);
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = run::run_seed(scenario, seed, &schedule, &options.target, &mut procs, &mut ports, run::RunDirs { logs: &dir, data: &data.0 }) => outcome,
            _ = tokio::signal::ctrl_c() => Err(ChaosError::Interrupted),
        }
    });
    procs.kill_all();
    drop(runtime);
    drop(data);
    let outcome = outcome?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok((outcome, schedule))
}

/// Where one run's servers keep their data (node directories, a cluster
/// node's `nodes.conf`, a sentinel's config), removed when dropped, whatever
/// the outcome (the logs stay in the run's directory).
///
/// It is on a tmpfs when the machine has one (`/dev/shm`), so that no
/// server's `fsync` (a replica's received RDB before its rename, a cluster
/// node's `nodes.conf` at each epoch change, a sentinel's config rewrite, an
/// AOF) waits on the host's disk: on a machine writing heavily meanwhile (a
/// build beside the run), an ext4 `fsync` waits for a journal commit of
/// everything dirty, seconds, and a server stopped that long is a fault the
/// schedule did not draw. CI saw it: three cluster replicas stopped in
/// `Loading DB in memory`, their received RDBs not yet renamed, one of them
/// deaf to the controller for its whole 2 s timeout. A machine crash is
/// still the `lazy_aof` library's (`lazy_aof`), not the disk's. Without a
/// tmpfs, a `data` folder in the run's directory.
struct DataDir(PathBuf);

impl DataDir {
    /// A fresh data directory for the run whose logs go to `run_dir`.
    fn new(run_dir: &std::path::Path) -> Result<Self, ChaosError> {
        let leaf = run_dir.file_name().unwrap_or_default();
        let path = match tmpfs() {
            Some(shm) => shm.join("lock-sim-chaos").join(leaf),
            None => run_dir.join("data"),
        };
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(|source| ChaosError::Io {
            what: path.display().to_string(),
            source,
        })?;
        Ok(Self(path))
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        // The shared parent goes once its last run is gone.
        if let Some(parent) = self.0.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}

/// The machine's tmpfs (`/dev/shm`), when it has one: where a run's servers
/// keep their data, so that no `fsync` of theirs waits on the host's disk.
/// The sim's tests that start real servers keep theirs there too.
pub fn tmpfs() -> Option<PathBuf> {
    let shm = std::path::Path::new("/dev/shm");
    shm.is_dir().then(|| shm.to_path_buf())
}

/// How long a client's events take to reach the history, at most, on a
/// loaded machine: the slack the checkers give real timing (the
/// simulator's is one tick).
pub const REAL_SLACK: Duration = Duration::from_millis(25);

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(
        kind: FaultKind,
        target: FaultTarget,
        at: u64,
        duration: Option<u64>,
    ) -> ConcreteFault {
        ConcreteFault {
            kind,
            at: Duration::from_secs(at),
            target,
            duration: duration.map(Duration::from_secs),
            rate: None,
            offset: None,
            delay: None,
        }
    }

    #[test]
    fn a_sentinel_failover_is_refused_only_beside_a_cut_that_may_hold_a_replica() {
        let failover = |at| fault(FaultKind::Failover, FaultTarget::Primary, at, Some(1));
        let cut = |target, at, duration| fault(FaultKind::Partition, target, at, duration);
        // The primary cut off, failed over: nobody promotes it.
        for target in [FaultTarget::Primary, FaultTarget::Redis(0)] {
            assert_eq!(
                failover_beside_a_cut(&[cut(target, 1, Some(5)), failover(3)]),
                None
            );
        }
        // A replica cut off at the failover.
        let schedule = [cut(FaultTarget::Redis(1), 1, Some(5)), failover(3)];
        let found = failover_beside_a_cut(&schedule);
        assert_eq!(found, Some((&schedule[1], &schedule[0])));
        // Healed before, begun after, one way, or latency: no refusal.
        assert_eq!(
            failover_beside_a_cut(&[cut(FaultTarget::Redis(1), 1, Some(2)), failover(3)]),
            None
        );
        assert_eq!(
            failover_beside_a_cut(&[failover(3), cut(FaultTarget::Redis(1), 4, None)]),
            None
        );
        for kind in [FaultKind::PartitionOneway, FaultKind::Latency] {
            let schedule = [fault(kind, FaultTarget::Redis(1), 1, Some(5)), failover(3)];
            assert_eq!(failover_beside_a_cut(&schedule), None);
        }
        // Never healed: still cut at a failover long after.
        let schedule = [cut(FaultTarget::Redis(2), 1, None), failover(30)];
        assert!(failover_beside_a_cut(&schedule).is_some());
        // After a failover, redis-0 may be a replica, and the primary cut
        // before it is the deposed one.
        let schedule = [
            failover(1),
            cut(FaultTarget::Redis(0), 2, Some(5)),
            failover(4),
        ];
        assert!(failover_beside_a_cut(&schedule).is_some());
        let schedule = [
            cut(FaultTarget::Primary, 1, Some(9)),
            failover(2),
            failover(4),
        ];
        assert!(failover_beside_a_cut(&schedule).is_some());
        let schedule = [
            failover(1),
            cut(FaultTarget::Primary, 2, Some(5)),
            failover(4),
        ];
        assert_eq!(failover_beside_a_cut(&schedule), None);
    }
}
