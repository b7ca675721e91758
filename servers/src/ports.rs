//! Loopback ports for servers: one walk per process below the kernel's
//! ephemeral range, or consecutive ports from a base the user chose.

use std::{
    net::Ipv4Addr,
    sync::atomic::{AtomicU32, Ordering},
};

/// Why no port could be handed out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PortError {
    /// A port from a base is taken.
    #[error("port {port} is already in use: {source}")]
    Taken {
        /// The port.
        port: u16,
        /// What binding it said.
        source: std::io::Error,
    },
    /// The ports from a base ran past 65535.
    #[error("no ports left above base port {base}")]
    Exhausted {
        /// The base.
        base: u16,
    },
    /// Every port of the walk was taken.
    #[error("no free loopback port in {low}..{high}")]
    NoneFree {
        /// The first port of the walk.
        low: u16,
        /// The first port past it (the ephemeral range's first).
        high: u16,
    },
}

/// Hands out loopback ports: from a fixed base when the user asked for one
/// (each must be free, or [`PortError::Taken`] names it), or else from this
/// process's walk over the ports below the kernel's ephemeral range.
///
/// Not a bind to port 0: that port comes from the ephemeral range, and it
/// is free only until the listener that found it closes; a server started
/// on it a moment later can find it taken by any connection opened
/// meanwhile, whose local port the kernel draws from the same range (a
/// proxy's connection upstream, a cluster's bus links, another test's
/// client). No connection is ever given a port below that range. The walk
/// is shared by the whole process, from an offset and by a stride both
/// drawn from the process id (`Route`): two users in one process (tests
/// running side by side) never draw the same step, test binaries running
/// side by side take the ports in different orders, and a port found taken
/// (by a server of another process) is skipped. A server that still loses
/// its port between the draw and its bind is started again on the next
/// one ([`crate::Launch`]).
#[derive(Debug)]
pub struct Ports {
    base: Option<u16>,
    next: u16,
}

/// The lowest port the walk hands out: clear of the well-known ports and of
/// the fixed bases the chaos runs are given (7100, 7600, 7900 in CI).
const LOW: u16 = 16_384;

/// The next step of this process's walk: shared, so that each step is
/// handed out once. Each user walking from step 0 let two tests of one
/// process draw the same ports, each port free when drawn and then bound
/// by both.
static WALK: AtomicU32 = AtomicU32::new(0);

impl Ports {
    /// Ports from this process's walk.
    pub fn walk() -> Self {
        Self {
            base: None,
            next: 0,
        }
    }

    /// Consecutive ports from `base` up, each checked free.
    pub fn from_base(base: u16) -> Self {
        Self {
            base: Some(base),
            next: 0,
        }
    }

    /// Ports from `base` when given, else from the walk.
    pub fn new(base: Option<u16>) -> Self {
        Self { base, next: 0 }
    }

    /// Whether a server that finds its port taken may move to another
    /// (ports from the walk), rather than fail naming it (from a base).
    pub fn may_move(&self) -> bool {
        self.base.is_none()
    }

    /// One free port.
    pub fn take(&mut self) -> Result<u16, PortError> {
        let Some(base) = self.base else {
            return walk();
        };
        let port = base
            .checked_add(self.next)
            .ok_or(PortError::Exhausted { base })?;
        self.next += 1;
        probe(port).map_err(|source| PortError::Taken { port, source })?;
        Ok(port)
    }
}

/// The next free port of this process's walk ([`Ports`]).
fn walk() -> Result<u16, PortError> {
    let high = ephemeral_low();
    let route = Route::new(std::process::id(), u32::from(high - LOW));
    for _ in 0..route.span {
        let step = WALK.fetch_add(1, Ordering::Relaxed);
        let port = LOW + route.port(step);
        // A probe, not a reservation: below the ephemeral range only a
        // server of another process can take it before ours binds it, and
        // then ours starts again on the next port.
        if probe(port).is_ok() {
            return Ok(port);
        }
    }
    Err(PortError::NoneFree { low: LOW, high })
}

/// One process's order over the `span` ports of the walk: from an offset,
/// by a stride coprime with the span (so every port comes once before any
/// repeats), both drawn from the process id.
///
/// The stride is the process's own, not one shared by all. With one stride
/// for every process, two processes whose walks met on a port went on in
/// lockstep: the one that lost the port moved to its next step, which was
/// the winner's next step too, so two tests starting clusters side by side
/// fought over port after port (CI: a Valkey 9.1 cluster node lost its
/// port five starts in a row). With a stride of its own, two walks that
/// meet on one port part at the next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Route {
    offset: u32,
    stride: u32,
    span: u32,
}

impl Route {
    fn new(seed: u32, span: u32) -> Self {
        let span = span.max(1);
        let offset = seed.wrapping_mul(2_654_435_761) % span;
        // Odd, and one-to-one in the seed over any `span / 2` seeds when
        // the span is a power of two (the kernel's default range makes it
        // 2^14), so processes with nearby ids never share a stride.
        let half = (span / 2).max(1);
        let mut stride = (2 * (seed.wrapping_mul(2_246_822_519) % half) + 1) % span;
        while gcd(stride, span) != 1 {
            stride = (stride + 1) % span;
        }
        Self {
            offset,
            stride,
            span,
        }
    }

    /// The port (above [`LOW`]) of step `step`.
    fn port(self, step: u32) -> u16 {
        let step = u64::from(step % self.span);
        let at = (u64::from(self.offset) + step * u64::from(self.stride)) % u64::from(self.span);
        // Below `span`, which is at most 2^16 - LOW, so it fits.
        u16::try_from(at).unwrap_or(0)
    }
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Whether `port` can be bound on loopback now: it fails while anything
/// listens there.
///
/// The probe binds and never listens. A probing *listener* held the port in
/// LISTEN for as long as any copy of its descriptor lived, and a process
/// forked by another thread (a test starting a server) keeps a copy until
/// its exec: the server, or a test, binding the port a moment later found
/// it in use (`ports_without_a_base_are_free_and_below_the_ephemeral_range`
/// failed so on 9 of 40 runs of sim's chaos tests). A bound socket that
/// never listened, with `SO_REUSEADDR` as every listener here has (std's
/// and Redis's), blocks no later bind and listen.
fn probe(port: u16) -> std::io::Result<()> {
    use rustix::net::{AddressFamily, SocketType, bind, socket, sockopt};
    let probe = socket(AddressFamily::INET, SocketType::STREAM, None)?;
    sockopt::set_socket_reuseaddr(&probe, true)?;
    bind(
        &probe,
        &std::net::SocketAddrV4::new(Ipv4Addr::LOCALHOST, port),
    )?;
    Ok(())
}

/// The first port of the kernel's ephemeral range (Linux:
/// `net.ipv4.ip_local_port_range`, 32768 unless changed), never below
/// [`LOW`] + 1024.
pub(crate) fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768u16)
        .max(LOW + 1_024)
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    #[test]
    fn walked_ports_are_free_distinct_and_below_the_ephemeral_range() {
        let mut ports = Ports::walk();
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

    #[test]
    fn two_walks_in_one_process_share_the_steps() {
        let (mut first, mut second) = (Ports::walk(), Ports::walk());
        let mut drawn: Vec<u16> = (0..16)
            .flat_map(|_| [first.take().unwrap(), second.take().unwrap()])
            .collect();
        drawn.sort_unstable();
        drawn.dedup();
        assert_eq!(drawn.len(), 32, "two walks drew the same port");
    }

    #[test]
    fn every_route_visits_each_port_of_its_span_once() {
        for span in [1, 2, 7, 1_000, 16_384, 28_231] {
            for seed in [0, 1, 4_242, 18_002, u32::MAX] {
                let route = Route::new(seed, span);
                let mut seen = vec![false; span as usize];
                for step in 0..span {
                    let port = usize::from(route.port(step));
                    assert!(!seen[port], "span {span} seed {seed}: {port} twice");
                    seen[port] = true;
                }
            }
        }
    }

    #[test]
    fn two_processes_whose_walks_meet_part_at_the_next_step() {
        // The kernel's default range: a span of 2^14.
        let span = 16_384;
        let steps = 48;
        let walk = |seed| -> Vec<u16> {
            let route = Route::new(seed, span);
            (0..steps).map(|step| route.port(step)).collect()
        };
        let mut met = 0;
        for first in 18_000..18_120 {
            let a = walk(first);
            for second in first + 1..18_120 {
                let b = walk(second);
                for i in 0..a.len() - 1 {
                    for j in 0..b.len() - 1 {
                        if a[i] == b[j] {
                            met += 1;
                            assert_ne!(
                                a[i + 1],
                                b[j + 1],
                                "pids {first} and {second} met on {} and went on together",
                                a[i]
                            );
                        }
                    }
                }
            }
        }
        // The pairs do meet (the check above is not empty).
        assert!(met > 0, "no two walks met");
    }

    #[test]
    fn a_taken_port_from_a_base_is_named() {
        let held = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a port to hold");
        let port = held.local_addr().expect("its address").port();
        let error = Ports::from_base(port).take().expect_err("taken");
        assert!(
            matches!(error, PortError::Taken { port: named, .. } if named == port),
            "{error}"
        );
    }
}
