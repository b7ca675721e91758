//! The deployment check against real `redis-server`s, configured safe and
//! unsafe: each finding is produced by the configuration it names, and a
//! safe server produces none. `Locker::check_deployment` finds the nodes a
//! locker uses (one node, every Redlock node, the Sentinel primary, every
//! cluster primary) and checks each the same way.

#![cfg(feature = "redis")]

use crate::support;

use std::time::{Duration, SystemTime};

use lock_core::{
    CheckError, CheckOptions, DeploymentReport, FindingKind, LockOptions, Locker, LockerReport,
    Severity, check_deployment,
};
use support::{RedisServer, states};

async fn check_url(url: &str, opts: &CheckOptions) -> DeploymentReport {
    let client = redis::Client::open(url).expect("a valid url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|error| panic!("connect to {url}: {error}"));
    check_deployment(&mut conn, opts)
        .await
        .expect("the check runs to the end")
}

async fn check(server: &RedisServer, opts: &CheckOptions) -> DeploymentReport {
    check_url(&server.url(), opts).await
}

fn opts() -> CheckOptions {
    CheckOptions::new(Duration::from_secs(30))
}

/// The kinds and severities of a report, in report order.
fn found(report: &DeploymentReport) -> Vec<(FindingKind, Severity)> {
    report
        .findings
        .iter()
        .map(|finding| (finding.kind, finding.severity))
        .collect()
}

fn config_set(server: &RedisServer, name: &str, value: &str) {
    let _: String = server.query(&["CONFIG", "SET", name, value]);
}

/// AOF with an fsync per write: the configuration the README recommends.
fn make_durable(server: &RedisServer) {
    config_set(server, "appendonly", "yes");
    config_set(server, "appendfsync", "always");
}

#[tokio::test]
async fn a_safe_server_has_no_findings() {
    let server = RedisServer::start();
    make_durable(&server);
    let report = check(&server, &opts()).await;
    assert_eq!(found(&report), [], "{report}");
    assert!(report.is_safe());
    assert_eq!(report.worst(), None);
    let reading = |name: &str| {
        report
            .readings
            .iter()
            .find(|reading| reading.name == name)
            .map(|reading| reading.value.clone())
    };
    assert_eq!(reading("appendfsync").as_deref(), Some("\"always\""));
    assert_eq!(
        reading("maxmemory-policy").as_deref(),
        Some("\"noeviction\"")
    );
    assert_eq!(
        reading("role").as_deref(),
        Some("primary, 0 replica(s) attached")
    );
}

#[tokio::test]
async fn every_evicting_policy_is_unsafe_once_memory_is_capped() {
    let server = RedisServer::start();
    make_durable(&server);
    config_set(&server, "maxmemory", "100mb");
    for policy in [
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        config_set(&server, "maxmemory-policy", policy);
        let report = check(&server, &opts()).await;
        assert_eq!(
            found(&report),
            [(FindingKind::EvictionPolicy, Severity::Unsafe)],
            "{policy}: {report}"
        );
        let finding = &report.findings[0];
        assert_eq!(
            finding.observed,
            format!("maxmemory-policy {policy}, maxmemory 104857600")
        );
        assert_eq!(
            finding.safety_row,
            "Eviction of a held key under memory pressure"
        );
        assert!(finding.fix.contains("noeviction"), "{}", finding.fix);
        assert!(!report.is_safe());
    }
    // Without a memory limit nothing is evicted yet: a warning.
    config_set(&server, "maxmemory", "0");
    let report = check(&server, &opts()).await;
    assert_eq!(
        found(&report),
        [(FindingKind::EvictionPolicy, Severity::Warning)],
        "{report}"
    );
    assert!(report.is_safe());
}

#[tokio::test]
async fn a_restart_that_forgets_locks_is_unsafe() {
    // The test servers run with neither AOF nor snapshots.
    let server = RedisServer::start();
    let report = check(&server, &opts()).await;
    assert_eq!(
        found(&report),
        [(FindingKind::NoPersistence, Severity::Unsafe)],
        "{report}"
    );
    assert_eq!(report.findings[0].observed, "appendonly no, save \"\"");
    assert_eq!(
        report.findings[0].safety_row,
        "Redis restart without persistence"
    );
    assert!(report.findings[0].fix.contains("30s"), "names the ttl");

    // RDB snapshots alone always miss the newest locks.
    config_set(&server, "save", "3600 1");
    let report = check(&server, &opts()).await;
    assert_eq!(
        found(&report),
        [(FindingKind::NoPersistence, Severity::Unsafe)]
    );
    assert_eq!(
        report.findings[0].observed,
        "appendonly no, save \"3600 1\""
    );

    config_set(&server, "appendonly", "yes");
    for fsync in ["everysec", "no"] {
        config_set(&server, "appendfsync", fsync);
        let report = check(&server, &opts()).await;
        assert_eq!(
            found(&report),
            [(FindingKind::AofNotAlways, Severity::Unsafe)],
            "{fsync}: {report}"
        );
        assert_eq!(
            report.findings[0].observed,
            format!("appendonly yes, appendfsync {fsync}")
        );
    }
}

#[tokio::test]
async fn replication_findings_follow_the_lock_options() {
    let primary = RedisServer::start();
    make_durable(&primary);
    let replica = RedisServer::replica_of(&primary);

    let report = check(&primary, &opts()).await;
    assert_eq!(
        found(&report),
        [(FindingKind::FailoverCanLoseLock, Severity::Unsafe)],
        "{report}"
    );
    assert_eq!(
        report.findings[0].observed,
        "1 replica(s) attached, the locks WAIT for 0, min-replicas-to-write 0"
    );
    assert_eq!(
        report.findings[0].safety_row,
        "Failover with async replication"
    );

    // min-replicas-to-write bounds a cut-off primary, but a grant can still
    // be lost: only WAIT makes a grant wait for a replica.
    config_set(&primary, "min-replicas-to-write", "1");
    let report = check(&primary, &opts()).await;
    assert_eq!(
        found(&report),
        [(FindingKind::FailoverCanLoseLock, Severity::Unsafe)]
    );

    // The options of a lock that WAITs for its replica: nothing to report.
    let waiting =
        LockOptions::new(Duration::from_secs(30)).wait_replicas(1, Duration::from_millis(100));
    let report = check(&primary, &CheckOptions::for_lock(&waiting)).await;
    assert_eq!(found(&report), [], "{report}");

    let report = check(&primary, &opts().wait_replicas(2)).await;
    assert_eq!(
        found(&report),
        [(FindingKind::TooFewReplicasForWait, Severity::Unavailable)],
        "{report}"
    );

    config_set(&primary, "min-replicas-to-write", "2");
    let report = check(&primary, &opts().wait_replicas(1)).await;
    assert_eq!(
        found(&report),
        [(FindingKind::MinReplicasUnmet, Severity::Unavailable)],
        "{report}"
    );
    assert_eq!(
        report.findings[0].observed,
        "min-replicas-to-write 2, min-replicas-max-lag 10, 1 good replica(s)"
    );

    // The replica itself: locks there are refused, or worse if it is writable.
    make_durable(&replica);
    let report = check(&replica, &opts()).await;
    assert_eq!(
        found(&report),
        [(FindingKind::NotAPrimary, Severity::Unavailable)],
        "{report}"
    );
    assert!(
        report.findings[0]
            .observed
            .starts_with(&format!("ROLE: replica of 127.0.0.1:{}", primary.port())),
        "{}",
        report.findings[0].observed
    );
    config_set(&replica, "replica-read-only", "no");
    let report = check(&replica, &opts()).await;
    assert_eq!(
        found(&report),
        [(FindingKind::NotAPrimary, Severity::Unsafe)],
        "{report}"
    );
}

#[tokio::test]
async fn a_server_clock_far_from_ours_is_reported() {
    let server = RedisServer::start();
    make_durable(&server);
    // Redis has no command to move its clock: move ours instead.
    let behind = opts().wall_clock(|| SystemTime::now() - Duration::from_secs(10));
    let report = check(&server, &behind).await;
    assert_eq!(
        found(&report),
        [(FindingKind::ClockOffset, Severity::Warning)],
        "{report}"
    );
    let observed = &report.findings[0].observed;
    // About +10 000 ms: the server is ahead of the (moved) local clock. The
    // estimate's own error grows with the round trip, which a loaded
    // machine stretches (seen: +9997.0 ms ± 3.0 ms), so allow 50 ms.
    let offset: f64 = observed
        .strip_prefix("server clock +")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("no forward offset in {observed:?}"));
    assert!((offset - 10_000.0).abs() <= 50.0, "{observed}");
    assert_eq!(report.findings[0].safety_row, "Redis clock jump forward");

    // Within the drift margin (30 s × 0.01 + 2 ms = 302 ms): nothing.
    let close = opts().wall_clock(|| SystemTime::now() + Duration::from_millis(100));
    assert_eq!(found(&check(&server, &close).await), []);
    let strict = opts()
        .max_clock_offset(Duration::from_millis(20))
        .wall_clock(|| SystemTime::now() + Duration::from_millis(100));
    let report = check(&server, &strict).await;
    assert_eq!(
        found(&report),
        [(FindingKind::ClockOffset, Severity::Warning)],
        "{report}"
    );
    assert!(report.findings[0].observed.starts_with("server clock -"));
}

#[tokio::test]
async fn a_renamed_config_command_is_reported_unreadable_not_guessed() {
    // What managed services do: CONFIG is gone. INFO still tells the
    // eviction policy and whether AOF is on, but not its fsync policy or
    // min-replicas-to-write.
    let server = RedisServer::start_with(&[
        "--appendonly",
        "yes",
        "--maxmemory",
        "100mb",
        "--maxmemory-policy",
        "volatile-lru",
        "--rename-command",
        "CONFIG",
        "",
    ]);
    let report = check(&server, &opts()).await;
    assert_eq!(
        found(&report),
        [
            (FindingKind::EvictionPolicy, Severity::Unsafe),
            (FindingKind::PersistenceUnreadable, Severity::Unknown),
            (FindingKind::ReplicationUnreadable, Severity::Unknown),
        ],
        "{report}"
    );
    assert_eq!(
        report.findings[0].observed,
        "maxmemory-policy volatile-lru, maxmemory 104857600"
    );
    for unreadable in &report.findings[1..] {
        assert!(
            unreadable.observed.contains("ERR unknown command 'CONFIG'"),
            "{}",
            unreadable.observed
        );
    }
}

#[tokio::test]
async fn commands_an_acl_denies_are_reported_unreadable() {
    let server = RedisServer::start();
    let _: String = server.query(&[
        "ACL",
        "SETUSER",
        "no-config",
        "on",
        ">pw",
        "~*",
        "+@all",
        "-config",
    ]);
    let _: String = server.query(&["ACL", "SETUSER", "ping-only", "on", ">pw", "+ping"]);
    let url = |user: &str| format!("redis://{user}:pw@127.0.0.1:{}/", server.port());

    let report = check_url(&url("no-config"), &opts()).await;
    assert_eq!(
        found(&report),
        [
            (FindingKind::NoPersistence, Severity::Unsafe),
            (FindingKind::ReplicationUnreadable, Severity::Unknown),
        ],
        "{report}"
    );
    assert!(
        report.findings[1].observed.contains("NOPERM"),
        "{}",
        report.findings[1].observed
    );

    let report = check_url(&url("ping-only"), &opts()).await;
    assert_eq!(
        found(&report),
        [
            (FindingKind::RoleUnreadable, Severity::Unknown),
            (FindingKind::EvictionUnreadable, Severity::Unknown),
            (FindingKind::PersistenceUnreadable, Severity::Unknown),
            (FindingKind::ClockUnreadable, Severity::Unknown),
        ],
        "{report}"
    );
    for finding in &report.findings {
        assert!(finding.observed.contains("NOPERM"), "{}", finding.observed);
    }
    assert!(
        !report.is_safe(),
        "nothing was read: nothing is guessed, and nothing is passed"
    );
}

#[tokio::test]
async fn a_refused_authentication_is_an_error_not_a_report() {
    let server = RedisServer::start();
    // Set once it runs: the fixture proves a server up by asking it, unauthenticated.
    config_set(&server, "requirepass", "secret");
    // No password in the URL: the connection opens, every command gets NOAUTH.
    let client = redis::Client::open(server.url()).expect("a valid url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("the connection opens without AUTH");
    match check_deployment(&mut conn, &opts()).await {
        Err(CheckError::Authentication(reply)) => {
            assert!(reply.starts_with("NOAUTH"), "{reply}");
        }
        other => panic!("expected an authentication error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_replica_in_its_initial_sync_is_counted_and_named() {
    let (primary, replica) = states::replica_in_initial_sync(&[]);
    make_durable(&primary);
    // ROLE lists only online replicas: it shows none.
    let role: redis::Value = primary.cmd(&["ROLE"]);
    assert!(
        matches!(&role, redis::Value::Array(items) if items.get(2) == Some(&redis::Value::Array(vec![]))),
        "{role:?}"
    );
    let named = format!("127.0.0.1:{} (wait_bgsave: in a full sync)", replica.port());

    let report = check(&primary, &opts()).await;
    assert_eq!(
        found(&report),
        [
            (FindingKind::FailoverCanLoseLock, Severity::Unsafe),
            (FindingKind::ReplicaNotInSync, Severity::Warning),
        ],
        "{report}"
    );
    assert_eq!(
        report.findings[0].observed,
        format!(
            "1 replica(s) attached, 1 not in sync ({named}), the locks WAIT for 0, min-replicas-to-write 0"
        )
    );
    let role = report
        .readings
        .iter()
        .find(|reading| reading.name == "role");
    assert_eq!(
        role.map(|reading| reading.value.as_str()),
        Some(format!("primary, 1 replica(s) attached: {named}").as_str())
    );

    // Locks that WAIT for it get no acknowledgement until it has synced.
    let report = check(&primary, &opts().wait_replicas(1)).await;
    assert_eq!(
        found(&report),
        [(FindingKind::ReplicaNotInSync, Severity::Unavailable)],
        "{report}"
    );
    assert!(report.findings[0].observed.contains(&named), "{report}");
}

#[tokio::test]
async fn a_replica_that_stops_acknowledging_is_named() {
    let primary = RedisServer::start();
    make_durable(&primary);
    let replica = RedisServer::replica_of(&primary);
    let waiting = opts().wait_replicas(1);
    assert_eq!(found(&check(&primary, &waiting).await), []);

    // The default lag allowed is 2 s: three without an acknowledgement lag.
    states::stop_acknowledging(&primary, &replica, 3);
    let report = check(&primary, &waiting).await;
    assert_eq!(
        found(&report),
        [(FindingKind::ReplicaNotInSync, Severity::Unavailable)],
        "{report}"
    );
    let listed = format!("127.0.0.1:{} (online, lag ", replica.port());
    assert!(report.findings[0].observed.contains(&listed), "{report}");
    // A longer lag allowed: the same replica counts as keeping up.
    let patient = waiting.max_replica_lag(Duration::from_secs(3600));
    assert_eq!(found(&check(&primary, &patient).await), []);
}

#[tokio::test]
async fn a_server_still_loading_is_unavailable() {
    let server = states::loading();
    let report = check(&server, &opts()).await;
    let loading = report
        .finding(FindingKind::Loading)
        .unwrap_or_else(|| panic!("no loading finding: {report}"));
    assert_eq!(loading.severity, Severity::Unavailable);
    assert!(
        loading.observed.starts_with("INFO loading:1 ("),
        "{}",
        loading.observed
    );
    // The settings are still read while it loads.
    assert!(
        report.finding(FindingKind::NoPersistence).is_some(),
        "{report}"
    );
    assert!(!report.is_safe());
}

// Locker::check_deployment ---------------------------------------------------

/// The kinds found on each node, by node name.
fn per_node(report: &LockerReport) -> Vec<(String, Option<Vec<FindingKind>>)> {
    report
        .nodes
        .iter()
        .map(|node| {
            let kinds = node.result.as_ref().ok().map(DeploymentReport::kinds);
            (node.node.clone(), kinds)
        })
        .collect()
}

/// Memory capped with an evicting policy, and no persistence.
fn make_evicting(server: &RedisServer) {
    config_set(server, "maxmemory", "100mb");
    config_set(server, "maxmemory-policy", "allkeys-lru");
}

#[tokio::test]
async fn a_locker_checks_the_node_it_uses() {
    let lock_opts = LockOptions::new(Duration::from_secs(30));
    let safe = RedisServer::start();
    make_durable(&safe);
    let locker = Locker::connect(&safe.url()).await.expect("connect");
    let report = locker
        .check_deployment(&CheckOptions::for_lock(&lock_opts))
        .await;
    let name = format!("127.0.0.1:{}", safe.port());
    assert_eq!(
        per_node(&report),
        [(name.clone(), Some(vec![]))],
        "{report}"
    );
    assert!(report.is_safe());
    assert_eq!(report.worst(), None);
    assert!(report.report(&name).is_some());
    assert!(report.to_string().starts_with(&format!("node {name}:\n")));

    let unsafe_server = RedisServer::start();
    make_evicting(&unsafe_server);
    let locker = Locker::connect(&unsafe_server.url())
        .await
        .expect("connect");
    let report = locker
        .check_deployment(&CheckOptions::for_lock(&lock_opts))
        .await;
    assert_eq!(
        per_node(&report),
        [(
            format!("127.0.0.1:{}", unsafe_server.port()),
            Some(vec![
                FindingKind::EvictionPolicy,
                FindingKind::NoPersistence
            ])
        )],
        "{report}"
    );
    assert!(!report.is_safe());
    assert_eq!(report.worst(), Some(Severity::Unsafe));
    let eviction = report.nodes[0]
        .result
        .as_ref()
        .expect("checked")
        .finding(FindingKind::EvictionPolicy)
        .expect("found");
    assert_eq!(eviction.kind.evidence(), ["scenarios/eviction.toml"]);
    assert!(
        report
            .to_string()
            .contains("evidence: scenarios/eviction.toml"),
        "{report}"
    );

    // The lock's options matter: locks that WAIT for a replica need one.
    let waiting = lock_opts
        .clone()
        .wait_replicas(1, Duration::from_millis(100));
    let report = locker
        .check_deployment(&CheckOptions::for_lock(&waiting))
        .await;
    let kinds = report.nodes[0].result.as_ref().expect("checked").kinds();
    assert!(
        kinds.contains(&FindingKind::TooFewReplicasForWait),
        "{report}"
    );

    // The check used a connection of its own: the locks carry on.
    let guard = locker
        .acquire("checked", &lock_opts)
        .await
        .expect("acquire");
    guard.release().await.expect("release");
}

#[tokio::test]
async fn a_redlock_locker_checks_every_node() {
    let mut servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    make_durable(&servers[0]);
    make_durable(&servers[1]);
    make_durable(&servers[2]);
    make_evicting(&servers[1]);
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let locker = Locker::connect_redlock(&urls).await.expect("connect");
    let opts = CheckOptions::new(Duration::from_secs(30));
    let names: Vec<String> = servers
        .iter()
        .map(|server| format!("127.0.0.1:{}", server.port()))
        .collect();

    let report = locker.check_deployment(&opts).await;
    assert_eq!(
        per_node(&report),
        [
            (names[0].clone(), Some(vec![])),
            (names[1].clone(), Some(vec![FindingKind::EvictionPolicy])),
            (names[2].clone(), Some(vec![])),
        ],
        "{report}"
    );
    assert!(!report.is_safe(), "one unsafe node makes the locker unsafe");

    // A node that cannot be reached is reported, and the others checked.
    servers[2].kill();
    let report = locker.check_deployment(&opts).await;
    assert_eq!(report.nodes.len(), 3);
    assert!(report.nodes[0].result.is_ok());
    assert!(report.nodes[1].result.is_ok());
    assert!(
        matches!(report.nodes[2].result, Err(CheckError::Connect(_))),
        "{report}"
    );
    assert!(report.to_string().contains("not checked"), "{report}");
    assert!(!report.is_safe());
}

#[tokio::test]
async fn a_sentinel_locker_checks_the_primary_named_now() {
    let group = support::sentinel::SentinelGroup::start();
    let urls = group.sentinel_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let locker = Locker::connect_sentinel(&urls, group.master_name())
        .await
        .expect("connect");
    let opts = CheckOptions::new(Duration::from_secs(30));
    let primary_of = format!("(the primary of {})", group.master_name());

    let first = group.master_port();
    let report = locker.check_deployment(&opts).await;
    assert_eq!(report.nodes.len(), 1, "{report}");
    assert_eq!(
        report.nodes[0].node,
        format!("127.0.0.1:{first} {primary_of}")
    );
    let kinds = report.nodes[0].result.as_ref().expect("checked").kinds();
    assert!(!kinds.contains(&FindingKind::NotAPrimary), "{report}");
    assert!(
        kinds.contains(&FindingKind::FailoverCanLoseLock),
        "a replica and no WAIT: {report}"
    );

    let second = group.failover();
    assert_ne!(second, first);
    let report = locker.check_deployment(&opts).await;
    assert_eq!(
        report.nodes[0].node,
        format!("127.0.0.1:{second} {primary_of}"),
        "{report}"
    );
    let kinds = report.nodes[0].result.as_ref().expect("checked").kinds();
    assert!(!kinds.contains(&FindingKind::NotAPrimary), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_locker_checks_every_primary() {
    let cluster = support::cluster::Cluster::start(3, 0);
    let urls = cluster.seed_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let locker = Locker::connect_cluster(&urls).await.expect("connect");
    let report = locker
        .check_deployment(&CheckOptions::new(Duration::from_secs(30)))
        .await;
    let mut primaries: Vec<String> = cluster
        .shards()
        .iter()
        .map(|shard| format!("127.0.0.1:{}", shard.primary))
        .collect();
    primaries.sort();
    let checked: Vec<String> = report.nodes.iter().map(|node| node.node.clone()).collect();
    assert_eq!(checked, primaries, "{report}");
    for node in &report.nodes {
        let kinds = node.result.as_ref().expect("checked").kinds();
        assert!(!kinds.contains(&FindingKind::NotAPrimary), "{report}");
    }
}
