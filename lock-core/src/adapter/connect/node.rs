//! One Redis server as the locks see it: the connection currently in use
//! (a redis-rs multiplexed connection that any task may clone and send
//! on), its generation, and what the server supports.
//!
//! Callers send from their own tasks. A caller that finds the connection
//! broken (a reset, a timed-out command that may have wedged the stream,
//! `READONLY` after a failover) marks it broken, and the locker's driver
//! opens a new one.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use redis::{RedisConnectionInfo, aio::MultiplexedConnection};

use super::{
    attempts::{ATTEMPT_DELAY, MAX_ATTEMPTS, staggered},
    connector::Connector,
    error::ConnectError,
    sentinel::Current,
};

/// What a server supports, read once per connection (`INFO server`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Dialect {
    /// `SET … NX … GET` is accepted (Redis 7.0 and later).
    pub(crate) set_nx_get: bool,
    /// `SET … IFEQ` is accepted (Valkey 8.1 and later): a lone renewal is
    /// `SET key token IFEQ token PX ttl`, with no script (see
    /// [`codec::encode`](crate::adapter::wire::codec::encode)).
    pub(crate) set_ifeq: bool,
    /// The server is known to lack `WAITAOF` (its version is below 7.2, or
    /// it answered `unknown command`): a lock with `wait_aof` fails with
    /// [`Failure::Unsupported`](crate::Failure::Unsupported) before
    /// sending. An unreadable version leaves it false: the command is
    /// sent, and its answer decides.
    pub(crate) lacks_waitaof: bool,
    /// `DELIFEQ key value` is accepted (Valkey 9.0 and later): an
    /// unannounced release is that command, not the script.
    pub(crate) delifeq: bool,
    /// `DELEX key IFEQ value` is accepted (Redis 8.4 and later): an
    /// unannounced release is that command, not the script.
    pub(crate) delex_ifeq: bool,
    /// Releases do not announce themselves on the lock's channel (a
    /// Redlock node: nobody subscribes there). Set by the session, not read
    /// from the server.
    pub(crate) quiet_release: bool,
}

impl Dialect {
    /// The dialect of a server whose `INFO server` reply is `info`. An
    /// unreadable version means the oldest dialect, which works everywhere.
    ///
    /// Valkey answers `redis_version:7.2.4` (the Redis release it forked
    /// from) and its own release in `valkey_version`: only that field turns
    /// `SET … IFEQ` on. Redis 8.4 has `SET … IFEQ` too, but no Redis 8.4 runs
    /// in the test matrix, so Redis keeps the script.
    pub(crate) fn from_info(info: &str) -> Self {
        let version = |field: &str| {
            info.lines()
                .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
                .map(|version| {
                    let mut parts = version
                        .trim()
                        .split('.')
                        .map(|part| part.parse::<u32>().ok());
                    (parts.next().flatten(), parts.next().flatten())
                })
        };
        let redis = version("redis_version");
        let redis_major = redis.and_then(|(major, _)| major);
        let valkey = version("valkey_version");
        let at_least = |version: Option<(Option<u32>, Option<u32>)>, wanted: (u32, u32)| {
            version.is_some_and(|version| match version {
                (Some(major), Some(minor)) => (major, minor) >= wanted,
                (Some(major), None) => major > wanted.0,
                _ => false,
            })
        };
        Self {
            // Neither server is in the test matrix: chosen from the
            // documented versions, tested against the simulator only.
            delifeq: at_least(valkey, (9, 0)),
            delex_ifeq: valkey.is_none() && at_least(redis, (8, 4)),
            set_nx_get: redis_major.is_some_and(|major| major >= 7),
            // WAITAOF came with Redis 7.2 (Valkey answers redis_version:7.2.4).
            lacks_waitaof: match redis {
                Some((Some(major), Some(minor))) => (major, minor) < (7, 2),
                Some((Some(major), None)) => major < 7,
                _ => false,
            },
            set_ifeq: valkey.is_some_and(|version| match version {
                (Some(major), Some(minor)) => (major, minor) >= (8, 1),
                (Some(major), None) => major > 8,
                _ => false,
            }),
            quiet_release: false,
        }
    }
}

/// Whether a connection's server refused a native command once (a server
/// that claims a release with `SET … IFEQ` but rejects it: a proxy, a
/// renamed command): from then on the connection sends the script.
#[derive(Debug, Default)]
pub(crate) struct Refusals {
    set_ifeq: std::sync::atomic::AtomicBool,
    del_ifeq: std::sync::atomic::AtomicBool,
    waitaof: std::sync::atomic::AtomicBool,
}

impl Refusals {
    /// Remembers that the server refused `DELIFEQ` / `DELEX … IFEQ`.
    pub(crate) fn refuse_del_ifeq(&self) {
        self.del_ifeq
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Remembers that the server answered `WAITAOF` with `unknown command`.
    pub(crate) fn refuse_waitaof(&self) {
        self.waitaof
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Remembers that the server refused `SET … IFEQ`.
    pub(crate) fn refuse_set_ifeq(&self) {
        self.set_ifeq
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) connector: Arc<dyn Connector>,
    pub(crate) redis: RedisConnectionInfo,
}

/// A connection in use, cheap to clone (redis-rs multiplexes the clones).
#[derive(Clone)]
pub(crate) struct Live {
    pub(crate) conn: MultiplexedConnection,
    pub(crate) generation: u64,
    pub(crate) dialect: Dialect,
    /// Native commands this connection's server refused.
    pub(crate) refusals: Arc<Refusals>,
}

impl Live {
    /// The dialect to encode the next command in: what the server
    /// announced, less the native commands it has refused since.
    pub(crate) fn dialect(&self) -> Dialect {
        let mut dialect = self.dialect;
        if self
            .refusals
            .set_ifeq
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            dialect.set_ifeq = false;
        }
        if self
            .refusals
            .del_ifeq
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            dialect.delifeq = false;
            dialect.delex_ifeq = false;
        }
        if self
            .refusals
            .waitaof
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            dialect.lacks_waitaof = true;
        }
        dialect
    }
}

/// A freshly opened connection and redis-rs's task that drives its socket.
pub(crate) struct Opened {
    pub(crate) live: Live,
    pub(crate) task: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
}

/// The shared slot of one node: what callers send on.
pub(crate) struct NodeSlot {
    live: Mutex<Option<Live>>,
    /// Group commit of the hot path's script operations.
    /// Releases on this node need not announce themselves (a Redlock
    /// node: its waiters never subscribe).
    quiet_release: bool,
}

impl NodeSlot {
    pub(crate) fn new() -> Self {
        Self::with_quiet_release(false)
    }

    /// A slot whose connections send releases that publish nothing.
    pub(crate) fn with_quiet_release(quiet_release: bool) -> Self {
        Self {
            live: Mutex::new(None),
            quiet_release,
        }
    }

    /// The connection to send on now, if one is open.
    pub(crate) fn live(&self) -> Option<Live> {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Makes `live` the connection callers use.
    pub(crate) fn install(&self, mut live: Live) {
        live.dialect.quiet_release = self.quiet_release;
        *self.live.lock().unwrap_or_else(PoisonError::into_inner) = Some(live);
    }

    /// Drops the connection if it is still `generation` (a newer one is
    /// left alone). Returns true if it was dropped.
    pub(crate) fn break_generation(&self, generation: u64) -> bool {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        if live.as_ref().is_some_and(|l| l.generation == generation) {
            *live = None;
            true
        } else {
            false
        }
    }

    /// The generation in use, if a connection is open.
    pub(crate) fn generation(&self) -> Option<u64> {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|live| live.generation)
    }
}

/// A node a locker's check reaches, and how to name it.
#[derive(Clone)]
pub(crate) struct CheckTarget {
    /// `host:port`, or `node N` for a locker built from connectors.
    pub(crate) name: String,
    pub(crate) endpoint: Endpoint,
    /// Sentinel mode: where this target's own connector found the primary
    /// (its own, so that the check never moves what the driver follows).
    pub(crate) resolved: Option<Current>,
}

/// Opens one connection: connect, handshake and `INFO server` (to pick
/// the dialect), all under `timeout` (redis-rs's response timeout does not
/// cover the handshake). An attempt not open after
/// [`ATTEMPT_DELAY`](super::attempts::ATTEMPT_DELAY) gets a fresh one
/// beside it, and the first to open wins (see [`super::attempts`]).
pub(crate) async fn open(
    endpoint: Endpoint,
    timeout: Duration,
    generation: u64,
) -> Result<Opened, ConnectError> {
    let attempts = staggered(ATTEMPT_DELAY, MAX_ATTEMPTS, || {
        open_once(&endpoint, generation)
    });
    tokio::time::timeout(timeout, attempts)
        .await
        .map_err(|_| ConnectError::Timeout(timeout))?
}

/// One attempt of [`open`], with no timeout of its own.
async fn open_once(endpoint: &Endpoint, generation: u64) -> Result<Opened, ConnectError> {
    let stream = endpoint.connector.connect().await?;
    // Commands are bounded by the lock machine's command timeout, so
    // redis-rs's 500 ms default must not cut in first.
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    let (mut conn, task) = MultiplexedConnection::new_with_config(&endpoint.redis, stream, config)
        .await
        .map_err(ConnectError::Handshake)?;
    let mut task: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> = Box::pin(task);
    // One round trip reads the version (to pick the dialect) and loads
    // the lock script, so that the first commands need no NOSCRIPT
    // detour. The connection task must run for them to be answered:
    // poll it alongside (it only ends when the socket closes).
    let mut greet = redis::pipe();
    greet
        .cmd("INFO")
        .arg("server")
        .cmd("SCRIPT")
        .arg("LOAD")
        .arg(crate::scripts::LOCK.source);
    let greeting = conn.send_packed_commands(&greet, 0, 2);
    let greeting = {
        let mut greeting = std::pin::pin!(greeting);
        std::future::poll_fn(|cx| {
            if let std::task::Poll::Ready(result) = greeting.as_mut().poll(cx) {
                return std::task::Poll::Ready(Some(result));
            }
            if task.as_mut().poll(cx).is_ready() {
                return std::task::Poll::Ready(None);
            }
            std::task::Poll::Pending
        })
        .await
    };
    let dialect = match greeting {
        // `INFO` renamed or refused (some managed services) gives no
        // version: assume the oldest dialect, which works everywhere. A
        // refused `SCRIPT LOAD` only means a NOSCRIPT detour later.
        Some(Ok(replies)) => match replies.first() {
            Some(redis::Value::BulkString(info)) => {
                Dialect::from_info(&String::from_utf8_lossy(info))
            }
            Some(redis::Value::VerbatimString { text, .. }) => Dialect::from_info(text),
            _ => Dialect::default(),
        },
        Some(Err(error)) if error.code().is_some() => Dialect::default(),
        Some(Err(error)) => return Err(ConnectError::Handshake(error)),
        None => {
            return Err(ConnectError::Io(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "the connection closed during the handshake",
            )));
        }
    };
    Ok(Opened {
        live: Live {
            conn,
            generation,
            dialect,
            refusals: Arc::default(),
        },
        task,
    })
}
