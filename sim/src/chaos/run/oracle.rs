//! The oracle of a real run: the authoritative view of the lock key,
//! sampled over direct connections.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use super::{
    node_ops::{Scripts, lock_key},
    recorder::Recorder,
};
use crate::chaos::{deploy::admin, wire::mono_ns};
use crate::{
    config::Topology,
    history::{Op, Phase, Process},
};

/// The longest round trip of an oracle sample that is kept: a slower
/// answer says too little about when the key looked like that.
const ORACLE_RTT: Duration = Duration::from_millis(5);

/// How long the oracle goes without a sample it keeps before it records
/// itself blind (`Op::OracleBlind`): the rounds come every 2 ms, so this
/// is several rounds lost in a row, not one slow answer.
const BLIND_AFTER: Duration = Duration::from_millis(20);

/// Samples the authoritative view of the lock key every 2 ms, over direct
/// connections (no proxy) to `nodes` (each a node's client port and the
/// port it announces): single, primary-replica and Sentinel read the
/// node that answers `role:master` (while a deposed primary says `master`
/// too, the one last seen promoted from replica), Redlock a majority (a
/// node that does not answer counted with the key it had, until its ttl),
/// a cluster the node that serves the key's slot (while the cluster is
/// down and every node answers `CLUSTERDOWN`, the key it last read, until
/// its ttl: nothing can write it meanwhile; the same while no node is a
/// primary, each answering as a replica or refusing connections because
/// its process is gone, as between a primary's death and its successor's
/// promotion; while a slot migration moves the key, the node an `ASK`
/// names, read with `ASKING`). While the authority runs a script and
/// answers `BUSY`, the key it had holds until its ttl ([`BusySpan`]: seen
/// once the first sample after agrees). Each node has its own
/// [`reader`], whose readings count while [`FRESH`] and only if answered
/// within [`ORACLE_RTT`]; a sample is stamped with the oldest reading it
/// rests on. A slow or stopped node blinds the oracle only where its own
/// answer is the authority's. When no sample is kept for [`BLIND_AFTER`],
/// the history says the oracle was blind from its last kept sample until
/// the next (the validity check's coverage of the hold time); not while
/// the authority last seen refuses connections and no successor shows
/// (its process is gone: no node serves the key as it did, which the
/// oracle knows).
pub(super) async fn oracle(
    topology: Topology,
    nodes: Vec<(u16, u16)>,
    scripts: Scripts,
    recorder: Recorder,
) {
    let key = lock_key();
    let redlock = matches!(topology, Topology::Redlock { .. });
    // One reader per node, so that a node that is slow or stopped blinds
    // the oracle to itself alone; dropped with this future.
    let slots: Vec<Slot> = nodes.iter().map(|_| Slot::default()).collect();
    let nodes: Arc<[(u16, u16)]> = nodes.into();
    let mut readers = tokio::task::JoinSet::new();
    for (index, slot) in slots.iter().enumerate() {
        readers.spawn(reader(
            index,
            Arc::clone(&nodes),
            key.clone(),
            Arc::clone(slot),
        ));
    }
    let mut last: Option<(usize, Option<String>)> = None;
    // Primary-replica, Sentinel and Cluster: the node last seen turning
    // from replica to master is the authority while a deposed primary
    // still says master too (the stale window; in a cluster, an old
    // primary cut off the bus still serves the slot). A cluster node that
    // answers `MOVED` does not serve the key: it counts as a replica, so
    // that a shard's replica taking over, or a node the slot migrated to,
    // is seen turning.
    let follows_promotions = matches!(
        topology,
        Topology::PrimaryReplica { .. } | Topology::Sentinel { .. } | Topology::Cluster { .. }
    );
    let mut was_master: Vec<Option<bool>> = vec![None; slots.len()];
    let mut promoted: Option<usize> = None;
    // Redlock: each node's key as last read, with the instant (the shared
    // monotonic clock) its ttl ends. A node that does not answer (down,
    // or stopped) still counts with it, as the simulator's oracle counts
    // a down node with the keys it had: it grants nobody else meanwhile,
    // and a restart that empties it shows at its first answer.
    let mut remembered: Vec<Option<(String, u64)>> = vec![None; slots.len()];
    // The key as last read on the authority (in a cluster, the node
    // serving its slot), and when its ttl ends (the shared monotonic
    // clock, ns).
    let mut last_read: Option<(usize, Option<(String, u64)>)> = None;
    let mut sight = Sight::new(mono_ns());
    // A span in which the authority answers `BUSY`, until the first sample
    // after it settles what the oracle saw (dropped unsettled, it leaves
    // the oracle blind from its start).
    let mut held = Held {
        span: None,
        recorder: recorder.clone(),
    };
    loop {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let now = mono_ns();
        if held.span.is_none() {
            sight.check(now, &recorder);
        }
        let Readings {
            mut views,
            sent,
            cluster_down,
            none_writable,
            down,
            busy,
        } = readings(&slots, now, redlock, &mut was_master, &mut promoted);
        let sample = if redlock {
            let (owner, pttl) = redlock_sample(&mut views, &mut remembered, sent);
            Some((0, owner, pttl))
        } else {
            primary_sample(&views, follows_promotions.then_some(promoted).flatten())
        };
        // The authority last read answers `BUSY`, and no node serves the
        // key in its place: nothing can write the key while the script
        // runs, so its state now is the one the script started with.
        let authority_busy = last_read
            .as_ref()
            .and_then(|(node, _)| busy[*node])
            .filter(|_| sample.is_none());
        let round = Round {
            now,
            sent,
            busy_at: authority_busy,
            outstanding: sample.is_none()
                && held
                    .span
                    .as_ref()
                    .is_some_and(|span| scripts.outstanding(nodes[span.read.0].0)),
            sample: sample
                .as_ref()
                .map(|(node, owner, _)| (*node, owner.as_deref())),
        };
        if held.round(&round, last_read.as_ref(), &mut sight, &mut last) {
            continue;
        }
        let sample = match (sample, &last_read) {
            (Some(read), _) => {
                last_read = Some(remember(&read, sent));
                Some(read)
            }
            (None, Some(read)) if cluster_down || none_writable => Some(recall(read, sent)),
            (None, _) => None,
        };
        let Some((primary, owner, pttl)) = sample else {
            // The authority last seen is gone and no successor shows yet
            // (a primary's death, until its replica's promotion is read):
            // no node serves the key as it did, and the oracle knows it.
            // Not blind; nothing new to record.
            if !redlock && last.as_ref().is_some_and(|(node, _)| down[*node]) {
                sight.saw(now, &recorder);
            }
            continue;
        };
        sight.saw(sent, &recorder);
        record_change(&mut last, sent, (primary, owner, pttl), &recorder);
    }
}

/// One round of readings, every node's as of its start.
struct Readings {
    /// Each node's view of the key (`None`: no answer, or not a primary).
    views: Vec<View>,
    /// When the oldest reading the round rests on was sent.
    sent: u64,
    /// Whether a node answered `CLUSTERDOWN`.
    cluster_down: bool,
    /// Whether every node is known to take no write this round: each
    /// answered as a replica or refuses connections (its process is gone).
    /// Then nothing can change the key, and the one last read holds until
    /// its ttl, as while a cluster is down.
    none_writable: bool,
    /// The nodes whose process is gone (they refuse connections).
    down: Vec<bool>,
    /// The nodes busy running a script: when each sent the latest reading
    /// it answered `BUSY` to, if within [`BUSY_FRESH`].
    busy: Vec<Option<u64>>,
}

/// The readings `slots` hold at `now` (the shared monotonic clock, ns), a
/// reading counting while [`FRESH`]; each node's role followed in
/// `was_master`, and `promoted` the node last seen turning from replica
/// to master. Outside Redlock only a primary's view counts.
fn readings(
    slots: &[Slot],
    now: u64,
    redlock: bool,
    was_master: &mut [Option<bool>],
    promoted: &mut Option<usize>,
) -> Readings {
    let mut cluster_down = false;
    let mut none_writable = !redlock;
    let mut down = vec![false; slots.len()];
    let mut busy: Vec<Option<u64>> = vec![None; slots.len()];
    // Keys read on the node an `ASK` named: (the node that answered
    // `ASK`, the view read there with `ASKING`).
    let mut asked = Vec::new();
    // Stamped with the oldest reading it rests on.
    let mut sent = now;
    let mut views: Vec<Option<(Option<String>, i64)>> = Vec::with_capacity(slots.len());
    for (index, slot) in slots.iter().enumerate() {
        let latest = lock(slot).clone();
        let age = |r: &Reading| Duration::from_nanos(now.saturating_sub(r.sent));
        busy[index] = latest
            .as_ref()
            .filter(|r| matches!(r.read, Read::Busy) && age(r) <= BUSY_FRESH)
            .map(|r| r.sent);
        let reading = latest.filter(|r| age(r) <= FRESH);
        let Some(reading) = reading else {
            none_writable = false;
            views.push(None);
            continue;
        };
        none_writable &= matches!(reading.read, Read::Down | Read::Key { master: false, .. });
        down[index] = matches!(reading.read, Read::Down);
        sent = sent.min(reading.sent);
        let view = match reading.read {
            Read::Key {
                owner,
                pttl,
                master,
            } => {
                if master && was_master[index] == Some(false) {
                    *promoted = Some(index);
                }
                was_master[index] = Some(master);
                (master || redlock).then_some((owner, pttl))
            }
            Read::Moved => {
                was_master[index] = Some(false);
                None
            }
            Read::ClusterDown => {
                cluster_down = true;
                None
            }
            Read::Asked { node, owner, pttl } => {
                asked.push((index, node, (owner, pttl)));
                None
            }
            Read::Busy | Read::Down | Read::Ask(_) | Read::Nothing => None,
        };
        views.push(view);
    }
    for (source, node, view) in asked {
        ask_view(&mut views, source, node, view);
    }
    Readings {
        views,
        sent,
        cluster_down,
        none_writable,
        down,
        busy,
    }
}

/// Records at `at` (the shared monotonic clock, ns) the authority's view
/// `sample` (node, owner, `PTTL`) if its node or owner differs from the
/// `last` recorded, which it then becomes.
fn record_change(
    last: &mut Option<(usize, Option<String>)>,
    at: u64,
    sample: (usize, Option<String>, Option<i64>),
    recorder: &Recorder,
) {
    let (primary, owner, pttl) = sample;
    let current = Some((primary, owner.clone()));
    if current != *last {
        *last = current;
        recorder.record_at(
            at,
            Process::Controller,
            Op::Oracle {
                primary,
                owner,
                pttl_ms: pttl.and_then(|p| u64::try_from(p).ok()),
            },
        );
    }
}

/// One node's latest reading that came within [`ORACLE_RTT`], as its
/// reader left it.
type Slot = Arc<Mutex<Option<Reading>>>;

/// A reading: when it was sent (the shared monotonic clock, ns), and what
/// the node said.
#[derive(Clone)]
struct Reading {
    sent: u64,
    read: Read,
}

/// How old a reading may be and still count: a node whose last kept
/// reading is older does not answer, this round.
const FRESH: Duration = Duration::from_millis(10);

/// How old a node's latest `BUSY` may be and still say it runs a script:
/// a busy server answers between steps of the script, tens of ms apart
/// on a loaded machine, and a reader waits up to 50 ms for an answer.
const BUSY_FRESH: Duration = Duration::from_millis(60);

/// Locks `slot`; a reader that panicked left its last reading, still good.
fn lock(slot: &Slot) -> std::sync::MutexGuard<'_, Option<Reading>> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reads node `index` of `nodes` (each its client port and the port it
/// announces, which an `ASK` names) every 2 ms and leaves each reading
/// that came within [`ORACLE_RTT`] (a `BUSY` whenever it came) in `slot`;
/// an `ASK` is followed to the
/// node it names, within the same reading. A node that cannot be dialled
/// is dialled again every 20 ms, each dial bounded, so a stopped node
/// costs its reader alone.
async fn reader(index: usize, nodes: Arc<[(u16, u16)]>, key: String, slot: Slot) {
    let port = nodes[index].0;
    let mut conn = None;
    // A connection to the node an `ASK` last named, and its index.
    let mut asked_conn = None;
    loop {
        tokio::time::sleep(Duration::from_millis(2)).await;
        if conn.is_none() {
            let sent = mono_ns();
            if let Ok(Ok(live)) =
                tokio::time::timeout(Duration::from_millis(100), admin(port)).await
            {
                conn = Some(live);
            } else {
                // Refused at once: nothing listens there. A reading, and
                // no backoff (a refusal costs nothing).
                if refused(port).await {
                    *lock(&slot) = Some(Reading {
                        sent,
                        read: Read::Down,
                    });
                } else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                continue;
            }
        }
        let sent = mono_ns();
        let mut read = read_node(&mut conn, &key).await;
        if let Read::Ask(at) = read {
            read = read_asked(&nodes, at, &mut asked_conn, &key).await;
        }
        // A server running a script answers `BUSY` only between steps of
        // it, 5 ms apart or more (Redis 7.0 answers half of them later
        // than ORACLE_RTT): such an answer is kept however slow, since it
        // says the script ran at some instant after `sent`, which is all
        // a busy span rests on.
        if Duration::from_nanos(mono_ns().saturating_sub(sent)) <= ORACLE_RTT
            || matches!(read, Read::Busy)
        {
            *lock(&slot) = Some(Reading { sent, read });
        }
    }
}

/// Whether a connection to `port` is refused (nothing listens: the
/// node's process is gone), as opposed to one that does not answer.
async fn refused(port: u16) -> bool {
    let dial = tokio::net::TcpStream::connect((std::net::Ipv4Addr::LOCALHOST, port));
    matches!(
        tokio::time::timeout(Duration::from_millis(20), dial).await,
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

/// What one node said of the lock key in one round.
#[derive(Clone)]
enum Read {
    /// The key's owner and `PTTL`, and whether the node says it is a
    /// primary (`ROLE`).
    Key {
        owner: Option<String>,
        pttl: i64,
        master: bool,
    },
    /// `MOVED`: a cluster node that does not serve the key's slot.
    Moved,
    /// `CLUSTERDOWN`.
    ClusterDown,
    /// `BUSY`: the node runs a script, and nothing else, until it ends.
    Busy,
    /// `ASK`, naming the announced port of the node a slot migration moved
    /// the key to (the reader follows it to an [`Read::Asked`]).
    Ask(u16),
    /// What node `node` said with `ASKING` first, after the node read
    /// answered `ASK` (the slot migrates to it, key by key): the key's
    /// owner and `PTTL` there.
    Asked {
        node: usize,
        owner: Option<String>,
        pttl: i64,
    },
    /// The node refuses connections: its process is gone, so it serves
    /// nothing and accepts no write.
    Down,
    /// No answer, or another error.
    Nothing,
}

/// Reads `key`, its `PTTL` and the node's `ROLE` over `conn` (nothing
/// without one); a failure that is not an error reply drops the
/// connection, to be dialled again next round.
async fn read_node(conn: &mut Option<redis::aio::MultiplexedConnection>, key: &str) -> Read {
    let Some(live) = conn.as_mut() else {
        return Read::Nothing;
    };
    let pipe = redis::pipe()
        .cmd("GET")
        .arg(key)
        .cmd("PTTL")
        .arg(key)
        .cmd("ROLE")
        .clone();
    let read = tokio::time::timeout(
        Duration::from_millis(50),
        pipe.query_async::<(Option<String>, i64, redis::Value)>(live),
    )
    .await;
    match read {
        Ok(Ok((owner, pttl, role))) => Read::Key {
            owner,
            pttl,
            master: says_master(&role),
        },
        Ok(Err(error)) => match error_reply(error) {
            Some((code, detail)) => match code.as_str() {
                "MOVED" => Read::Moved,
                "CLUSTERDOWN" => Read::ClusterDown,
                "BUSY" => Read::Busy,
                "ASK" => detail
                    .as_deref()
                    .and_then(asked_port)
                    .map_or(Read::Nothing, Read::Ask),
                _ => Read::Nothing,
            },
            // An error reply (`MOVED`, `CLUSTERDOWN`, `BUSY`, `ASK`)
            // leaves the connection usable; anything else does not.
            None => {
                *conn = None;
                Read::Nothing
            }
        },
        Err(_) => Read::Nothing,
    }
}

/// The code and detail of the first error reply in `error` (a failed
/// pipeline's; `None` if the server sent none: the connection failed).
/// Read from the reply itself: a pipeline's error knows the code only of
/// the kinds the client names (`MOVED`, `ASK`, `CLUSTERDOWN`), not
/// `BUSY`, and no detail at all (the address an `ASK` names).
fn error_reply(error: redis::RedisError) -> Option<(String, Option<String>)> {
    let replies = error.into_server_errors()?;
    let (_, reply) = replies.first()?;
    Some((reply.code().to_owned(), reply.details().map(str::to_owned)))
}

/// The port an `ASK` reply's detail (`slot host:port`) names.
fn asked_port(detail: &str) -> Option<u16> {
    detail
        .split_whitespace()
        .nth(1)?
        .rsplit(':')
        .next()?
        .parse()
        .ok()
}

/// Whether `role` (a `ROLE` reply) says primary.
fn says_master(role: &redis::Value) -> bool {
    matches!(role, redis::Value::Array(items)
        if matches!(items.first(), Some(redis::Value::BulkString(b)) if b == b"master"))
}

/// Reads `key`, its `PTTL` and `ROLE` with `ASKING` first on the node of
/// `nodes` (client port, announced port) that announces port `at` (an
/// `ASK` named it), over `conn` (dialled when it leads elsewhere): the
/// key as the node importing its slot holds it. A node that is not a
/// primary, or an answer that is not one, reads as nothing.
async fn read_asked(
    nodes: &[(u16, u16)],
    at: u16,
    conn: &mut Option<(usize, redis::aio::MultiplexedConnection)>,
    key: &str,
) -> Read {
    let Some(node) = nodes.iter().position(|&(_, announced)| announced == at) else {
        return Read::Nothing;
    };
    if conn.as_ref().is_none_or(|(dialled, _)| *dialled != node) {
        let dial = tokio::time::timeout(Duration::from_millis(50), admin(nodes[node].0)).await;
        *conn = dial.ok().and_then(Result::ok).map(|live| (node, live));
    }
    let Some((_, live)) = conn.as_mut() else {
        return Read::Nothing;
    };
    // `ASKING` lets the next command alone through.
    let pipe = redis::pipe()
        .cmd("ASKING")
        .ignore()
        .cmd("GET")
        .arg(key)
        .cmd("ASKING")
        .ignore()
        .cmd("PTTL")
        .arg(key)
        .cmd("ROLE")
        .clone();
    let read = tokio::time::timeout(
        Duration::from_millis(50),
        pipe.query_async::<(Option<String>, i64, redis::Value)>(live),
    )
    .await;
    match read {
        Ok(Ok((owner, pttl, role))) if says_master(&role) => Read::Asked { node, owner, pttl },
        Ok(Err(error)) => {
            if error_reply(error).is_none() {
                *conn = None;
            }
            Read::Nothing
        }
        _ => Read::Nothing,
    }
}

/// Puts in `views` what node `node` said with `ASKING` (`view`), after
/// node `source` answered `ASK`: the key lives on `node` once migrated
/// (the authority is then `node`, as the simulator's is the migration's
/// target while it holds the key); a key on neither is nobody's on the
/// slot's owner, `source`.
fn ask_view(views: &mut [View], source: usize, node: usize, view: (Option<String>, i64)) {
    let authority = if view.0.is_some() { node } else { source };
    views[authority] = Some(view);
}

/// Whether the oracle sees: when it last kept a sample, and whether it has
/// recorded itself blind since.
struct Sight {
    last_kept: u64,
    blind: bool,
}

impl Sight {
    fn new(now: u64) -> Self {
        Self {
            last_kept: now,
            blind: false,
        }
    }

    /// At `now` (the shared monotonic clock, ns): past [`BLIND_AFTER`]
    /// without a kept sample, records the blind spell's start at the last
    /// kept one.
    fn check(&mut self, now: u64, recorder: &Recorder) {
        let since = Duration::from_nanos(now.saturating_sub(self.last_kept));
        if !self.blind && since > BLIND_AFTER {
            self.blind = true;
            recorder.record_at(
                self.last_kept,
                Process::Controller,
                Op::OracleBlind {
                    phase: Phase::Start,
                },
            );
        }
    }

    /// Records a blind spell from `from` (the shared monotonic clock, ns),
    /// unless one is under way.
    fn blind_since(&mut self, from: u64, recorder: &Recorder) {
        if !self.blind {
            self.blind = true;
            recorder.record_at(
                from,
                Process::Controller,
                Op::OracleBlind {
                    phase: Phase::Start,
                },
            );
        }
    }

    /// A sample sent at `sent` was kept: a blind spell ends there.
    fn saw(&mut self, sent: u64, recorder: &Recorder) {
        if self.blind {
            self.blind = false;
            recorder.record_at(
                sent,
                Process::Controller,
                Op::OracleBlind { phase: Phase::End },
            );
        }
        self.last_kept = sent;
    }
}

/// A span in which the authority answered `BUSY` (the shared monotonic
/// clock, ns; from its first `BUSY` to the controller's reply from the
/// script, [`Scripts`]): a script runs there, and the server takes no other command
/// until it ends, so nothing writes the key meanwhile, and a ttl that
/// passes ends the key at that instant (the server counts ttls on while
/// the script runs: the key is gone from the script's end on, and
/// answers `GET` nil and `PTTL` -2, as Redis 7.0 and 8.2 and Valkey 8.1
/// and 9.1 do). What the script began with is unknown, though: a write
/// between the last sample before it and its start shows only after it.
/// So the span counts as seen only once the first sample after it agrees
/// with the key as last read ([`BusySpan::settle`]).
struct BusySpan {
    /// The last sample kept before it.
    from: u64,
    /// The last round the authority answered `BUSY`.
    last: u64,
    /// The key as last read on the authority ([`remember`]).
    read: (usize, Option<(String, u64)>),
}

impl BusySpan {
    /// Whether the first sample after the span (`node`, `owner`, read at
    /// `sent`) is the key as last read, untouched until then (the same
    /// node and owner, or nobody's once its ttl ended): `Some` with the
    /// instant its ttl ended, if it did before `sent`, when it is; `None`
    /// when the key changed, before the script or after it (the oracle
    /// cannot tell which), so the span is blind.
    fn settle(&self, node: usize, owner: Option<&str>, sent: u64) -> Option<Option<u64>> {
        let (was_node, was_owner, _) = recall(&self.read, sent);
        if was_node != node || was_owner.as_deref() != owner {
            return None;
        }
        Some(match &self.read.1 {
            Some((_, ends)) if *ends <= sent => Some(*ends),
            _ => None,
        })
    }
}

/// The oracle's [`BusySpan`] under way, if any; dropped with the oracle
/// (the run's end) before the first sample after it settled it, it leaves
/// the oracle blind from its start.
struct Held {
    span: Option<BusySpan>,
    recorder: Recorder,
}

/// What one round of the oracle says of a busy span.
struct Round<'a> {
    /// When the round began (the shared monotonic clock, ns).
    now: u64,
    /// When the oldest reading it rests on was sent.
    sent: u64,
    /// When the authority last read sent the read it answered `BUSY` to,
    /// within [`BUSY_FRESH`], if no node serves the key in its place.
    busy_at: Option<u64>,
    /// Whether the round has no sample and the busy script the controller
    /// sent the span's node is not answered yet.
    outstanding: bool,
    /// The round's sample: node and owner.
    sample: Option<(usize, Option<&'a str>)>,
}

impl Held {
    /// Takes `round` as a busy span sees it, `last_read` the key as last
    /// read on the authority: whether the round ends here (it starts or
    /// holds a span, or waits for the sample that settles one). Else its
    /// sample goes on as any other, a span it settled closed: seen (the
    /// key's ttl, if it ended inside, recorded ended then, in `last`), or
    /// blind over it (in `sight`).
    fn round(
        &mut self,
        round: &Round<'_>,
        last_read: Option<&(usize, Option<(String, u64)>)>,
        sight: &mut Sight,
        last: &mut Option<(usize, Option<String>)>,
    ) -> bool {
        let Some(span) = self.span.as_mut() else {
            let (Some(busy_at), Some(read)) = (round.busy_at, last_read) else {
                return false;
            };
            // The oracle is not blind meanwhile if the span settles; a
            // blind spell before it ends where it starts.
            if sight.blind {
                sight.saw(busy_at, &self.recorder);
            }
            self.span = Some(BusySpan {
                from: sight.last_kept,
                last: busy_at,
                read: read.clone(),
            });
            return true;
        };
        // Still running: the node answers `BUSY`, or the script the
        // controller sent it is not answered yet (a busy node on a loaded
        // machine may leave the oracle's reads unanswered for longer than
        // a reader waits).
        let running = round
            .busy_at
            .or_else(|| round.outstanding.then_some(round.now));
        if let Some(at) = running {
            span.last = span.last.max(at);
            return true;
        }
        let Some((node, owner)) = round.sample else {
            if Duration::from_nanos(round.now.saturating_sub(span.last)) > BUSY_FRESH {
                sight.blind_since(span.from, &self.recorder);
                self.span = None;
            }
            return true;
        };
        match span.settle(node, owner, round.sent) {
            // The key as last read, untouched over the span: its ttl, if
            // it ended inside, ended it then (the server shows it gone
            // from the script's end on).
            Some(Some(at)) if last.as_ref().is_some_and(|(_, owner)| owner.is_some()) => {
                record_change(last, at, (span.read.0, None, None), &self.recorder);
            }
            Some(_) => {}
            None => sight.blind_since(span.from, &self.recorder),
        }
        self.span = None;
        false
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(span) = &self.span {
            self.recorder.record_at(
                span.from,
                Process::Controller,
                Op::OracleBlind {
                    phase: Phase::Start,
                },
            );
        }
    }
}

/// What a sample read (node, owner, `PTTL`) at `sent` (the shared monotonic
/// clock, ns) says of later instants: the node, and the owner with the
/// instant its ttl ends (a key without a ttl never ends).
fn remember(
    read: &(usize, Option<String>, Option<i64>),
    sent: u64,
) -> (usize, Option<(String, u64)>) {
    let (node, owner, pttl) = read;
    let owner = owner.clone().map(|owner| {
        let ends = match pttl {
            Some(ms) if *ms >= 0 => {
                sent.saturating_add(Duration::from_millis(ms.unsigned_abs()).as_nanos() as u64)
            }
            _ => u64::MAX,
        };
        (owner, ends)
    });
    (*node, owner)
}

/// The key at `sent` as [`remember`]ed: its owner until its ttl ends, then
/// nobody's.
fn recall(
    read: &(usize, Option<(String, u64)>),
    sent: u64,
) -> (usize, Option<String>, Option<i64>) {
    let (node, owner) = read;
    match owner {
        Some((owner, ends)) if *ends > sent => {
            let left = (*ends - sent) / 1_000_000;
            let pttl = if *ends == u64::MAX { -1 } else { left as i64 };
            (*node, Some(owner.clone()), Some(pttl))
        }
        _ => (*node, None, None),
    }
}

/// One node's view of the lock key: its owner (if any) and `PTTL`; `None`
/// when the node did not answer (or, outside Redlock, is not a primary).
type View = Option<(Option<String>, i64)>;

/// Redlock's authority from one round of `views` read at `sent` (the
/// shared monotonic clock, ns): the owner a majority of nodes hold, and
/// the quorum-th longest of their `PTTL`s. A node that did not answer
/// counts with the key it had at its last answer (`remembered`: owner and
/// when its ttl ends), until that ttl ends, as the simulator counts a down
/// node: it grants nobody else meanwhile, and a restart that emptied it
/// shows at its first answer, which replaces what is remembered.
fn redlock_sample(
    views: &mut [View],
    remembered: &mut [Option<(String, u64)>],
    sent: u64,
) -> (Option<String>, Option<i64>) {
    for (view, memory) in views.iter_mut().zip(remembered.iter_mut()) {
        match view {
            Some((owner, pttl)) => {
                *memory = owner.clone().filter(|_| *pttl > 0).map(|owner| {
                    let ttl = Duration::from_millis(pttl.unsigned_abs());
                    (owner, sent.saturating_add(ttl.as_nanos() as u64))
                });
            }
            None => {
                *view = memory.as_ref().and_then(|(owner, ends)| {
                    let left = ends.saturating_sub(sent) / 1_000_000;
                    (left > 0).then(|| (Some(owner.clone()), left as i64))
                });
            }
        }
    }
    let quorum = views.len() / 2 + 1;
    let mut counts: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (owner, pttl) in views.iter().flatten() {
        if let Some(owner) = owner {
            counts.entry(owner.clone()).or_default().push(*pttl);
        }
    }
    let found = counts.into_iter().find_map(|(owner, mut pttls)| {
        (pttls.len() >= quorum).then(|| {
            pttls.sort_unstable_by(|a, b| b.cmp(a));
            (owner, pttls.get(quorum - 1).copied())
        })
    });
    match found {
        Some((owner, pttl)) => (Some(owner), pttl),
        None => (None, None),
    }
}

/// The authority among the nodes that say they are primary (`views`, by
/// index): the only one, or, while a deposed primary in its stale window
/// says master too, the one last seen promoted from replica (`promoted`,
/// when the topology follows promotions), as the simulator's primary of
/// record is from the promotion on; before any promotion was seen such a
/// round is skipped rather than guessed.
fn primary_sample(
    views: &[View],
    promoted: Option<usize>,
) -> Option<(usize, Option<String>, Option<i64>)> {
    let masters: Vec<(usize, &(Option<String>, i64))> = views
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.as_ref().map(|v| (i, v)))
        .collect();
    match masters.as_slice() {
        [] => None,
        [(index, (owner, pttl))] => Some((*index, owner.clone(), Some(*pttl))),
        several => several
            .iter()
            .find(|(index, _)| Some(*index) == promoted)
            .map(|(index, (owner, pttl))| (*index, owner.clone(), Some(*pttl))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn holds(owner: &str, pttl: i64) -> View {
        Some((Some(owner.to_owned()), pttl))
    }

    fn empty() -> View {
        Some((None, -2))
    }

    #[test]
    fn a_down_redlock_node_counts_with_the_key_it_last_had_until_its_ttl() {
        let mut remembered = vec![None; 3];
        let mut round = |views: &[View], at_ms: u64| {
            redlock_sample(&mut views.to_vec(), &mut remembered, at_ms * MS)
        };
        // Nodes 0 and 2 hold a's key, node 1 is empty: a has a majority.
        let first = round(&[holds("a", 1000), empty(), holds("a", 300)], 0);
        assert_eq!(first, (Some("a".to_owned()), Some(300)));
        // Node 2 stops answering: it still counts with a's key, 200 ms left.
        let down = round(&[holds("a", 900), empty(), None], 100);
        assert_eq!(down, (Some("a".to_owned()), Some(200)));
        // Past the ttl it had, it counts for nobody.
        assert_eq!(round(&[holds("a", 600), empty(), None], 400), (None, None));
        // Back and empty (a restart without persistence): nobody's.
        let mut remembered = vec![None; 3];
        let mut round = |views: &[View], at_ms: u64| {
            redlock_sample(&mut views.to_vec(), &mut remembered, at_ms * MS)
        };
        round(&[holds("a", 1000), empty(), holds("a", 1000)], 0);
        assert_eq!(
            round(&[holds("a", 900), empty(), empty()], 100),
            (None, None)
        );
        assert_eq!(round(&[holds("a", 800), empty(), None], 200), (None, None));
    }

    #[test]
    fn while_a_cluster_is_down_the_key_last_read_stays_until_its_ttl() {
        let read = remember(&(0, Some("a".to_owned()), Some(300)), 1000 * MS);
        assert_eq!(
            recall(&read, 1100 * MS),
            (0, Some("a".to_owned()), Some(200))
        );
        assert_eq!(recall(&read, 1300 * MS), (0, None, None));
        let forever = remember(&(1, Some("b".to_owned()), Some(-1)), 0);
        assert_eq!(
            recall(&forever, 9000 * MS),
            (1, Some("b".to_owned()), Some(-1))
        );
        let empty = remember(&(2, None, Some(-2)), 0);
        assert_eq!(recall(&empty, 5 * MS), (2, None, None));
    }

    #[test]
    fn a_busy_span_is_seen_when_the_key_after_it_is_the_one_last_read() {
        let span = |read: (usize, Option<String>, Option<i64>)| BusySpan {
            from: 1000 * MS,
            last: 1500 * MS,
            read: remember(&read, 1000 * MS),
        };
        // a's key, 800 ms left: still a's after the script.
        let held = span((0, Some("a".to_owned()), Some(800)));
        assert_eq!(held.settle(0, Some("a"), 1600 * MS), Some(None));
        // Its ttl passed during the script: gone at the ttl's end, and
        // gone after.
        assert_eq!(held.settle(0, None, 1900 * MS), Some(Some(1800 * MS)));
        // Gone before its ttl, or someone else's: a write before the
        // script or after it, which the oracle cannot tell apart.
        assert_eq!(held.settle(0, None, 1600 * MS), None);
        assert_eq!(held.settle(0, Some("b"), 1900 * MS), None);
        // Another node serves the key after it: a failover meanwhile.
        assert_eq!(held.settle(1, Some("a"), 1600 * MS), None);
        // Nobody's before and after.
        let empty = span((0, None, Some(-2)));
        assert_eq!(empty.settle(0, None, 1600 * MS), Some(None));
        assert_eq!(empty.settle(0, Some("b"), 1600 * MS), None);
    }

    #[test]
    fn an_asked_key_is_the_migration_targets_and_a_missing_one_the_sources() {
        let mut views = vec![None, None, None];
        ask_view(&mut views, 0, 2, (Some("a".to_owned()), 400));
        assert_eq!(views, vec![None, None, holds("a", 400)]);
        assert_eq!(
            primary_sample(&views, None),
            Some((2, Some("a".to_owned()), Some(400)))
        );
        let mut views = vec![None, None, None];
        ask_view(&mut views, 0, 2, (None, -2));
        assert_eq!(views, vec![empty(), None, None]);
    }

    #[test]
    fn an_ask_names_the_port_after_the_slot() {
        assert_eq!(asked_port("4242 127.0.0.1:30012"), Some(30012));
        assert_eq!(asked_port("4242"), None);
    }

    #[test]
    fn two_primaries_answer_for_the_one_last_promoted_or_not_at_all() {
        let views = [holds("old", 500), None, holds("new", 900)];
        assert_eq!(primary_sample(&views, None), None);
        assert_eq!(
            primary_sample(&views, Some(2)),
            Some((2, Some("new".to_owned()), Some(900)))
        );
        assert_eq!(
            primary_sample(&[None, empty(), None], None),
            Some((1, None, Some(-2)))
        );
        assert_eq!(primary_sample(&[None, None], Some(0)), None);
    }
}
