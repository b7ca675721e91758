//! The two regimes of a small machine, and what else ran during a
//! measurement.
//!
//! - **idle**: nothing else runs, so a core that waits for a reply drops
//!   into a deep sleep state and pays its wake-up on every round trip;
//! - **busy**: one `nice -n 19` spinning shell per core keeps every core
//!   awake. The spinners yield to the bench and to Redis (nice 19 weighs
//!   1/68 of nice 0 under CFS), but a wake-up may still wait for the
//!   spinner's slice on that core.
//!
//! A latency or throughput ratio can differ by half between the two
//! (bench/README.md), so every section runs both, round by round, and
//! each regime's figures come with the CPU the rest of the machine used
//! meanwhile: an "idle" figure taken while others' builds ran is not idle.

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// How the machine is held while a round runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Regime {
    /// Nothing started by the bench.
    Idle,
    /// One `nice -n 19` spinner per core.
    Busy,
}

impl Regime {
    /// `idle` or `busy`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Busy => "busy",
        }
    }

    /// The regimes `--regime idle|busy|both` names (both by default).
    pub fn parse(arg: Option<&str>) -> Result<Vec<Self>, String> {
        match arg {
            None | Some("both") => Ok(vec![Self::Idle, Self::Busy]),
            Some("idle") => Ok(vec![Self::Idle]),
            Some("busy") => Ok(vec![Self::Busy]),
            Some(other) => Err(format!("--regime {other}: expected idle, busy or both")),
        }
    }

    /// Enters the regime: starts the spinners for `Busy` (stopped when the
    /// returned value is dropped) and lets the cores settle.
    pub async fn enter(self) -> Spinners {
        let spinners = match self {
            Self::Idle => Spinners::none(),
            Self::Busy => Spinners::start(cores()),
        };
        // Busy: the spinners are running; idle: the spinners of the round
        // before are gone and the cores have gone back to sleep.
        tokio::time::sleep(Duration::from_millis(50)).await;
        spinners
    }
}

/// The machine's core count.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
}

/// Spinning shells at `nice -n 19`, killed when dropped. Each also watches
/// the bench's pid and exits within milliseconds once the bench is gone,
/// so a killed bench (even `kill -9`) leaves none behind.
pub struct Spinners {
    children: Vec<Child>,
}

impl Spinners {
    fn none() -> Self {
        Self {
            children: Vec::new(),
        }
    }

    fn start(count: usize) -> Self {
        let pid = std::process::id();
        // The inner loop spins in the shell (a few ms per pass on an idle core); the
        // outer one checks that the bench still runs.
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do i=0; \
             while [ $i -lt 5000 ]; do i=$((i+1)); done; done"
        );
        let children = (0..count)
            .map(|_| {
                Command::new("nice")
                    .args(["-n", "19", "sh", "-c", &script])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    // Invariant: `nice` and `sh` are on every system this
                    // bench runs on (it also needs redis-server); a bench
                    // that cannot create its regime must not report it.
                    .expect("start a `nice -n 19 sh` spinner")
            })
            .collect();
        Self { children }
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// CPU time in clock ticks (USER_HZ, 1/100 s on Linux).
#[derive(Debug, Clone, Copy, Default)]
struct Ticks {
    /// Every core's non-idle time (user, nice, system, irq, softirq).
    machine: u64,
    /// This process.
    bench: u64,
    /// The Redis server, when it runs on this machine.
    redis: u64,
}

fn read_ticks(redis_pid: Option<u32>) -> Option<Ticks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq ...
    let machine = [0, 1, 2, 5, 6]
        .iter()
        .map(|&i| fields.get(i).copied().unwrap_or(0))
        .sum();
    Some(Ticks {
        machine,
        bench: process_ticks("self").unwrap_or(0),
        redis: redis_pid
            .and_then(|pid| process_ticks(&pid.to_string()))
            .unwrap_or(0),
    })
}

/// utime + stime of `/proc/<pid>/stat`.
fn process_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// This process's CPU time so far.
pub fn process_cpu() -> Option<Duration> {
    process_ticks("self").map(|ticks| Duration::from_millis(ticks * 10))
}

/// What the machine did besides the bench, over the rounds of one regime.
#[derive(Debug, Default, Clone, Copy)]
pub struct Load {
    wall: Duration,
    machine: u64,
    bench: u64,
    redis: u64,
    readable: bool,
}

/// One measured stretch; [`Meter::stop`] adds it to a [`Load`].
pub struct Meter {
    started: Instant,
    before: Option<Ticks>,
    redis_pid: Option<u32>,
}

impl Meter {
    /// Starts measuring now (`redis_pid`: the Redis server on this machine,
    /// whose CPU is told apart from the others').
    pub fn start(redis_pid: Option<u32>) -> Self {
        Self {
            started: Instant::now(),
            before: read_ticks(redis_pid),
            redis_pid,
        }
    }

    /// Ends the stretch and adds it to `load`.
    pub fn stop(self, load: &mut Load) {
        load.wall += self.started.elapsed();
        if let (Some(before), Some(after)) = (self.before, read_ticks(self.redis_pid)) {
            load.machine += after.machine.saturating_sub(before.machine);
            load.bench += after.bench.saturating_sub(before.bench);
            load.redis += after.redis.saturating_sub(before.redis);
            load.readable = true;
        }
    }
}

impl Load {
    /// "others 0.04 cores (bench 0.95, Redis 0.61)": the cores used by
    /// everything but the bench and its Redis, on average over the rounds.
    pub fn describe(&self) -> String {
        let secs = self.wall.as_secs_f64();
        if !self.readable || secs <= 0.0 {
            return "machine load unreadable (no /proc/stat)".into();
        }
        let cores = |ticks: u64| ticks as f64 / 100.0 / secs;
        let others = self.machine.saturating_sub(self.bench + self.redis);
        format!(
            "others {:.2} cores (bench {:.2}, Redis {:.2})",
            cores(others),
            cores(self.bench),
            cores(self.redis)
        )
    }
}
