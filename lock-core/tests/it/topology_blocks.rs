//! The cluster and Sentinel building blocks against real processes.
//!
//! Cluster: the slot map read from `CLUSTER SHARDS` and `CLUSTER SLOTS`
//! (RESP2 and RESP3) matches `redis-cli --cluster check`, slots match
//! `CLUSTER KEYSLOT`, and `MOVED` and `ASK` parse from the errors real nodes
//! send (with `TRYAGAIN` and `CROSSSLOT` recognised as neither).
//!
//! Cluster over TLS: the slot map picks the TLS ports, and redirections
//! sent over TLS name them.
//!
//! Sentinel: the resolver finds the primary, and the new one after
//! `SENTINEL FAILOVER`, and `+switch-master` parses from a real
//! subscription.

#![cfg(feature = "redis")]

use crate::support;

use std::{collections::BTreeMap, time::Duration};

use lock_core::internal::{
    TcpDialer,
    cluster::{NodeAddress, Redirect, RedirectKind, SlotMap, slot_of},
    sentinel::{SWITCH_MASTER_CHANNEL, SentinelError, SentinelResolver, SwitchMaster},
};
use support::{
    cluster::{Cluster, ClusterNode, ShardView, cli_view},
    sentinel::SentinelGroup,
};

/// A blocking connection to one node, in RESP2 or RESP3.
fn connect(node: &ClusterNode, resp3: bool) -> redis::Connection {
    let protocol = if resp3 { "?protocol=resp3" } else { "" };
    redis::Client::open(format!("{}{protocol}", node.url()))
        .and_then(|client| client.get_connection())
        .expect("connect to a cluster node")
}

/// The slot map in the fixture's terms: shards by primary port, with their
/// ranges merged where adjacent.
fn as_views(map: &SlotMap) -> Vec<ShardView> {
    let mut views: BTreeMap<u16, ShardView> = BTreeMap::new();
    for (first, last, shard) in map.ranges() {
        let view = views
            .entry(shard.primary.address.port)
            .or_insert_with(|| ShardView {
                primary: shard.primary.address.port,
                slots: Vec::new(),
                replicas: shard
                    .replicas
                    .iter()
                    .map(|node| node.address.port)
                    .collect(),
            });
        match view.slots.last_mut() {
            Some(previous) if previous.1 + 1 == first => previous.1 = last,
            _ => view.slots.push((first, last)),
        }
    }
    views
        .into_values()
        .map(|mut view| {
            view.replicas.sort_unstable();
            view
        })
        .collect()
}

fn error_of(node: &ClusterNode, args: &[&str]) -> redis::RedisError {
    node.try_query::<redis::Value>(args)
        .expect_err("the node refuses the command")
}

#[test]
fn slot_maps_slots_and_redirects_match_a_real_cluster() {
    let cluster = Cluster::start(3, 1);
    let seed = &cluster.nodes()[0];
    let expected = cli_view(seed);
    assert_eq!(expected.len(), 3);
    assert!(expected.iter().all(|shard| shard.replicas.len() == 1));

    // The slot map, from either command and in either protocol.
    for resp3 in [false, true] {
        let mut conn = connect(seed, resp3);
        let shards: redis::Value = redis::cmd("CLUSTER")
            .arg("SHARDS")
            .query(&mut conn)
            .expect("CLUSTER SHARDS");
        let map = SlotMap::from_cluster_shards(&shards, "127.0.0.1", false)
            .unwrap_or_else(|error| panic!("{error}: {shards:?}"));
        assert!(map.covers_all_slots());
        assert_eq!(as_views(&map), expected, "CLUSTER SHARDS, resp3: {resp3}");
        let slots: redis::Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut conn)
            .expect("CLUSTER SLOTS");
        let map = SlotMap::from_cluster_slots(&slots, "127.0.0.1")
            .unwrap_or_else(|error| panic!("{error}: {slots:?}"));
        assert_eq!(as_views(&map), expected, "CLUSTER SLOTS, resp3: {resp3}");
    }

    // Slots, against the server's own computation.
    let keys: Vec<String> = (0..500)
        .map(|i| match i % 5 {
            0 => format!("lock:{i}"),
            1 => format!("{{orders:{i}}}:fence"),
            2 => format!("a{{}}{{b{i}}}"),
            3 => format!("x{{{{y{i}}}}}"),
            _ => format!("ünïcode:{i}{{"),
        })
        .collect();
    let mut pipe = redis::pipe();
    for key in &keys {
        pipe.cmd("CLUSTER").arg("KEYSLOT").arg(key);
    }
    let server: Vec<u16> = pipe
        .query(&mut connect(seed, false))
        .expect("CLUSTER KEYSLOT");
    let ours: Vec<u16> = keys.iter().map(slot_of).collect();
    assert_eq!(ours, server);

    // MOVED from a node that does not own the key.
    let key = "{orders}:lock";
    let slot = slot_of(key);
    let owner = cluster.owner_of_slot(slot);
    let other = cluster.other_primary(owner.port());
    let moved = Redirect::from_error(&error_of(other, &["GET", key]), "127.0.0.1");
    assert_eq!(
        moved,
        Some(Redirect {
            kind: RedirectKind::Moved,
            slot,
            to: NodeAddress::new("127.0.0.1", owner.port()),
        })
    );

    // CROSSSLOT: two keys in two slots.
    assert_ne!(slot_of("{a}"), slot_of("{b}"));
    let crossslot = error_of(cluster.owner_of_key("{a}"), &["MGET", "{a}", "{b}"]);
    assert_eq!(crossslot.code(), Some("CROSSSLOT"), "{crossslot}");
    assert_eq!(Redirect::from_error(&crossslot, "127.0.0.1"), None);

    // Mid-migration: ASK for a key already moved, TRYAGAIN for a command
    // whose keys are split, and the target serves the key after ASKING.
    let (stays, moves) = ("{orders}:fence", "{orders}:lock");
    let _: String = owner.query(&["SET", stays, "1"]);
    let _: String = owner.query(&["SET", moves, "2"]);
    let target = cluster.other_primary(owner.port());
    let migration = cluster.begin_migration(slot, target.port());
    migration.move_keys(&[moves]);
    let ask = Redirect::from_error(&error_of(owner, &["GET", moves]), "127.0.0.1");
    assert_eq!(
        ask,
        Some(Redirect {
            kind: RedirectKind::Ask,
            slot,
            to: NodeAddress::new("127.0.0.1", target.port()),
        })
    );
    let tryagain = error_of(owner, &["MGET", stays, moves]);
    assert_eq!(tryagain.code(), Some("TRYAGAIN"), "{tryagain}");
    assert_eq!(Redirect::from_error(&tryagain, "127.0.0.1"), None);
    let mut at_target = connect(target, false);
    let (_, value): ((), String) = redis::pipe()
        .cmd("ASKING")
        .cmd("GET")
        .arg(moves)
        .query(&mut at_target)
        .expect("ASKING, then the key on the target");
    assert_eq!(value, "2");
    let before_asking = error_of(target, &["GET", moves]);
    assert_eq!(
        Redirect::from_error(&before_asking, "127.0.0.1").map(|r| r.kind),
        Some(RedirectKind::Moved),
        "without ASKING the importing node sends the client back"
    );
    migration.finish();
    let after = Redirect::from_error(&error_of(owner, &["GET", stays]), "127.0.0.1");
    assert_eq!(
        after.map(|r| (r.kind, r.to.port)),
        Some((RedirectKind::Moved, target.port()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resolver_follows_a_real_sentinel_failover() {
    let group = tokio::task::spawn_blocking(SentinelGroup::start)
        .await
        .expect("the group starts");
    let loopback = |port| NodeAddress::new("127.0.0.1", port);
    // A dead sentinel first: the resolver must move on to the live ones.
    let (_refusing, dead) = support::refusing_port();
    let mut sentinels = vec![loopback(dead)];
    sentinels.extend(group.sentinel_ports().into_iter().map(loopback));
    let resolver = SentinelResolver::new(sentinels.clone(), group.master_name());
    let first = resolver.resolve(&TcpDialer).await.expect("resolved");
    let old = group.master_port();
    assert_eq!(first.master, loopback(old));
    assert_eq!(first.answered_by, 1);

    let unknown = SentinelResolver::new(sentinels, "no-such-master")
        .resolve(&TcpDialer)
        .await;
    assert_eq!(
        unknown,
        Err(SentinelError::UnknownMaster {
            name: "no-such-master".into()
        })
    );

    // Listen for the announcement, fail over, and read it.
    let sentinel_port = group.sentinel_ports()[1];
    let (group, switch) = tokio::task::spawn_blocking(move || {
        let client = redis::Client::open(format!("redis://127.0.0.1:{sentinel_port}/"))
            .expect("a sentinel url");
        let mut conn = client.get_connection().expect("connect to a sentinel");
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("a read timeout");
        let mut pubsub = conn.as_pubsub();
        pubsub.subscribe(SWITCH_MASTER_CHANNEL).expect("subscribe");
        group.failover();
        let message = pubsub.get_message().expect("+switch-master within 30 s");
        (group, SwitchMaster::from_message(&message))
    })
    .await
    .expect("the failover runs");
    let new = group.master_port();
    assert_ne!(new, old);
    assert_eq!(
        switch,
        Some(SwitchMaster {
            master_name: group.master_name().to_owned(),
            from: loopback(old),
            to: loopback(new),
        })
    );
    let second = resolver.resolve(&TcpDialer).await.expect("resolved again");
    assert_eq!(second.master, loopback(new));
    tokio::task::spawn_blocking(move || drop(group))
        .await
        .expect("the group stops");
}

/// Runs one command on `port` over TLS through the crate's own dialer.
#[cfg(feature = "tls")]
async fn query_over_tls(
    dialer: &dyn lock_core::internal::Dialer,
    port: u16,
    command: &redis::Cmd,
) -> redis::RedisResult<redis::Value> {
    let stream = dialer.dial("127.0.0.1", port).await.expect("a tls stream");
    let (mut conn, task) = redis::aio::MultiplexedConnection::new_with_config(
        &redis::RedisConnectionInfo::default(),
        stream,
        redis::AsyncConnectionConfig::new(),
    )
    .await
    .expect("a redis handshake over tls");
    let task = tokio::spawn(task);
    let reply = conn.send_packed_command(command).await;
    task.abort();
    // An error reply comes back as a value: make it the error it is.
    reply.and_then(redis::Value::extract_error)
}

#[cfg(feature = "tls")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_cluster_maps_and_redirects_to_tls_ports() {
    use lock_core::{
        TlsOptions,
        internal::{TlsDialer, TlsUpgrader},
    };

    let cluster = tokio::task::spawn_blocking(|| Cluster::start_tls(3, 0))
        .await
        .expect("the cluster starts");
    let tls = cluster.tls().expect("a tls cluster");
    let options = TlsOptions::new()
        .ca_pem(tls.pki.ca_pem.clone())
        .client_cert_pem(tls.client.cert_pem.clone(), tls.client.key_pem.clone());
    let dialer = TlsDialer::new(TcpDialer, TlsUpgrader::new(&options).expect("tls options"));
    let tls_port = |plain: u16| cluster.node(plain).tls_port().expect("a tls port");
    let seed = tls_port(cluster.nodes()[0].port());
    let expected: Vec<(u16, Vec<(u16, u16)>)> = cli_view(&cluster.nodes()[0])
        .into_iter()
        .map(|shard| (tls_port(shard.primary), shard.slots))
        .collect();

    let mut shards_command = redis::cmd("CLUSTER");
    shards_command.arg("SHARDS");
    let shards = query_over_tls(&dialer, seed, &shards_command)
        .await
        .expect("CLUSTER SHARDS over tls");
    let views = |map: &SlotMap| -> Vec<(u16, Vec<(u16, u16)>)> {
        let mut views: Vec<_> = as_views(map)
            .into_iter()
            .map(|view| (view.primary, view.slots))
            .collect();
        views.sort_unstable();
        views
    };
    let mut expected_sorted = expected.clone();
    expected_sorted.sort_unstable();
    let over_tls = SlotMap::from_cluster_shards(&shards, "127.0.0.1", true).expect("a map");
    assert_eq!(
        views(&over_tls),
        expected_sorted,
        "tls ports from CLUSTER SHARDS"
    );
    let mut slots_command = redis::cmd("CLUSTER");
    slots_command.arg("SLOTS");
    let slots = query_over_tls(&dialer, seed, &slots_command)
        .await
        .expect("CLUSTER SLOTS over tls");
    let slots = SlotMap::from_cluster_slots(&slots, "127.0.0.1").expect("a map");
    assert_eq!(
        views(&slots),
        expected_sorted,
        "CLUSTER SLOTS over tls names tls ports"
    );

    let key = "{orders}:lock";
    let owner = cluster.owner_of_key(key);
    let other = cluster.other_primary(owner.port());
    let mut get = redis::cmd("GET");
    get.arg(key);
    let error = query_over_tls(&dialer, tls_port(other.port()), &get)
        .await
        .expect_err("a non-owner redirects");
    assert_eq!(
        Redirect::from_error(&error, "127.0.0.1").map(|redirect| redirect.to.port),
        Some(tls_port(owner.port())),
        "MOVED over tls names the tls port: {error}"
    );
    tokio::task::spawn_blocking(move || drop(cluster))
        .await
        .expect("the cluster stops");
}
