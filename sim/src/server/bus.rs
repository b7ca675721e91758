//! The reach of a node's `PUBLISH`: its own subscribers, and in a cluster
//! the cluster bus, as far as pub/sub needs it.
//!
//! In a Redis Cluster, `PUBLISH` on one node reaches the subscribers of
//! every node: the node delivers to its own subscribers and relays the
//! message over the cluster bus (its port + 10000) to every node it has a
//! link to, each of which delivers to its own. A node cut off from the
//! publisher hears nothing: the bus does not queue a message for a link
//! that is down. Here the relay is one turmoil UDP datagram per other node,
//! so a partition drops it and a slow link delays it, as on the real bus.

use std::rc::Rc;

use turmoil::net::UdpSocket;

use super::node::{Node, NodeHandle, PORT};
use crate::net::redis_host;

/// The bus port: Redis's default, the client port + 10000.
pub const BUS_PORT: u16 = PORT + 10_000;

/// A relayed message: the channel's length (4 bytes, big-endian), the
/// channel, then the message.
fn encode(channel: &[u8], message: &[u8]) -> Vec<u8> {
    let mut datagram = Vec::with_capacity(4 + channel.len() + message.len());
    datagram.extend_from_slice(&(channel.len() as u32).to_be_bytes());
    datagram.extend_from_slice(channel);
    datagram.extend_from_slice(message);
    datagram
}

/// The channel and message of a relayed datagram; `None` if malformed.
fn decode(datagram: &[u8]) -> Option<(&[u8], &[u8])> {
    let (length, rest) = datagram.split_first_chunk::<4>()?;
    let length = usize::try_from(u32::from_be_bytes(*length)).ok()?;
    (length <= rest.len()).then(|| rest.split_at(length))
}

/// `PUBLISH` on node `from`: its own subscribers get the message at once;
/// in a cluster, every other node's when the bus relays it. Answers how
/// many of `from`'s own got it (what Redis answers in a cluster too).
pub(super) fn publish(from: &Node, channel: &[u8], message: &[u8]) -> usize {
    let local = from.subscribers.deliver(channel, message);
    if let Some(cluster) = &from.cluster {
        relay(from, cluster.node_count(), channel, message);
    }
    local
}

/// Relays a `PUBLISH` from `node` to the other `nodes` nodes of its
/// cluster (their subscribers get it when the datagram arrives).
fn relay(node: &Node, nodes: usize, channel: &[u8], message: &[u8]) {
    let Some(bus) = &node.bus else {
        return;
    };
    let datagram = encode(channel, message);
    for other in (0..nodes).filter(|&other| other != node.index) {
        // A node that is down or cut off misses it, as on the real bus.
        let _ = bus.try_send_to(&datagram, (redis_host(other).as_str(), BUS_PORT));
    }
}

/// Opens the node's end of the bus and delivers what arrives to its
/// subscribers, until the host stops.
pub(crate) async fn serve(node: NodeHandle) -> turmoil::Result {
    let socket = Rc::new(UdpSocket::bind(("0.0.0.0", BUS_PORT)).await?);
    node.0.borrow_mut().bus = Some(Rc::clone(&socket));
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let (read, _) = socket.recv_from(&mut buffer).await?;
        if let Some((channel, message)) = decode(&buffer[..read]) {
            node.0.borrow().subscribers.deliver(channel, message);
        }
    }
}

#[cfg(test)]
mod tests {
    use redis_protocol::resp2::types::OwnedFrame as Frame;

    use super::*;
    use crate::server::{cluster::ClusterHandle, frame::bulk};

    #[test]
    fn a_relayed_message_decodes_to_what_was_published() {
        let datagram = encode(b"{lock:k}:released", b"released");
        assert_eq!(
            decode(&datagram),
            Some((&b"{lock:k}:released"[..], &b"released"[..]))
        );
        assert_eq!(decode(&datagram[..3]), None);
        assert_eq!(decode(&[0, 0, 0, 9, 1]), None, "a length past the end");
    }

    #[test]
    fn publish_answers_for_the_node_own_subscribers() {
        // Other nodes hear it over the bus (tests/cluster.rs); the reply
        // counts this node's subscribers, as Redis does in a cluster.
        let (_cluster, nodes) = ClusterHandle::with_nodes(3, 1);
        let (push, mut pushes) = tokio::sync::mpsc::unbounded_channel();
        nodes[3]
            .0
            .borrow_mut()
            .subscribers
            .subscribe(1, &push, &[b"channel".to_vec()]);
        assert_eq!(
            publish(&nodes[0].0.borrow(), b"channel", b"released"),
            0,
            "none on redis-0"
        );
        assert!(pushes.try_recv().is_err(), "not delivered in place");
        assert_eq!(
            publish(&nodes[3].0.borrow(), b"channel", b"again"),
            1,
            "one on redis-3"
        );
        assert_eq!(
            pushes.try_recv().ok(),
            Some(Frame::Array(vec![
                bulk(b"message"),
                bulk(b"channel"),
                bulk(b"again"),
            ]))
        );
    }
}
