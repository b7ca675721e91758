//! The admin reply readers (`reply`, `cluster`, `sentinel`), and raw RESP
//! through redis-rs's parser into every reader and decoder.

use proptest::{collection::vec, prelude::*, sample::select};
use redis::{PushKind, Value};

use super::{CASES, config, strategies::*};
use crate::{
    Reply,
    adapter::{
        NodeAddress,
        cluster::{Redirect, RedirectKind, SLOTS, SlotMap},
        connect::{node::Dialect, reply},
        sentinel::{self, SwitchMaster},
        wire::codec::{self as wire, OpKind},
    },
};

/// A `CLUSTER SHARDS` node, near-valid: some fields missing, some wrong.
fn shard_node() -> BoxedStrategy<Vec<(&'static str, Value)>> {
    let port = prop_oneof![
        3 => (1_i64..65_536).prop_map(Value::Int),
        1 => int().prop_map(Value::Int),
        1 => number_text().prop_map(|text| bulk(&text)),
    ];
    let host = prop_oneof![
        select(vec!["127.0.0.1", "", "?", "::1", "redis-2.example"]).prop_map(bulk),
        Just(Value::Nil),
        value(),
    ];
    let role = prop_oneof![
        select(vec!["master", "replica", "slave", "x"]).prop_map(bulk),
        value()
    ];
    let health = select(vec!["online", "failed", "loading", "?"]).prop_map(bulk);
    let id = "[0-9a-f]{4}".prop_map(|id| bulk(&id));
    (
        prop::option::of(id),
        prop::option::of(port.clone()),
        prop::option::of(port),
        prop::option::of(host.clone()),
        prop::option::of(host),
        prop::option::of(role),
        prop::option::of(health),
    )
        .prop_map(|(id, port, tls_port, ip, endpoint, role, health)| {
            [
                ("id", id),
                ("port", port),
                ("tls-port", tls_port),
                ("ip", ip),
                ("endpoint", endpoint),
                ("role", role),
                ("health", health),
            ]
            .into_iter()
            .filter_map(|(name, value)| Some((name, value?)))
            .collect()
        })
        .boxed()
}

/// A map in RESP3 form or as RESP2's flat array.
fn as_map(fields: Vec<(&'static str, Value)>, resp3: bool) -> Value {
    if resp3 {
        Value::Map(
            fields
                .into_iter()
                .map(|(name, value)| (bulk(name), value))
                .collect(),
        )
    } else {
        Value::Array(
            fields
                .into_iter()
                .flat_map(|(name, value)| [bulk(name), value])
                .collect(),
        )
    }
}

fn slot_number() -> BoxedStrategy<Value> {
    prop_oneof![
        6 => (0_i64..i64::from(SLOTS)).prop_map(Value::Int),
        1 => int().prop_map(Value::Int),
        1 => number_text().prop_map(|text| bulk(&text)),
        1 => value(),
    ]
    .boxed()
}

/// Near-valid `CLUSTER SHARDS` replies, RESP2 or RESP3.
fn cluster_shards() -> BoxedStrategy<Value> {
    let shard = (
        vec(slot_number(), 0..5),
        vec(shard_node(), 0..4),
        any::<bool>(),
        prop::option::of("[0-9a-f]{4}"),
    )
        .prop_map(|(slots, nodes, resp3, id)| {
            let mut fields = vec![
                ("slots", Value::Array(slots)),
                (
                    "nodes",
                    Value::Array(nodes.into_iter().map(|node| as_map(node, resp3)).collect()),
                ),
            ];
            if let Some(id) = id {
                fields.push(("id", bulk(&id)));
            }
            as_map(fields, resp3)
        });
    prop_oneof![4 => vec(shard, 0..5).prop_map(Value::Array), 1 => value()].boxed()
}

/// Near-valid `CLUSTER SLOTS` replies.
fn cluster_slots() -> BoxedStrategy<Value> {
    let node = (
        prop_oneof![
            select(vec!["127.0.0.1", "", "?"]).prop_map(bulk),
            Just(Value::Nil),
            value()
        ],
        prop_oneof![
            (1_i64..65_536).prop_map(Value::Int),
            int().prop_map(Value::Int)
        ],
        prop::option::of("[0-9a-f]{2}".prop_map(|id| bulk(&id))),
    )
        .prop_map(|(host, port, id)| {
            let mut fields = vec![host, port];
            fields.extend(id);
            Value::Array(fields)
        });
    let entry = (slot_number(), slot_number(), vec(node, 0..3)).prop_map(|(first, last, nodes)| {
        let mut entry = vec![first, last];
        entry.extend(nodes);
        Value::Array(entry)
    });
    prop_oneof![4 => vec(entry, 0..5).prop_map(Value::Array), 1 => value()].boxed()
}

/// What every slot map must be, however it was read.
fn check_slot_map(map: &SlotMap) -> Result<(), TestCaseError> {
    let ranges: Vec<(u16, u16, String)> = map
        .ranges()
        .map(|(first, last, shard)| (first, last, shard.id.clone()))
        .collect();
    let mut covered = 0_u32;
    for (index, (first, last, _)) in ranges.iter().enumerate() {
        prop_assert!(first <= last && *last < SLOTS, "{:?}", ranges);
        if let Some((_, previous_last, _)) = index.checked_sub(1).map(|i| &ranges[i]) {
            prop_assert!(
                previous_last < first,
                "ranges overlap or are unsorted: {:?}",
                ranges
            );
        }
        covered += u32::from(last - first) + 1;
    }
    prop_assert_eq!(map.covers_all_slots(), covered == u32::from(SLOTS));
    for shard in map.shards() {
        prop_assert!(shard.primary.address.port != 0);
    }
    // Every range edge, and the slots on either side of it.
    let probes = ranges
        .iter()
        .flat_map(|(first, last, _)| [*first, *last, first.wrapping_sub(1), last + 1])
        .chain([0, SLOTS - 1, SLOTS, u16::MAX]);
    for slot in probes {
        let owner = ranges
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|(_, _, id)| id.as_str());
        prop_assert_eq!(map.shard_of(slot).map(|shard| shard.id.as_str()), owner);
        prop_assert_eq!(map.primary_of(slot).is_some(), owner.is_some());
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(CASES))]

    /// The generic readers never panic and agree with each other.
    #[test]
    fn generic_readers_agree(value in value(), name in text()) {
        if let Some(text) = reply::text(&value) {
            prop_assert_eq!(reply::integer(&value).is_some(), text.parse::<i64>().is_ok());
        }
        if let Value::Int(number) = value {
            prop_assert_eq!(reply::integer(&value), Some(number));
        }
        if let Some(fields) = reply::fields(&value)
            && let Some(found) = reply::field(&fields, &name)
        {
            prop_assert!(fields.iter().any(|(_, value)| std::ptr::eq(*value, found)));
        }
        if let (Value::Array(items) | Value::Set(items), None) = (&value, reply::fields(&value)) {
            // A flat array fails as a map only if odd or with a non-text name.
            prop_assert!(
                items.len() % 2 == 1
                    || items.iter().step_by(2).any(|name| reply::text(name).is_none())
            );
        }
        let _ = reply::items(&value);
    }

    /// `CLUSTER SHARDS` replies read into a consistent slot map or a typed
    /// error.
    #[test]
    fn cluster_shards_read_or_fail(reply in cluster_shards(), host in text(), tls in any::<bool>()) {
        if let Ok(map) = SlotMap::from_cluster_shards(&reply, &host, tls) {
            check_slot_map(&map)?;
        }
    }

    /// `CLUSTER SLOTS` replies read into a consistent slot map or a typed
    /// error.
    #[test]
    fn cluster_slots_read_or_fail(reply in cluster_slots(), host in text()) {
        if let Ok(map) = SlotMap::from_cluster_slots(&reply, &host) {
            check_slot_map(&map)?;
        }
    }

    /// A redirection reads only from `MOVED`/`ASK <slot> <host:port>` with
    /// a slot in range.
    #[test]
    fn redirects_read_only_from_well_formed_lines(
        line in prop_oneof![
            text(),
            (
                select(vec!["MOVED", "ASK", "-MOVED", "-ASK", "ERR", "moved", ""]),
                prop_oneof![(0_u32..20_000).prop_map(|slot| slot.to_string()), number_text()],
                prop_oneof![
                    (select(vec!["", "127.0.0.1", "::1", "[::1]", "h.example"]),
                        prop_oneof![(0_u32..70_000).prop_map(|p| p.to_string()), number_text()])
                        .prop_map(|(host, port)| format!("{host}:{port}")),
                    text(),
                ],
                select(vec!["", " ", " extra", "\r\n"]),
            )
                .prop_map(|(code, slot, to, tail)| format!("{code} {slot} {to}{tail}")),
        ],
        host in text(),
    ) {
        if let Some(redirect) = Redirect::parse(&line, &host) {
            prop_assert!(redirect.slot < SLOTS);
            let code = line.trim().trim_start_matches('-');
            let expected = if code.starts_with("MOVED ") { RedirectKind::Moved } else { RedirectKind::Ask };
            prop_assert!(code.starts_with("MOVED ") || code.starts_with("ASK "));
            prop_assert_eq!(redirect.kind, expected);
            let port = line.rsplit_once(':').map(|(_, port)| port.trim_end().parse::<u16>());
            prop_assert_eq!(port, Some(Ok(redirect.to.port)));
        }
        if let Some(address) = NodeAddress::parse(&line, &host) {
            let port = line.rsplit_once(':').map(|(_, port)| port.parse::<u16>());
            prop_assert_eq!(port, Some(Ok(address.port)));
        }
    }

    /// Sentinel answers: an address only from `[host, port]` with a port
    /// that fits, a role only from an array that starts with text.
    #[test]
    fn sentinel_replies_read_or_fail(reply in prop_oneof![
        (text(), prop_oneof![(0_i64..70_000).prop_map(Value::Int), fence_like()])
            .prop_map(|(host, port)| Value::Array(vec![bulk(&host), port])),
        Just(Value::Array(vec![])),
        value(),
    ]) {
        match sentinel::master_address(&reply) {
            Ok(Some(address)) => {
                let items = reply::items(&reply);
                prop_assert!(matches!(items, Some([_, _])), "{:?}", reply);
                let port = items.and_then(|items| reply::integer(&items[1]));
                prop_assert_eq!(port, Some(i64::from(address.port)));
            }
            Ok(None) => {
                prop_assert!(matches!(reply, Value::Nil) || reply::items(&reply) == Some(&[][..]));
            }
            Err(_) => {}
        }
        if let Some(role) = sentinel::role_name(&reply) {
            let first = reply::items(&reply).and_then(|items| items.first());
            prop_assert_eq!(first.and_then(reply::text), Some(role.as_str()));
        }
    }

    /// `+switch-master` bodies read only with five words and two ports.
    #[test]
    fn switch_master_reads_only_five_words(
        payload in prop_oneof![
            text(),
            vec(prop_oneof![text(), (0_u32..70_000).prop_map(|n| n.to_string())], 0..7)
                .prop_map(|words| words.join(" ")),
        ],
        channel in prop_oneof![Just(sentinel::SWITCH_MASTER_CHANNEL.to_owned()), text()],
        push in any::<bool>(),
        junk in value(),
    ) {
        if let Some(switch) = SwitchMaster::parse(&payload) {
            prop_assert_eq!(payload.split_ascii_whitespace().count(), 5);
            prop_assert_eq!(payload.split_ascii_whitespace().next(), Some(switch.master_name.as_str()));
        }
        let message = if push {
            Value::Push { kind: PushKind::Message, data: vec![bulk(&channel), bulk(&payload)] }
        } else {
            Value::Array(vec![bulk("message"), bulk(&channel), bulk(&payload)])
        };
        for value in [message, junk] {
            if let Some(message) = redis::Msg::from_value(&value)
                && let Some(switch) = SwitchMaster::from_message(&message)
            {
                prop_assert_eq!(message.get_channel_name(), sentinel::SWITCH_MASTER_CHANNEL);
                let payload = message.get_payload::<String>().ok();
                prop_assert_eq!(Some(switch), payload.as_deref().and_then(SwitchMaster::parse));
            }
        }
    }
}

/// Feeds one value to every decoder and reader; only panics matter here
/// (the properties above hold each one to its specification).
fn every_decoder(value: &Value) {
    for kind in [OpKind::Acquire, OpKind::Renew, OpKind::Release] {
        let _ = wire::decode_op(kind, value);
        let _ = wire::decode_script(value, &[kind, kind]);
    }
    let _ = wire::decode_set_nx_get(value, "token");
    let _ = wire::with_replicas(
        Reply::Renewed {
            replicas: None,
            aof: None,
        },
        wire::decode_wait(value),
    );
    if let Some(text) = reply::text(value) {
        let _ = Dialect::from_info(text);
        let _ = Redirect::parse(text, "h");
        let _ = SwitchMaster::parse(text);
    }
    let _ = reply::fields(value);
    let _ = SlotMap::from_cluster_shards(value, "h", false);
    let _ = SlotMap::from_cluster_slots(value, "h");
    let _ = sentinel::master_address(value);
    let _ = sentinel::role_name(value);
    if let Some(message) = redis::Msg::from_value(value) {
        let _ = SwitchMaster::from_message(&message);
    }
}

proptest! {
    #![proptest_config(config(CASES))]

    /// Bytes built from RESP pieces (lengths right, wrong, negative and
    /// huge) either fail to parse or parse into values every decoder takes
    /// without panicking.
    #[test]
    fn raw_resp_never_panics_a_decoder(bytes in resp_bytes()) {
        match redis::parse_redis_value(&bytes) {
            Ok(value) => every_decoder(&value),
            Err(error) => prop_assert!(wire::failure_of(&error).outcome_unknown()),
        }
    }

    /// Generated values reach every decoder too.
    #[test]
    fn any_value_never_panics_a_decoder(value in value()) {
        every_decoder(&value);
    }
}
