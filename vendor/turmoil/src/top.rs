use crate::envelope::{Envelope, Protocol, Segment};
use crate::host::Host;
use crate::rt::Rt;
use crate::{config, TRACING_TARGET};

use indexmap::IndexMap;
use rand::{Rng, RngCore};
use rand_distr::{Distribution, Exp};
use std::collections::VecDeque;
use std::io::{Error, ErrorKind, Result};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::time::Instant;

/// Linux's minimum retransmission timeout, the first one of a connection
/// whose round trip is short (see [`Builder::tcp_retransmit`]).
///
/// [`Builder::tcp_retransmit`]: crate::Builder::tcp_retransmit
const RTO_MIN: Duration = Duration::from_millis(200);

/// Linux's maximum retransmission timeout: the backoff stops doubling there.
const RTO_MAX: Duration = Duration::from_secs(120);

/// When a SYN is retransmitted, after `connect` began (Linux 6.x:
/// `tcp_syn_linear_timeouts = 4` timeouts of 1 s, then doubling, and
/// `tcp_syn_retries = 6`).
const SYN_RETRANSMITS: [Duration; 6] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(3),
    Duration::from_secs(4),
    Duration::from_secs(5),
    Duration::from_secs(7),
];

/// When `connect` gives up, after it began, if no SYN got through.
const SYN_GIVE_UP: Duration = Duration::from_secs(11);

/// Describes the network topology.
pub(crate) struct Topology {
    config: config::Link,

    /// Specific configuration overrides between specific hosts.
    links: IndexMap<Pair, Link>,

    /// We don't use a Rt for async. Right now, we just use it to tick time
    /// forward in the same way we do it elsewhere. We'd like to represent
    /// network state with async in the future.
    rt: Rt<'static>,

    /// The network's time: `rt`'s clock, or, with idle skipping, a count
    /// of the same steps kept without running `rt` (see [`Topology::advance_by`]).
    now: Instant,

    /// How many messages wait in the links' `deliverable` queues.
    undelivered: usize,
}

/// This type is used as the key in the [`Topology::links`] map. See [`new`]
/// which orders the addrs, such that this type uniquely identifies the link
/// between two hosts on the network.
#[derive(Debug, Clone, Hash, Eq, PartialEq)]
struct Pair(IpAddr, IpAddr);

impl Pair {
    fn new(a: IpAddr, b: IpAddr) -> Pair {
        assert_ne!(a, b);

        if a < b {
            Pair(a, b)
        } else {
            Pair(b, a)
        }
    }
}

/// An iterator for the network topology, providing access to all active links
/// in the simulated network.
pub struct LinksIter<'a> {
    iter: indexmap::map::IterMut<'a, Pair, Link>,
}

/// An iterator for the link, providing access to sent messages that have not
/// yet been delivered.
pub struct LinkIter<'a> {
    a: IpAddr,
    b: IpAddr,
    now: Instant,
    iter: std::collections::vec_deque::IterMut<'a, Sent>,
}

impl LinkIter<'_> {
    /// The [`IpAddr`] pair for the link. Always ordered to uniquely identify
    /// the link.
    pub fn pair(&self) -> (IpAddr, IpAddr) {
        (self.a, self.b)
    }

    /// Schedule all messages on the link for delivery the next time the
    /// simulation steps, consuming the iterator.
    pub fn deliver_all(self) {
        for sent in self {
            sent.deliver();
        }
    }
}

/// Provides a reference to a message that is currently inflight on the network
/// from one host to another.
pub struct SentRef<'a> {
    src: SocketAddr,
    dst: SocketAddr,
    now: Instant,
    sent: &'a mut Sent,
}

impl SentRef<'_> {
    /// The (src, dst) [`SocketAddr`] pair for the message.
    pub fn pair(&self) -> (SocketAddr, SocketAddr) {
        (self.src, self.dst)
    }

    /// The message [`Protocol`].
    pub fn protocol(&self) -> &Protocol {
        &self.sent.protocol
    }

    /// Schedule the message for delivery the next time the simulation steps,
    /// consuming the item.
    pub fn deliver(self) {
        self.sent.deliver(self.now);
    }
}

impl<'a> Iterator for LinksIter<'a> {
    type Item = LinkIter<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let (pair, link) = self.iter.next()?;

        Some(LinkIter {
            a: pair.0,
            b: pair.1,
            now: link.now,
            iter: link.sent.iter_mut(),
        })
    }
}

impl<'a> Iterator for LinkIter<'a> {
    type Item = SentRef<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let sent = self.iter.next()?;

        Some(SentRef {
            src: sent.src,
            dst: sent.dst,
            now: self.now,
            sent,
        })
    }
}

/// A two-way link between two hosts on the network.
struct Link {
    /// The state of the link from node 'a' to node 'b'.
    /// Of the two nodes attached to a link, 'a' is the
    /// one whose ip address sorts smallest.
    state_a_b: State,
    /// The state of the link from node 'b' to node 'a'.
    /// Of the two nodes attached to a link, 'b' is the
    /// one whose ip address sorts greatest.
    state_b_a: State,

    /// Optional, per-link configuration.
    config: config::Link,

    /// Sent messages that are either scheduled for delivery in the future
    /// or are on hold.
    sent: VecDeque<Sent>,

    /// Messages that are ready to be delivered.
    deliverable: IndexMap<IpAddr, VecDeque<Envelope>>,

    /// How many messages `deliverable` holds, both ways.
    undelivered: usize,

    /// The current network time, moved forward with [`Link::tick`].
    now: Instant,
}

/// States that a link between two nodes can be in.
#[derive(Clone, Copy)]
enum State {
    /// The link is healthy.
    Healthy,

    /// The link was explicitly partitioned.
    ExplicitPartition,

    /// The link was randomly partitioned.
    RandPartition,

    /// Messages are being held indefinitely.
    Hold,
}

impl Topology {
    pub(crate) fn new(config: config::Link) -> Topology {
        let rt = Rt::no_software();
        let now = rt.now();
        Topology {
            config,
            links: IndexMap::new(),
            rt,
            now,
            undelivered: 0,
        }
    }

    /// Register a link between two hosts
    pub(crate) fn register(&mut self, a: IpAddr, b: IpAddr) {
        let pair = Pair::new(a, b);
        assert!(self.links.insert(pair, Link::new(self.now)).is_none());
    }

    pub(crate) fn set_max_message_latency(&mut self, value: Duration) {
        self.config.latency_mut().max_message_latency = value;
    }

    pub(crate) fn set_link_message_latency(&mut self, a: IpAddr, b: IpAddr, value: Duration) {
        let pair = Pair::new(a, b);
        let latency = self
            .links
            .get_mut(&pair)
            .unwrap_or_else(|| panic!("unable to find link between {pair:?}"))
            .latency(self.config.latency());
        latency.min_message_latency = value;
        latency.max_message_latency = value;
    }

    pub(crate) fn set_link_max_message_latency(&mut self, a: IpAddr, b: IpAddr, value: Duration) {
        let pair = Pair::new(a, b);
        self.links
            .get_mut(&pair)
            .unwrap_or_else(|| panic!("unable to find link between {pair:?}"))
            .latency(self.config.latency())
            .max_message_latency = value;
    }

    pub(crate) fn set_message_latency_curve(&mut self, value: f64) {
        self.config.latency_mut().latency_distribution = Exp::new(value).unwrap();
    }

    pub(crate) fn set_fail_rate(&mut self, value: f64) {
        self.config.message_loss_mut().fail_rate = value;
    }

    pub(crate) fn set_link_fail_rate(&mut self, a: IpAddr, b: IpAddr, value: f64) {
        let pair = Pair::new(a, b);
        self.links
            .get_mut(&pair)
            .unwrap_or_else(|| panic!("unable to find link between {pair:?}"))
            .message_loss(self.config.message_loss())
            .fail_rate = value;
    }

    // Send a `message` from `src` to `dst`. This method returns immediately,
    // and message delivery happens at a later time (or never, if the link is
    // broken).
    pub(crate) fn enqueue_message(
        &mut self,
        rand: &mut dyn RngCore,
        src: SocketAddr,
        dst: SocketAddr,
        message: Protocol,
    ) -> Result<()> {
        if let Some(link) = self.links.get_mut(&Pair::new(src.ip(), dst.ip())) {
            let before = link.undelivered;
            let result = link.enqueue_message(&self.config, rand, src, dst, message);
            self.undelivered = self.undelivered + link.undelivered - before;
            result
        } else {
            Err(Error::new(
                ErrorKind::ConnectionRefused,
                "Connection refused",
            ))
        }
    }

    // Move messages from any network links to the `dst` host.
    pub(crate) fn deliver_messages(&mut self, rand: &mut dyn RngCore, dst: &mut Host) {
        for (pair, link) in &mut self.links {
            if pair.0 == dst.addr || pair.1 == dst.addr {
                let before = link.undelivered;
                link.deliver_messages(&self.config, rand, dst);
                self.undelivered = self.undelivered + link.undelivered - before;
            }
        }
    }

    pub(crate) fn hold(&mut self, a: IpAddr, b: IpAddr) {
        self.get_link_mut(&Pair::new(a, b)).hold();
    }

    pub(crate) fn release(&mut self, a: IpAddr, b: IpAddr) {
        self.get_link_mut(&Pair::new(a, b)).release();
    }

    pub(crate) fn partition(&mut self, a: IpAddr, b: IpAddr) {
        let retransmit = self.config.tcp_retransmit;
        self.get_link_mut(&Pair::new(a, b))
            .explicit_partition(retransmit);
    }

    pub(crate) fn partition_oneway(&mut self, a: IpAddr, b: IpAddr) {
        let retransmit = self.config.tcp_retransmit;
        let link = &mut self.get_link_mut(&Pair::new(a, b));
        link.partition_oneway(a, b, retransmit);
    }

    pub(crate) fn repair(&mut self, rand: &mut dyn RngCore, a: IpAddr, b: IpAddr) {
        let pair = Pair::new(a, b);
        let link = self
            .links
            .get_mut(&pair)
            .unwrap_or_else(|| panic!("unable to find link between {pair:?}"));
        link.explicit_repair();
        link.retransmit(&self.config, rand);
    }

    pub(crate) fn repair_oneway(&mut self, rand: &mut dyn RngCore, a: IpAddr, b: IpAddr) {
        let pair = Pair::new(a, b);
        let link = self
            .links
            .get_mut(&pair)
            .unwrap_or_else(|| panic!("unable to find link between {pair:?}"));
        link.repair_oneway(a, b);
        link.retransmit(&self.config, rand);
    }

    pub(crate) fn tick_by(&mut self, duration: Duration) {
        let _ = self.rt.tick(duration);
        self.now = self.rt.now();
        for link in self.links.values_mut() {
            let before = link.undelivered;
            link.tick(self.now);
            self.undelivered = self.undelivered + link.undelivered - before;
        }
    }

    /// `tick_by` for idle skipping: the network's runtime runs no software,
    /// so ticking it only moves its clock by `duration`; count instead.
    pub(crate) fn advance_by(&mut self, duration: Duration) {
        self.now += duration;
        for link in self.links.values_mut() {
            let before = link.undelivered;
            link.tick(self.now);
            self.undelivered = self.undelivered + link.undelivered - before;
        }
    }

    /// The network's time.
    pub(crate) fn now(&self) -> Instant {
        self.now
    }

    /// Whether a message waits to be delivered to `addr`.
    pub(crate) fn has_deliverable(&self, addr: IpAddr) -> bool {
        self.undelivered > 0
            && self.links.iter().any(|(pair, link)| {
                (pair.0 == addr || pair.1 == addr) && link.has_deliverable(addr)
            })
    }

    /// `deliver_messages` for idle skipping: skips the links with nothing
    /// to deliver (the same outcome, without looking them up).
    pub(crate) fn deliver_pending(&mut self, rand: &mut dyn RngCore, dst: &mut Host) {
        if self.undelivered == 0 {
            return;
        }
        for (pair, link) in &mut self.links {
            if (pair.0 == dst.addr || pair.1 == dst.addr) && link.has_deliverable(dst.addr) {
                let before = link.undelivered;
                link.deliver_messages(&self.config, rand, dst);
                self.undelivered = self.undelivered + link.undelivered - before;
            }
        }
    }

    /// The earliest network time at which a message in flight becomes
    /// deliverable, or the current time if one waits for a host that
    /// `running` says runs; `None` if neither. Held messages wait for a
    /// release and do not count. Messages in flight to a stopped host count:
    /// the order in which they become deliverable is the order in which it
    /// receives them once restarted.
    pub(crate) fn next_delivery(&self, running: impl Fn(IpAddr) -> bool) -> Option<Instant> {
        self.links
            .values()
            .filter_map(|link| {
                if link.undelivered > 0
                    && link
                        .deliverable
                        .iter()
                        .any(|(dst, queue)| !queue.is_empty() && running(*dst))
                {
                    return Some(self.now);
                }
                link.sent
                    .iter()
                    .filter_map(|sent| match sent.status {
                        DeliveryStatus::DeliverAfter(at) => Some(at),
                        DeliveryStatus::Hold => None,
                        // A cut SYN is dropped when `connect` gives up.
                        DeliveryStatus::Cut if is_syn(&sent.protocol) => {
                            Some(sent.sent_at + SYN_GIVE_UP)
                        }
                        DeliveryStatus::Cut => None,
                    })
                    .min()
            })
            .min()
    }

    pub(crate) fn iter_mut(&mut self) -> LinksIter<'_> {
        LinksIter {
            iter: self.links.iter_mut(),
        }
    }

    #[inline]
    fn get_link_mut(&mut self, pair: &Pair) -> &mut Link {
        self.links
            .get_mut(pair)
            .unwrap_or_else(|| panic!("unable to find link between {pair:?}"))
    }
}

/// Represents a message sent between two hosts on the network.
struct Sent {
    src: SocketAddr,
    dst: SocketAddr,
    status: DeliveryStatus,
    protocol: Protocol,
    /// When it was first sent: retransmissions are timed from there.
    sent_at: Instant,
}

impl Sent {
    fn deliver(&mut self, now: Instant) {
        self.status = DeliveryStatus::DeliverAfter(now);
    }
}

enum DeliveryStatus {
    DeliverAfter(Instant),
    Hold,
    /// A TCP segment an explicit partition cut, with `tcp_retransmit`: it
    /// is retransmitted after the repair.
    Cut,
}

/// Whether TCP retransmits `protocol` when it is lost: a SYN, data or a
/// FIN, not a RST or UDP.
fn is_retransmitted(protocol: &Protocol) -> bool {
    matches!(
        protocol,
        Protocol::Tcp(Segment::Syn(_) | Segment::Data(..) | Segment::Fin(_))
    )
}

fn is_syn(protocol: &Protocol) -> bool {
    matches!(protocol, Protocol::Tcp(Segment::Syn(_)))
}

/// The first retransmission of a segment first sent at `sent_at` that
/// leaves at or after `now`: `RTO_MIN` after the first send, then
/// doubling.
fn next_retransmission(sent_at: Instant, now: Instant) -> Instant {
    let mut rto = RTO_MIN;
    let mut at = sent_at + rto;
    while at < now {
        rto = (rto * 2).min(RTO_MAX);
        at += rto;
    }
    at
}

impl Link {
    fn new(now: Instant) -> Link {
        Link {
            state_a_b: State::Healthy,
            state_b_a: State::Healthy,
            config: config::Link::default(),
            sent: VecDeque::new(),
            deliverable: IndexMap::new(),
            undelivered: 0,
            now,
        }
    }

    fn enqueue_message(
        &mut self,
        global_config: &config::Link,
        rand: &mut dyn RngCore,
        src: SocketAddr,
        dst: SocketAddr,
        message: Protocol,
    ) -> Result<()> {
        tracing::trace!(target: TRACING_TARGET, ?src, ?dst, protocol = %message, "Send");

        self.rand_partition_or_repair(global_config, rand);
        let result = self.enqueue(global_config, rand, src, dst, message);
        self.process_deliverables();
        result
    }

    fn has_deliverable(&self, addr: IpAddr) -> bool {
        // At most the link's two ends are keys: a scan beats hashing.
        self.undelivered > 0
            && self
                .deliverable
                .iter()
                .any(|(dst, queue)| *dst == addr && !queue.is_empty())
    }

    fn get_state_for_message(&self, src: IpAddr, dst: IpAddr) -> State {
        // Between each pair of ip-addresses there can exist a link.
        // A link between two such pairs can be constructed as
        // Pair::new(x,y) or Pair::new(y,x). These two expressions create
        // the exact same link. We denote one of the ends of the link as 'a',
        // and the other 'b'. 'a' is always the one that compares smaller, i.e,
        // `a < b` holds.
        if src < dst {
            self.state_a_b
        } else {
            self.state_b_a
        }
    }

    // src -> link -> dst
    //        ^-- you are here!
    //
    // Messages may be dropped, sit on the link for a while (due to latency, or
    // because the link has stalled), or be delivered immediately.
    // Link will return an Err(()) if the socket buffer is full.
    fn enqueue(
        &mut self,
        global_config: &config::Link,
        rand: &mut dyn RngCore,
        src: SocketAddr,
        dst: SocketAddr,
        message: Protocol,
    ) -> Result<()> {
        let state = self.get_state_for_message(src.ip(), dst.ip());
        let retransmit = global_config.tcp_retransmit && is_retransmitted(&message);
        let status = match state {
            // The handshake needs both directions: a SYN whose answer
            // would be cut is retransmitted too.
            State::Healthy
                if retransmit
                    && is_syn(&message)
                    && matches!(
                        self.get_state_for_message(dst.ip(), src.ip()),
                        State::ExplicitPartition
                    ) =>
            {
                DeliveryStatus::Cut
            }
            State::Healthy => {
                let delay = self.delay(global_config.latency(), rand);
                DeliveryStatus::DeliverAfter(self.now + delay)
            }
            State::ExplicitPartition if retransmit => {
                tracing::trace!(target: TRACING_TARGET,?src, ?dst, protocol = %message, "Cut");
                DeliveryStatus::Cut
            }
            // Only A->B is blocked, so B can send, so we can send if src is B
            State::Hold => {
                tracing::trace!(target: TRACING_TARGET,?src, ?dst, protocol = %message, "Hold");
                DeliveryStatus::Hold
            }
            _ => {
                tracing::trace!(target: TRACING_TARGET,?src, ?dst, protocol = %message, "Drop");
                return Ok(());
            }
        };

        let sent = Sent {
            src,
            dst,
            status,
            protocol: message,
            sent_at: self.now,
        };

        self.sent.push_back(sent);
        Ok(())
    }

    fn tick(&mut self, now: Instant) {
        self.now = now;
        self.process_deliverables();
    }

    fn process_deliverables(&mut self) {
        // TODO: `drain_filter` is not yet stable, and so we have a low quality
        // implementation here that avoids clones.
        let mut deliverable = 0;
        for i in 0..self.sent.len() {
            let index = i - deliverable;
            let sent = &self.sent[index];
            if matches!(sent.status, DeliveryStatus::Cut)
                && is_syn(&sent.protocol)
                && sent.sent_at + SYN_GIVE_UP <= self.now
            {
                // `connect` gives up: dropping the SYN fails it.
                self.sent.remove(index);
                deliverable += 1;
                continue;
            }
            if let DeliveryStatus::DeliverAfter(time) = sent.status {
                if time <= self.now {
                    let sent = self.sent.remove(index).unwrap();
                    let envelope = Envelope {
                        src: sent.src,
                        dst: sent.dst,
                        message: sent.protocol,
                    };
                    self.deliverable
                        .entry(sent.dst.ip())
                        .or_default()
                        .push_back(envelope);
                    self.undelivered += 1;
                    deliverable += 1;
                }
            }
        }
    }

    // FIXME: This implementation does not respect message delivery order. If
    // host A and host B are ordered (by addr), and B sends before A, then this
    // method will deliver A's message before B's.
    fn deliver_messages(
        &mut self,
        global_config: &config::Link,
        rand: &mut dyn RngCore,
        host: &mut Host,
    ) {
        let deliverable = self
            .deliverable
            .entry(host.addr)
            .or_default()
            .drain(..)
            .collect::<Vec<Envelope>>();
        self.undelivered -= deliverable.len();

        for message in deliverable {
            let (src, dst) = (message.src, message.dst);
            if let Err(message) = host.receive_from_network(message) {
                let _ = self.enqueue_message(global_config, rand, dst, src, message);
            }
        }
    }

    // Randomly break or repair this link.
    fn rand_partition_or_repair(&mut self, global_config: &config::Link, rand: &mut dyn RngCore) {
        let do_rand = self.rand_partition(global_config.message_loss(), rand);
        match (self.state_a_b, self.state_b_a) {
            (State::Healthy, _) | (_, State::Healthy) if do_rand => {
                self.state_a_b = State::RandPartition;
                self.state_b_a = State::RandPartition;

                self.sent.clear();
            }
            (State::RandPartition, _) | (_, State::RandPartition)
                if self.rand_repair(global_config.message_loss(), rand) =>
            {
                self.release();
            }
            _ => {}
        }
    }

    fn hold(&mut self) {
        self.state_a_b = State::Hold;
        self.state_b_a = State::Hold;

        for sent in &mut self.sent {
            sent.status = DeliveryStatus::Hold;
        }
    }

    // This link becomes healthy, and any held messages are scheduled for delivery.
    fn release(&mut self) {
        self.state_a_b = State::Healthy;
        self.state_b_a = State::Healthy;
        for sent in &mut self.sent {
            if let DeliveryStatus::Hold = sent.status {
                sent.deliver(self.now);
            }
        }
    }

    fn explicit_partition(&mut self, retransmit: bool) {
        self.state_a_b = State::ExplicitPartition;
        self.state_b_a = State::ExplicitPartition;

        if retransmit {
            self.cut(|_| true);
        } else {
            self.sent.clear();
        }
    }

    fn partition_oneway(&mut self, from: IpAddr, to: IpAddr, retransmit: bool) {
        if from < to {
            self.state_a_b = State::ExplicitPartition;
        } else {
            self.state_b_a = State::ExplicitPartition;
        }

        if retransmit {
            self.cut(|sent| sent.src.ip() == from || is_syn(&sent.protocol));
        } else {
            self.sent.retain(|sent| sent.src.ip() != from);
        }
    }

    /// With `tcp_retransmit`, what a partition takes in flight: the
    /// segments `cut` selects that TCP retransmits are cut, the rest of
    /// them lost.
    fn cut(&mut self, cut: impl Fn(&Sent) -> bool) {
        self.sent.retain_mut(|sent| {
            if !cut(sent) {
                return true;
            }
            if is_retransmitted(&sent.protocol) {
                sent.status = DeliveryStatus::Cut;
                true
            } else {
                false
            }
        });
    }

    /// After a repair: schedules each cut segment whose way is open again
    /// (both ways, for a SYN) at its retransmission that gets through,
    /// plus the link's latency. A connection's segments leave together,
    /// in order, at the retransmission of the oldest (its timer's). A SYN
    /// after its last retransmission stays cut until `connect` gives up.
    fn retransmit(&mut self, global_config: &config::Link, rand: &mut dyn RngCore) {
        let open = |link: &Link, src: IpAddr, dst: IpAddr| {
            matches!(link.get_state_for_message(src, dst), State::Healthy)
        };
        // Each connection's delivery time, from its oldest cut segment.
        let mut scheduled: Vec<(SocketAddr, SocketAddr, Instant)> = Vec::new();
        for index in 0..self.sent.len() {
            let sent = &self.sent[index];
            let (src, dst) = (sent.src, sent.dst);
            if !matches!(sent.status, DeliveryStatus::Cut) || !open(self, src.ip(), dst.ip()) {
                continue;
            }
            let at = if is_syn(&sent.protocol) {
                if !open(self, dst.ip(), src.ip()) {
                    continue;
                }
                let Some(after) = SYN_RETRANSMITS
                    .iter()
                    .find(|after| sent.sent_at + **after >= self.now)
                else {
                    continue;
                };
                let delay = self.delay(global_config.latency(), rand);
                sent.sent_at + *after + delay
            } else if let Some(&(.., at)) =
                scheduled.iter().find(|(s, d, _)| *s == src && *d == dst)
            {
                at
            } else {
                let delay = self.delay(global_config.latency(), rand);
                let at = next_retransmission(sent.sent_at, self.now) + delay;
                scheduled.push((src, dst, at));
                at
            };
            self.sent[index].status = DeliveryStatus::DeliverAfter(at);
        }
    }

    fn repair_oneway(&mut self, from: IpAddr, to: IpAddr) {
        if from < to {
            self.state_a_b = State::Healthy;
        } else {
            self.state_b_a = State::Healthy;
        }
    }

    // Repair the link, without releasing any held messages.
    fn explicit_repair(&mut self) {
        self.state_a_b = State::Healthy;
        self.state_b_a = State::Healthy;
    }

    /// Should the link be randomly partitioned
    fn rand_partition(&self, global: &config::MessageLoss, rand: &mut dyn RngCore) -> bool {
        let config = self.config.message_loss.as_ref().unwrap_or(global);
        let fail_rate = config.fail_rate;
        fail_rate > 0.0 && rand.random_bool(fail_rate)
    }

    fn rand_repair(&self, global: &config::MessageLoss, rand: &mut dyn RngCore) -> bool {
        let config = self.config.message_loss.as_ref().unwrap_or(global);
        let repair_rate = config.repair_rate;
        repair_rate > 0.0 && rand.random_bool(repair_rate)
    }

    fn delay(&self, global: &config::Latency, rand: &mut dyn RngCore) -> Duration {
        let config = self.config.latency.as_ref().unwrap_or(global);

        let mult = config.latency_distribution.sample(rand);
        let range = (config.max_message_latency - config.min_message_latency).as_millis() as f64;
        let delay = config.min_message_latency + Duration::from_millis((range * mult) as _);

        std::cmp::min(delay, config.max_message_latency)
    }

    fn latency(&mut self, global: &config::Latency) -> &mut config::Latency {
        self.config.latency.get_or_insert_with(|| global.clone())
    }

    fn message_loss(&mut self, global: &config::MessageLoss) -> &mut config::MessageLoss {
        self.config
            .message_loss
            .get_or_insert_with(|| global.clone())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Link;

    use super::*;

    #[test]
    #[should_panic(expected = "unable to find link between Pair(10.0.0.1, 192.168.0.1)")]
    fn link_access_gives_useful_panic_message() {
        let mut topo = Topology::new(Link::default());
        topo.hold("10.0.0.1".parse().unwrap(), "192.168.0.1".parse().unwrap());
    }
}
