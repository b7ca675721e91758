//! The topology fixtures themselves: each comes up, and its failover and
//! migration helpers do what they say on real processes. Run with
//! `--nocapture` to see how long each change took.

#![cfg(feature = "redis")]

use crate::support;

use std::time::{Duration, Instant};

use support::{
    cluster::{Cluster, cli_view},
    sentinel::{SentinelGroup, SentinelSetup, is_master},
};

#[test]
fn a_cluster_comes_up_routes_and_matches_redis_cli() {
    let cluster = Cluster::start(3, 0);
    let shards = cluster.shards();
    assert_eq!(shards.len(), 3);
    assert_eq!(cli_view(&cluster.nodes()[0]), shards);
    let key = "orders:42";
    let owner = cluster.owner_of_key(key);
    let _: String = owner.query(&["SET", key, "1"]);
    let other = cluster.other_primary(owner.port());
    let error = other
        .try_query::<Option<String>>(&["GET", key])
        .expect_err("a non-owner redirects");
    assert_eq!(error.code(), Some("MOVED"), "{error}");
}

#[test]
fn cluster_failover_promotes_the_replica_with_the_data() {
    let cluster = Cluster::start(3, 1);
    let key = "{fence}:orders";
    let old = cluster.owner_of_key(key).port();
    let _: String = cluster.node(old).query(&["SET", key, "7"]);
    let _: i64 = cluster.node(old).query(&["WAIT", "1", "1000"]);
    let new = cluster.failover(old);
    assert_ne!(new, old);
    assert_eq!(cluster.owner_of_key(key).port(), new);
    assert_eq!(cluster.node(new).query::<String>(&["GET", key]), "7");
    assert_eq!(
        cluster.replicas_of(new).first().map(|node| node.port()),
        Some(old)
    );
    // A demoted primary redirects rather than answering READONLY.
    let error = cluster
        .node(old)
        .try_query::<String>(&["SET", key, "8"])
        .expect_err("the old primary is a replica now");
    assert_eq!(error.code(), Some("MOVED"), "{error}");
}

#[test]
fn a_slot_migrates_with_its_keys() {
    let cluster = Cluster::start(3, 0);
    let keys = ["{mig}:a", "{mig}:b"];
    let slot = cluster.slot_of(keys[0]);
    let source = cluster.owner_of_slot(slot).port();
    for key in keys {
        let _: String = cluster.node(source).query(&["SET", key, key]);
    }
    let target = cluster.other_primary(source).port();
    let started = Instant::now();
    cluster.migrate_slot(slot, target);
    eprintln!("slot migration with 2 keys: {:?}", started.elapsed());
    assert_eq!(cluster.owner_of_slot(slot).port(), target);
    for key in keys {
        assert_eq!(cluster.node(target).query::<String>(&["GET", key]), key);
    }
    let error = cluster
        .node(source)
        .try_query::<String>(&["GET", keys[0]])
        .expect_err("the old owner redirects");
    assert_eq!(error.code(), Some("MOVED"), "{error}");
}

#[test]
fn killing_a_cluster_primary_promotes_its_replica() {
    let mut cluster = Cluster::start(3, 1);
    let key = "{kill}:orders";
    let old = cluster.owner_of_key(key).port();
    let _: String = cluster.node(old).query(&["SET", key, "1"]);
    // The replica has the key before its primary dies: WAIT until it
    // acknowledges (its link may still be coming up; CI once saw WAIT
    // answer 0 and the promoted replica without the key).
    let acknowledged = (0..10).any(|_| cluster.node(old).query::<i64>(&["WAIT", "1", "1000"]) >= 1);
    assert!(acknowledged, "the replica never acknowledged the write");
    let new = cluster.kill_primary(old);
    assert_eq!(cluster.owner_of_key(key).port(), new);
    assert_eq!(cluster.node(new).query::<String>(&["GET", key]), "1");
}

#[test]
fn a_sentinel_group_comes_up_and_fails_over_on_request() {
    let group = SentinelGroup::start();
    let old = group.master_port();
    assert_eq!(old, group.server_ports()[0]);
    let new = group.failover();
    assert_eq!(new, group.server_ports()[1]);
    let role: redis::Value = group.server(new).query(&["ROLE"]);
    assert!(is_master(&role));
}

#[test]
fn killing_the_sentinel_primary_promotes_the_replica() {
    let mut group = SentinelGroup::start();
    let replica = group.server_ports()[1];
    let _: String = group.server(group.master_port()).query(&["SET", "k", "v"]);
    let new = group.kill_master();
    assert_eq!(new, replica);
    assert_eq!(group.server(new).query::<String>(&["GET", "k"]), "v");
}

/// What a client still connected to the old primary sees after a `SENTINEL
/// FAILOVER`: when its writes stopped succeeding, against when the sentinels
/// named the new master, and the error that ended them.
struct StaleWindow {
    /// From the failover request to the sentinel naming the new master.
    named_after: Duration,
    /// From the failover request to the old primary's last accepted write.
    last_write_after: Duration,
    /// The error code of the first refused write ("connection lost" if the
    /// server closed the connection).
    ended_by: String,
    /// The last value the old primary acknowledged, and the value the new
    /// primary holds once the old one was demoted.
    last_acknowledged: u64,
    on_new_primary: u64,
}

fn stale_write_window(setup: &SentinelSetup) -> StaleWindow {
    let group = SentinelGroup::start_with(setup);
    let old = group.master_port();
    let client = redis::Client::open(format!("redis://127.0.0.1:{old}/")).expect("a url");
    let mut conn = client.get_connection().expect("connect to the primary");
    let _: () = redis::cmd("SET")
        .arg("stale")
        .arg(0)
        .query(&mut conn)
        .expect("a write");
    let started = Instant::now();
    let _: String = group.sentinels()[0].query(&["SENTINEL", "FAILOVER", group.master_name()]);
    let named = |group: &SentinelGroup| {
        let named: Option<(String, u16)> = group.sentinels()[0].query(&[
            "SENTINEL",
            "GET-MASTER-ADDR-BY-NAME",
            group.master_name(),
        ]);
        named.is_some_and(|(_, port)| port != old)
    };
    let mut named_after = None;
    let mut last_write_after = Duration::ZERO;
    let mut last_acknowledged = 0;
    let mut ended_by = None;
    for attempt in 1_u64.. {
        if named_after.is_none() && named(&group) {
            named_after = Some(started.elapsed());
        }
        if ended_by.is_none() {
            let write: redis::RedisResult<()> =
                redis::cmd("SET").arg("stale").arg(attempt).query(&mut conn);
            match write {
                Ok(()) => {
                    last_write_after = started.elapsed();
                    last_acknowledged = attempt;
                }
                Err(error) => {
                    ended_by = Some(error.code().unwrap_or("connection lost").to_owned());
                }
            }
        }
        if let (Some(named_after), Some(ended_by)) = (named_after, &ended_by) {
            let new = group.master_port();
            let on_new_primary: String = group.server(new).query(&["GET", "stale"]);
            eprintln!(
                "sentinel stale window ({setup:?}): new master named {named_after:?} after \
                 SENTINEL FAILOVER, last write on the old primary {last_write_after:?} after it \
                 (acknowledged up to {last_acknowledged}, the new primary holds \
                 {on_new_primary}), then {ended_by}"
            );
            return StaleWindow {
                named_after,
                last_write_after,
                ended_by: ended_by.clone(),
                last_acknowledged,
                on_new_primary: on_new_primary.parse().expect("a counter"),
            };
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "60 s after SENTINEL FAILOVER: named after {named_after:?}, writes ended by \
             {ended_by:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    unreachable!("the loop returns or panics")
}

#[test]
fn the_old_primary_takes_writes_after_sentinel_failover_until_demoted() {
    let window = stale_write_window(&SentinelSetup::default());
    assert!(
        window.last_write_after > window.named_after,
        "the old primary took no write after the new master was named"
    );
    assert_ne!(window.ended_by, "NOREPLICAS");
    // What the old primary acknowledged in that window is gone: the new
    // primary never saw it.
    assert!(
        window.on_new_primary < window.last_acknowledged,
        "new primary {} vs acknowledged {}",
        window.on_new_primary,
        window.last_acknowledged
    );
}

#[test]
fn min_replicas_to_write_ends_the_stale_window_with_noreplicas() {
    let window = stale_write_window(&SentinelSetup {
        min_replicas_to_write: Some(1),
        ..SentinelSetup::default()
    });
    assert_eq!(window.ended_by, "NOREPLICAS");
    assert!(window.on_new_primary <= window.last_acknowledged);
}
