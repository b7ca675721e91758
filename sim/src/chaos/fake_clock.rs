//! Server clock faults on real processes: the `fake_clock` preload library
//! (`sim/shim/fake_clock.c`, built by `sim/build.rs`) and the controller's
//! side of it.
//!
//! A node of a run whose schedule has a server clock fault starts with the
//! library preloaded and `LOCK_SIM_CLOCK_FILE` naming a file of its own;
//! the library adds the offset that file holds to every wall-clock reading
//! of the server (`gettimeofday`, `time`, `clock_gettime` of the realtime
//! clocks): what Redis's key expiry and `TIME` read. The monotonic clock,
//! which runs Redis's event loop and timeouts, is left alone: the
//! simulator's server clock is the wall clock its keyspace reads, and its
//! timers run on true time.
//!
//! The offset follows the simulator's own model of a node's clock
//! ([`ClockControl`]): a jump steps it (`ClockControl::jump`), a drift
//! makes it grow at the drift's rate (`ClockControl::set_rate`), and the
//! file holds `local(t) − t` for the controller's time `t`. A drift is the
//! controller writing that offset again every millisecond, not a rate the
//! library applies: a rate inside the process would also stretch its
//! sleeps (libfaketime's `x` does), which the simulator's drift does not.
//! The file outlives a restart of the node, and so does its clock, as a
//! simulated node's clock does.

use std::{
    io::Write as _,
    os::unix::fs::FileExt as _,
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use redis::aio::MultiplexedConnection;

use super::ChaosError;
use crate::{
    clock::ClockControl,
    config::{FaultKind, FaultTarget, Scenario},
    outcome::ConcreteFault,
};

/// The environment variable naming a node's clock file.
pub const FILE_VAR: &str = "LOCK_SIM_CLOCK_FILE";

/// The library, as built for this machine.
const LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libfake_clock.so"));

/// How often a drifting node's offset is written again: the offset it
/// reads lags the model by at most the rate times this (0.05 ms at 5 %).
const DRIFT_STEP: Duration = Duration::from_millis(1);

/// How far a server's `TIME` may be from what the controller expects, past
/// the span of the request: the server reads its clock once per command.
pub const TOLERANCE: Duration = Duration::from_millis(3);

/// Whether `kind` on `target` is a server clock fault.
pub fn is_server_clock(kind: FaultKind, target: FaultTarget) -> bool {
    matches!(kind, FaultKind::ClockDrift | FaultKind::ClockJump)
        && matches!(target, FaultTarget::Redis(_) | FaultTarget::Primary)
}

/// Whether `schedule` has a server clock fault: its nodes then start with
/// the library preloaded.
pub fn needed(schedule: &[ConcreteFault]) -> bool {
    schedule
        .iter()
        .any(|fault| is_server_clock(fault.kind, fault.target))
}

/// Where `scenario` may give a server clock fault: `Some(Some(index))`
/// for its `[[fault]]` number `index`, `Some(None)` for its `[mix]` (which
/// may draw one), `None` when it never does.
pub fn written_at(scenario: &Scenario) -> Option<Option<usize>> {
    let server = |target| {
        matches!(
            target,
            crate::config::Target::Redis(_) | crate::config::Target::Primary
        )
    };
    let clock = |kind| matches!(kind, FaultKind::ClockDrift | FaultKind::ClockJump);
    if let Some(index) = scenario
        .faults
        .iter()
        .position(|spec| clock(spec.kind) && server(spec.target))
    {
        return Some(Some(index));
    }
    let mix = scenario.mix.as_ref()?;
    mix.kinds.iter().any(|kind| clock(*kind)).then_some(None)
}

/// What a clock file holds for `offset_ns`: the offset, then its bitwise
/// complement (native 64-bit integers), so the library can tell a reading
/// made while the controller wrote.
pub fn contents(offset_ns: i64) -> [u8; 16] {
    let mut bytes = [0; 16];
    bytes[..8].copy_from_slice(&offset_ns.to_ne_bytes());
    bytes[8..].copy_from_slice(&(!offset_ns).to_ne_bytes());
    bytes
}

/// Why the server binary at `server` cannot take a preloaded library, or
/// `None`: a statically linked binary (an ELF file with no interpreter)
/// never runs the dynamic linker that honours `LD_PRELOAD`.
pub fn not_preloadable(server: &Path) -> Option<&'static str> {
    let Ok(bytes) = std::fs::read(server) else {
        return Some("its server binary cannot be read to see whether it is linked dynamically");
    };
    match has_interpreter(&bytes) {
        Some(true) => None,
        Some(false) => Some(
            "its server binary is statically linked: the library that fakes a server's clock is preloaded (LD_PRELOAD), which only a dynamically linked binary honours",
        ),
        None => {
            Some("its server binary is not an ELF file the clock library can be preloaded into")
        }
    }
}

/// Whether the ELF image `bytes` names an interpreter (a `PT_INTERP`
/// program header), or `None` if it is no ELF file.
fn has_interpreter(bytes: &[u8]) -> Option<bool> {
    const PT_INTERP: u32 = 3;
    if bytes.get(..4)? != b"\x7fELF" {
        return None;
    }
    let wide = *bytes.get(4)? == 2;
    let little = *bytes.get(5)? == 1;
    let read = |at: usize, len: usize| -> Option<u64> {
        let field = bytes.get(at..at + len)?;
        let mut value = [0u8; 8];
        if little {
            value[..len].copy_from_slice(field);
            Some(u64::from_le_bytes(value))
        } else {
            value[8 - len..].copy_from_slice(field);
            Some(u64::from_be_bytes(value))
        }
    };
    let (table, entry_size, count) = if wide {
        (read(0x20, 8)?, read(0x36, 2)?, read(0x38, 2)?)
    } else {
        (read(0x1C, 4)?, read(0x2A, 2)?, read(0x2C, 2)?)
    };
    let table = usize::try_from(table).ok()?;
    let entry_size = usize::try_from(entry_size).ok()?;
    for entry in 0..usize::try_from(count).ok()? {
        if read(table + entry * entry_size, 4)? == u64::from(PT_INTERP) {
            return Some(true);
        }
    }
    Some(false)
}

/// One node's clock: the simulator's model of it, and the file the
/// library reads its offset from.
#[derive(Debug, Clone)]
struct NodeClock {
    file: PathBuf,
    clock: ClockControl,
}

/// The server clocks of a run's nodes, `redis-0` first.
#[derive(Debug)]
pub(super) struct ServerClocks {
    /// The library, for `LD_PRELOAD`.
    pub library: PathBuf,
    /// The controller's time zero for the clocks' model (any fixed
    /// instant: only offsets are written).
    origin: Instant,
    nodes: Vec<NodeClock>,
    /// The task writing each drifting node's offset, by node.
    drifts: Vec<Option<tokio::task::JoinHandle<()>>>,
}

impl ServerClocks {
    /// Installs the library in `logs` and an unshifted clock file for each
    /// of `count` nodes in `data`.
    pub(super) fn new(logs: &Path, data: &Path, count: usize) -> Result<Self, ChaosError> {
        let library = logs.join("libfake_clock.so");
        write_file(&library, LIBRARY)?;
        let mut nodes = Vec::with_capacity(count);
        for index in 0..count {
            let file = data.join(format!("redis-{index}.clock"));
            write_file(&file, &contents(0))?;
            nodes.push(NodeClock {
                file,
                clock: ClockControl::default(),
            });
        }
        Ok(Self {
            library,
            origin: Instant::now(),
            nodes,
            drifts: (0..count).map(|_| None).collect(),
        })
    }

    /// Node `index`'s clock file.
    pub(super) fn file(&self, index: usize) -> Option<&Path> {
        self.nodes.get(index).map(|node| node.file.as_path())
    }

    /// Node `index`'s clock steps by `offset_ns` now (negative: back).
    pub(super) fn jump(&self, index: usize, offset_ns: i128) -> Result<(), ChaosError> {
        let node = self.node(index)?;
        node.clock.jump(self.origin.elapsed(), offset_ns);
        write_offset(node, self.origin)
    }

    /// Node `index`'s clock runs `rate` fast from now (0: true again).
    pub(super) fn drift(&mut self, index: usize, rate: f64) -> Result<(), ChaosError> {
        let node = self.node(index)?.clone();
        node.clock.set_rate(self.origin.elapsed(), rate);
        if let Some(task) = self.drifts[index].take() {
            task.abort();
        }
        write_offset(&node, self.origin)?;
        if rate != 0.0 {
            let origin = self.origin;
            self.drifts[index] = Some(tokio::spawn(async move {
                let mut every = tokio::time::interval(DRIFT_STEP);
                loop {
                    every.tick().await;
                    if write_offset(&node, origin).is_err() {
                        return;
                    }
                }
            }));
        }
        Ok(())
    }

    /// What tells whether node `index` reads its clock as the model has
    /// it now.
    pub(super) fn observer(&self, index: usize) -> Result<Observer, ChaosError> {
        Ok(Observer {
            clock: self.node(index)?.clock.clone(),
            origin: self.origin,
        })
    }

    fn node(&self, index: usize) -> Result<&NodeClock, ChaosError> {
        self.nodes
            .get(index)
            .ok_or_else(|| ChaosError::Internal(format!("no clock file for node {index}")))
    }
}

impl Drop for ServerClocks {
    fn drop(&mut self) {
        for task in self.drifts.iter_mut().filter_map(Option::take) {
            task.abort();
        }
    }
}

/// Writes `bytes` to a new file at `path`.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ChaosError> {
    std::fs::File::create(path)
        .and_then(|mut file| file.write_all(bytes))
        .map_err(|source| ChaosError::Io {
            what: format!("writing {}", path.display()),
            source,
        })
}

/// The offset of `clock` at `at` since the model's origin, in ns.
fn offset_ns(clock: &ClockControl, at: Duration) -> i64 {
    let offset = clock.local_ns(at) - at.as_nanos() as i128;
    i64::try_from(offset).unwrap_or(if offset < 0 { i64::MIN } else { i64::MAX })
}

/// Writes `node`'s offset now into its file, in one write at its start.
fn write_offset(node: &NodeClock, origin: Instant) -> Result<(), ChaosError> {
    let bytes = contents(offset_ns(&node.clock, origin.elapsed()));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&node.file)
        .and_then(|file| file.write_all_at(&bytes, 0))
        .map_err(|source| ChaosError::Io {
            what: format!("writing {}", node.file.display()),
            source,
        })
}

/// Reads one node's `TIME` against its clock's model.
#[derive(Debug, Clone)]
pub(super) struct Observer {
    clock: ClockControl,
    origin: Instant,
}

impl Observer {
    /// The model's offset now, in ns.
    fn offset_now(&self) -> i64 {
        offset_ns(&self.clock, self.origin.elapsed())
    }

    /// Returns `true` once the node's `TIME`, asked on `conn` every 2 ms,
    /// reads its clock as the model has it: the evidence that the fault
    /// took, with [`maps_clock_file`] (checked at the node's start), which
    /// shows that the node reads its clock through the file. The offset
    /// need not have moved past the [`TOLERANCE`]: a drift of 0.1 % takes 6
    /// s to grow that far, longer than many drifts last. Returns `false`
    /// when the node does not answer (down, restarting): the caller dials
    /// again.
    pub(super) async fn until_agrees(&self, conn: &mut MultiplexedConnection) -> bool {
        loop {
            let sent = unix_ns();
            let answer: redis::RedisResult<(i64, i64)> = redis::cmd("TIME").query_async(conn).await;
            let heard = unix_ns();
            let Ok((secs, micros)) = answer else {
                return false;
            };
            if agrees(secs, micros, (sent, heard), self.offset_now()) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// Whether the process `pid` maps the clock file `file` (its
/// `/proc/PID/maps` names it): the library loaded, found the file and
/// reads its offset from it, the kernel's word for it.
pub(super) fn maps_clock_file(pid: u32, file: &Path) -> bool {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return false;
    };
    let file = file.to_string_lossy();
    maps.lines().any(|line| line.ends_with(file.as_ref()))
}

/// Whether a server's `TIME` (`secs`, `micros`), asked between the Unix
/// times `span` (ns), reads a clock `offset_ns` off true time, within
/// [`TOLERANCE`].
fn agrees(secs: i64, micros: i64, span: (i64, i64), offset_ns: i64) -> bool {
    let server = i128::from(secs) * 1_000_000_000 + i128::from(micros) * 1_000;
    let slack = TOLERANCE.as_nanos() as i128;
    let (sent, heard) = (i128::from(span.0), i128::from(span.1));
    let offset = i128::from(offset_ns);
    sent + offset - slack <= server && server <= heard + offset + slack
}

/// The controller's own wall clock, in Unix ns (the library is not
/// preloaded into the controller).
fn unix_ns() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_nanos()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset_of(bytes: [u8; 16]) -> (i64, i64) {
        let mut offset = [0; 8];
        let mut check = [0; 8];
        offset.copy_from_slice(&bytes[..8]);
        check.copy_from_slice(&bytes[8..]);
        (i64::from_ne_bytes(offset), i64::from_ne_bytes(check))
    }

    #[test]
    fn a_file_holds_the_offset_and_its_complement() {
        for offset in [0, 2_000_000_000, -10_000_000_000, i64::MIN] {
            let (read, check) = offset_of(contents(offset));
            assert_eq!(read, offset);
            assert_eq!(check, !offset, "the torn-read check");
        }
    }

    #[test]
    fn a_jump_steps_the_written_offset_and_a_drift_grows_it_at_its_rate() {
        let clock = ClockControl::default();
        let s = Duration::from_secs;
        assert_eq!(offset_ns(&clock, s(1)), 0, "unshifted");
        // A jump back 10 s at 1 s: the offset is -10 s from then on.
        clock.jump(s(1), -10_000_000_000);
        assert_eq!(
            offset_of(contents(offset_ns(&clock, s(1)))).0,
            -10_000_000_000
        );
        assert_eq!(offset_ns(&clock, s(5)), -10_000_000_000);
        // A 5 % slow drift from 5 s: 2 s later it lost 100 ms more.
        clock.set_rate(s(5), -0.05);
        assert_eq!(offset_ns(&clock, s(5)), -10_000_000_000, "continuous");
        assert_eq!(offset_ns(&clock, s(7)), -10_100_000_000);
        // Its end keeps what it lost; a jump forward adds to it.
        clock.set_rate(s(7), 0.0);
        clock.jump(s(8), 2_000_000_000);
        assert_eq!(
            offset_of(contents(offset_ns(&clock, s(9)))).0,
            -8_100_000_000
        );
    }

    #[test]
    fn time_agrees_only_within_the_request_and_the_tolerance() {
        let sent = 1_000_000_000_000_000_000;
        let heard = sent + 500_000;
        let secs = |ns: i64| {
            (
                ns.div_euclid(1_000_000_000),
                ns.rem_euclid(1_000_000_000) / 1000,
            )
        };
        let (s, us) = secs(sent + 200_000 + 2_000_000_000);
        assert!(agrees(s, us, (sent, heard), 2_000_000_000));
        assert!(!agrees(s, us, (sent, heard), 0), "the old clock");
        let (s, us) = secs(sent - 10_000_000_000);
        assert!(agrees(s, us, (sent, heard), -10_000_000_000));
        assert!(!agrees(s, us, (sent, heard), -9_900_000_000));
    }

    #[test]
    fn a_process_maps_the_files_its_maps_name() {
        // This test's own binary is mapped into it; a file never opened
        // is not.
        let me = std::env::current_exe().expect("the test binary's path");
        assert!(maps_clock_file(std::process::id(), &me));
        assert!(!maps_clock_file(
            std::process::id(),
            Path::new("/nowhere/redis-0.clock")
        ));
        assert!(!maps_clock_file(u32::MAX, &me), "no such process");
    }

    #[test]
    fn a_dynamically_linked_binary_names_its_interpreter() {
        // This test binary itself is dynamically linked (it uses libc's
        // loader); a plain text file is no ELF.
        let me = std::env::current_exe().expect("the test binary's path");
        assert_eq!(not_preloadable(&me), None);
        let mut image = std::fs::read(&me).expect("the test binary");
        assert_eq!(has_interpreter(&image), Some(true));
        // Blank every program header's type: no interpreter left.
        let table = usize::try_from(u64::from_le_bytes(
            image[0x20..0x28].try_into().expect("8 bytes"),
        ))
        .expect("a table offset");
        let size = usize::from(u16::from_le_bytes([image[0x36], image[0x37]]));
        let count = usize::from(u16::from_le_bytes([image[0x38], image[0x39]]));
        for entry in 0..count {
            image[table + entry * size..table + entry * size + 4].fill(0);
        }
        assert_eq!(has_interpreter(&image), Some(false));
        assert_eq!(has_interpreter(b"#!/bin/sh\n"), None);
    }
}
