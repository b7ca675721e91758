//! The oracle of a real run: the authoritative view of the lock key,
//! sampled over direct connections.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use super::{node_ops::lock_key, recorder::Recorder};
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
/// connections (no proxy): single, primary-replica and Sentinel read the
/// node that answers `role:master` (while a deposed primary says `master`
/// too, the one last seen promoted from replica), Redlock a majority (a
/// node that does not answer counted with the key it had, until its ttl),
/// a cluster the node that serves the key's slot (while the cluster is
/// down and every node answers `CLUSTERDOWN`, the key it last read, until
/// its ttl: nothing can write it meanwhile; the same while no node is a
/// primary, each answering as a replica or refusing connections because
/// its process is gone, as between a primary's death and its successor's
/// promotion). Each node has its own
/// [`reader`], whose readings count while [`FRESH`] and only if answered
/// within [`ORACLE_RTT`]; a sample is stamped with the oldest reading it
/// rests on. A slow or stopped node blinds the oracle only where its own
/// answer is the authority's. When no sample is kept for [`BLIND_AFTER`],
/// the history says the oracle was blind from its last kept sample until
/// the next (the validity check's coverage of the hold time); not while
/// the authority last seen refuses connections and no successor shows
/// (its process is gone: no node serves the key as it did, which the
/// oracle knows).
pub(super) async fn oracle(topology: Topology, ports: Vec<u16>, recorder: Recorder) {
    let key = lock_key();
    let redlock = matches!(topology, Topology::Redlock { .. });
    // One reader per node, so that a node that is slow or stopped blinds
    // the oracle to itself alone; dropped with this future.
    let slots: Vec<Slot> = ports.iter().map(|_| Slot::default()).collect();
    let mut readers = tokio::task::JoinSet::new();
    for (port, slot) in ports.iter().zip(&slots) {
        readers.spawn(reader(*port, key.clone(), Arc::clone(slot)));
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
    let mut was_master: Vec<Option<bool>> = vec![None; ports.len()];
    let mut promoted: Option<usize> = None;
    // Redlock: each node's key as last read, with the instant (the shared
    // monotonic clock) its ttl ends. A node that does not answer (down,
    // or stopped) still counts with it, as the simulator's oracle counts
    // a down node with the keys it had: it grants nobody else meanwhile,
    // and a restart that empties it shows at its first answer.
    let mut remembered: Vec<Option<(String, u64)>> = vec![None; ports.len()];
    // The key as last read on the authority (in a cluster, the node
    // serving its slot), and when its ttl ends (the shared monotonic
    // clock, ns).
    let mut last_read: Option<(usize, Option<(String, u64)>)> = None;
    let mut sight = Sight::new(mono_ns());
    loop {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let now = mono_ns();
        sight.check(now, &recorder);
        let mut cluster_down = false;
        // Whether every node is known to take no write this round: each
        // answered as a replica or refuses connections (its process is
        // gone). Then nothing can change the key, and the one last read
        // holds until its ttl, as while a cluster is down.
        let mut none_writable = !redlock;
        // The nodes whose process is gone (they refuse connections).
        let mut down = vec![false; ports.len()];
        // Stamped with the oldest reading it rests on.
        let mut sent = now;
        let mut views: Vec<Option<(Option<String>, i64)>> = Vec::with_capacity(ports.len());
        for (index, slot) in slots.iter().enumerate() {
            let reading = lock(slot)
                .clone()
                .filter(|r| Duration::from_nanos(now.saturating_sub(r.sent)) <= FRESH);
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
                        promoted = Some(index);
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
                Read::Down => None,
                Read::Nothing => None,
            };
            views.push(view);
        }
        let sample = if redlock {
            let (owner, pttl) = redlock_sample(&mut views, &mut remembered, sent);
            Some((0, owner, pttl))
        } else {
            primary_sample(&views, follows_promotions.then_some(promoted).flatten())
        };
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
        let current = Some((primary, owner.clone()));
        if current != last {
            last = current;
            recorder.record_at(
                sent,
                Process::Controller,
                Op::Oracle {
                    primary,
                    owner,
                    pttl_ms: pttl.and_then(|p| u64::try_from(p).ok()),
                },
            );
        }
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

/// Locks `slot`; a reader that panicked left its last reading, still good.
fn lock(slot: &Slot) -> std::sync::MutexGuard<'_, Option<Reading>> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reads node `port` every 2 ms and leaves each reading that came within
/// [`ORACLE_RTT`] in `slot`. A node that cannot be dialled is dialled
/// again every 20 ms, each dial bounded, so a stopped node costs its
/// reader alone.
async fn reader(port: u16, key: String, slot: Slot) {
    let mut conn = None;
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
        let read = read_node(&mut conn, &key).await;
        if Duration::from_nanos(mono_ns().saturating_sub(sent)) <= ORACLE_RTT {
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
            master: matches!(&role, redis::Value::Array(items)
                if matches!(items.first(), Some(redis::Value::BulkString(b)) if b == b"master")),
        },
        Ok(Err(error)) => match error.code() {
            Some("MOVED") => Read::Moved,
            Some("CLUSTERDOWN") => Read::ClusterDown,
            Some(_) => Read::Nothing,
            // An error reply (`MOVED`, `CLUSTERDOWN`) leaves the
            // connection usable; anything else does not.
            None => {
                *conn = None;
                Read::Nothing
            }
        },
        Err(_) => Read::Nothing,
    }
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
