//! Slot maps from replies shaped like Redis 7.0's (checked against a real
//! cluster in tests/it/topology_blocks.rs), in RESP2 and RESP3.

use super::*;

fn bulk(text: &str) -> Value {
    Value::BulkString(text.as_bytes().to_vec())
}

/// A map in RESP2 (a flat array) or RESP3 (a map).
fn map(resp3: bool, pairs: Vec<(&str, Value)>) -> Value {
    if resp3 {
        Value::Map(
            pairs
                .into_iter()
                .map(|(name, value)| (bulk(name), value))
                .collect(),
        )
    } else {
        Value::Array(
            pairs
                .into_iter()
                .flat_map(|(name, value)| [bulk(name), value])
                .collect(),
        )
    }
}

fn shard_node(resp3: bool, id: &str, port: i64, role: &str, health: &str) -> Value {
    map(
        resp3,
        vec![
            ("id", bulk(id)),
            ("port", Value::Int(port)),
            ("ip", bulk("127.0.0.1")),
            ("endpoint", bulk("127.0.0.1")),
            ("role", bulk(role)),
            ("replication-offset", Value::Int(0)),
            ("health", bulk(health)),
        ],
    )
}

fn shard(resp3: bool, slots: &[i64], nodes: Vec<Value>) -> Value {
    map(
        resp3,
        vec![
            (
                "slots",
                Value::Array(slots.iter().map(|&slot| Value::Int(slot)).collect()),
            ),
            ("nodes", Value::Array(nodes)),
        ],
    )
}

fn three_shards(resp3: bool) -> Value {
    Value::Array(vec![
        shard(
            resp3,
            &[5461, 10922],
            vec![
                shard_node(resp3, "b", 7002, "master", "online"),
                shard_node(resp3, "e", 7005, "replica", "loading"),
            ],
        ),
        shard(
            resp3,
            &[0, 5460],
            vec![shard_node(resp3, "a", 7001, "master", "online")],
        ),
        shard(
            resp3,
            &[10923, 16000, 16001, 16383],
            vec![
                shard_node(resp3, "c", 7003, "master", "online"),
                shard_node(resp3, "f", 7006, "replica", "online"),
            ],
        ),
    ])
}

#[test]
fn shards_read_the_same_in_resp2_and_resp3() {
    for resp3 in [false, true] {
        let map = SlotMap::from_cluster_shards(&three_shards(resp3), "10.0.0.9", false)
            .expect("a valid reply");
        assert!(map.covers_all_slots());
        assert_eq!(map.shards().len(), 3);
        assert_eq!(
            map.primary_of(0),
            Some(&NodeAddress::new("127.0.0.1", 7001))
        );
        assert_eq!(map.primary_of(5460).map(|a| a.port), Some(7001));
        assert_eq!(map.primary_of(5461).map(|a| a.port), Some(7002));
        assert_eq!(map.primary_of(16383).map(|a| a.port), Some(7003));
        let second = map.shard_of(6000).expect("served");
        assert_eq!(second.id, "b", "7.0 has no shard id: the primary's");
        assert_eq!(second.replicas.len(), 1);
        assert!(!second.replicas[0].healthy, "loading is not healthy");
        let ranges: Vec<_> = map
            .ranges()
            .map(|(f, l, s)| (f, l, s.id.as_str()))
            .collect();
        assert_eq!(
            ranges,
            [
                (0, 5460, "a"),
                (5461, 10922, "b"),
                (10923, 16000, "c"),
                (16001, 16383, "c")
            ]
        );
    }
}

#[test]
fn a_shard_id_and_tls_ports_are_used_when_given() {
    let node = map(
        false,
        vec![
            ("id", bulk("n1")),
            ("port", Value::Int(0)),
            ("tls-port", Value::Int(6380)),
            ("ip", bulk("10.0.0.1")),
            ("endpoint", bulk("cache-1.example")),
            ("role", bulk("master")),
            ("health", bulk("online")),
        ],
    );
    let reply = Value::Array(vec![map(
        false,
        vec![
            ("id", bulk("shard-1")),
            (
                "slots",
                Value::Array(vec![Value::Int(0), Value::Int(16383)]),
            ),
            ("nodes", Value::Array(vec![node])),
        ],
    )]);
    let map = SlotMap::from_cluster_shards(&reply, "x", true).expect("valid");
    let shard = map.shard_of(100).expect("served");
    assert_eq!(shard.id, "shard-1");
    assert_eq!(
        shard.primary.address,
        NodeAddress::new("cache-1.example", 6380)
    );
    // Without TLS the plaintext port is 0: no way in.
    assert_eq!(
        SlotMap::from_cluster_shards(&reply, "x", false),
        Err(SlotMapError::NoPrimary {
            first: 0,
            last: 16383
        })
    );
}

#[test]
fn a_failed_primary_next_to_its_replacement_is_not_the_primary() {
    let reply = Value::Array(vec![shard(
        false,
        &[0, 16383],
        vec![
            shard_node(false, "old", 7001, "master", "failed"),
            shard_node(false, "new", 7004, "master", "online"),
        ],
    )]);
    let map = SlotMap::from_cluster_shards(&reply, "x", false).expect("valid");
    let shard = map.shard_of(0).expect("served");
    assert_eq!(shard.primary.id.as_deref(), Some("new"));
    assert_eq!(shard.replicas[0].id.as_deref(), Some("old"));
}

#[test]
fn empty_and_unknown_endpoints() {
    let node = |endpoint: Value| {
        map(
            false,
            vec![
                ("id", bulk("n")),
                ("port", Value::Int(7000)),
                ("endpoint", endpoint),
                ("role", bulk("master")),
            ],
        )
    };
    let reply = |endpoint| Value::Array(vec![shard(false, &[0, 16383], vec![node(endpoint)])]);
    let same_host = SlotMap::from_cluster_shards(&reply(bulk("")), "10.1.1.1", false)
        .expect("an empty endpoint is the origin");
    assert_eq!(
        same_host.primary_of(0),
        Some(&NodeAddress::new("10.1.1.1", 7000))
    );
    let unknown = SlotMap::from_cluster_shards(&reply(bulk("?")), "10.1.1.1", false);
    assert_eq!(
        unknown,
        Err(SlotMapError::NoPrimary {
            first: 0,
            last: 16383
        })
    );
}

#[test]
fn shards_without_slots_are_left_out() {
    let reply = Value::Array(vec![
        shard(
            false,
            &[0, 16383],
            vec![shard_node(false, "a", 7001, "master", "online")],
        ),
        shard(
            false,
            &[],
            vec![shard_node(false, "b", 7002, "master", "online")],
        ),
    ]);
    let map = SlotMap::from_cluster_shards(&reply, "x", false).expect("valid");
    assert_eq!(map.shards().len(), 1);
}

#[test]
fn overlapping_and_malformed_replies_are_errors() {
    let overlapping = Value::Array(vec![
        shard(
            false,
            &[0, 100],
            vec![shard_node(false, "a", 7001, "master", "online")],
        ),
        shard(
            false,
            &[100, 200],
            vec![shard_node(false, "b", 7002, "master", "online")],
        ),
    ]);
    assert_eq!(
        SlotMap::from_cluster_shards(&overlapping, "x", false),
        Err(SlotMapError::Overlap { slot: 100 })
    );
    for bad in [
        Value::Int(1),
        Value::Array(vec![Value::Int(1)]),
        Value::Array(vec![shard(
            false,
            &[0, 16384],
            vec![shard_node(false, "a", 7001, "master", "online")],
        )]),
        Value::Array(vec![shard(
            false,
            &[0],
            vec![shard_node(false, "a", 7001, "master", "online")],
        )]),
        Value::Array(vec![shard(
            false,
            &[200, 100],
            vec![shard_node(false, "a", 7001, "master", "online")],
        )]),
    ] {
        assert!(
            matches!(
                SlotMap::from_cluster_shards(&bad, "x", false),
                Err(SlotMapError::Malformed { .. })
            ),
            "{bad:?}"
        );
    }
}

fn slots_node(host: Value, port: i64, id: &str) -> Value {
    Value::Array(vec![host, Value::Int(port), bulk(id), Value::Array(vec![])])
}

#[test]
fn cluster_slots_merges_ranges_of_one_primary() {
    for resp3 in [false, true] {
        let metadata = if resp3 {
            Value::Map(vec![])
        } else {
            Value::Array(vec![])
        };
        let node = |port, id: &str| {
            Value::Array(vec![
                bulk("127.0.0.1"),
                Value::Int(port),
                bulk(id),
                metadata.clone(),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node(7001, "a"),
                node(7004, "d"),
            ]),
            Value::Array(vec![Value::Int(5461), Value::Int(16000), node(7002, "b")]),
            Value::Array(vec![Value::Int(16001), Value::Int(16383), node(7001, "a")]),
        ]);
        let map = SlotMap::from_cluster_slots(&reply, "x").expect("valid");
        assert!(map.covers_all_slots());
        assert_eq!(map.shards().len(), 2);
        assert_eq!(map.shard_of(16383).map(|s| s.id.as_str()), Some("a"));
        assert_eq!(map.shard_of(0).map(|s| s.replicas.len()), Some(1));
    }
}

#[test]
fn cluster_slots_null_endpoint_is_the_origin() {
    let reply = Value::Array(vec![Value::Array(vec![
        Value::Int(0),
        Value::Int(16383),
        slots_node(Value::Nil, 7001, "a"),
        slots_node(bulk("?"), 7004, "d"),
    ])]);
    let map = SlotMap::from_cluster_slots(&reply, "10.2.2.2").expect("valid");
    let shard = map.shard_of(0).expect("served");
    assert_eq!(shard.primary.address, NodeAddress::new("10.2.2.2", 7001));
    assert!(shard.replicas.is_empty(), "an unknown endpoint is skipped");
}

#[test]
fn cluster_slots_an_undialable_primary_leaves_no_primary() {
    // Found by the fuzz properties (redis::fuzz): CLUSTER SHARDS skipped a
    // node on port 0 while CLUSTER SLOTS made it the primary; and skipping
    // the first node of an entry made its replica the primary.
    for primary in [
        slots_node(bulk("127.0.0.1"), 0, "a"),
        slots_node(bulk("?"), 7001, "a"),
    ] {
        let reply = Value::Array(vec![Value::Array(vec![
            Value::Int(0),
            Value::Int(16383),
            primary,
            slots_node(bulk("127.0.0.1"), 7004, "d"),
        ])]);
        assert_eq!(
            SlotMap::from_cluster_slots(&reply, "x"),
            Err(SlotMapError::NoPrimary {
                first: 0,
                last: 16383
            })
        );
    }
}

#[test]
fn lookups_outside_the_map_are_none() {
    let reply = Value::Array(vec![Value::Array(vec![
        Value::Int(100),
        Value::Int(200),
        slots_node(bulk("h"), 1, "a"),
    ])]);
    let map = SlotMap::from_cluster_slots(&reply, "x").expect("valid");
    assert!(map.shard_of(99).is_none());
    assert!(map.shard_of(100).is_some());
    assert!(map.shard_of(200).is_some());
    assert!(map.shard_of(201).is_none());
    assert!(!map.covers_all_slots());
    assert!(SlotMap::default().shard_of(0).is_none());
}

#[test]
fn an_unknown_subcommand_asks_for_the_fallback() {
    let error = redis::RedisError::from((
        redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
        "An error was signalled by the server",
        "unknown subcommand 'shards'. Try CLUSTER HELP.".to_owned(),
    ));
    assert_eq!(error.code(), Some("ERR"), "{error:?}");
    assert!(SlotMap::shards_unsupported(&error));
}
