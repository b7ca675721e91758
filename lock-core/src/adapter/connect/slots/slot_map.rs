//! The slot map: which shard serves which slots, read from `CLUSTER SHARDS`
//! (Redis 7+) or, on older servers, `CLUSTER SLOTS`.

use redis::Value;

use super::{NodeAddress, SLOTS};
use crate::adapter::connect::reply::{field, fields, integer, items, text};

/// One node of a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Its cluster node id, when the reply gives it.
    pub id: Option<String>,
    /// Where it accepts clients.
    pub address: NodeAddress,
    /// False when `CLUSTER SHARDS` reports it `failed` or `loading`.
    pub healthy: bool,
}

/// A primary, its replicas, and an id that stays the same across a
/// failover when the server provides one (`CLUSTER SHARDS` on Redis 7.2+;
/// otherwise the primary's node id, or its address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// The shard's id.
    pub id: String,
    /// The node that takes writes.
    pub primary: Node,
    /// Its replicas with a known address.
    pub replicas: Vec<Node>,
}

/// Why a slot-map reply could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SlotMapError {
    /// The reply does not have the documented shape.
    #[error("unexpected {command} reply: {detail}")]
    Malformed {
        /// `CLUSTER SHARDS` or `CLUSTER SLOTS`.
        command: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// A range of slots has no primary with a known address.
    #[error("slots {first}-{last} have no primary with a known address")]
    NoPrimary {
        /// The first slot of the range.
        first: u16,
        /// The last slot of the range.
        last: u16,
    },
    /// Two shards claim the same slot.
    #[error("slot {slot} is claimed by two shards")]
    Overlap {
        /// The slot.
        slot: u16,
    },
}

/// Which shard serves which slots, as one node sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlotMap {
    shards: Vec<Shard>,
    /// `(first, last, index into shards)`, sorted, disjoint.
    ranges: Vec<(u16, u16, usize)>,
}

const SHARDS: &str = "CLUSTER SHARDS";
const SLOTS_COMMAND: &str = "CLUSTER SLOTS";

impl SlotMap {
    /// Reads a `CLUSTER SHARDS` reply (RESP2 or RESP3). `origin_host` is the
    /// host the command went to, which an empty endpoint stands for; `tls`
    /// picks each node's `tls-port` over its `port`. Shards that serve no
    /// slot are left out.
    pub fn from_cluster_shards(
        reply: &Value,
        origin_host: &str,
        tls: bool,
    ) -> Result<Self, SlotMapError> {
        let malformed = |detail: String| SlotMapError::Malformed {
            command: SHARDS,
            detail,
        };
        let mut map = Self::default();
        for shard in items(reply).ok_or_else(|| malformed("not an array".into()))? {
            let shard = fields(shard).ok_or_else(|| malformed("a shard is not a map".into()))?;
            let slots = field(&shard, "slots")
                .and_then(items)
                .ok_or_else(|| malformed("a shard without slots".into()))?;
            let ranges = slots
                .chunks(2)
                .map(|pair| match pair {
                    [first, last] => Ok((slot(first)?, slot(last)?)),
                    _ => Err(()),
                })
                .collect::<Result<Vec<_>, ()>>()
                .map_err(|()| malformed(format!("bad slot ranges {slots:?}")))?;
            let Some(&(first, last)) = ranges.first() else {
                continue;
            };
            let mut primaries = Vec::new();
            let mut replicas = Vec::new();
            let nodes = field(&shard, "nodes")
                .and_then(items)
                .ok_or_else(|| malformed("a shard without nodes".into()))?;
            for node in nodes {
                let node = fields(node).ok_or_else(|| malformed("a node is not a map".into()))?;
                let role = field(&node, "role").and_then(text).unwrap_or_default();
                let Some(parsed) = shard_node(&node, origin_host, tls) else {
                    continue;
                };
                if role == "master" {
                    primaries.push(parsed);
                } else {
                    replicas.push(parsed);
                }
            }
            // A failed primary can linger in the shard next to the replica
            // that replaced it: the healthy one takes the writes.
            primaries.sort_by_key(|node| !node.healthy);
            let mut primaries = primaries.into_iter();
            let primary = primaries
                .next()
                .ok_or(SlotMapError::NoPrimary { first, last })?;
            let id = field(&shard, "id")
                .and_then(text)
                .map(str::to_owned)
                .or_else(|| primary.id.clone())
                .unwrap_or_else(|| primary.address.to_string());
            replicas.extend(primaries);
            map.add(
                Shard {
                    id,
                    primary,
                    replicas,
                },
                &ranges,
            );
        }
        map.finish()
    }

    /// Reads a `CLUSTER SLOTS` reply, for servers without `CLUSTER SHARDS`
    /// (before 7.0). `origin_host` stands in for an empty or null endpoint.
    pub fn from_cluster_slots(reply: &Value, origin_host: &str) -> Result<Self, SlotMapError> {
        let malformed = |detail: String| SlotMapError::Malformed {
            command: SLOTS_COMMAND,
            detail,
        };
        let mut map = Self::default();
        for entry in items(reply).ok_or_else(|| malformed("not an array".into()))? {
            let entry = items(entry).ok_or_else(|| malformed("an entry is not an array".into()))?;
            let [first, last, nodes @ ..] = entry else {
                return Err(malformed(format!("a short entry {entry:?}")));
            };
            let (first, last) = match (slot(first), slot(last)) {
                (Ok(first), Ok(last)) => (first, last),
                _ => return Err(malformed(format!("bad slot range {first:?}-{last:?}"))),
            };
            let mut nodes = nodes.iter().map(|node| slots_node(node, origin_host));
            // The first node is the primary. If it cannot be dialed, the
            // range has no primary: a replica listed after it is not one.
            let primary = nodes
                .next()
                .flatten()
                .ok_or(SlotMapError::NoPrimary { first, last })?;
            let replicas = nodes.flatten().collect();
            let same_primary = |shard: &Shard| match (&shard.primary.id, &primary.id) {
                (Some(known), Some(id)) => known == id,
                _ => shard.primary.address == primary.address,
            };
            if let Some(index) = map.shards.iter().position(same_primary) {
                map.ranges.push((first, last, index));
                continue;
            }
            let id = primary
                .id
                .clone()
                .unwrap_or_else(|| primary.address.to_string());
            map.add(
                Shard {
                    id,
                    primary,
                    replicas,
                },
                &[(first, last)],
            );
        }
        map.finish()
    }

    /// Whether `error` says the server does not know `CLUSTER SHARDS`
    /// (Redis before 7.0): then ask `CLUSTER SLOTS` instead.
    pub fn shards_unsupported(error: &redis::RedisError) -> bool {
        error.code() == Some("ERR")
            && error
                .detail()
                .is_some_and(|detail| detail.to_ascii_lowercase().contains("unknown subcommand"))
    }

    fn add(&mut self, shard: Shard, ranges: &[(u16, u16)]) {
        let index = self.shards.len();
        self.shards.push(shard);
        self.ranges
            .extend(ranges.iter().map(|&(first, last)| (first, last, index)));
    }

    /// Sorts the ranges and checks that no slot is claimed twice.
    fn finish(mut self) -> Result<Self, SlotMapError> {
        self.ranges.sort_unstable();
        for pair in self.ranges.windows(2) {
            if pair[1].0 <= pair[0].1 {
                return Err(SlotMapError::Overlap { slot: pair[1].0 });
            }
        }
        if let Some(&(first, last, _)) = self.ranges.iter().find(|range| range.0 > range.1) {
            return Err(SlotMapError::Malformed {
                command: SHARDS,
                detail: format!("range {first}-{last} ends before it starts"),
            });
        }
        Ok(self)
    }

    /// The shard serving `slot`, if any does.
    pub fn shard_of(&self, slot: u16) -> Option<&Shard> {
        let index = self.ranges.partition_point(|&(first, _, _)| first <= slot);
        let &(_, last, shard) = self.ranges.get(index.checked_sub(1)?)?;
        (slot <= last).then(|| &self.shards[shard])
    }

    /// The primary serving `slot`, if any does.
    pub fn primary_of(&self, slot: u16) -> Option<&NodeAddress> {
        self.shard_of(slot).map(|shard| &shard.primary.address)
    }

    /// The shards serving at least one slot, in the order the reply gave.
    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// Every slot range, ascending: `(first, last, shard)`, inclusive.
    pub fn ranges(&self) -> impl Iterator<Item = (u16, u16, &Shard)> {
        self.ranges
            .iter()
            .map(|&(first, last, shard)| (first, last, &self.shards[shard]))
    }

    /// Whether every one of the 16384 slots has a shard (the cluster would
    /// otherwise answer `CLUSTERDOWN` for the missing ones).
    pub fn covers_all_slots(&self) -> bool {
        let covered: u32 = self
            .ranges
            .iter()
            .map(|&(first, last, _)| u32::from(last - first) + 1)
            .sum();
        covered == u32::from(SLOTS)
    }
}

fn slot(value: &Value) -> Result<u16, ()> {
    integer(value)
        .and_then(|slot| u16::try_from(slot).ok())
        .filter(|&slot| slot < SLOTS)
        .ok_or(())
}

/// The host to dial from an endpoint field: an empty or null endpoint means
/// the host the reply came from; `?` means unknown (the node cannot be
/// reached yet), as the Redis documentation defines them.
fn endpoint<'a>(value: Option<&'a Value>, origin_host: &'a str) -> Option<&'a str> {
    match value.map_or(Some(""), |value| match value {
        Value::Nil => Some(""),
        other => text(other),
    })? {
        "" => Some(origin_host),
        "?" => None,
        host => Some(host),
    }
}

/// A node of a `CLUSTER SHARDS` shard; `None` if it cannot be dialed.
fn shard_node(node: &[(&str, &Value)], origin_host: &str, tls: bool) -> Option<Node> {
    let port = |name| {
        field(node, name)
            .and_then(integer)
            .and_then(|port| u16::try_from(port).ok())
            .filter(|&port| port != 0)
    };
    let port = if tls {
        port("tls-port").or_else(|| port("port"))
    } else {
        port("port")
    }?;
    let host = endpoint(
        field(node, "endpoint").or_else(|| field(node, "ip")),
        origin_host,
    )?;
    Some(Node {
        id: field(node, "id").and_then(text).map(str::to_owned),
        address: NodeAddress::new(host, port),
        healthy: field(node, "health")
            .and_then(text)
            .is_none_or(|health| health == "online"),
    })
}

/// A node of a `CLUSTER SLOTS` entry: `[endpoint, port, id?, metadata?]`;
/// `None` if it cannot be dialed (an unknown endpoint, or port 0, as in
/// `CLUSTER SHARDS`).
fn slots_node(node: &Value, origin_host: &str) -> Option<Node> {
    let fields = items(node)?;
    let host = endpoint(fields.first(), origin_host)?;
    let port = u16::try_from(integer(fields.get(1)?)?)
        .ok()
        .filter(|&port| port != 0)?;
    Some(Node {
        id: fields.get(2).and_then(text).map(str::to_owned),
        address: NodeAddress::new(host, port),
        healthy: true,
    })
}

#[cfg(test)]
mod tests;
