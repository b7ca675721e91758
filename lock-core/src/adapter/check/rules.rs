//! From what was read to findings: one rule per part of the deployment.
//! Pure functions of a [`Server`] and the [`CheckOptions`].

use std::cmp::Reverse;

use super::{
    CheckOptions,
    read::{CONFIG, Role, Server},
    replication::{Replicas, replication},
    report::{Finding, FindingKind, Reading, Severity, row},
};

/// Every finding `server` calls for, most severe first.
pub(super) fn findings(server: &Server, opts: &CheckOptions) -> Vec<Finding> {
    let mut found = Vec::new();
    let role = role_of(server);
    match &role {
        Ok(Role::Sentinel) => {
            // A Sentinel holds no data: nothing else applies to it.
            found.push(not_a_primary(server, &Role::Sentinel));
            return found;
        }
        Ok(replica @ Role::Replica { .. }) => found.push(not_a_primary(server, replica)),
        Ok(Role::Primary { replicas }) => {
            replication(server, opts, &Replicas::of(server, replicas), &mut found);
        }
        Err(error) => found.push(Finding {
            kind: FindingKind::RoleUnreadable,
            severity: Severity::Unknown,
            observed: error.clone(),
            safety_row: row::FAILOVER,
            fix: "allow ROLE or INFO for this user (ACL +role +info), and make sure the \
                  locker talks to the primary"
                .into(),
        }),
    }
    loading(server, &mut found);
    eviction(server, &mut found);
    persistence(server, opts, &mut found);
    clock(server, opts, &mut found);
    found.sort_by_key(|finding| (Reverse(finding.severity), finding.kind));
    found
}

/// Everything that was read, for the report's record.
pub(super) fn readings(server: &Server) -> Vec<Reading> {
    let mut readings = vec![Reading {
        name: "role".into(),
        value: match role_of(server) {
            Ok(Role::Primary { replicas }) => {
                format!("primary, {}", Replicas::of(server, &replicas).describe())
            }
            Ok(Role::Replica { primary, state }) => {
                format!("replica of {primary} (link {state})")
            }
            Ok(Role::Sentinel) => "sentinel".into(),
            Err(error) => format!("unreadable ({error})"),
        },
    }];
    for (name, _) in CONFIG {
        let value = match server.config.get(name) {
            Some(Ok(value)) => format!("{value:?}"),
            Some(Err(error)) => format!("unreadable ({error})"),
            None => "not read".into(),
        };
        readings.push(Reading {
            name: name.into(),
            value,
        });
    }
    match &server.info {
        Ok(_) => {
            for field in [
                "redis_version",
                "valkey_version",
                "maxmemory_policy",
                "aof_enabled",
                "loading",
                "connected_slaves",
                "min_slaves_good_slaves",
            ] {
                if let Some(value) = server.info(field) {
                    readings.push(Reading {
                        name: format!("INFO {field}"),
                        value: value.into(),
                    });
                }
            }
        }
        Err(error) => readings.push(Reading {
            name: "INFO".into(),
            value: format!("unreadable ({error})"),
        }),
    }
    readings.push(Reading {
        name: "server clock offset".into(),
        value: match &server.clock {
            Ok(sample) => format!("{} (positive: the server is ahead)", sample.describe()),
            Err(error) => format!("unreadable ({error})"),
        },
    });
    readings
}

/// The role from `ROLE`, else from `INFO replication`.
fn role_of(server: &Server) -> Result<Role, String> {
    let role_error = match &server.role {
        Ok(role) => return Ok(role.clone()),
        Err(error) => error,
    };
    let from_info = match server.info("role") {
        // The replicas themselves are read from INFO by `Replicas::of`.
        Some("master") => Some(Role::Primary {
            replicas: Vec::new(),
        }),
        Some("slave") => Some(Role::Replica {
            primary: format!(
                "{}:{}",
                server.info("master_host").unwrap_or("?"),
                server.info("master_port").unwrap_or("?")
            ),
            state: server.info("master_link_status").unwrap_or("?").into(),
        }),
        _ => None,
    };
    from_info.ok_or_else(|| format!("ROLE: {role_error}; {}", server.info_error("role")))
}

fn not_a_primary(server: &Server, role: &Role) -> Finding {
    let (severity, observed, fix) = match role {
        Role::Replica { primary, state } => {
            let read_only = server.config("replica-read-only");
            let observed = format!(
                "ROLE: replica of {primary} (link {state}), replica-read-only {}",
                read_only.map_or_else(
                    || format!(
                        "unreadable ({})",
                        server.config_error("replica-read-only").unwrap_or("?")
                    ),
                    str::to_owned
                )
            );
            // A writable replica accepts the lock key, but its primary never
            // sees it and the next resync erases it: two holders. A
            // read-only one refuses it (READONLY): no lock at all.
            let severity = if read_only == Some("no") {
                Severity::Unsafe
            } else {
                Severity::Unavailable
            };
            let fix = format!(
                "point the locker at the primary ({primary}); with Sentinel, resolve the current \
                 primary on every connect. Never take locks on a writable replica \
                 (replica-read-only no): its keys never reach the primary"
            );
            (severity, observed, fix)
        }
        _ => (
            Severity::Unavailable,
            "ROLE: sentinel".to_owned(),
            "point the locker at the primary this Sentinel monitors, not at Sentinel".to_owned(),
        ),
    };
    Finding {
        kind: FindingKind::NotAPrimary,
        severity,
        observed,
        safety_row: row::FAILOVER,
        fix,
    }
}

fn eviction(server: &Server, found: &mut Vec<Finding>) {
    let policy = server
        .config("maxmemory-policy")
        .or_else(|| server.info("maxmemory_policy"));
    let Some(policy) = policy else {
        found.push(Finding {
            kind: FindingKind::EvictionUnreadable,
            severity: Severity::Unknown,
            observed: format!(
                "CONFIG GET maxmemory-policy: {}; {}",
                server.config_error("maxmemory-policy").unwrap_or("?"),
                server.info_error("maxmemory_policy")
            ),
            safety_row: row::EVICTION,
            fix: "make sure maxmemory-policy is noeviction (in your provider's console if CONFIG \
                  is disabled)"
                .into(),
        });
        return;
    };
    if policy == "noeviction" {
        return;
    }
    let maxmemory = server
        .config("maxmemory")
        .or_else(|| server.info("maxmemory"));
    // With no memory limit nothing is evicted yet; the policy waits for one.
    let unlimited = maxmemory.and_then(|bytes| bytes.parse::<u64>().ok()) == Some(0);
    let fix = if unlimited {
        "set maxmemory-policy noeviction now: nothing is evicted while maxmemory is 0, but \
         setting a limit with this policy lets Redis evict held lock keys"
    } else {
        "set maxmemory-policy noeviction: a full Redis then refuses new locks (OOM) instead of \
         evicting held ones; if the cache needs eviction, give the locks an instance of their own"
    };
    found.push(Finding {
        kind: FindingKind::EvictionPolicy,
        severity: if unlimited {
            Severity::Warning
        } else {
            Severity::Unsafe
        },
        observed: format!(
            "maxmemory-policy {policy}, maxmemory {}",
            maxmemory.unwrap_or("unreadable")
        ),
        safety_row: row::EVICTION,
        fix: fix.into(),
    });
}

/// Whether the server's `WAITAOF` counts the local AOF only once it is
/// fsynced: Redis 8.0 and later. Valkey (8.1.8 measured here, 9.1 by a
/// public report) and Redis 7.2 to 7.4 advance the fsynced offset on an
/// event-loop pass with nothing left to write, fsynced or not (the code
/// Redis fixed in 8.0, redis/redis#13793). A version not read is not
/// trusted.
fn waitaof_waits_for_fsync(server: &Server) -> bool {
    if server.info("valkey_version").is_some() || server.info("server_name") == Some("valkey") {
        return false;
    }
    server
        .info("redis_version")
        .and_then(|version| version.split('.').next()?.parse::<u32>().ok())
        .is_some_and(|major| major >= 8)
}

/// The server and version `INFO server` names, for a finding's text.
fn server_version(server: &Server) -> String {
    match (server.info("valkey_version"), server.info("redis_version")) {
        (Some(valkey), _) => format!("valkey_version {valkey}"),
        (None, Some(redis)) => format!("redis_version {redis}"),
        (None, None) => "version not read".into(),
    }
}

fn persistence(server: &Server, opts: &CheckOptions, found: &mut Vec<Finding>) {
    let delayed_restart = format!(
        "or make every restart a delayed one: keep the node down for longer than the lock ttl \
         ({:?}) before it serves again",
        opts.ttl
    );
    let aof = match server.config("appendonly") {
        Some(value) => Some(value == "yes"),
        None => server.info("aof_enabled").map(|value| value == "1"),
    };
    let Some(aof) = aof else {
        found.push(Finding {
            kind: FindingKind::PersistenceUnreadable,
            severity: Severity::Unknown,
            observed: format!(
                "CONFIG GET appendonly: {}; {}",
                server.config_error("appendonly").unwrap_or("?"),
                server.info_error("aof_enabled")
            ),
            safety_row: row::RESTART,
            fix: format!(
                "make sure the node runs with appendonly yes and appendfsync always, {delayed_restart}"
            ),
        });
        return;
    };
    if !aof && opts.wait_aof_local >= 1 {
        // Safe, but nothing is granted: WAITAOF 1 answers an error there.
        found.push(Finding {
            kind: FindingKind::NoPersistence,
            severity: Severity::Unavailable,
            observed: "appendonly no, with the locks' WAITAOF asking for the local fsync".into(),
            safety_row: row::RESTART,
            fix: "appendonly yes (WAITAOF 1 answers an error without it, so every grant is \
                  refused), or drop wait_aof's local count"
                .into(),
        });
        return;
    }
    if !aof {
        let save = match server.config("save") {
            Some(schedule) => format!("save {schedule:?}"),
            None => format!(
                "save unreadable ({})",
                server.config_error("save").unwrap_or("?")
            ),
        };
        found.push(Finding {
            kind: FindingKind::NoPersistence,
            severity: Severity::Unsafe,
            observed: format!("appendonly no, {save}"),
            safety_row: row::RESTART,
            fix: format!(
                "appendonly yes with appendfsync always (RDB snapshots alone always miss the \
                 newest locks), {delayed_restart}"
            ),
        });
        return;
    }
    let waitaof = opts.wait_aof_local >= 1;
    if waitaof && waitaof_waits_for_fsync(server) {
        // A grant or renewal counts only once WAITAOF confirmed the local
        // fsync: whatever the policy, a restart cannot lose a counted lock.
        return;
    }
    fsync_policy(server, waitaof, &delayed_restart, found);
}

/// The findings of an AOF's `appendfsync` policy; `waitaof` when the locks
/// ask for the local fsync on a server whose `WAITAOF` does not wait for it.
fn fsync_policy(server: &Server, waitaof: bool, delayed_restart: &str, found: &mut Vec<Finding>) {
    match server.config("appendfsync") {
        Some("always") => {}
        Some(fsync) if waitaof => found.push(Finding {
            kind: FindingKind::AofNotAlways,
            severity: Severity::Unsafe,
            observed: format!(
                "appendonly yes, appendfsync {fsync}, and a server whose WAITAOF acknowledges \
                 the local AOF before it is fsynced ({})",
                server_version(server)
            ),
            safety_row: row::RESTART,
            fix: format!(
                "appendfsync always, or Redis 8.0 or later, whose WAITAOF waits for the fsync \
                 (Valkey, and Redis 7.2 to 7.4, count a write once written: \
                 redis/redis#13793), {delayed_restart} after a machine crash"
            ),
        }),
        Some(fsync) => found.push(Finding {
            kind: FindingKind::AofNotAlways,
            severity: Severity::Unsafe,
            observed: format!("appendonly yes, appendfsync {fsync}"),
            safety_row: row::RESTART,
            fix: format!(
                "appendfsync always (each write is on disk before its reply, at a throughput \
                 cost), {delayed_restart} after a machine crash"
            ),
        }),
        None => found.push(Finding {
            kind: FindingKind::PersistenceUnreadable,
            severity: Severity::Unknown,
            observed: format!(
                "appendonly yes, CONFIG GET appendfsync: {}",
                server.config_error("appendfsync").unwrap_or("?")
            ),
            safety_row: row::RESTART,
            fix: format!(
                "make sure appendfsync is always, {delayed_restart} after a machine crash"
            ),
        }),
    }
}

/// A server still loading its dataset answers `LOADING` to every lock
/// command, though it answers the check's reads.
fn loading(server: &Server, found: &mut Vec<Finding>) {
    if server.info("loading") != Some("1") {
        return;
    }
    let progress = match (
        server.info("loading_loaded_perc"),
        server.info("loading_eta_seconds"),
    ) {
        (Some(percent), Some(eta)) => format!(" ({percent} % loaded, about {eta} s left)"),
        _ => String::new(),
    };
    found.push(Finding {
        kind: FindingKind::Loading,
        severity: Severity::Unavailable,
        observed: format!("INFO loading:1{progress}"),
        safety_row: row::RESTART,
        fix: "check again once the load is done: until then every acquire waits (a locker \
              retries LOADING within its wait) and every renewal fails; a long load after each \
              restart is an outage as long, which a smaller dataset on the locks' node shortens"
            .into(),
    });
}

fn clock(server: &Server, opts: &CheckOptions, found: &mut Vec<Finding>) {
    match &server.clock {
        Err(error) => found.push(Finding {
            kind: FindingKind::ClockUnreadable,
            severity: Severity::Unknown,
            observed: format!("TIME: {error}"),
            safety_row: row::CLOCK_JUMP,
            fix: "allow TIME for this user (ACL +time), and keep every node's clock synchronised"
                .into(),
        }),
        Ok(sample) if sample.certain_offset() > opts.max_clock_offset => {
            found.push(Finding {
                kind: FindingKind::ClockOffset,
                severity: Severity::Warning,
                observed: format!(
                    "server clock {} from this client's, beyond the {:?} allowed",
                    sample.describe(),
                    opts.max_clock_offset
                ),
                safety_row: row::CLOCK_JUMP,
                fix: "synchronise both clocks (NTP, chrony) and have them slew, not step: a \
                      forward step of the server clock larger than the lock's drift margin \
                      expires keys before their holders' valid_until; fencing protects the \
                      resource if it happens"
                    .into(),
            });
        }
        Ok(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use std::{collections::BTreeMap, time::Duration};

    use super::*;
    use crate::adapter::check::read::{ClockSample, Replica};

    const REFUSED: &str = "ERR unknown command 'CONFIG', with args beginning with: 'GET'";

    /// A primary configured safely: noeviction, AOF always, no replicas,
    /// the same clock as ours.
    fn safe_primary() -> Server {
        let config = [
            ("maxmemory-policy", "noeviction"),
            ("maxmemory", "0"),
            ("appendonly", "yes"),
            ("appendfsync", "always"),
            ("save", ""),
            ("min-replicas-to-write", "0"),
            ("min-replicas-max-lag", "10"),
            ("replica-read-only", "yes"),
        ];
        Server {
            config: config
                .into_iter()
                .map(|(name, value)| (name, Ok(value.to_owned())))
                .collect(),
            info: Ok([
                ("role", "master"),
                ("connected_slaves", "0"),
                ("maxmemory_policy", "noeviction"),
                ("maxmemory", "0"),
                ("aof_enabled", "1"),
            ]
            .into_iter()
            .map(|(field, value)| (field.to_owned(), value.to_owned()))
            .collect()),
            role: Ok(Role::Primary {
                replicas: Vec::new(),
            }),
            clock: Ok(ClockSample {
                offset_us: 100,
                uncertainty_us: 50,
            }),
        }
    }

    fn set(server: &mut Server, name: &'static str, value: &str) {
        server.config.insert(name, Ok(value.to_owned()));
    }

    fn info(server: &mut Server, field: &str, value: &str) {
        if let Ok(fields) = &mut server.info {
            fields.insert(field.to_owned(), value.to_owned());
        }
    }

    /// Attaches replicas `(state, lag)`, as `INFO replication` lists them
    /// and `ROLE` (online ones only) does.
    fn attach(server: &mut Server, replicas: &[(&str, u64)]) {
        info(server, "connected_slaves", &replicas.len().to_string());
        let mut online = Vec::new();
        for (index, (state, lag)) in replicas.iter().enumerate() {
            let address = format!("10.0.0.{index}:6380");
            let (ip, port) = address.split_once(':').unwrap_or_default();
            info(
                server,
                &format!("slave{index}"),
                &format!("ip={ip},port={port},state={state},offset=7,lag={lag}"),
            );
            if *state == "online" {
                online.push(Replica {
                    address,
                    state: (*state).to_owned(),
                    lag: None,
                });
            }
        }
        server.role = Ok(Role::Primary { replicas: online });
    }

    fn refuse_config(server: &mut Server) {
        for value in server.config.values_mut() {
            *value = Err(REFUSED.to_owned());
        }
    }

    fn opts() -> CheckOptions {
        CheckOptions::new(Duration::from_secs(30))
    }

    fn found(server: &Server, opts: &CheckOptions) -> Vec<(FindingKind, Severity)> {
        findings(server, opts)
            .into_iter()
            .map(|finding| (finding.kind, finding.severity))
            .collect()
    }

    #[test]
    fn a_safe_primary_has_no_findings() {
        assert_eq!(found(&safe_primary(), &opts()), []);
    }

    #[test]
    fn every_policy_but_noeviction_can_evict_a_held_key() {
        for policy in [
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
        ] {
            let mut server = safe_primary();
            set(&mut server, "maxmemory-policy", policy);
            set(&mut server, "maxmemory", "104857600");
            assert_eq!(
                found(&server, &opts()),
                [(FindingKind::EvictionPolicy, Severity::Unsafe)],
                "{policy}"
            );
            let finding = &findings(&server, &opts())[0];
            assert!(finding.observed.contains(policy), "{}", finding.observed);
            assert_eq!(finding.safety_row, row::EVICTION);
        }
        // Without a memory limit nothing is evicted yet: a warning.
        let mut server = safe_primary();
        set(&mut server, "maxmemory-policy", "volatile-lru");
        assert_eq!(
            found(&server, &opts()),
            [(FindingKind::EvictionPolicy, Severity::Warning)]
        );
    }

    #[test]
    fn persistence_findings() {
        let mut server = safe_primary();
        set(&mut server, "appendonly", "no");
        set(&mut server, "save", "3600 1");
        assert_eq!(
            found(&server, &opts()),
            [(FindingKind::NoPersistence, Severity::Unsafe)]
        );
        let finding = &findings(&server, &opts())[0];
        assert_eq!(finding.observed, "appendonly no, save \"3600 1\"");
        assert!(finding.fix.contains("30s"), "{}", finding.fix);
        for fsync in ["everysec", "no"] {
            let mut server = safe_primary();
            set(&mut server, "appendfsync", fsync);
            assert_eq!(
                found(&server, &opts()),
                [(FindingKind::AofNotAlways, Severity::Unsafe)]
            );
            // WAITAOF 1 on Redis 8: a counted grant is on disk whatever
            // the policy.
            info(&mut server, "redis_version", "8.4.0");
            assert_eq!(found(&server, &opts().wait_aof_local(1)), []);
            // On Valkey, and on Redis 7.2–7.4, WAITAOF counts it once
            // written: a machine crash can still take it.
            for (field, version) in [("valkey_version", "8.1.8"), ("redis_version", "7.2.4")] {
                let mut server = server.clone();
                info(&mut server, field, version);
                let report = findings(&server, &opts().wait_aof_local(1));
                assert_eq!(report.len(), 1, "{version}: {report:?}");
                assert_eq!(report[0].kind, FindingKind::AofNotAlways);
                assert!(
                    report[0].observed.contains(version),
                    "{}",
                    report[0].observed
                );
            }
        }
        // Unreadable policy: the same.
        let mut server = safe_primary();
        server.config.insert("appendfsync", Err(REFUSED.into()));
        assert_eq!(
            found(&server, &opts()),
            [(FindingKind::PersistenceUnreadable, Severity::Unknown)]
        );
        // WAITAOF 1 covers it only on a server known to fsync first.
        assert_eq!(
            found(&server, &opts().wait_aof_local(1)),
            [(FindingKind::PersistenceUnreadable, Severity::Unknown)]
        );
        info(&mut server, "redis_version", "8.0.0");
        assert_eq!(found(&server, &opts().wait_aof_local(1)), []);
        // AOF off: WAITAOF 1 refuses every grant; safe, but unavailable.
        let mut server = safe_primary();
        set(&mut server, "appendonly", "no");
        assert_eq!(
            found(&server, &opts().wait_aof_local(1)),
            [(FindingKind::NoPersistence, Severity::Unavailable)]
        );
    }

    #[test]
    fn refused_config_falls_back_to_info_and_reports_the_rest_unreadable() {
        let mut server = safe_primary();
        refuse_config(&mut server);
        info(&mut server, "maxmemory_policy", "allkeys-lru");
        info(&mut server, "maxmemory", "1000000");
        let report = findings(&server, &opts());
        let kinds: Vec<_> = report
            .iter()
            .map(|finding| (finding.kind, finding.severity))
            .collect();
        assert_eq!(
            kinds,
            [
                (FindingKind::EvictionPolicy, Severity::Unsafe),
                (FindingKind::PersistenceUnreadable, Severity::Unknown),
                (FindingKind::ReplicationUnreadable, Severity::Unknown),
            ]
        );
        // AOF is on (INFO says so) but its fsync policy is CONFIG-only.
        assert!(
            report[1].observed.contains(REFUSED),
            "{}",
            report[1].observed
        );

        // INFO says AOF is off: that alone means restarts lose locks.
        info(&mut server, "aof_enabled", "0");
        assert!(found(&server, &opts()).contains(&(FindingKind::NoPersistence, Severity::Unsafe)));

        // Nothing readable at all: every check says so, and guesses nothing.
        server.info = Err("NOPERM this user has no permissions to run the 'info' command".into());
        server.role = Err("NOPERM this user has no permissions to run the 'role' command".into());
        server.clock = Err("NOPERM this user has no permissions to run the 'time' command".into());
        assert_eq!(
            found(&server, &opts()),
            [
                (FindingKind::RoleUnreadable, Severity::Unknown),
                (FindingKind::EvictionUnreadable, Severity::Unknown),
                (FindingKind::PersistenceUnreadable, Severity::Unknown),
                (FindingKind::ClockUnreadable, Severity::Unknown),
            ]
        );
    }

    #[test]
    fn replication_findings() {
        let mut server = safe_primary();
        attach(&mut server, &[("online", 0), ("online", 1)]);
        assert_eq!(
            found(&server, &opts()),
            [(FindingKind::FailoverCanLoseLock, Severity::Unsafe)]
        );
        // min-replicas-to-write does not make a grant reach a replica.
        set(&mut server, "min-replicas-to-write", "1");
        info(&mut server, "min_slaves_good_slaves", "2");
        assert_eq!(
            found(&server, &opts()),
            [(FindingKind::FailoverCanLoseLock, Severity::Unsafe)]
        );
        assert_eq!(found(&server, &opts().wait_replicas(1)), []);
        assert_eq!(
            found(&server, &opts().wait_replicas(3)),
            [(FindingKind::TooFewReplicasForWait, Severity::Unavailable)]
        );
        set(&mut server, "min-replicas-to-write", "3");
        assert_eq!(
            found(&server, &opts().wait_replicas(1)),
            [(FindingKind::MinReplicasUnmet, Severity::Unavailable)]
        );
        // Redis ignores the minimum while min-replicas-max-lag is 0.
        set(&mut server, "min-replicas-max-lag", "0");
        assert_eq!(found(&server, &opts().wait_replicas(1)), []);
    }

    #[test]
    fn a_replica_in_its_initial_sync_is_attached_but_not_in_sync() {
        // ROLE lists no replica: only INFO shows the one in its full sync.
        let mut server = safe_primary();
        attach(&mut server, &[("wait_bgsave", 0)]);
        assert_eq!(server.role, Ok(Role::Primary { replicas: vec![] }));
        let report = findings(&server, &opts());
        assert_eq!(
            found(&server, &opts()),
            [
                (FindingKind::FailoverCanLoseLock, Severity::Unsafe),
                (FindingKind::ReplicaNotInSync, Severity::Warning),
            ]
        );
        assert_eq!(
            report[0].observed,
            "1 replica(s) attached, 1 not in sync (10.0.0.0:6380 (wait_bgsave: in a full sync)), \
             the locks WAIT for 0, min-replicas-to-write 0"
        );
        // Locks that WAIT for it: nothing acknowledges, every grant fails.
        assert_eq!(
            found(&server, &opts().wait_replicas(1)),
            [(FindingKind::ReplicaNotInSync, Severity::Unavailable)]
        );
        // Another replica in sync makes up the count: one failover away.
        attach(&mut server, &[("online", 0), ("send_bulk", 0)]);
        assert_eq!(
            found(&server, &opts().wait_replicas(1)),
            [(FindingKind::ReplicaNotInSync, Severity::Warning)]
        );
        let readings: BTreeMap<_, _> = readings(&server)
            .into_iter()
            .map(|reading| (reading.name, reading.value))
            .collect();
        assert_eq!(
            readings["role"],
            "primary, 2 replica(s) attached: 10.0.0.0:6380 (online, lag 0 s), 10.0.0.1:6380 \
             (send_bulk: in a full sync)"
        );
    }

    #[test]
    fn a_replica_that_stops_acknowledging_is_not_in_sync() {
        let mut server = safe_primary();
        attach(&mut server, &[("online", 1), ("online", 2)]);
        assert_eq!(found(&server, &opts().wait_replicas(2)), []);
        attach(&mut server, &[("online", 1), ("online", 3)]);
        assert_eq!(
            found(&server, &opts().wait_replicas(2)),
            [(FindingKind::ReplicaNotInSync, Severity::Unavailable)]
        );
        assert_eq!(
            found(&server, &opts().wait_replicas(1)),
            [(FindingKind::ReplicaNotInSync, Severity::Warning)]
        );
        let strict = opts().wait_replicas(1).max_replica_lag(Duration::ZERO);
        let report = findings(&server, &strict);
        assert_eq!(report.len(), 1);
        assert_eq!(
            report[0].observed,
            "2 of 2 replica(s) not in sync: 10.0.0.0:6380 (online, lag 1 s), 10.0.0.1:6380 \
             (online, lag 3 s); 0 in sync, the locks WAIT for 1"
        );
    }

    #[test]
    fn without_info_replicas_not_online_are_not_counted_and_say_so() {
        let mut server = safe_primary();
        attach(&mut server, &[("online", 0), ("wait_bgsave", 0)]);
        server.info = Err("NOPERM this user has no permissions to run the 'info' command".into());
        let report = findings(&server, &opts().wait_replicas(1));
        assert_eq!(
            report
                .iter()
                .map(|finding| (finding.kind, finding.severity))
                .collect::<Vec<_>>(),
            [(FindingKind::ReplicationUnreadable, Severity::Unknown)]
        );
        assert!(
            report[0].observed.starts_with("INFO: NOPERM") && report[0].observed.contains("ROLE"),
            "{}",
            report[0].observed
        );
        let readings: BTreeMap<_, _> = readings(&server)
            .into_iter()
            .map(|reading| (reading.name, reading.value))
            .collect();
        assert_eq!(
            readings["role"],
            "primary, 1 replica(s) attached: 10.0.0.0:6380 (online) (from ROLE, which lists only \
             replicas online)"
        );
    }

    #[test]
    fn a_loading_server_is_unavailable() {
        let mut server = safe_primary();
        info(&mut server, "loading", "1");
        info(&mut server, "loading_loaded_perc", "7.88");
        info(&mut server, "loading_eta_seconds", "11");
        let report = findings(&server, &opts());
        assert_eq!(
            found(&server, &opts()),
            [(FindingKind::Loading, Severity::Unavailable)]
        );
        assert_eq!(
            report[0].observed,
            "INFO loading:1 (7.88 % loaded, about 11 s left)"
        );
        info(&mut server, "loading", "0");
        assert_eq!(found(&server, &opts()), []);
    }

    #[test]
    fn a_replica_is_not_a_primary() {
        let mut server = safe_primary();
        server.role = Ok(Role::Replica {
            primary: "10.0.0.1:6379".into(),
            state: "connected".into(),
        });
        assert_eq!(
            found(&server, &opts()),
            [(FindingKind::NotAPrimary, Severity::Unavailable)]
        );
        set(&mut server, "replica-read-only", "no");
        assert_eq!(
            found(&server, &opts()),
            [(FindingKind::NotAPrimary, Severity::Unsafe)]
        );
        server.role = Ok(Role::Sentinel);
        assert_eq!(
            found(&server, &opts()),
            [(FindingKind::NotAPrimary, Severity::Unavailable)]
        );
        // ROLE refused: INFO replication still tells.
        let mut server = safe_primary();
        server.role = Err("NOPERM".into());
        info(&mut server, "role", "slave");
        assert_eq!(
            found(&server, &opts()),
            [(FindingKind::NotAPrimary, Severity::Unavailable)]
        );
    }

    #[test]
    fn a_clock_offset_counts_beyond_its_uncertainty() {
        let opts = opts().max_clock_offset(Duration::from_millis(100));
        let mut server = safe_primary();
        server.clock = Ok(ClockSample {
            offset_us: -150_000,
            uncertainty_us: 10_000,
        });
        assert_eq!(
            found(&server, &opts),
            [(FindingKind::ClockOffset, Severity::Warning)]
        );
        // 150 ms ± 60 ms might be 90 ms: not certainly beyond 100 ms.
        server.clock = Ok(ClockSample {
            offset_us: 150_000,
            uncertainty_us: 60_000,
        });
        assert_eq!(found(&server, &opts), []);
    }

    #[test]
    fn findings_come_most_severe_first() {
        let mut server = safe_primary();
        set(&mut server, "maxmemory-policy", "allkeys-lru");
        set(&mut server, "appendonly", "no");
        attach(&mut server, &[("online", 0)]);
        server.clock = Err("NOPERM".into());
        let severities: Vec<_> = findings(&server, &opts().wait_replicas(2))
            .iter()
            .map(|finding| finding.severity)
            .collect();
        let mut sorted = severities.clone();
        sorted.sort_by_key(|severity| Reverse(*severity));
        assert_eq!(severities, sorted);
        assert_eq!(severities.len(), 4);
    }

    #[test]
    fn readings_record_values_and_refusals() {
        let mut server = safe_primary();
        server.config.insert("appendfsync", Err(REFUSED.into()));
        let readings: BTreeMap<_, _> = readings(&server)
            .into_iter()
            .map(|reading| (reading.name, reading.value))
            .collect();
        assert_eq!(readings["maxmemory-policy"], "\"noeviction\"");
        assert_eq!(readings["appendfsync"], format!("unreadable ({REFUSED})"));
        assert_eq!(readings["role"], "primary, 0 replica(s) attached");
        assert!(readings["server clock offset"].starts_with("+0.1 ms"));
    }
}
