//! The adapter's injection points: where streams, time and randomness come from.
//!
//! Production uses [`TcpConnector`], [`TokioClock`] and [`OsEntropy`]. A
//! simulator plugs in its own network, a skewed per-node clock and a seeded
//! random source; nothing else about the adapter changes.

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use tokio::io::{AsyncRead, AsyncWrite};

use crate::jitter::{GOLDEN_GAMMA, splitmix64};

/// A byte stream to a Redis server.
pub trait RedisStream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> RedisStream for T {}

/// The future a [`Connector`] returns.
pub type ConnectFuture<'a> =
    Pin<Box<dyn Future<Output = io::Result<Box<dyn RedisStream>>> + Send + 'a>>;

/// Opens streams to the current Redis primary. Advanced: most users never
/// implement it.
///
/// Called for the first connection, for every reconnect (so an
/// implementation may rediscover the primary after a failover), and once
/// more for the pub/sub connection. Calls may overlap: a connection not
/// open 250 ms after its call gets a second call beside it (up to four),
/// and the first stream to open is kept, the others dropped.
pub trait Connector: Send + Sync + 'static {
    /// Opens a new stream to the server the lock should talk to now.
    fn connect(&self) -> ConnectFuture<'_>;
}

/// Reads the time the lock machine runs on. Advanced: most users never
/// implement it.
///
/// Must be monotonic. Production reads tokio's clock, so a paused or
/// simulated tokio runtime drives every deadline.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// Supplies the randomness of owner tokens and backoff jitter. Advanced:
/// a simulator passes a seeded source so that runs replay exactly.
pub trait Entropy: Send + Sync + 'static {
    /// Returns 64 random bits.
    fn next_u64(&self) -> u64;

    /// What follows the uuid in an owner token: `pid:host` by default. A
    /// simulator returns something stable so that runs replay exactly.
    fn owner_suffix(&self) -> &str {
        process_suffix()
    }
}

/// Connects over TCP with `TCP_NODELAY` set (redis-rs leaves it off).
#[derive(Debug, Clone)]
pub struct TcpConnector {
    host: String,
    port: u16,
}

impl TcpConnector {
    /// Connects to `host:port`.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
        }
    }
}

impl Connector for TcpConnector {
    fn connect(&self) -> ConnectFuture<'_> {
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect((self.host.as_str(), self.port)).await?;
            // Without it every small command waits on Nagle's algorithm.
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as Box<dyn RedisStream>)
        })
    }
}

/// Reads `tokio::time::Instant::now()`, which a paused or simulated tokio
/// runtime controls.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
}

/// Random bits for tokens and jitter: one draw from the operating system's
/// random source per process (through `uuid`), then splitmix64 over a
/// counter. splitmix64 is a bijection, so no two draws in a process repeat;
/// the token adds the pid and host, so none repeat across processes. No
/// syscall per lock.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsEntropy;

impl Entropy for OsEntropy {
    fn next_u64(&self) -> u64 {
        static STATE: OnceLock<AtomicU64> = OnceLock::new();
        let state = STATE.get_or_init(|| AtomicU64::new(uuid::Uuid::new_v4().as_u64_pair().0));
        splitmix64(state.fetch_add(GOLDEN_GAMMA, Ordering::Relaxed))
    }
}

/// One event of one lock, as an observer sees it.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The key as given to `acquire`.
    pub key: &'a str,
    /// The owner token of this acquisition.
    pub token: &'a str,
    /// What the lock machine reported.
    pub event: &'a crate::Event,
    /// When, on the locker's clock.
    pub at: Instant,
}

/// A callback that sees every lock event of a locker (for metrics, audit
/// logs, or a simulator's history). It runs on whichever task drove the
/// lock (the caller's, or the driver's): keep it short.
pub type Observer = Arc<dyn Fn(&Observed<'_>) + Send + Sync>;

/// Builds an owner token: a uuid v4 from `entropy`, then the pid and host, so
/// that `GET` on a lock key tells a human who holds it.
pub(crate) fn owner_token(entropy: &dyn Entropy) -> String {
    let (high, low) = (entropy.next_u64(), entropy.next_u64());
    let bytes = ((u128::from(high) << 64) | u128::from(low)).to_be_bytes();
    let uuid = uuid::Builder::from_random_bytes(bytes).into_uuid();
    // Built in place: this runs once per acquire, and `format!` costs
    // several times as much.
    let suffix = entropy.owner_suffix();
    let mut token = String::with_capacity(uuid::fmt::Hyphenated::LENGTH + 1 + suffix.len());
    token.push_str(
        uuid.hyphenated()
            .encode_lower(&mut uuid::Uuid::encode_buffer()),
    );
    token.push(':');
    token.push_str(suffix);
    token
}

/// `pid:host`, read once per process.
fn process_suffix() -> &'static str {
    static SUFFIX: OnceLock<String> = OnceLock::new();
    SUFFIX.get_or_init(|| format!("{}:{}", std::process::id(), host_name()))
}

fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counter(AtomicU64);

    impl Entropy for Counter {
        fn next_u64(&self) -> u64 {
            self.0.fetch_add(1, Ordering::Relaxed)
        }
    }

    #[test]
    fn tokens_are_uuid_v4_pid_and_host() {
        let entropy = Counter(AtomicU64::new(1));
        let token = owner_token(&entropy);
        let mut parts = token.splitn(3, ':');
        let uuid = uuid::Uuid::parse_str(parts.next().unwrap_or_default()).expect("a uuid");
        assert_eq!(uuid.get_version_num(), 4);
        assert_eq!(parts.next(), Some(std::process::id().to_string().as_str()));
        assert!(!parts.next().unwrap_or_default().is_empty());
        assert_ne!(token, owner_token(&entropy), "tokens differ per draw");
    }
}
