//! The parser's tests: whole files, every mistake at its line and column,
//! and each topology's and fault kind's keys.

use super::*;
use crate::scenario::to_toml;

const GOOD: &str = r#"
name = "failover-without-wait"
description = "why"
seeds = 20
duration = "10s"
expect = "violation"
property = "lease-exclusion"

[topology]
kind = "primary-replica"
replicas = 1
replication_lag = "1ms..50ms"

[lock]
ttl = "1s"
renew_every = "300ms"
fencing = "time-mixed"

[clients]
count = 3
hold = "10ms..400ms"

[[fault]]
kind = "failover"
at = "2s..8s"
target = "redis:primary"
"#;

#[test]
fn a_complete_file_parses() {
    let scenario = parse_scenario("good.toml", GOOD).expect("valid");
    assert_eq!(scenario.seeds, 20);
    assert_eq!(scenario.faults.len(), 1);
    assert_eq!(scenario.faults[0].target, Target::Primary);
    assert!(matches!(
        scenario.topology,
        Topology::PrimaryReplica { replicas: 1, .. }
    ));
}

#[test]
fn mistakes_point_at_their_line_and_column() {
    let cases = [
        ("seeds = 20", "seeds = \"twenty\"", 4, "invalid type"),
        (
            "duration = \"10s\"",
            "duration = \"10 parsecs\"",
            5,
            "bad duration",
        ),
        (
            "at = \"2s..8s\"",
            "at = \"8s..2s\"",
            26,
            "start is after the end",
        ),
        (
            "kind = \"failover\"",
            "kind = \"meteor\"",
            25,
            "unknown fault kind",
        ),
        (
            "target = \"redis:primary\"",
            "target = \"redis:7\"",
            27,
            "does not exist",
        ),
        (
            "renew_every = \"300ms\"",
            "renew_every = \"2s\"",
            16,
            "invalid lock options",
        ),
        (
            "expect = \"violation\"",
            "expect = \"maybe\"",
            6,
            "unknown expectation",
        ),
        (
            "property = \"lease-exclusion\"",
            "property = \"vibes\"",
            7,
            "unknown property",
        ),
        (
            "count = 3",
            "count = 3\ncolour = \"red\"",
            22,
            "unknown field",
        ),
        (
            "kind = \"primary-replica\"",
            "kind = \"mesh\"",
            10,
            "unknown topology kind",
        ),
        (
            "fencing = \"time-mixed\"",
            "fencing = \"sometimes\"",
            18,
            "unknown fencing",
        ),
        (
            "ttl = \"1s\"",
            "ttl = \"1500us\"",
            15,
            "whole number of milliseconds",
        ),
    ];
    for (from, to, _, needle) in cases {
        let text = GOOD.replacen(from, to, 1);
        // The line holding the last line of the replacement.
        let at = text.find(to).expect("replaced") + to.rfind('\n').map_or(0, |i| i + 1);
        let line = text[..at].matches('\n').count() + 1;
        let error = parse_scenario("bad.toml", &text).expect_err(to);
        assert_eq!(error.line, line, "{to}: {error}");
        assert!(error.message.contains(needle), "{to}: {error}");
        assert!(
            error.to_string().starts_with(&format!("bad.toml:{line}:")),
            "{error}"
        );
    }
}

#[test]
fn faults_need_their_parameters() {
    let drift = GOOD.replace("kind = \"failover\"", "kind = \"clock-drift\"");
    assert!(
        parse_scenario("f.toml", &drift)
            .expect_err("rate")
            .message
            .contains("needs `rate`")
    );
    let pause = GOOD.replace("kind = \"failover\"", "kind = \"pause\"");
    assert!(parse_scenario("f.toml", &pause).is_err());
}

#[test]
fn every_scenario_file_survives_a_round_trip_through_to_toml() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the scenarios directory")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(
        files.len() > 10,
        "found only {} scenario files",
        files.len()
    );
    for file in files {
        let scenario = load(&file).expect("a valid scenario");
        let text = to_toml(&scenario);
        let back = parse_scenario("round-trip.toml", &text)
            .unwrap_or_else(|error| panic!("{error}\n{text}"));
        assert_eq!(back, scenario, "{}", file.display());
    }
}

#[test]
fn stray_parameters_are_errors() {
    let stray = GOOD.replace(
        "target = \"redis:primary\"",
        "target = \"redis:primary\"\nrate = 0.1",
    );
    let error = parse_scenario("f.toml", &stray).expect_err("rate on a failover");
    assert!(error.message.contains("does not apply"), "{error}");
    let nodes = GOOD.replace("replicas = 1", "replicas = 1\nnodes = 3");
    let error = parse_scenario("f.toml", &nodes).expect_err("nodes on primary-replica");
    assert!(error.message.contains("does not apply"), "{error}");
}

#[test]
fn an_eviction_hits_the_primary_unless_told_otherwise() {
    let evict = GOOD.replace(
        "kind = \"failover\"\nat = \"2s..8s\"\ntarget = \"redis:primary\"",
        "kind = \"evict\"\nat = \"2s..8s\"\nevery = \"100ms..1s\"",
    );
    let scenario = parse_scenario("f.toml", &evict).expect("valid");
    assert_eq!(scenario.faults[0].kind, crate::config::FaultKind::Evict);
    assert_eq!(scenario.faults[0].target, Target::Primary);
    let back = parse_scenario("round-trip.toml", &to_toml(&scenario)).expect("valid");
    assert_eq!(back, scenario);
    let replica = evict.replace("\nevery = ", "\ntarget = \"redis:1\"\nevery = ");
    assert_eq!(
        parse_scenario("f.toml", &replica).expect("valid").faults[0].target,
        Target::Redis(1)
    );
    let lasting = evict.replace("\nevery = ", "\nduration = \"1s\"\nevery = ");
    let error = parse_scenario("f.toml", &lasting).expect_err("duration on an eviction");
    assert!(error.message.contains("does not apply"), "{error}");
    let client = evict.replace("\nevery = ", "\ntarget = \"client:0\"\nevery = ");
    let error = parse_scenario("f.toml", &client).expect_err("a client has no keys");
    assert!(error.message.contains("targets a Redis node"), "{error}");
    let redlock = evict.replace(
        "kind = \"primary-replica\"\nreplicas = 1\nreplication_lag = \"1ms..50ms\"",
        "kind = \"redlock\"\nnodes = 3",
    );
    let error = parse_scenario("f.toml", &redlock).expect_err("no primary in redlock");
    assert!(error.message.contains("name one"), "{error}");
    let pause = GOOD.replace(
        "kind = \"failover\"\nat = \"2s..8s\"\ntarget = \"redis:primary\"",
        "kind = \"pause\"\nat = \"2s..8s\"\nduration = \"1s\"",
    );
    let error = parse_scenario("f.toml", &pause).expect_err("a pause needs its client");
    assert!(error.message.contains("needs `target`"), "{error}");
}

#[test]
fn a_sentinel_topology_takes_its_keys_and_defaults() {
    let sentinel = GOOD.replace(
        "kind = \"primary-replica\"\nreplicas = 1\nreplication_lag = \"1ms..50ms\"",
        "kind = \"sentinel\"\nreplicas = 2",
    );
    let scenario = parse_scenario("s.toml", &sentinel).expect("valid");
    assert_eq!(
        scenario.topology,
        Topology::Sentinel {
            replicas: 2,
            sentinels: 3,
            replication_lag: DurationRange {
                min: Duration::from_millis(1),
                max: Duration::from_millis(20),
            },
            sentinel_lag: DurationRange {
                min: Duration::ZERO,
                max: Duration::from_secs(2),
            },
        }
    );
    assert_eq!(scenario.topology.node_count(), 3);
    let back = parse_scenario("round-trip.toml", &to_toml(&scenario)).expect("valid");
    assert_eq!(back, scenario);
    for (bad, needle) in [
        ("replicas = 2\nsentinels = 0", "1 to 9 sentinels"),
        ("replicas = 2\nnodes = 3", "does not apply"),
        (
            "replicas = 2\nsentinel_lag = \"2s..1s\"",
            "start is after the end",
        ),
    ] {
        let text = sentinel.replace("replicas = 2", bad);
        let error = parse_scenario("s.toml", &text).expect_err(bad);
        assert!(error.message.contains(needle), "{bad}: {error}");
    }
    let stray = GOOD.replace("replicas = 1", "replicas = 1\nsentinels = 3");
    let error = parse_scenario("f.toml", &stray).expect_err("sentinels on primary-replica");
    assert!(error.message.contains("does not apply"), "{error}");
}

#[test]
fn a_cluster_topology_takes_its_keys_and_defaults() {
    let cluster = GOOD
        .replace(
            "kind = \"primary-replica\"\nreplicas = 1\nreplication_lag = \"1ms..50ms\"",
            "kind = \"cluster\"",
        )
        .replace("kind = \"failover\"", "kind = \"shard-failover\"");
    let scenario = parse_scenario("c.toml", &cluster).expect("valid");
    assert_eq!(
        scenario.topology,
        Topology::Cluster {
            shards: 3,
            replicas: 1,
            replication_lag: DurationRange {
                min: Duration::from_millis(1),
                max: Duration::from_millis(20),
            },
            node_timeout: Duration::from_secs(15),
        }
    );
    assert_eq!(scenario.topology.node_count(), 6);
    assert_eq!(
        scenario.faults[0].kind,
        crate::config::FaultKind::ShardFailover
    );
    let back = parse_scenario("round-trip.toml", &to_toml(&scenario)).expect("valid");
    assert_eq!(back, scenario);
    let shaped = cluster.replace(
        "kind = \"cluster\"",
        "kind = \"cluster\"\nshards = 2\nreplicas = 0",
    );
    let error = parse_scenario("c.toml", &shaped).expect_err("no replica to promote");
    assert!(error.message.contains("does not apply"), "{error}");
    for (bad, needle) in [
        ("shards = 0", "1 to 9 shards"),
        ("replicas = 9", "0 to 8 replicas"),
        ("sentinels = 3", "does not apply"),
        ("nodes = 3", "does not apply"),
    ] {
        let text = cluster.replace("kind = \"cluster\"", &format!("kind = \"cluster\"\n{bad}"));
        let error = parse_scenario("c.toml", &text).expect_err(bad);
        assert!(error.message.contains(needle), "{bad}: {error}");
    }
    let stray = GOOD.replace("replicas = 1", "replicas = 1\nshards = 3");
    let error = parse_scenario("f.toml", &stray).expect_err("shards on primary-replica");
    assert!(error.message.contains("does not apply"), "{error}");
    let elsewhere = GOOD.replace("kind = \"failover\"", "kind = \"shard-failover\"");
    let error = parse_scenario("f.toml", &elsewhere).expect_err("no shards here");
    assert!(error.message.contains("does not apply"), "{error}");
}

#[test]
fn a_slot_migration_moves_the_lock_slot_and_lasts() {
    let cluster = GOOD.replace(
        "kind = \"primary-replica\"\nreplicas = 1\nreplication_lag = \"1ms..50ms\"",
        "kind = \"cluster\"",
    );
    let migration = cluster.replace(
        "kind = \"failover\"\nat = \"2s..8s\"\ntarget = \"redis:primary\"",
        "kind = \"slot-migration\"\nat = \"2s..8s\"\nduration = \"500ms\"",
    );
    let scenario = parse_scenario("m.toml", &migration).expect("valid");
    assert_eq!(scenario.faults[0].target, Target::Primary);
    let back = parse_scenario("round-trip.toml", &to_toml(&scenario)).expect("valid");
    assert_eq!(back, scenario);
    let named = migration.replace(
        "duration = \"500ms\"",
        "target = \"redis:3\"\nduration = \"500ms\"",
    );
    let error = parse_scenario("m.toml", &named).expect_err("the lock slot's owner only");
    assert!(error.message.contains("redis:primary"), "{error}");
    let instant = migration.replace("\nduration = \"500ms\"", "");
    let error = parse_scenario("m.toml", &instant).expect_err("a migration takes time");
    assert!(error.message.contains("needs `duration`"), "{error}");
    let one = migration.replace("kind = \"cluster\"", "kind = \"cluster\"\nshards = 1");
    let error = parse_scenario("m.toml", &one).expect_err("nowhere to move to");
    assert!(error.message.contains("does not apply"), "{error}");
}

#[test]
fn a_failover_may_leave_the_old_primary_up_for_a_stale_window() {
    let stale = GOOD.replace(
        "target = \"redis:primary\"",
        "target = \"redis:primary\"\nduration = \"10s..11s\"",
    );
    let scenario = parse_scenario("f.toml", &stale).expect("valid");
    assert_eq!(
        scenario.faults[0].duration,
        Some(DurationRange {
            min: Duration::from_secs(10),
            max: Duration::from_secs(11),
        })
    );
    let back = parse_scenario("round-trip.toml", &to_toml(&scenario)).expect("valid");
    assert_eq!(back, scenario);
    let single = stale.replace(
        "[topology]\nkind = \"primary-replica\"\nreplicas = 1\nreplication_lag = \"1ms..50ms\"\n",
        "",
    );
    let error = parse_scenario("f.toml", &single).expect_err("no replica to promote");
    assert!(error.message.contains("does not apply"), "{error}");
}

#[test]
fn redlock_needs_nodes_and_named_targets() {
    let redlock = GOOD
        .replace(
            "kind = \"primary-replica\"\nreplicas = 1\nreplication_lag = \"1ms..50ms\"",
            "kind = \"redlock\"\nnodes = 3",
        )
        .replace(
            "kind = \"failover\"",
            "kind = \"partition\"\nduration = \"1s\"",
        );
    let primary = parse_scenario("f.toml", &redlock).expect_err("redis:primary in redlock");
    assert!(primary.message.contains("name one"), "{primary}");
    let named = redlock.replace("redis:primary", "redis:2");
    let scenario = parse_scenario("f.toml", &named).expect("valid");
    assert_eq!(scenario.topology, Topology::Redlock { nodes: 3 });
    let missing = named.replace("nodes = 3", "");
    assert!(
        parse_scenario("f.toml", &missing)
            .expect_err("no nodes")
            .message
            .contains("needs `nodes`")
    );
    let beyond = named.replace("redis:2", "redis:3");
    assert!(parse_scenario("f.toml", &beyond).is_err());
}

#[test]
fn a_mix_is_checked_against_the_topology() {
    let single = GOOD
        .replace(
            "[topology]\nkind = \"primary-replica\"\nreplicas = 1\nreplication_lag = \"1ms..50ms\"\n",
            "",
        )
        .replace(
            "[[fault]]\nkind = \"failover\"\nat = \"2s..8s\"\ntarget = \"redis:primary\"\n",
            "",
        );
    let with = |mix: &str| format!("{single}\n[mix]\n{mix}\n");
    let scenario = parse_scenario(
        "m.toml",
        &with("kinds = [\"pause\", \"latency\"]\nepisodes = \"2..5\""),
    )
    .expect("a valid mix");
    let mix = scenario.mix.expect("a mix");
    assert_eq!(mix.episodes, (2, 5));
    assert!((mix.drift - 0.005).abs() < 1e-12, "half the drift factor");
    for (bad, needle) in [
        (
            "kinds = [\"meteor\"]\nepisodes = \"2\"",
            "unknown fault kind",
        ),
        ("kinds = [\"failover\"]\nepisodes = \"2\"", "does not apply"),
        ("kinds = [\"pause\"]\nepisodes = \"5..2\"", "bad episodes"),
        ("kinds = [\"pause\", \"pause\"]\nepisodes = \"2\"", "twice"),
        ("kinds = []\nepisodes = \"2\"", "at least one"),
        (
            "kinds = [\"pause\"]\nepisodes = \"2\"\npairs = 2.0",
            "chance",
        ),
    ] {
        let error = parse_scenario("m.toml", &with(bad)).expect_err(bad);
        assert!(error.message.contains(needle), "{bad}: {error}");
    }
}

#[test]
fn the_workload_table_picks_the_kind_and_its_mistakes_point_at_their_line() {
    let with =
        |table: &str| GOOD.replacen("[[fault]]", &format!("[workload]\n{table}\n\n[[fault]]"), 1);
    let semaphore =
        parse_scenario("w.toml", &with("kind = \"semaphore\"\npermits = 3")).expect("valid");
    assert_eq!(
        semaphore.clients.workload,
        WorkloadConfig {
            kind: WorkloadKind::Semaphore,
            permits: 3,
            ..WorkloadConfig::default()
        }
    );
    let back = parse_scenario("round-trip.toml", &to_toml(&semaphore)).expect("valid");
    assert_eq!(back, semaphore);
    let rw =
        parse_scenario("w.toml", &with("kind = \"read-write\"\nread_share = 0.25")).expect("valid");
    assert_eq!(rw.clients.workload.read_share, 0.25);
    assert_eq!(
        parse_scenario("round-trip.toml", &to_toml(&rw)).expect("valid"),
        rw
    );
    assert_eq!(
        parse_scenario("w.toml", GOOD)
            .expect("valid")
            .clients
            .workload
            .kind,
        WorkloadKind::Mutex,
        "no table: the plain lock"
    );
    for (table, line, needle) in [
        ("kind = \"spinlock\"", 24, "unknown workload kind"),
        (
            "kind = \"fair\"\npermits = 2",
            25,
            "applies to workload kind \"semaphore\"",
        ),
        ("kind = \"semaphore\"\npermits = 0", 25, "between 1 and 64"),
        (
            "kind = \"mutex\"\nread_share = 0.5",
            25,
            "\"read-write\" only",
        ),
        (
            "kind = \"read-write\"\nread_share = 1.5",
            25,
            "between 0 and 1",
        ),
        ("kind = \"fair\"\ncolour = 1", 25, "unknown field"),
    ] {
        let error = parse_scenario("bad.toml", &with(table)).expect_err(table);
        assert!(error.message.contains(needle), "{table}: {error}");
        assert!(
            error.to_string().starts_with(&format!("bad.toml:{line}:")),
            "{table}: {error}"
        );
    }
    let redlock = GOOD
        .replacen(
            "kind = \"primary-replica\"\nreplicas = 1\nreplication_lag = \"1ms..50ms\"",
            "kind = \"redlock\"\nnodes = 3",
            1,
        )
        .replacen("[[fault]]", "[workload]\nkind = \"fair\"\n\n[[fault]]", 1);
    let error = parse_scenario("bad.toml", &redlock).expect_err("fair on Redlock");
    assert!(error.message.contains("does not run on Redlock"), "{error}");
}

#[test]
fn an_atomic_slot_migration_needs_a_server_that_has_it() {
    let cluster = GOOD.replace(
        "kind = \"primary-replica\"\nreplicas = 1\nreplication_lag = \"1ms..50ms\"",
        "kind = \"cluster\"",
    );
    let migration = cluster.replace(
        "kind = \"failover\"\nat = \"2s..8s\"\ntarget = \"redis:primary\"",
        "kind = \"atomic-slot-migration\"\nat = \"2s..8s\"\nduration = \"500ms\"",
    );
    // Redis 7.0, the default flavour: refused at the kind's value.
    let error = parse_scenario("a.toml", &migration).expect_err("Redis has no MIGRATESLOTS");
    let line = migration
        .lines()
        .position(|line| line.contains("atomic-slot-migration"))
        .expect("the fault's line")
        + 1;
    assert_eq!((error.line, error.column), (line, 8), "{error}");
    assert!(
        error.message.contains("valkey-9.1") && error.message.contains("redis-7.0 has not"),
        "{error}"
    );
    let valkey_81 = migration.replace("[lock]", "[server]\nflavour = \"valkey-8.1\"\n\n[lock]");
    let error = parse_scenario("a.toml", &valkey_81).expect_err("Valkey 8.1 has none");
    assert!(error.message.contains("valkey-8.1 has not"), "{error}");
    let valkey_91 = migration.replace("[lock]", "[server]\nflavour = \"valkey-9.1\"\n\n[lock]");
    let scenario = parse_scenario("a.toml", &valkey_91).expect("valid");
    assert_eq!(
        scenario.faults[0].kind,
        crate::config::FaultKind::AtomicSlotMigration
    );
    assert_eq!(scenario.faults[0].target, Target::Primary);
    let back = parse_scenario("round-trip.toml", &to_toml(&scenario)).expect("valid");
    assert_eq!(back, scenario);
    // A mix may draw it only where a fault could be it.
    let mix = cluster.replace(
        "[[fault]]\nkind = \"failover\"\nat = \"2s..8s\"\ntarget = \"redis:primary\"\n",
        "[mix]\nkinds = [\"atomic-slot-migration\"]\nepisodes = \"2\"\n",
    );
    let error = parse_scenario("m.toml", &mix).expect_err("no MIGRATESLOTS to draw");
    assert!(
        error.message.contains("needs a [server] flavour"),
        "{error}"
    );
    let mix = mix.replace("[lock]", "[server]\nflavour = \"valkey-9.1\"\n\n[lock]");
    parse_scenario("m.toml", &mix).expect("valid on Valkey 9.1");
}
