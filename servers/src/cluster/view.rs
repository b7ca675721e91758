//! How the nodes, and `redis-cli --cluster check`, describe a cluster's
//! shards.

use std::collections::{BTreeMap, BTreeSet};

use crate::{Binaries, StartError, query_port};

/// One shard as a node's `CLUSTER NODES` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardView {
    /// The primary's client port.
    pub primary: u16,
    /// Its slot ranges, inclusive, ascending.
    pub slots: Vec<(u16, u16)>,
    /// Its replicas' client ports, ascending.
    pub replicas: Vec<u16>,
}

impl ShardView {
    /// Whether one of its ranges holds `slot`.
    pub fn serves(&self, slot: u16) -> bool {
        self.slots
            .iter()
            .any(|&(first, last)| (first..=last).contains(&slot))
    }
}

/// The shards the node on `port` describes in `CLUSTER NODES`: live primaries with
/// slots, their live replicas, ordered by primary port.
pub(super) fn shards_seen_by(port: u16) -> Result<Vec<ShardView>, String> {
    let text: String =
        query_port(port, &["CLUSTER", "NODES"]).map_err(|error| error.to_string())?;
    // <id> <ip:port@bus[,host]> <flags> <primary id|-> <ping> <pong> <epoch> <link> <slot>...
    let mut ports = BTreeMap::new();
    let mut shards: BTreeMap<String, ShardView> = BTreeMap::new();
    let mut replicas = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [id, address, flags, primary_id, _, _, _, _, slots @ ..] = fields.as_slice() else {
            return Err(format!("unexpected CLUSTER NODES line {line:?}"));
        };
        let port: u16 = address
            .split(['@', ','])
            .next()
            .and_then(|host_port| host_port.rsplit_once(':'))
            .and_then(|(_, port)| port.parse().ok())
            .ok_or_else(|| format!("no port in {address:?}"))?;
        ports.insert((*id).to_owned(), port);
        if flags.contains("fail") || flags.contains("noaddr") {
            continue;
        }
        if flags.contains("master") {
            let ranges = slots
                .iter()
                // `[slot->-id]` and `[slot-<-id]` mark a migration in progress.
                .filter(|slot| !slot.starts_with('['))
                .map(|slot| {
                    let (first, last) = slot.split_once('-').unwrap_or((slot, slot));
                    Ok((
                        first.parse().map_err(|_| format!("slot {slot:?}"))?,
                        last.parse().map_err(|_| format!("slot {slot:?}"))?,
                    ))
                })
                .collect::<Result<Vec<(u16, u16)>, String>>()?;
            if !ranges.is_empty() {
                shards.insert(
                    (*id).to_owned(),
                    ShardView {
                        primary: port,
                        slots: ranges,
                        replicas: Vec::new(),
                    },
                );
            }
        } else if flags.contains("slave") {
            replicas.push(((*primary_id).to_owned(), port));
        }
    }
    for (primary_id, port) in replicas {
        if let Some(shard) = shards.get_mut(&primary_id) {
            shard.replicas.push(port);
        }
    }
    let mut shards: Vec<ShardView> = shards.into_values().collect();
    for shard in &mut shards {
        shard.slots.sort_unstable();
        shard.replicas.sort_unstable();
    }
    shards.sort_by_key(|shard| shard.primary);
    Ok(shards)
}

/// How many distinct nodes the `CLUSTER SLOTS` of the node on `port` lists.
pub(super) fn ports_in_cluster_slots(port: u16) -> Result<usize, String> {
    let reply: redis::Value =
        query_port(port, &["CLUSTER", "SLOTS"]).map_err(|error| error.to_string())?;
    let redis::Value::Array(entries) = reply else {
        return Err(format!("CLUSTER SLOTS gave {reply:?}"));
    };
    let mut ports = BTreeSet::new();
    for entry in entries {
        let redis::Value::Array(fields) = entry else {
            return Err("a CLUSTER SLOTS entry is not an array".into());
        };
        for node in fields.iter().skip(2) {
            if let redis::Value::Array(node) = node
                && let Some(redis::Value::Int(port)) = node.get(1)
            {
                ports.insert(*port);
            }
        }
    }
    Ok(ports.len())
}

/// How many nodes `port` lists as online in a shard that serves slots, by
/// `CLUSTER SHARDS` (`None` where the server lacks the command: before
/// Redis 7).
///
/// Its own convergence: Valkey 8.1 keeps a replica out of its primary's
/// shard (a shard of its own, without slots) until the nodes agree on the
/// replica's shard id, which gossip settles after `CLUSTER NODES` and
/// `CLUSTER SLOTS` already show the replica in place ("Shard id … diverges
/// from existing primary shard id, rejecting!" in the log meanwhile).
pub(super) fn ports_in_cluster_shards(port: u16) -> Result<Option<usize>, String> {
    let reply: redis::Value = match query_port(port, &["CLUSTER", "SHARDS"]) {
        Ok(reply) => reply,
        Err(error)
            if error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError)
                && error.to_string().to_lowercase().contains("unknown") =>
        {
            return Ok(None);
        }
        Err(error) => return Err(error.to_string()),
    };
    let redis::Value::Array(shards) = reply else {
        return Err(format!("CLUSTER SHARDS gave {reply:?}"));
    };
    let mut ports = BTreeSet::new();
    for shard in &shards {
        let serves =
            matches!(field(shard, "slots"), Some(redis::Value::Array(slots)) if !slots.is_empty());
        let Some(redis::Value::Array(nodes)) = field(shard, "nodes") else {
            return Err(format!("a CLUSTER SHARDS entry without nodes: {shard:?}"));
        };
        for node in nodes {
            let online = matches!(
                field(node, "health"),
                Some(redis::Value::BulkString(health)) if health.as_slice() == b"online"
            );
            if let (true, true, Some(redis::Value::Int(port))) =
                (serves, online, field(node, "port"))
            {
                ports.insert(*port);
            }
        }
    }
    Ok(Some(ports.len()))
}

/// The value after `name` in a RESP2 flat map (an array of name, value,
/// name, value…).
fn field<'a>(map: &'a redis::Value, name: &str) -> Option<&'a redis::Value> {
    let redis::Value::Array(items) = map else {
        return None;
    };
    items
        .chunks_exact(2)
        .find(|pair| matches!(&pair[0], redis::Value::BulkString(key) if key.as_slice() == name.as_bytes()))
        .map(|pair| &pair[1])
}

/// `redis-cli --cluster check`'s view of the shards: the operator's tool,
/// independent of the code under test.
///
/// # Panics
/// If `redis-cli` fails, or prints a line it cannot read: for tests.
pub fn cli_view(binaries: &Binaries, port: u16) -> Vec<ShardView> {
    let address = format!("127.0.0.1:{port}");
    let output = strip_colours(&redis_cli(binaries, &["--cluster", "check", &address]));
    // M: <id> <ip:port>
    //    slots:[0-5460],[5462] (5461 slots) master
    // S: <id> <ip:port>
    //    replicates <primary id>
    let mut shards: BTreeMap<String, ShardView> = BTreeMap::new();
    let mut replicas = Vec::new();
    let mut current: Option<(char, String, u16)> = None;
    for line in output.lines() {
        let line = line.trim();
        if let Some(rest) = line
            .strip_prefix("M: ")
            .or_else(|| line.strip_prefix("S: "))
        {
            let mut words = rest.split_whitespace();
            let id = words.next().unwrap_or_default().to_owned();
            let port = words
                .next()
                .and_then(|address| address.rsplit_once(':'))
                .and_then(|(_, port)| port.parse().ok())
                .unwrap_or_else(|| panic!("no address in {line:?}"));
            let kind = line.chars().next().unwrap_or('?');
            if kind == 'M' {
                shards.insert(
                    id.clone(),
                    ShardView {
                        primary: port,
                        slots: Vec::new(),
                        replicas: Vec::new(),
                    },
                );
            }
            current = Some((kind, id, port));
        } else if let (Some(ranges), Some(('M', id, _))) = (line.strip_prefix("slots:"), &current) {
            let ranges = ranges.split_whitespace().next().unwrap_or_default();
            let shard = shards.get_mut(id).expect("inserted with its M: line");
            for range in ranges.split(',').filter(|range| !range.is_empty()) {
                let range = range.trim_matches(['[', ']']);
                let (first, last) = range.split_once('-').unwrap_or((range, range));
                shard.slots.push((
                    first.parse().expect("a slot number"),
                    last.parse().expect("a slot number"),
                ));
            }
        } else if let (Some(primary), Some(('S', _, port))) =
            (line.strip_prefix("replicates "), &current)
        {
            replicas.push((primary.trim().to_owned(), *port));
        }
    }
    for (primary, port) in replicas {
        if let Some(shard) = shards.get_mut(&primary) {
            shard.replicas.push(port);
        }
    }
    let mut shards: Vec<ShardView> = shards
        .into_values()
        .filter(|shard| !shard.slots.is_empty())
        .collect();
    for shard in &mut shards {
        shard.slots.sort_unstable();
        shard.replicas.sort_unstable();
    }
    shards.sort_by_key(|shard| shard.primary);
    shards
}

/// `redis-cli --cluster` colours its output even into a pipe: drop the
/// `ESC [ ... m` sequences.
fn strip_colours(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

/// Runs `redis-cli` with `args`.
///
/// # Panics
/// If there is none, or it fails, with its output.
fn redis_cli(binaries: &Binaries, args: &[&str]) -> String {
    let cli = binaries
        .cli()
        .map_err(StartError::from)
        .unwrap_or_else(|error| panic!("{error}"));
    let output = std::process::Command::new(cli)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("{} does not run: {error}", cli.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "redis-cli {args:?} failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}
