//! Real `redis-server` processes for integration tests (the `servers`
//! crate's), each on its own loopback port, so a test can freeze, kill,
//! restart or fail over its server without touching anyone else's.
//!
//! There is no skipping: a test that cannot start a server fails and says
//! how to get one.
// Each test binary uses a different subset of this module, and `pub` here
// only means "visible to the test file that declares `mod support;`".
#![allow(dead_code, unreachable_pub)]

pub mod cluster;
pub mod pki;
pub mod sentinel;
pub mod states;
#[cfg(feature = "tls")]
pub mod tls;
#[cfg(feature = "redis")]
pub mod workload;

use std::{
    net::TcpListener,
    ops::{Deref, DerefMut},
    sync::OnceLock,
    thread,
};

/// The server binaries every fixture starts (the `servers` crate's test
/// route: `REDIS_SERVER_BIN`, else the first `redis-server` on `PATH`),
/// checked to be the server `LOCK_TEST_SERVER` names when it is set, at
/// lookup and again from each process's `INFO server`. Panics, saying how
/// to get one, when there is none.
pub fn binaries() -> &'static servers::Binaries {
    static FOUND: OnceLock<Result<servers::Binaries, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| servers::Binaries::for_tests().map_err(|error| error.to_string()))
        .as_ref()
        .unwrap_or_else(|error| panic!("{error}"))
}

/// A loopback port that refuses every connection for as long as the
/// returned socket lives: the socket is bound but never listens, so the
/// kernel answers a SYN to it with a reset, and nothing else can take the
/// port meanwhile. (A port found by binding a listener and dropping it is
/// free only until some other test's server or connection takes it.)
pub fn refusing_port() -> (tokio::net::TcpSocket, u16) {
    let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
    socket
        .bind(([127, 0, 0, 1], 0).into())
        .expect("bind a loopback port");
    let port = socket
        .local_addr()
        .expect("a bound socket's address")
        .port();
    (socket, port)
}

/// A loopback port where a node is silent for as long as the returned
/// listener lives: the listener never accepts, so the kernel completes
/// each TCP handshake into its backlog and the connection then hears
/// nothing, as from a hung process or a host behind a firewall that lets
/// the handshake through. A client's Redis handshake there never ends.
/// (Bound to port 0 and kept, so nothing else can take the port.)
pub fn silent_port() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener
        .local_addr()
        .expect("a bound listener's address")
        .port();
    (listener, port)
}

/// One `redis-server` process owned by a test ([`servers::Server`], whose
/// methods it has), on a port of its own. Killed on drop.
pub struct RedisServer(servers::Server);

impl RedisServer {
    /// Starts a server with no persistence and waits until it answers.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server like [`Self::start`], with `args` after the defaults
    /// (so `--appendonly yes` overrides the default `--appendonly no`).
    pub fn start_with(args: &[&str]) -> Self {
        Self(
            servers::Server::start_with(binaries(), args).unwrap_or_else(|error| panic!("{error}")),
        )
    }

    /// Starts a replica of `primary` and waits until it acknowledges a
    /// write, so later writes stream to it (asynchronously, as in
    /// production) and `WAIT` counts it without delay.
    pub fn replica_of(primary: &Self) -> Self {
        Self(
            servers::Server::replica_of(binaries(), primary)
                .unwrap_or_else(|error| panic!("{error}")),
        )
    }

    /// Starts a replica of `primary` whose replication link runs through a
    /// [`LinkProxy`] the test can cut.
    pub fn replica_via(primary: &Self) -> (Self, LinkProxy) {
        let proxy = LinkProxy::start(primary.port());
        let replica = servers::Server::replica_linked_through(binaries(), primary, proxy.port)
            .unwrap_or_else(|error| panic!("{error}"));
        (Self(replica), proxy)
    }

    /// `redis://127.0.0.1:PORT/` (a function of its own, for `map`).
    pub fn url(&self) -> String {
        self.0.url()
    }
}

impl Deref for RedisServer {
    type Target = servers::Server;

    fn deref(&self) -> &servers::Server {
        &self.0
    }
}

impl DerefMut for RedisServer {
    fn deref_mut(&mut self) -> &mut servers::Server {
        &mut self.0
    }
}

/// A server for tests that only need *a* Redis: `REDIS_URL` if set,
/// otherwise a spawned one.
pub enum AnyRedis {
    /// From `REDIS_URL`.
    External(String),
    /// Spawned for this test.
    Spawned(Box<RedisServer>),
}

impl AnyRedis {
    /// Its URL.
    pub fn url(&self) -> String {
        match self {
            Self::External(url) => url.clone(),
            Self::Spawned(server) => server.url(),
        }
    }
}

/// `REDIS_URL` if set, otherwise a fresh `redis-server`.
pub fn redis_url_or_spawn() -> AnyRedis {
    match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => AnyRedis::External(url),
        _ => AnyRedis::Spawned(Box::new(RedisServer::start())),
    }
}

/// The arguments of a `MONITOR` line, unquoted:
/// `1700000000.000001 [0 lua] "SET" "k"` gives `["SET", "k"]`.
pub fn monitor_args(line: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut arg = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => arg.extend(chars.next()),
                '"' => break,
                c => arg.push(c),
            }
        }
        args.push(arg);
    }
    args
}

/// The key's PTTL (-2: missing, -1: no ttl).
pub fn pttl(server: &RedisServer, key: &str) -> i64 {
    server.query(&["PTTL", key])
}

/// The key's value, if any.
pub fn get(server: &RedisServer, key: &str) -> Option<String> {
    server.query(&["GET", key])
}

/// A TCP relay on loopback that can silently drop what it carries: a
/// replication link that loses data, as a network partition would.
pub struct LinkProxy {
    port: u16,
    dropping: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl LinkProxy {
    /// Relays a free port to `target_port`, one thread per direction.
    pub fn start(target_port: u16) -> Self {
        use std::{
            io::{Read, Write},
            net::TcpStream,
            sync::{
                Arc,
                atomic::{AtomicBool, Ordering},
            },
        };
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a relay port");
        let port = listener.local_addr().expect("relay address").port();
        let dropping = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&dropping);
        thread::spawn(move || {
            for inbound in listener.incoming().flatten() {
                let Ok(outbound) = TcpStream::connect(("127.0.0.1", target_port)) else {
                    continue;
                };
                for (mut from, mut to) in [
                    (
                        inbound.try_clone().expect("clone"),
                        outbound.try_clone().expect("clone"),
                    ),
                    (outbound, inbound),
                ] {
                    let flag = Arc::clone(&flag);
                    thread::spawn(move || {
                        let mut buffer = [0u8; 16 * 1024];
                        while let Ok(read) = from.read(&mut buffer) {
                            if read == 0 {
                                break;
                            }
                            if !flag.load(Ordering::SeqCst)
                                && to.write_all(&buffer[..read]).is_err()
                            {
                                break;
                            }
                        }
                    });
                }
            }
        });
        Self { port, dropping }
    }

    /// From now on, every byte in either direction is lost.
    pub fn drop_everything(&self) {
        self.dropping
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}
