//! Sentinel building blocks: finding the current primary of a monitored
//! master ([`SentinelResolver`]), and reading the `+switch-master` message
//! sentinels publish when a failover names a new one ([`SwitchMaster`]).
//!
//! Resolution follows the Redis "Sentinel client" guidelines: ask each
//! sentinel in turn with `SENTINEL GET-MASTER-ADDR-BY-NAME`, skipping those
//! that do not answer or do not know the name, then ask the candidate
//! `ROLE`: a sentinel's view can be stale, and only a node that says it is
//! a master may take the lock's writes. A sentinel still silent after
//! 250 ms gets the next one asked beside it (see `attempts::in_turn`), so
//! a hung sentinel does not hold up a connect while another answers.
//! Streams come from a [`Dialer`], so TCP, TLS or a simulated network all
//! work.

use std::{
    fmt, io,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use redis::{AsyncConnectionConfig, RedisConnectionInfo, Value, aio::MultiplexedConnection};

use super::{
    attempts::{ATTEMPT_DELAY, in_turn},
    connector::{ConnectFuture, Connector},
    dial::{Dialer, NodeAddress},
    reply::{integer, items, text},
};

/// The channel sentinels announce a new master on.
pub const SWITCH_MASTER_CHANNEL: &str = "+switch-master";

/// Why no primary could be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SentinelError {
    /// The resolver was given no sentinel.
    #[error("no sentinel addresses given")]
    NoSentinels,
    /// No sentinel answered.
    #[error("none of the {} sentinels answered{}", .tried.len(), first_failure(.tried))]
    NoSentinelReachable {
        /// Each sentinel and why it failed.
        tried: Vec<(NodeAddress, String)>,
    },
    /// Every sentinel that answered does not monitor this master name.
    #[error("no sentinel knows a master named {name:?}")]
    UnknownMaster {
        /// The master name asked for.
        name: String,
    },
    /// The node the sentinels named could not be reached.
    #[error("the master {address} of {name:?} named by the sentinels is unreachable: {reason}")]
    MasterUnreachable {
        /// The master name.
        name: String,
        /// The node named.
        address: NodeAddress,
        /// Why it failed.
        reason: String,
    },
    /// The node the sentinels named says it is not a master (their view is
    /// stale, or a failover is under way): wait briefly and resolve again.
    #[error("{address}, named as the master of {name:?}, says it is a {role}")]
    NotAMaster {
        /// The master name.
        name: String,
        /// The node named.
        address: NodeAddress,
        /// The role it reported (`slave`, `sentinel`, ...).
        role: String,
    },
}

/// A primary the sentinels named and that confirmed it is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The primary's address.
    pub master: NodeAddress,
    /// The index, in the resolver's list, of the sentinel that named it.
    /// The guidelines suggest asking that one first next time.
    pub answered_by: usize,
}

/// Finds the current primary of `master_name` through a list of sentinels.
#[derive(Clone)]
pub struct SentinelResolver {
    sentinels: Vec<NodeAddress>,
    master_name: String,
    sentinel_settings: RedisConnectionInfo,
    master_settings: RedisConnectionInfo,
    timeout: Duration,
}

impl fmt::Debug for SentinelResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelResolver")
            .field("sentinels", &self.sentinels)
            .field("master_name", &self.master_name)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl SentinelResolver {
    /// Resolves `master_name` through `sentinels`, asked in order, with no
    /// credentials and 1 s per node.
    pub fn new(sentinels: Vec<NodeAddress>, master_name: impl Into<String>) -> Self {
        Self {
            sentinels,
            master_name: master_name.into(),
            sentinel_settings: RedisConnectionInfo::default(),
            master_settings: RedisConnectionInfo::default(),
            timeout: Duration::from_secs(1),
        }
    }

    /// Credentials and protocol for the sentinels (they often differ from
    /// the data nodes').
    #[must_use]
    pub fn sentinel_settings(mut self, settings: RedisConnectionInfo) -> Self {
        self.sentinel_settings = settings;
        self
    }

    /// Credentials and protocol for the `ROLE` check on the candidate.
    #[must_use]
    pub fn master_settings(mut self, settings: RedisConnectionInfo) -> Self {
        self.master_settings = settings;
        self
    }

    /// Bounds each node's connect, handshake and reply (default 1 s).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The sentinels, in the order they are asked.
    pub fn sentinels(&self) -> &[NodeAddress] {
        &self.sentinels
    }

    /// The credentials and protocol used with the sentinels.
    pub(crate) fn sentinel_info(&self) -> &RedisConnectionInfo {
        &self.sentinel_settings
    }

    /// The master name.
    pub fn master_name(&self) -> &str {
        &self.master_name
    }

    /// Asks the sentinels in order for the master's address and returns the
    /// first candidate whose `ROLE` says master.
    ///
    /// A sentinel that fails is followed by the next at once; one that has
    /// not answered (with its candidate's `ROLE`) within 250 ms gets the
    /// next asked beside it, so a silent sentinel costs that delay, not
    /// the timeout, while another names the primary.
    ///
    /// When none does, the error is the most telling one met: a candidate
    /// that is not a master, then one that is unreachable, then a name no
    /// sentinel knows, then no sentinel answering.
    pub async fn resolve(&self, dialer: &dyn Dialer) -> Result<Resolved, SentinelError> {
        if self.sentinels.is_empty() {
            return Err(SentinelError::NoSentinels);
        }
        let failures = match in_turn(ATTEMPT_DELAY, self.sentinels.len(), |index| {
            self.ask(dialer, index)
        })
        .await
        {
            Ok(resolved) => return Ok(resolved),
            Err(failures) => failures,
        };
        let mut unreachable = Vec::new();
        let mut unknown = false;
        let mut candidate_error: Option<SentinelError> = None;
        // In the sentinels' order, whichever answered first.
        for failure in failures {
            match failure {
                Asked::Unreachable(sentinel, reason) => unreachable.push((sentinel, reason)),
                Asked::Unknown => unknown = true,
                Asked::Candidate(error) => {
                    // Keep the first candidate's error, unless a later one
                    // is more telling: a node that answered beats one that
                    // did not.
                    let keep = matches!(
                        (&candidate_error, &error),
                        (None, _)
                            | (
                                Some(SentinelError::MasterUnreachable { .. }),
                                SentinelError::NotAMaster { .. }
                            )
                    );
                    if keep {
                        candidate_error = Some(error);
                    }
                }
            }
        }
        Err(match (candidate_error, unknown) {
            (Some(error), _) => error,
            (None, true) => SentinelError::UnknownMaster {
                name: self.master_name.clone(),
            },
            (None, false) => SentinelError::NoSentinelReachable { tried: unreachable },
        })
    }

    /// Asks sentinel `index` for the master's address, then the candidate
    /// for its `ROLE`.
    async fn ask(&self, dialer: &dyn Dialer, index: usize) -> Result<Resolved, Asked> {
        let sentinel = &self.sentinels[index];
        let name = &self.master_name;
        let mut ask = redis::cmd("SENTINEL");
        ask.arg("GET-MASTER-ADDR-BY-NAME").arg(name);
        let reply = query(
            dialer,
            sentinel,
            &self.sentinel_settings,
            &ask,
            self.timeout,
        )
        .await;
        let address = match reply.and_then(|reply| master_address(&reply)) {
            Err(reason) => return Err(Asked::Unreachable(sentinel.clone(), reason)),
            Ok(None) => return Err(Asked::Unknown),
            Ok(Some(address)) => address,
        };
        let role = query(
            dialer,
            &address,
            &self.master_settings,
            &redis::cmd("ROLE"),
            self.timeout,
        )
        .await;
        Err(Asked::Candidate(match role.map(|role| role_name(&role)) {
            Ok(Some(role)) if role == "master" => {
                return Ok(Resolved {
                    master: address,
                    answered_by: index,
                });
            }
            Ok(role) => SentinelError::NotAMaster {
                name: name.clone(),
                address,
                role: role.unwrap_or_else(|| "node with an unreadable ROLE".into()),
            },
            Err(reason) => SentinelError::MasterUnreachable {
                name: name.clone(),
                address,
                reason,
            },
        }))
    }
}

/// Why asking one sentinel named no master.
enum Asked {
    /// The sentinel did not answer, or answered something unreadable.
    Unreachable(NodeAddress, String),
    /// The sentinel does not know the master name.
    Unknown,
    /// The candidate it named is not a master, or could not be reached.
    Candidate(SentinelError),
}

/// `; first: <address>: <reason>`, or nothing for an empty list.
fn first_failure(tried: &[(NodeAddress, String)]) -> String {
    tried
        .first()
        .map(|(address, reason)| format!("; first: {address}: {reason}"))
        .unwrap_or_default()
}

/// Runs one command on a fresh connection to `address` and closes it.
async fn query(
    dialer: &dyn Dialer,
    address: &NodeAddress,
    settings: &RedisConnectionInfo,
    command: &redis::Cmd,
    timeout: Duration,
) -> Result<Value, String> {
    let work = async {
        let stream = dialer
            .dial(&address.host, address.port)
            .await
            .map_err(|error| error.to_string())?;
        let config = AsyncConnectionConfig::new().set_response_timeout(None);
        let (mut conn, task) = MultiplexedConnection::new_with_config(settings, stream, config)
            .await
            .map_err(|error| error.to_string())?;
        // redis-rs's connection task runs here, beside the command, rather
        // than spawned: nothing outlives this call.
        let task = std::pin::pin!(task);
        // Biased: a simulator replays only if no branch is picked at random.
        tokio::select! {
            biased;
            // An error reply comes back as a value: make it the error it is.
            reply = conn.send_packed_command(command) => reply
                .and_then(Value::extract_error)
                .map_err(|error| error.to_string()),
            () = task => Err(io::Error::from(io::ErrorKind::ConnectionReset).to_string()),
        }
    };
    tokio::time::timeout(timeout, work)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {timeout:?}")))
}

/// Reads `GET-MASTER-ADDR-BY-NAME`'s reply: `[host, port]`, or nil for an
/// unknown name.
pub(crate) fn master_address(reply: &Value) -> Result<Option<NodeAddress>, String> {
    if matches!(reply, Value::Nil) {
        return Ok(None);
    }
    match items(reply) {
        Some([host, port]) => {
            let host = text(host).ok_or("a host that is not text")?;
            let port = integer(port)
                .and_then(|port| u16::try_from(port).ok())
                .ok_or("a port that is not a port number")?;
            Ok(Some(NodeAddress::new(host, port)))
        }
        // RESP3 servers may send nil as an empty array.
        Some([]) => Ok(None),
        _ => Err(format!(
            "unexpected GET-MASTER-ADDR-BY-NAME reply {reply:?}"
        )),
    }
}

/// The first element of a `ROLE` reply: `master`, `slave` or `sentinel`.
pub(crate) fn role_name(reply: &Value) -> Option<String> {
    items(reply)?.first().and_then(text).map(str::to_owned)
}

/// A `+switch-master` announcement: a failover made `to` the master of
/// `master_name` in place of `from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchMaster {
    /// The master name.
    pub master_name: String,
    /// The old master.
    pub from: NodeAddress,
    /// The new master.
    pub to: NodeAddress,
}

impl SwitchMaster {
    /// Parses the message body `<name> <old ip> <old port> <new ip> <new
    /// port>`; `None` if it has another shape.
    pub fn parse(payload: &str) -> Option<Self> {
        let words: Vec<&str> = payload.split_ascii_whitespace().collect();
        let [name, old_host, old_port, new_host, new_port] = words.as_slice() else {
            return None;
        };
        Some(Self {
            master_name: (*name).to_owned(),
            from: NodeAddress::new(*old_host, old_port.parse().ok()?),
            to: NodeAddress::new(*new_host, new_port.parse().ok()?),
        })
    }

    /// Reads a pub/sub message: `None` unless it came on
    /// [`SWITCH_MASTER_CHANNEL`] with a well-formed body.
    pub fn from_message(message: &redis::Msg) -> Option<Self> {
        if message.get_channel_name() != SWITCH_MASTER_CHANNEL {
            return None;
        }
        Self::parse(&message.get_payload::<String>().ok()?)
    }
}

/// Where the locker's connection points now, shared by the connector
/// (which sets it) and the watch (which compares announcements with it).
pub(crate) type Current = Arc<Mutex<Option<NodeAddress>>>;

/// Opens streams to whatever node the sentinels name as the primary.
pub(crate) struct SentinelConnector {
    pub(crate) resolver: SentinelResolver,
    pub(crate) dialer: Arc<dyn Dialer>,
    pub(crate) current: Current,
}

impl Connector for SentinelConnector {
    fn connect(&self) -> ConnectFuture<'_> {
        Box::pin(async move {
            let resolved = self
                .resolver
                .resolve(self.dialer.as_ref())
                .await
                // Carried inside the io::Error; `ConnectError` takes it back out.
                .map_err(io::Error::other)?;
            let master = resolved.master;
            let stream = self.dialer.dial(&master.host, master.port).await?;
            tracing::debug!(%master, "connected to the primary the sentinels named");
            *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(master);
            Ok(stream)
        })
    }
}

/// Takes a [`SentinelError`] back out of the `io::Error` a connector had
/// to wrap it in.
pub(crate) fn take_sentinel_error(error: io::Error) -> Result<SentinelError, io::Error> {
    if !error
        .get_ref()
        .is_some_and(|inner| inner.is::<SentinelError>())
    {
        return Err(error);
    }
    match error
        .into_inner()
        .map(|inner| inner.downcast::<SentinelError>())
    {
        Some(Ok(sentinel)) => Ok(*sentinel),
        // Checked above; a payload of another type goes back as it was.
        Some(Err(other)) => Err(io::Error::other(other)),
        None => Err(io::Error::other("sentinel error")),
    }
}

#[cfg(test)]
mod tests;
