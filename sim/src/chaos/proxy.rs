//! A userspace TCP proxy per link (one client to one server port), inside
//! the controller, so that partitions and latency need no root: what a
//! held direction carries is read and kept, and arrives after the heal at
//! the instant a real kernel would retransmit it (nothing is lost, it
//! arrives late: [`next_retransmission`]), a delayed one delivers every
//! chunk `delay` after it was read, in order. A link can also hold or
//! delay only the connections that come from given addresses (a node's
//! bus or replication traffic, told apart by the source address it binds).
//!
//! A connection dialled while its link is cut (either direction, or its
//! source address) is not connected upstream at once: through a real cut
//! the SYN or the SYN-ACK is dropped and the handshake completes only at
//! the client's first SYN retransmission after the heal. The kernel here
//! has already completed it with the proxy, so the proxy takes the client's
//! bytes but connects upstream (and delivers them) only at that instant
//! ([`SYN_RETRANSMITS`]), and drops the connection, as `connect()` times
//! out, when the cut outlasts them all; a client that closes before never
//! reaches the server.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::{IpAddr, Ipv4Addr},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use crate::{config::DurationRange, rng::Rng};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::{mpsc, watch},
    time::Instant,
};

/// How many faults hold one direction of a link now. A direction is held
/// while any is, as a packet two iptables rules drop stays dropped until
/// both are gone: the end of one fault must not heal what another
/// overlapping it still holds (`mix-failover-no-wait` seed 274: a client's
/// partition ended inside its node's, and the node granted it the lock).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Holds(u32);

impl Holds {
    /// One more fault holds it.
    pub(super) fn begin(&mut self) {
        self.0 += 1;
    }

    /// One fault holding it ends; an end with none left does nothing.
    pub(super) fn end(&mut self) {
        self.0 = self.0.saturating_sub(1);
    }

    /// A fault begins (`begin`) or ends.
    pub(super) fn set(&mut self, begin: bool) {
        if begin { self.begin() } else { self.end() }
    }

    /// Whether any fault holds it.
    pub(super) fn held(self) -> bool {
        self.0 > 0
    }

    /// Held by one fault.
    #[cfg(test)]
    pub(super) const ONE: Self = Self(1);
}

/// What a link does to its traffic now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct LinkMode {
    /// Hold what the client sends.
    pub hold_up: Holds,
    /// Hold what the server sends.
    pub hold_down: Holds,
    /// Extra one-way delay, both directions.
    pub delay: Duration,
    /// A further delay drawn afresh for each chunk the server sends, from
    /// this range (a replication stream's lag, as the simulator draws it
    /// per write), once the connection carries a stream: from the chunk
    /// after the primary's `+FULLRESYNC` or `+CONTINUE`. The handshake
    /// before it (`PING`, `REPLCONF`, `PSYNC`) and every connection that
    /// is no replication stream (a sentinel's) go at loopback speed: the
    /// simulator's lag delays each write of the stream, and it has no
    /// handshake (a demoted primary replicates from the new one at once).
    /// Chunks still arrive in order, so a short draw waits behind a
    /// longer one before it.
    pub drawn_down: Option<DurationRange>,
    /// What happens, on top of the above, to the connections from given
    /// addresses.
    pub peers: BTreeMap<IpAddr, PeerMode>,
    /// Addresses whose connections the link-wide holds above do not hold
    /// (a peer rule still can): the sentinels' links to a node, which a
    /// partition of the node leaves alone, as the simulator's sentinels
    /// watch no node (real ones would fail over a primary they could not
    /// reach for a second).
    pub spared: BTreeSet<IpAddr>,
    /// The link-wide holds are no network cut but the controller's way to
    /// make a node deaf for a fault's exact window: what they keep arrives
    /// at once when they end, not at its retransmission (a cluster shard
    /// failover's stale window ends when the old primary hears of the new
    /// epoch, `duration` after the takeover, as in the simulator). Read
    /// while a chunk is held, so it must be set with the hold.
    pub heal_at_once: bool,
}

/// What a link does to the connections from one source address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct PeerMode {
    /// Hold what such a connection sends.
    pub hold_up: Holds,
    /// Hold what the server sends back on it.
    pub hold_down: Holds,
    /// Extra one-way delay, both directions.
    pub delay: Duration,
    /// This rule's holds end at once ([`LinkMode::heal_at_once`]): a
    /// sentinel made deaf for its drawn lag.
    pub heal_at_once: bool,
}

impl LinkMode {
    /// Whether the direction `up` (client to server) of a connection
    /// from `peer` is held now.
    pub(super) fn holds(&self, up: bool, peer: Option<IpAddr>) -> bool {
        self.hold(up, peer).is_some()
    }

    /// Whether the direction `up` of a connection from `peer` is held now,
    /// and if so whether every hold that holds it ends at once (`true`) or
    /// one is a network cut, whose heal delivers at a retransmission.
    fn hold(&self, up: bool, peer: Option<IpAddr>) -> Option<bool> {
        let spared = peer.is_some_and(|peer| self.spared.contains(&peer));
        let wide = !spared && if up { self.hold_up } else { self.hold_down }.held();
        let rule = peer.and_then(|peer| self.peers.get(&peer));
        let ruled = rule.filter(|rule| if up { rule.hold_up } else { rule.hold_down }.held());
        if !wide && ruled.is_none() {
            return None;
        }
        Some((!wide || self.heal_at_once) && ruled.is_none_or(|rule| rule.heal_at_once))
    }

    /// The fixed one-way delay of a connection from `peer` now.
    pub(super) fn delay_of(&self, peer: Option<IpAddr>) -> Duration {
        let rule = peer.and_then(|peer| self.peers.get(&peer));
        self.delay + rule.map_or(Duration::ZERO, |rule| rule.delay)
    }

    /// Whether a handshake from `peer` would be lost now: a cut either way
    /// drops the SYN or the SYN-ACK.
    fn cuts_handshake(&self, peer: Option<IpAddr>) -> bool {
        self.holds(true, peer) || self.holds(false, peer)
    }
}

/// When, after `connect()` began, Linux sends the SYN again while no
/// SYN-ACK comes back (6.x defaults: `tcp_syn_linear_timeouts = 4` linear
/// 1 s timeouts, then doubling; `tcp_syn_retries = 6`). Measured through a
/// one-way iptables DROP on loopback in either direction: a connection
/// begun during the cut completed 1.02, 2.04, 3.07, 4.09 and 5.11 s after
/// its `connect()` for heals 0.3, 1.3, 2.3, 3.3 and 5.0 s after it.
pub(super) const SYN_RETRANSMITS: [Duration; 6] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(3),
    Duration::from_secs(4),
    Duration::from_secs(5),
    Duration::from_secs(7),
];

/// When `connect()` gives up (`ETIMEDOUT`) after the last retransmission.
pub(super) const SYN_GIVE_UP: Duration = Duration::from_secs(11);

/// The switch of one link.
#[derive(Debug, Clone)]
pub(super) struct Link {
    mode: watch::Sender<LinkMode>,
    /// The port the client dials.
    pub port: u16,
    /// The source addresses of every connection it accepted so far.
    seen: Arc<Mutex<BTreeSet<IpAddr>>>,
}

impl Link {
    /// Changes what the link does from now on.
    pub(super) fn set(&self, change: impl FnOnce(&mut LinkMode)) {
        self.mode.send_modify(change);
    }

    /// The source addresses of the connections it accepted so far (the
    /// hosts it has carried traffic for, as a turmoil link exists once
    /// its two hosts exchanged a message).
    pub(super) fn seen(&self) -> BTreeSet<IpAddr> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Starts a proxy to `upstream` on a fresh loopback port; it runs on the
/// current runtime until the runtime stops. `seed` seeds its drawn delays.
pub(super) async fn start(upstream: u16, seed: u64) -> std::io::Result<Link> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let port = listener.local_addr()?.port();
    let (mode, watching) = watch::channel(LinkMode::default());
    let seen: Arc<Mutex<BTreeSet<IpAddr>>> = Arc::default();
    let seeing = Arc::clone(&seen);
    tokio::spawn(async move {
        let mut connections = 0u64;
        while let Ok((client, from)) = listener.accept().await {
            let peer = Some(from.ip());
            seeing
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(from.ip());
            connections += 1;
            let rng = Rng::fork(seed, connections);
            let mut watching = watching.clone();
            tokio::spawn(async move {
                let mut client = client;
                let Some(early) = handshake(&mut client, &mut watching, peer).await else {
                    return;
                };
                let Ok(mut server) = TcpStream::connect((Ipv4Addr::LOCALHOST, upstream)).await
                else {
                    return;
                };
                if !early.is_empty() && server.write_all(&early).await.is_err() {
                    return;
                }
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                let up = pipe(
                    client_read,
                    server_write,
                    watching.clone(),
                    true,
                    peer,
                    None,
                );
                let down = pipe(server_read, client_write, watching, false, peer, Some(rng));
                // Either side closing ends the connection.
                tokio::select! {
                    () = up => {}
                    () = down => {}
                }
            });
        }
    });
    Ok(Link { mode, port, seen })
}

/// Waits, for a connection accepted now from `peer`, until its handshake
/// would have completed through the link: at once when the link is not
/// cut, otherwise at the first of [`SYN_RETRANSMITS`] that finds it healed.
/// Returns what the client sent meanwhile, or `None` when the client
/// closed first or `connect()` would have timed out (the client is then
/// dropped: it sees the connection reset).
async fn handshake(
    client: &mut TcpStream,
    mode: &mut watch::Receiver<LinkMode>,
    peer: Option<IpAddr>,
) -> Option<Vec<u8>> {
    let began = Instant::now();
    if !mode.borrow_and_update().cuts_handshake(peer) {
        return Some(Vec::new());
    }
    let mut early = Vec::new();
    for after in SYN_RETRANSMITS {
        read_until(client, &mut early, began + after).await?;
        if !mode.borrow_and_update().cuts_handshake(peer) {
            return Some(early);
        }
    }
    read_until(client, &mut early, began + SYN_GIVE_UP).await?;
    None
}

/// Reads what `client` sends into `early` until `due`; `None` if the
/// client closed first.
async fn read_until(client: &mut TcpStream, early: &mut Vec<u8>, due: Instant) -> Option<()> {
    let mut buf = [0u8; 4096];
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(due) => return Some(()),
            read = client.read(&mut buf) => match read {
                Ok(0) | Err(_) => return None,
                Ok(n) => early.extend_from_slice(&buf[..n]),
            },
        }
    }
}

/// Linux's minimum retransmission timeout: the first retransmission of a
/// segment leaves this long after its first send, each next one twice the
/// gap before (at most [`RTO_MAX`] apart), while no acknowledgement comes.
/// Measured through a two-way iptables DROP on loopback: a command sent
/// into a cut ran 137 ms after a 0.5 s cut healed and 1.6 s after a 1.5 s
/// one, at those instants from its send.
const RTO_MIN: Duration = Duration::from_millis(200);

/// The largest gap between two retransmissions (Linux's `TCP_RTO_MAX`).
const RTO_MAX: Duration = Duration::from_secs(120);

/// The first retransmission, at or after `now`, of a segment first sent
/// at `sent`: [`RTO_MIN`] after the send, then each gap twice the last (the
/// simulator's turmoil patch delivers a cut segment by the same rule).
fn next_retransmission(sent: Instant, now: Instant) -> Instant {
    let mut gap = RTO_MIN;
    let mut at = sent + gap;
    while at < now {
        gap = (gap * 2).min(RTO_MAX);
        at += gap;
    }
    at
}

/// One read of a direction, on its way to the other side.
struct Chunk {
    /// When the sender sent it (the proxy read it at once).
    sent: Instant,
    /// When it arrives if nothing cuts it: the send plus the link's delay.
    due: Instant,
    /// The bytes; empty for the sender's close (its FIN).
    bytes: Vec<u8>,
}

/// Copies one direction, holding and delaying as the mode says. The
/// sender's bytes are read at once, as its kernel would hand them to the
/// wire; a chunk sent while the direction is held, or still on its way
/// when a hold begins, is cut: as a real kernel retransmits what a cut
/// dropped, every cut chunk of the direction arrives, in order, at the
/// first retransmission of the oldest after the heal
/// ([`next_retransmission`] from its send, plus the link's delay), also
/// after the sender closed (then the close). A direction held for good
/// never delivers, nor closes: a silent death.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<LinkMode>,
    up: bool,
    peer: Option<IpAddr>,
    mut rng: Option<Rng>,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Chunk>();
    let reading = mode.clone();
    let reader = async move {
        let mut buf = vec![0u8; 16 * 1024];
        let mut stream_start = StreamStart::default();
        let mut streaming = false;
        loop {
            let read = from.read(&mut buf).await;
            let sent = Instant::now();
            let (fixed, range) = {
                let now = reading.borrow();
                (now.delay_of(peer), now.drawn_down)
            };
            let bytes = match read {
                Ok(0) | Err(_) => Vec::new(),
                Ok(n) => buf[..n].to_vec(),
            };
            let drawn = match (range, rng.as_mut()) {
                (Some(range), Some(rng)) if streaming => rng.duration(range),
                _ => Duration::ZERO,
            };
            if !streaming && range.is_some() {
                streaming = stream_start.found_in(&bytes);
            }
            let closed = bytes.is_empty();
            let chunk = Chunk {
                sent,
                due: sent + fixed + drawn,
                bytes,
            };
            if tx.send(chunk).is_err() || closed {
                return;
            }
        }
    };
    let writer = async move {
        // The oldest chunk a hold cut and that has not arrived yet: its
        // send, whose retransmission timer delivers them, and whether
        // every hold met since ends at once.
        let mut cut_since: Option<(Instant, bool)> = None;
        while let Some(chunk) = rx.recv().await {
            let Some(arrives) = arrival(&chunk, &mut cut_since, &mut mode, up, peer).await else {
                return;
            };
            tokio::time::sleep_until(arrives).await;
            if chunk.bytes.is_empty() {
                break;
            }
            if to.write_all(&chunk.bytes).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}

/// The primary's answers to `PSYNC` that start a replication stream.
const STREAM_MARKERS: [&[u8]; 2] = [b"+FULLRESYNC", b"+CONTINUE"];

/// Finds where a connection's replication stream starts (a
/// [`STREAM_MARKERS`] answer) in the chunks read from it, also when a read
/// splits the marker: a TCP read returns whatever has arrived, so
/// `+FULL` may end one chunk and `RESYNC` begin the next.
#[derive(Debug, Default)]
struct StreamStart {
    /// The last bytes scanned, one fewer than the longest marker: a marker
    /// the next chunk completes begins here.
    carried: Vec<u8>,
}

impl StreamStart {
    /// Whether a marker ends in `chunk` (begun in it or in the chunks
    /// before).
    fn found_in(&mut self, chunk: &[u8]) -> bool {
        self.carried.extend_from_slice(chunk);
        let found = STREAM_MARKERS.iter().any(|marker| {
            self.carried
                .windows(marker.len())
                .any(|window| window == *marker)
        });
        let keep = STREAM_MARKERS
            .iter()
            .map(|marker| marker.len() - 1)
            .max()
            .unwrap_or(0);
        let scanned = self.carried.len().saturating_sub(keep);
        self.carried.drain(..scanned);
        found
    }
}

/// When `chunk` arrives: at its `due` unless a hold cuts it first (it is
/// held at its send, or a hold begins before it arrives), and then at the
/// first retransmission, once healed, of the oldest cut chunk
/// (`cut_since`, which this sets and clears), or at the heal if every
/// hold that held it ends at once; a later cut chunk rides the same
/// retransmission, as TCP sends what it queued behind once the oldest is
/// acknowledged. `None` once the mode's sender is gone.
async fn arrival(
    chunk: &Chunk,
    cut_since: &mut Option<(Instant, bool)>,
    mode: &mut watch::Receiver<LinkMode>,
    up: bool,
    peer: Option<IpAddr>,
) -> Option<Instant> {
    loop {
        let held = mode.borrow_and_update().hold(up, peer);
        if let Some(at_once) = held {
            let cut = cut_since.get_or_insert((chunk.sent, true));
            cut.1 &= at_once;
            mode.changed().await.ok()?;
            continue;
        }
        let arrives = match *cut_since {
            Some((oldest, at_once)) => {
                let delay = mode.borrow().delay_of(peer);
                let resent = if at_once {
                    Instant::now()
                } else {
                    next_retransmission(oldest, Instant::now())
                };
                (resent + delay).max(chunk.due)
            }
            None => chunk.due,
        };
        // A hold that begins before it arrives cuts it too.
        tokio::select! {
            () = tokio::time::sleep_until(arrives) => {
                if mode.borrow_and_update().holds(up, peer) {
                    continue;
                }
                *cut_since = None;
                return Some(arrives);
            }
            changed = mode.changed() => changed.ok()?,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        net::SocketAddr,
        sync::{
            Arc, Mutex,
            atomic::{AtomicUsize, Ordering},
        },
    };

    use tokio::net::TcpSocket;

    use super::*;

    /// An upstream that echoes what it reads; returns its port.
    async fn echo() -> u16 {
        counted_echo().await.0
    }

    /// [`echo`], and how many connections it accepted so far.
    async fn counted_echo() -> (u16, Arc<AtomicUsize>) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = stream.read(&mut buf).await {
                        if n == 0 || stream.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (port, accepted)
    }

    /// A connection to `port` from the loopback address `from`.
    async fn dial_from(from: Ipv4Addr, port: u16) -> TcpStream {
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::from((from, 0))).unwrap();
        socket
            .connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
            .await
            .unwrap()
    }

    /// Sends `byte` and waits up to `wait` for it to come back.
    async fn round_trip(stream: &mut TcpStream, byte: u8, wait: Duration) -> Option<u8> {
        stream.write_all(&[byte]).await.unwrap();
        let mut back = [0u8; 1];
        match tokio::time::timeout(wait, stream.read_exact(&mut back)).await {
            Ok(Ok(_)) => Some(back[0]),
            _ => None,
        }
    }

    #[tokio::test]
    async fn a_cut_peer_is_held_both_ways_and_delivered_after_the_heal() {
        let link = start(echo().await, 1).await.unwrap();
        let cut = Ipv4Addr::new(127, 0, 0, 23);
        let mut from_cut = dial_from(cut, link.port).await;
        let mut other = dial_from(Ipv4Addr::LOCALHOST, link.port).await;
        let long = Duration::from_secs(5);
        assert_eq!(round_trip(&mut from_cut, b'a', long).await, Some(b'a'));
        link.set(|mode| {
            mode.peers.insert(
                IpAddr::V4(cut),
                PeerMode {
                    hold_up: Holds::ONE,
                    hold_down: Holds::ONE,
                    ..PeerMode::default()
                },
            );
        });
        let short = Duration::from_millis(200);
        assert_eq!(round_trip(&mut from_cut, b'b', short).await, None);
        // Only that address is cut; a new connection from it is held too.
        assert_eq!(round_trip(&mut other, b'c', long).await, Some(b'c'));
        let mut again = dial_from(cut, link.port).await;
        assert_eq!(round_trip(&mut again, b'd', short).await, None);
        link.set(|mode| {
            mode.peers.clear();
        });
        // Nothing was lost: what was held arrives after the heal.
        let mut back = [0u8; 1];
        tokio::time::timeout(long, from_cut.read_exact(&mut back))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back[0], b'b');
        tokio::time::timeout(long, again.read_exact(&mut back))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back[0], b'd');
    }

    #[tokio::test]
    async fn a_connection_dialled_during_a_cut_reaches_the_server_at_the_first_syn_retransmission_after_the_heal()
     {
        let (upstream, accepted) = counted_echo().await;
        let link = start(upstream, 1).await.unwrap();
        link.set(|mode| mode.hold_down.begin());
        let dialled = Instant::now();
        let mut stream = dial_from(Ipv4Addr::LOCALHOST, link.port).await;
        stream.write_all(b"x").await.unwrap();
        // Healed between the first retransmission (1 s) and the second.
        tokio::time::sleep_until(dialled + Duration::from_millis(1300)).await;
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            0,
            "connected during the cut"
        );
        link.set(|mode| mode.hold_down.end());
        let mut back = [0u8; 1];
        tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut back))
            .await
            .unwrap()
            .unwrap();
        let took = dialled.elapsed();
        assert_eq!(back[0], b'x');
        assert!(took >= SYN_RETRANSMITS[1], "answered at the heal: {took:?}");
        assert!(took < SYN_RETRANSMITS[2], "{took:?}");
    }

    #[tokio::test]
    async fn a_connection_abandoned_during_a_cut_never_reaches_the_server() {
        let (upstream, accepted) = counted_echo().await;
        let link = start(upstream, 1).await.unwrap();
        link.set(|mode| mode.hold_up.begin());
        let mut stream = dial_from(Ipv4Addr::LOCALHOST, link.port).await;
        stream.write_all(b"x").await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(stream);
        tokio::time::sleep(Duration::from_millis(100)).await;
        link.set(|mode| mode.hold_up.end());
        tokio::time::sleep(SYN_RETRANSMITS[0] + Duration::from_millis(300)).await;
        assert_eq!(accepted.load(Ordering::SeqCst), 0);
        // Healed, a new connection goes through at once.
        let mut stream = dial_from(Ipv4Addr::LOCALHOST, link.port).await;
        let short = Duration::from_millis(500);
        assert_eq!(round_trip(&mut stream, b'y', short).await, Some(b'y'));
    }

    /// What an upstream received, on each connection in turn: each read's
    /// instant and bytes, empty for the close.
    type Received = Arc<Mutex<Vec<(Instant, Vec<u8>)>>>;

    /// An upstream that records what it reads and answers nothing; with
    /// `close_after`, it closes each connection that long after accepting.
    async fn recorder(close_after: Option<Duration>) -> (u16, Received) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let received: Received = Arc::default();
        let log = Arc::clone(&received);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    let closing = async {
                        match close_after {
                            Some(after) => tokio::time::sleep(after).await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::pin!(closing);
                    let mut buf = [0u8; 1024];
                    loop {
                        tokio::select! {
                            () = &mut closing => return,
                            read = stream.read(&mut buf) => {
                                let n = read.unwrap_or(0);
                                log.lock().unwrap().push((Instant::now(), buf[..n].to_vec()));
                                if n == 0 {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        (port, received)
    }

    /// A connection through `link` whose first byte reached the recorder
    /// behind it (`received`), so that it is connected upstream.
    async fn connected(link: &Link, received: &Received) -> TcpStream {
        let mut stream = dial_from(Ipv4Addr::LOCALHOST, link.port).await;
        stream.write_all(b"a").await.unwrap();
        received_within(received, 1, Duration::from_secs(3)).await;
        assert_eq!(received.lock().unwrap().len(), 1, "never connected");
        stream
    }

    /// A connection through a new link to a [`recorder`] (closing as
    /// `close_after` says), cut both ways, and one byte sent into the cut:
    /// the link, what the upstream received, the client's stream and the
    /// send's instant.
    async fn sent_into_a_cut(
        close_after: Option<Duration>,
    ) -> (Link, Received, TcpStream, Instant) {
        let (upstream, received) = recorder(close_after).await;
        let link = start(upstream, 1).await.unwrap();
        let mut stream = connected(&link, &received).await;
        cut_both_ways(&link);
        let sent = Instant::now();
        stream.write_all(b"x").await.unwrap();
        (link, received, stream, sent)
    }

    /// Holds both directions of every connection on `link`: a cut.
    fn cut_both_ways(link: &Link) {
        link.set(|mode| {
            mode.hold_up.begin();
            mode.hold_down.begin();
        });
    }

    /// Waits up to `wait` until `received` holds `count` entries.
    async fn received_within(received: &Received, count: usize, wait: Duration) {
        let until = Instant::now() + wait;
        while received.lock().unwrap().len() < count && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn a_request_sent_into_a_cut_arrives_at_its_first_retransmission_after_the_heal() {
        // Healed before the first retransmission (200 ms after the send),
        // between the first and the second (600 ms), between the second
        // and the third (1.4 s).
        for (heal, retransmitted) in [(100, 200), (300, 600), (900, 1400)] {
            let (link, received, _stream, sent) = sent_into_a_cut(None).await;
            tokio::time::sleep_until(sent + Duration::from_millis(heal)).await;
            assert_eq!(received.lock().unwrap().len(), 1, "arrived in the cut");
            link.set(|mode| *mode = LinkMode::default());
            received_within(&received, 2, Duration::from_secs(3)).await;
            let log = received.lock().unwrap().clone();
            let (arrived, bytes) = log.get(1).expect("never arrived");
            let took = *arrived - sent;
            assert_eq!(bytes, b"x");
            let retransmitted = Duration::from_millis(retransmitted);
            assert!(
                took >= retransmitted,
                "healed at {heal} ms, arrived {took:?}"
            );
            assert!(
                took < retransmitted + RTO_MIN,
                "healed at {heal} ms, arrived {took:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_hold_ended_at_once_delivers_at_its_end() {
        let (upstream, received) = recorder(None).await;
        let link = start(upstream, 1).await.unwrap();
        let mut stream = connected(&link, &received).await;
        link.set(|mode| {
            mode.hold_up.begin();
            mode.heal_at_once = true;
        });
        let sent = Instant::now();
        stream.write_all(b"x").await.unwrap();
        tokio::time::sleep_until(sent + Duration::from_millis(300)).await;
        link.set(|mode| *mode = LinkMode::default());
        received_within(&received, 2, Duration::from_secs(3)).await;
        let log = received.lock().unwrap().clone();
        let took = log.get(1).expect("never arrived").0 - sent;
        // Not at the retransmission 600 ms after the send.
        assert!(took < Duration::from_millis(500), "{took:?}");
    }

    /// When a byte sent from `from` through `link` (to the recorder
    /// behind it, `received`) into the holds `hold` sets arrives, after
    /// they are lifted 300 ms after its send; the connection stays open
    /// (in `open`), so that its close adds nothing to `received`.
    async fn healed_after(
        link: &Link,
        received: &Received,
        from: Ipv4Addr,
        hold: impl Fn(&mut LinkMode),
        open: &mut Vec<TcpStream>,
    ) -> Duration {
        let mut stream = dial_from(from, link.port).await;
        let before = received.lock().unwrap().len();
        stream.write_all(b"a").await.unwrap();
        received_within(received, before + 1, Duration::from_secs(3)).await;
        link.set(&hold);
        let sent = Instant::now();
        stream.write_all(b"x").await.unwrap();
        tokio::time::sleep_until(sent + Duration::from_millis(300)).await;
        link.set(|mode| {
            mode.hold_up.end();
            mode.heal_at_once = false;
            mode.peers.clear();
        });
        received_within(received, before + 2, Duration::from_secs(3)).await;
        let log = received.lock().unwrap().clone();
        open.push(stream);
        log.get(before + 1).expect("never arrived").0 - sent
    }

    #[tokio::test]
    async fn a_deaf_peer_rule_ends_at_once_and_a_cut_beside_it_at_its_retransmission() {
        let (upstream, received) = recorder(None).await;
        let link = start(upstream, 1).await.unwrap();
        let deaf = Ipv4Addr::new(127, 0, 0, 200);
        let node = Ipv4Addr::new(127, 0, 0, 21);
        let hold = |mode: &mut LinkMode| {
            // A partition of the node on this link, a sentinel made deaf.
            mode.hold_up.begin();
            mode.spared.insert(IpAddr::V4(deaf));
            let rule = mode.peers.entry(IpAddr::V4(deaf)).or_default();
            rule.hold_up.begin();
            rule.heal_at_once = true;
        };
        let mut open = Vec::new();
        let at_once = healed_after(&link, &received, deaf, hold, &mut open).await;
        assert!(at_once < Duration::from_millis(500), "{at_once:?}");
        let cut = healed_after(&link, &received, node, hold, &mut open).await;
        assert!(cut >= Duration::from_millis(600), "{cut:?}");
        // A deaf rule on a peer the link-wide cut also holds: the cut's
        // retransmission.
        let both = healed_after(
            &link,
            &received,
            node,
            |mode| {
                mode.hold_up.begin();
                let rule = mode.peers.entry(IpAddr::V4(node)).or_default();
                rule.hold_up.begin();
                rule.heal_at_once = true;
            },
            &mut open,
        )
        .await;
        assert!(both >= Duration::from_millis(600), "{both:?}");
    }

    #[tokio::test]
    async fn a_spared_address_is_not_held_by_a_link_wide_hold() {
        let link = start(echo().await, 5).await.unwrap();
        let sentinel = Ipv4Addr::new(127, 0, 0, 201);
        let replica = Ipv4Addr::new(127, 0, 0, 22);
        link.set(|mode| {
            mode.spared.insert(IpAddr::V4(sentinel));
        });
        let mut from_sentinel = dial_from(sentinel, link.port).await;
        let mut from_replica = dial_from(replica, link.port).await;
        let long = Duration::from_secs(5);
        assert_eq!(round_trip(&mut from_replica, b'a', long).await, Some(b'a'));
        cut_both_ways(&link);
        let short = Duration::from_millis(300);
        assert_eq!(round_trip(&mut from_sentinel, b'b', long).await, Some(b'b'));
        assert_eq!(round_trip(&mut from_replica, b'c', short).await, None);
        // A new connection from it is let through at once too.
        let mut again = dial_from(sentinel, link.port).await;
        assert_eq!(round_trip(&mut again, b'd', short).await, Some(b'd'));
        // Only link-wide holds spare it: its own rule holds it.
        link.set(|mode| {
            mode.peers
                .entry(IpAddr::V4(sentinel))
                .or_default()
                .hold_down
                .begin()
        });
        assert_eq!(round_trip(&mut from_sentinel, b'e', short).await, None);
    }

    #[tokio::test]
    async fn a_socket_closed_in_a_cut_still_delivers_what_it_sent_then_its_close() {
        let (link, received, stream, sent) = sent_into_a_cut(None).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(stream);
        tokio::time::sleep_until(sent + Duration::from_millis(300)).await;
        link.set(|mode| *mode = LinkMode::default());
        received_within(&received, 3, Duration::from_secs(3)).await;
        let log = received.lock().unwrap().clone();
        assert_eq!(log.len(), 3, "{log:?}");
        assert_eq!(log[1].1, b"x");
        assert!(log[2].1.is_empty(), "then the close");
        let took = log[1].0 - sent;
        assert!(took >= Duration::from_millis(600), "{took:?}");
        assert!(took < Duration::from_millis(800), "{took:?}");
    }

    #[tokio::test]
    async fn a_server_closing_behind_a_lasting_cut_is_never_seen_to_close() {
        let (_link, received, mut stream, _) =
            sent_into_a_cut(Some(Duration::from_millis(300))).await;
        let mut back = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(1), stream.read(&mut back)).await;
        assert!(read.is_err(), "saw {read:?} through the cut");
        assert_eq!(received.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_server_that_closes_behind_a_hold_closes_nothing_until_the_heal() {
        // An upstream that takes one connection and closes it on demand,
        // as a `kill -9` of a server does.
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let upstream = listener.local_addr().unwrap().port();
        let (kill, killed) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1];
            stream.read_exact(&mut buf).await.unwrap();
            stream.write_all(&buf).await.unwrap();
            let _ = killed.await;
        });
        let link = start(upstream, 1).await.unwrap();
        let mut stream = dial_from(Ipv4Addr::LOCALHOST, link.port).await;
        let long = Duration::from_secs(5);
        assert_eq!(round_trip(&mut stream, b'a', long).await, Some(b'a'));
        // The proxy is waiting on the server's next bytes when the hold
        // begins, and the server dies while it holds: a silent death.
        cut_both_ways(&link);
        drop(kill);
        let mut back = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_millis(500), stream.read(&mut back)).await;
        assert!(read.is_err(), "the close went through the hold: {read:?}");
        link.set(|mode| {
            mode.hold_up.end();
            mode.hold_down.end();
        });
        let read = tokio::time::timeout(long, stream.read(&mut back)).await;
        assert!(
            matches!(read, Ok(Ok(0))),
            "no close after the heal: {read:?}"
        );
    }

    #[tokio::test]
    async fn a_peer_rule_delays_or_holds_one_direction_of_that_peers_connections_only() {
        let link = start(echo().await, 3).await.unwrap();
        let slow = Ipv4Addr::new(127, 0, 0, 24);
        let delay = Duration::from_millis(300);
        link.set(|mode| {
            mode.peers.insert(
                IpAddr::V4(slow),
                PeerMode {
                    delay,
                    ..PeerMode::default()
                },
            );
        });
        let mut from_slow = dial_from(slow, link.port).await;
        let mut other = dial_from(Ipv4Addr::LOCALHOST, link.port).await;
        let long = Duration::from_secs(5);
        let started = Instant::now();
        assert_eq!(round_trip(&mut other, b'a', long).await, Some(b'a'));
        assert!(started.elapsed() < delay, "{:?}", started.elapsed());
        let started = Instant::now();
        assert_eq!(round_trip(&mut from_slow, b'b', long).await, Some(b'b'));
        // Delayed each way.
        assert!(started.elapsed() >= delay * 2, "{:?}", started.elapsed());
        // Holding only what the server sends back to that peer: its
        // request still reaches the server (and is echoed) but is held.
        link.set(|mode| {
            mode.peers.insert(
                IpAddr::V4(slow),
                PeerMode {
                    hold_down: Holds::ONE,
                    ..PeerMode::default()
                },
            );
        });
        let short = Duration::from_millis(300);
        assert_eq!(round_trip(&mut from_slow, b'c', short).await, None);
        assert_eq!(round_trip(&mut other, b'd', long).await, Some(b'd'));
        link.set(|mode| {
            mode.peers.clear();
        });
        let mut back = [0u8; 1];
        tokio::time::timeout(long, from_slow.read_exact(&mut back))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back[0], b'c');
        assert!(link.seen().contains(&IpAddr::V4(slow)));
    }

    #[tokio::test]
    async fn drawn_delays_keep_the_servers_bytes_in_order_and_late() {
        let link = start(echo().await, 7).await.unwrap();
        let range = DurationRange {
            min: Duration::from_millis(20),
            max: Duration::from_millis(60),
        };
        link.set(|mode| mode.drawn_down = Some(range));
        let mut stream = dial_from(Ipv4Addr::LOCALHOST, link.port).await;
        // The primary's answer to `PSYNC` starts the stream.
        stream.write_all(b"+CONTINUE\r\n").await.unwrap();
        let mut answer = [0u8; 11];
        tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut answer))
            .await
            .unwrap()
            .unwrap();
        let started = Instant::now();
        let first = round_trip(&mut stream, 255, Duration::from_secs(5)).await;
        assert_eq!(first, Some(255));
        assert!(started.elapsed() >= range.min, "{:?}", started.elapsed());
        let sent: Vec<u8> = (0..40).collect();
        for byte in &sent {
            stream.write_all(&[*byte]).await.unwrap();
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let mut back = vec![0u8; sent.len()];
        tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut back))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back, sent);
    }

    #[test]
    fn a_stream_start_split_across_two_reads_is_found() {
        for marker in STREAM_MARKERS {
            let answer = [marker, b" 8a3f 0\r\n"].concat();
            for split in 1..marker.len() {
                let mut start = StreamStart::default();
                // The handshake's replies before it, in the same read.
                let first = [b"+PONG\r\n+OK\r\n", &answer[..split]].concat();
                assert!(!start.found_in(&first), "split at {split}");
                assert!(start.found_in(&answer[split..]), "split at {split}");
            }
        }
    }

    #[test]
    fn a_marker_broken_by_other_bytes_starts_no_stream() {
        let mut start = StreamStart::default();
        for chunk in [&b"+PONG\r\n+FULL"[..], b"\r\n+OK\r\n", b"RESYNC\r\n"] {
            assert!(!start.found_in(chunk));
        }
    }

    #[tokio::test]
    async fn the_replication_handshake_is_not_lagged_only_the_stream_after_it() {
        let link = start(echo().await, 7).await.unwrap();
        let range = DurationRange {
            min: Duration::from_millis(80),
            max: Duration::from_millis(100),
        };
        link.set(|mode| mode.drawn_down = Some(range));
        let mut stream = dial_from(Ipv4Addr::LOCALHOST, link.port).await;
        // `PING`, `REPLCONF`, `PSYNC`: each answer comes back at once.
        let started = Instant::now();
        for byte in 0..4 {
            let back = round_trip(&mut stream, byte, Duration::from_secs(5)).await;
            assert_eq!(back, Some(byte));
        }
        assert!(
            started.elapsed() < range.min,
            "the handshake took {:?}",
            started.elapsed()
        );
        // Then `+FULLRESYNC`, after which every chunk is lagged.
        stream.write_all(b"+FULLRESYNC x 0\r\n").await.unwrap();
        let mut answer = [0u8; 17];
        tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut answer))
            .await
            .unwrap()
            .unwrap();
        let started = Instant::now();
        assert_eq!(
            round_trip(&mut stream, 9, Duration::from_secs(5)).await,
            Some(9)
        );
        assert!(started.elapsed() >= range.min, "{:?}", started.elapsed());
    }
}
