//! Pub/sub, for data nodes and sentinels alike: the subscriptions of a
//! server's connections, `SUBSCRIBE` and `UNSUBSCRIBE` on them, and the
//! delivery of a published message to its channel's subscribers.
//!
//! A subscribed connection carries pushes (`message` frames) besides its
//! replies: each connection hands its push sender in with `SUBSCRIBE`, and
//! the connection loop ([`conn`](crate::server::conn)) writes what arrives
//! on it. Where a message comes from is the server's to say: a node's
//! `PUBLISH` (and, in a cluster, the bus: [`bus`](crate::server::bus)), a
//! sentinel's `+switch-master`.

use std::collections::BTreeMap;

use redis_protocol::resp2::types::OwnedFrame as Frame;
use tokio::sync::mpsc::UnboundedSender;

use crate::server::frame::bulk;

/// Where a connection's pushes go.
pub type Push = UnboundedSender<Frame>;

/// A server's subscriptions: channel → connection id → its push sender.
#[derive(Debug, Default)]
pub struct Subscribers(BTreeMap<Vec<u8>, BTreeMap<u64, Push>>);

impl Subscribers {
    /// `SUBSCRIBE channel …` on connection `id`: one reply per channel,
    /// each with the connection's subscription count after it.
    pub fn subscribe(&mut self, id: u64, push: &Push, channels: &[Vec<u8>]) -> Vec<Frame> {
        channels
            .iter()
            .map(|channel| {
                self.0
                    .entry(channel.clone())
                    .or_default()
                    .insert(id, push.clone());
                Frame::Array(vec![
                    bulk(b"subscribe"),
                    bulk(channel),
                    Frame::Integer(self.count(id)),
                ])
            })
            .collect()
    }

    /// `UNSUBSCRIBE [channel …]` on connection `id` (no channel: all of
    /// its own): one reply per channel, each with the count after it.
    pub fn unsubscribe(&mut self, id: u64, channels: &[Vec<u8>]) -> Vec<Frame> {
        let channels: Vec<Vec<u8>> = if channels.is_empty() {
            self.0
                .iter()
                .filter(|(_, subscribers)| subscribers.contains_key(&id))
                .map(|(channel, _)| channel.clone())
                .collect()
        } else {
            channels.to_vec()
        };
        if channels.is_empty() {
            // Subscribed to nothing: Redis still answers, with a nil channel.
            return vec![Frame::Array(vec![
                bulk(b"unsubscribe"),
                Frame::Null,
                Frame::Integer(0),
            ])];
        }
        channels
            .iter()
            .map(|channel| {
                if let Some(subscribers) = self.0.get_mut(channel) {
                    subscribers.remove(&id);
                }
                Frame::Array(vec![
                    bulk(b"unsubscribe"),
                    bulk(channel),
                    Frame::Integer(self.count(id)),
                ])
            })
            .collect()
    }

    /// Forgets connection `id`'s subscriptions (it closed), and the
    /// channels left without a subscriber.
    pub fn close(&mut self, id: u64) {
        for subscribers in self.0.values_mut() {
            subscribers.remove(&id);
        }
        self.0.retain(|_, subscribers| !subscribers.is_empty());
    }

    /// Forgets every subscription (the server restarted).
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Pushes a message to the subscribers of `channel`; answers how many
    /// got it (a connection that closed meanwhile does not count).
    pub fn deliver(&self, channel: &[u8], message: &[u8]) -> usize {
        let Some(subscribers) = self.0.get(channel) else {
            return 0;
        };
        let frame = Frame::Array(vec![bulk(b"message"), bulk(channel), bulk(message)]);
        subscribers
            .values()
            .filter(|push| push.send(frame.clone()).is_ok())
            .count()
    }

    /// How many channels connection `id` is subscribed to.
    fn count(&self, id: u64) -> i64 {
        self.0
            .values()
            .filter(|subscribers| subscribers.contains_key(&id))
            .count() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscriber_gets_what_is_delivered_until_it_unsubscribes() {
        let mut subscribers = Subscribers::default();
        let (push, mut pushes) = tokio::sync::mpsc::unbounded_channel();
        let replies = subscribers.subscribe(1, &push, &[b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(
            replies[1],
            Frame::Array(vec![bulk(b"subscribe"), bulk(b"b"), Frame::Integer(2)])
        );
        assert_eq!(subscribers.deliver(b"a", b"hello"), 1);
        assert_eq!(
            pushes.try_recv().ok(),
            Some(Frame::Array(vec![
                bulk(b"message"),
                bulk(b"a"),
                bulk(b"hello")
            ]))
        );
        assert_eq!(subscribers.unsubscribe(1, &[]).len(), 2, "both channels");
        assert_eq!(subscribers.deliver(b"a", b"again"), 0);
        assert_eq!(
            subscribers.unsubscribe(1, &[]),
            vec![Frame::Array(vec![
                bulk(b"unsubscribe"),
                Frame::Null,
                Frame::Integer(0)
            ])],
            "nothing left: one reply with a nil channel"
        );
        subscribers.subscribe(2, &push, &[b"c".to_vec()]);
        subscribers.close(2);
        assert_eq!(subscribers.deliver(b"c", b"gone"), 0);
    }
}
