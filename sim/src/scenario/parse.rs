//! Reading scenario files. Parsing is two steps: serde + toml read the raw
//! file ([`raw`]; unknown keys are rejected there, with their position);
//! then each value is checked against the rest and against the rules in
//! [`names`](super::names) (ranges ordered, targets that exist in the
//! topology, parameters the fault kind takes, renewals inside the ttl),
//! keeping the position of the offending value.

use std::{path::Path, time::Duration};

use toml::Spanned;

use self::raw::{RawFault, RawLock, RawScenario, RawServer, RawTopology, RawWorkload};
use super::{
    mix,
    names::{
        EXPECTS, FAULT_KINDS, FENCINGS, FLAVOURS, FaultKindInfo, Hosts, PERSISTENCES, PROPERTIES,
        TOPOLOGY_KINDS, Use, WORKLOAD_KINDS,
    },
    text::{Locator, ScenarioError},
};
use crate::config::{
    ClientsConfig, DurationRange, FaultSpec, FencingMode, LockConfig, Persistence, Scenario,
    ServerConfig, ServerFlavour, Target, Topology, WorkloadConfig, WorkloadKind,
};

/// Reads and checks the scenario file at `path`; errors name the file as
/// given.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|error| ScenarioError {
        file: label.clone(),
        line: 1,
        column: 1,
        message: format!("cannot read the file: {error}"),
    })?;
    parse_scenario(&label, &text)
}

/// A probability key (`drop_guard`, `cancel`): 0 when absent.
fn chance(locator: &Locator<'_>, value: Option<&Spanned<f64>>) -> Result<f64, ScenarioError> {
    match value {
        None => Ok(0.0),
        Some(p) if (0.0..=1.0).contains(p.get_ref()) => Ok(*p.get_ref()),
        Some(p) => Err(locator.error(p.span(), "a chance must be between 0 and 1")),
    }
}

fn one_of<T: Copy>(
    locator: &Locator<'_>,
    value: &Spanned<String>,
    what: &str,
    choices: &[(&str, T)],
) -> Result<T, ScenarioError> {
    choices
        .iter()
        .find(|(name, _)| *name == value.get_ref())
        .map(|(_, choice)| *choice)
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
            locator.error(
                value.span(),
                format!(
                    "unknown {what} {:?}; expected one of: {}",
                    value.get_ref(),
                    names.join(", ")
                ),
            )
        })
}

/// A real run's controller may stall this long unless the file says.
const DEFAULT_MAX_STALL: Duration = Duration::from_millis(500);

/// Parses and checks a scenario from `text`; `file` labels its errors.
pub fn parse_scenario(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
    let locator = Locator { file, text };
    let raw: RawScenario = toml::from_str(text).map_err(|error| {
        locator.error(
            error.span().unwrap_or(0..0),
            error.message().trim().to_owned(),
        )
    })?;

    let name = scenario_name(&locator, &raw.name)?;
    let seeds = match &raw.seeds {
        Some(seeds) if *seeds.get_ref() == 0 => {
            return Err(locator.error(seeds.span(), "seeds must be at least 1"));
        }
        Some(seeds) => *seeds.get_ref(),
        None => 100,
    };
    let duration = locator.duration(&raw.duration)?;
    let max_stall = raw
        .max_stall
        .as_ref()
        .map(|stall| locator.duration(stall))
        .transpose()?
        .unwrap_or(DEFAULT_MAX_STALL);
    if duration < Duration::from_secs(1) {
        return Err(locator.error(raw.duration.span(), "duration must be at least 1s"));
    }
    let expect = one_of(&locator, &raw.expect, "expectation", &EXPECTS)?;
    let properties = PROPERTIES.map(|(name, property, _)| (name, property));
    let property = raw
        .property
        .as_ref()
        .map(|p| one_of(&locator, p, "property", &properties))
        .transpose()?;

    let topology = match &raw.topology {
        None => Topology::Single,
        Some(spanned) => topology(&locator, spanned)?,
    };

    let lock_raw = raw.lock.get_ref();
    let lock = lock_config(&locator, lock_raw)?;
    let server = server_config(&locator, raw.server.as_ref())?;
    check_wait_aof(&locator, lock_raw, &lock, &server)?;
    check_lock_options(&locator, lock_raw, &lock, &topology)?;

    let clients = clients_config(&locator, &raw, &topology)?;

    let mut faults = Vec::new();
    for spanned in &raw.fault {
        faults.push(fault(
            &locator,
            spanned,
            &topology,
            &server,
            clients.count,
            duration,
        )?);
    }

    let mix = raw
        .mix
        .as_ref()
        .map(|spanned| mix::parse(&locator, spanned, &topology, &server, &lock))
        .transpose()?;

    Ok(Scenario {
        name,
        description: raw.description.trim().to_owned(),
        seeds,
        duration,
        expect,
        property,
        min_grants: raw.min_grants.unwrap_or(1),
        max_stall,
        topology,
        server,
        lock,
        clients,
        faults,
        mix,
    })
}

/// The scenario's `name`, trimmed: it names report files.
fn scenario_name(locator: &Locator<'_>, raw: &Spanned<String>) -> Result<String, ScenarioError> {
    let name = raw.get_ref().trim().to_owned();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(locator.error(
            raw.span(),
            "name must be non-empty and use only letters, digits, '-' and '_' (it names report files)",
        ));
    }
    Ok(name)
}

/// The `[lock]` table's values, each read on its own; how they fit
/// together is checked after.
fn lock_config(locator: &Locator<'_>, lock_raw: &RawLock) -> Result<LockConfig, ScenarioError> {
    let ttl = locator.duration(&lock_raw.ttl)?;
    let drift_factor = lock_raw
        .drift_factor
        .as_ref()
        .map_or(0.01, |d| *d.get_ref());
    let renew_every = lock_raw
        .renew_every
        .as_ref()
        .map(|r| locator.duration(r))
        .transpose()?;
    let fencing = lock_raw
        .fencing
        .as_ref()
        .map(|f| one_of(locator, f, "fencing", &FENCINGS))
        .transpose()?
        .unwrap_or(FencingMode::TimeMixed);
    let wait_replicas = lock_raw.wait_replicas.as_ref().map_or(0, |w| *w.get_ref());
    let wait = lock_raw
        .wait
        .as_ref()
        .map(|w| locator.duration(w))
        .transpose()?;
    let wait_aof = match lock_raw.wait_aof.as_ref() {
        None => None,
        Some(spanned) => match spanned.get_ref().as_slice() {
            [local, replicas] => Some((*local, *replicas)),
            _ => {
                return Err(locator.error(
                    spanned.span(),
                    "wait_aof is [local, replicas], as WAITAOF's numlocal and numreplicas",
                ));
            }
        },
    };
    Ok(LockConfig {
        ttl,
        renew_every,
        drift_factor,
        fencing,
        wait_replicas,
        wait_aof,
        wait,
    })
}

/// The `[server]` table: the defaults when absent.
fn server_config(
    locator: &Locator<'_>,
    server_raw: Option<&RawServer>,
) -> Result<ServerConfig, ScenarioError> {
    Ok(ServerConfig {
        flavour: server_raw
            .and_then(|s| s.flavour.as_ref())
            .map(|f| one_of(locator, f, "server flavour", &FLAVOURS))
            .transpose()?
            .unwrap_or_default(),
        persistence: server_raw
            .and_then(|s| s.persistence.as_ref())
            .map(|p| one_of(locator, p, "persistence", &PERSISTENCES))
            .transpose()?
            .unwrap_or_default(),
    })
}

/// `wait_aof` asks for what the simulated server can give: no replicas
/// (they keep no AOF), a flavour with `WAITAOF`, and an AOF for `local`.
fn check_wait_aof(
    locator: &Locator<'_>,
    lock_raw: &RawLock,
    lock: &LockConfig,
    server: &ServerConfig,
) -> Result<(), ScenarioError> {
    let (Some((local, replicas)), Some(spanned)) = (lock.wait_aof, lock_raw.wait_aof.as_ref())
    else {
        return Ok(());
    };
    if replicas > 0 {
        return Err(locator.error(
            spanned.span(),
            "wait_aof replicas must be 0: the simulated replicas keep no AOF, so WAITAOF \
             never counts them (as a real replica with appendonly no)",
        ));
    }
    if server.flavour == ServerFlavour::Redis70 {
        return Err(locator.error(
            spanned.span(),
            "wait_aof needs a [server] flavour with WAITAOF (redis-8.2, valkey-8.1, valkey-9.1, redis-8.4): Redis 7.0 has none",
        ));
    }
    if local == 1 && server.persistence == Persistence::None {
        return Err(locator.error(
            spanned.span(),
            "wait_aof local 1 needs [server] persistence = \"aof-everysec\" or \
             \"aof-always\": WAITAOF refuses numlocal without appendonly",
        ));
    }
    Ok(())
}

/// The lock's own validation, reported at the key it is about (else at
/// the ttl), and `wait_replicas` within the topology's replicas.
fn check_lock_options(
    locator: &Locator<'_>,
    lock_raw: &RawLock,
    lock: &LockConfig,
    topology: &Topology,
) -> Result<(), ScenarioError> {
    if let Err(error) = crate::client::lock_options(lock).validate() {
        use lock_core::OptionsError;
        let span = match error {
            OptionsError::DriftFactor { .. } => lock_raw.drift_factor.as_ref().map(Spanned::span),
            OptionsError::RenewEvery { .. } => lock_raw.renew_every.as_ref().map(Spanned::span),
            OptionsError::WaitReplicasTimeout { .. } => {
                lock_raw.wait_replicas.as_ref().map(Spanned::span)
            }
            OptionsError::WaitAofLocal { .. }
            | OptionsError::WaitAofNothing
            | OptionsError::WaitAofTimeout { .. } => lock_raw.wait_aof.as_ref().map(Spanned::span),
            _ => None,
        }
        .unwrap_or_else(|| lock_raw.ttl.span());
        return Err(locator.error(span, format!("invalid lock options: {error}")));
    }
    let wait_replicas = lock.wait_replicas;
    let replicas = topology.replicas();
    if wait_replicas as usize > replicas
        && let Some(w) = &lock_raw.wait_replicas
    {
        return Err(locator.error(
            w.span(),
            format!(
                "wait_replicas = {wait_replicas} but the topology has {replicas} replica(s): WAIT would never be satisfied"
            ),
        ));
    }
    Ok(())
}

/// The `[clients]` table, with the `[workload]` they run.
fn clients_config(
    locator: &Locator<'_>,
    raw: &RawScenario,
    topology: &Topology,
) -> Result<ClientsConfig, ScenarioError> {
    let clients_raw = raw.clients.as_ref();
    let count = clients_raw.and_then(|c| c.count.as_ref());
    let clients = ClientsConfig {
        count: count.map_or(3, |c| *c.get_ref()),
        hold: clients_raw
            .and_then(|c| c.hold.as_ref())
            .map(|h| locator.range(h))
            .transpose()?
            .unwrap_or(DurationRange {
                min: Duration::from_millis(10),
                max: Duration::from_millis(500),
            }),
        think: clients_raw
            .and_then(|c| c.think.as_ref())
            .map(|t| locator.range(t))
            .transpose()?
            .unwrap_or(DurationRange {
                min: Duration::ZERO,
                max: Duration::from_millis(200),
            }),
        unfenced_register: clients_raw
            .and_then(|c| c.unfenced_register)
            .unwrap_or(true),
        locks: clients_raw
            .and_then(|c| c.locks.as_ref())
            .map_or(1, |l| *l.get_ref()),
        drop_guard: chance(locator, clients_raw.and_then(|c| c.drop_guard.as_ref()))?,
        cancel: chance(locator, clients_raw.and_then(|c| c.cancel.as_ref()))?,
        workload: raw
            .workload
            .as_ref()
            .map(|w| workload(locator, w, topology))
            .transpose()?
            .unwrap_or_default(),
    };
    if clients.count == 0 || clients.count > 64 {
        let span = count.map_or(0..0, Spanned::span);
        return Err(locator.error(span, "clients.count must be between 1 and 64"));
    }
    if let Some(locks) = clients_raw.and_then(|c| c.locks.as_ref())
        && !(1..=16).contains(locks.get_ref())
    {
        return Err(locator.error(locks.span(), "clients.locks must be between 1 and 16"));
    }
    Ok(clients)
}

/// The `[workload]` table: a kind, and the keys that kind takes.
fn workload(
    locator: &Locator<'_>,
    spanned: &Spanned<RawWorkload>,
    topology: &Topology,
) -> Result<WorkloadConfig, ScenarioError> {
    let raw = spanned.get_ref();
    let kind = one_of(locator, &raw.kind, "workload kind", &WORKLOAD_KINDS)?;
    let mut config = WorkloadConfig {
        kind,
        ..WorkloadConfig::default()
    };
    if let Some(permits) = &raw.permits {
        if kind != WorkloadKind::Semaphore {
            return Err(locator.error(
                permits.span(),
                "`permits` applies to workload kind \"semaphore\" only",
            ));
        }
        if !(1..=64).contains(permits.get_ref()) {
            return Err(locator.error(permits.span(), "permits must be between 1 and 64"));
        }
        config.permits = *permits.get_ref();
    }
    if let Some(share) = &raw.read_share {
        if kind != WorkloadKind::ReadWrite {
            return Err(locator.error(
                share.span(),
                "`read_share` applies to workload kind \"read-write\" only",
            ));
        }
        if !(0.0..=1.0).contains(share.get_ref()) {
            return Err(locator.error(share.span(), "read_share must be between 0 and 1"));
        }
        config.read_share = *share.get_ref();
    }
    if kind != WorkloadKind::Mutex && matches!(topology, Topology::Redlock { .. }) {
        return Err(locator.error(
            raw.kind.span(),
            format!(
                "workload kind {:?} does not run on Redlock (lock-core refuses it: \
                 AcquireError::NotOnRedlock)",
                raw.kind.get_ref()
            ),
        ));
    }
    Ok(config)
}

fn topology(
    locator: &Locator<'_>,
    spanned: &Spanned<RawTopology>,
) -> Result<Topology, ScenarioError> {
    let raw = spanned.get_ref();
    let kinds = TOPOLOGY_KINDS.map(|(name, _)| (name, name));
    let kind = one_of(locator, &raw.kind, "topology kind", &kinds)?;
    check_topology_keys(locator, raw, kind)?;
    match kind {
        "single" => Ok(Topology::Single),
        "primary-replica" => Ok(Topology::PrimaryReplica {
            replicas: replicas(locator, spanned, kind)?,
            replication_lag: replication_lag(locator, raw)?,
        }),
        "sentinel" => sentinel_topology(locator, spanned),
        "cluster" => cluster_topology(locator, spanned),
        "redlock" => {
            let Some(nodes) = &raw.nodes else {
                return Err(locator.error(spanned.span(), "redlock needs `nodes`"));
            };
            let count = *nodes.get_ref();
            if !(1..=9).contains(&count) {
                return Err(locator.error(nodes.span(), "redlock needs 1 to 9 nodes"));
            }
            Ok(Topology::Redlock { nodes: count })
        }
        // `one_of` only returns names from TOPOLOGY_KINDS, each matched above.
        other => unreachable!("topology kind {other} is in TOPOLOGY_KINDS but not parsed"),
    }
}

/// A key that belongs to another topology kind than `kind` is a mistake,
/// not a no-op.
fn check_topology_keys(
    locator: &Locator<'_>,
    raw: &RawTopology,
    kind: &str,
) -> Result<(), ScenarioError> {
    let takes = TOPOLOGY_KINDS
        .iter()
        .find(|(name, _)| *name == kind)
        .map_or(&[][..], |(_, keys)| *keys);
    let given = [
        ("replicas", raw.replicas.as_ref().map(Spanned::span)),
        (
            "replication_lag",
            raw.replication_lag.as_ref().map(Spanned::span),
        ),
        ("nodes", raw.nodes.as_ref().map(Spanned::span)),
        ("sentinels", raw.sentinels.as_ref().map(Spanned::span)),
        ("sentinel_lag", raw.sentinel_lag.as_ref().map(Spanned::span)),
        ("shards", raw.shards.as_ref().map(Spanned::span)),
        ("node_timeout", raw.node_timeout.as_ref().map(Spanned::span)),
    ];
    for (key, span) in given {
        if let Some(span) = span
            && !takes.contains(&key)
        {
            return Err(locator.error(
                span,
                format!("`{key}` does not apply to topology kind {kind:?}"),
            ));
        }
    }
    Ok(())
}

/// The replicas of a primary (`kind` names the topology in the error):
/// 1 when absent, at most 8.
fn replicas(
    locator: &Locator<'_>,
    spanned: &Spanned<RawTopology>,
    kind: &str,
) -> Result<usize, ScenarioError> {
    let raw = spanned.get_ref();
    let replicas = raw.replicas.as_ref().map_or(1, |r| *r.get_ref());
    if replicas == 0 || replicas > 8 {
        let span = raw.replicas.as_ref().map_or(spanned.span(), Spanned::span);
        return Err(locator.error(span, format!("{kind} needs 1 to 8 replicas")));
    }
    Ok(replicas)
}

/// How far replication lags: 1 to 20 ms when absent.
fn replication_lag(
    locator: &Locator<'_>,
    raw: &RawTopology,
) -> Result<DurationRange, ScenarioError> {
    match &raw.replication_lag {
        Some(lag) => locator.range(lag),
        None => Ok(DurationRange {
            min: Duration::from_millis(1),
            max: Duration::from_millis(20),
        }),
    }
}

fn sentinel_topology(
    locator: &Locator<'_>,
    spanned: &Spanned<RawTopology>,
) -> Result<Topology, ScenarioError> {
    let raw = spanned.get_ref();
    let sentinels = raw.sentinels.as_ref().map_or(3, |s| *s.get_ref());
    if !(1..=9).contains(&sentinels) {
        let span = raw.sentinels.as_ref().map_or(spanned.span(), Spanned::span);
        return Err(locator.error(span, "sentinel needs 1 to 9 sentinels"));
    }
    // Real sentinels adopt a failover from each other's hello
    // messages, published every 2 s.
    let sentinel_lag = match &raw.sentinel_lag {
        Some(lag) => locator.range(lag)?,
        None => DurationRange {
            min: Duration::ZERO,
            max: Duration::from_secs(2),
        },
    };
    Ok(Topology::Sentinel {
        replicas: replicas(locator, spanned, "sentinel")?,
        sentinels,
        replication_lag: replication_lag(locator, raw)?,
        sentinel_lag,
    })
}

fn cluster_topology(
    locator: &Locator<'_>,
    spanned: &Spanned<RawTopology>,
) -> Result<Topology, ScenarioError> {
    let raw = spanned.get_ref();
    let shards = raw.shards.as_ref().map_or(3, |s| *s.get_ref());
    if !(1..=9).contains(&shards) {
        let span = raw.shards.as_ref().map_or(spanned.span(), Spanned::span);
        return Err(locator.error(span, "cluster needs 1 to 9 shards"));
    }
    // Zero replicas is a cluster without failover, as real ones
    // may run.
    let replicas = raw.replicas.as_ref().map_or(1, |r| *r.get_ref());
    if replicas > 8 {
        let span = raw.replicas.as_ref().map_or(spanned.span(), Spanned::span);
        return Err(locator.error(span, "cluster needs 0 to 8 replicas per shard"));
    }
    // Redis's default cluster-node-timeout.
    let node_timeout = match &raw.node_timeout {
        Some(timeout) => locator.duration(timeout)?,
        None => Duration::from_secs(15),
    };
    Ok(Topology::Cluster {
        shards,
        replicas,
        replication_lag: replication_lag(locator, raw)?,
        node_timeout,
    })
}

fn fault(
    locator: &Locator<'_>,
    spanned: &Spanned<RawFault>,
    topology: &Topology,
    server: &ServerConfig,
    clients: usize,
    run: Duration,
) -> Result<FaultSpec, ScenarioError> {
    let raw = spanned.get_ref();
    let kinds = FAULT_KINDS.map(|info| (info.name, info));
    let info = one_of(locator, &raw.kind, "fault kind", &kinds)?;
    if let Some(refusal) = info.refusal_on(server.flavour) {
        return Err(locator.error(raw.kind.span(), refusal));
    }
    let at = locator.range(&raw.at)?;
    if at.min >= run {
        return Err(locator.error(raw.at.span(), "the fault starts after the run ends"));
    }
    let target = fault_target(locator, spanned, &info, topology, clients)?;

    // Each parameter belongs to some kinds: required for some, optional
    // for others, and a mistake anywhere else.
    let duration = raw
        .duration
        .as_ref()
        .map(|d| locator.range(d))
        .transpose()?;
    let rate = raw.rate.as_ref().map(|r| *r.get_ref());
    let offset = raw.offset.as_ref().map(|o| locator.signed(o)).transpose()?;
    let delay = raw.delay.as_ref().map(|d| locator.range(d)).transpose()?;
    let every = raw.every.as_ref().map(|e| locator.range(e)).transpose()?;
    check_fault_parameters(locator, spanned, &info)?;
    if let Some(r) = &raw.rate
        && !(r.get_ref().is_finite() && r.get_ref().abs() < 0.5)
    {
        return Err(locator.error(
            r.span(),
            "rate must be a relative error between -0.5 and 0.5",
        ));
    }
    if let (Some(o), Some(offset)) = (&raw.offset, offset)
        && offset.magnitude.is_zero()
    {
        return Err(locator.error(o.span(), "a clock jump of zero does nothing"));
    }
    if let (Some(every), Some(raw_every)) = (every, &raw.every)
        && every.min.is_zero()
    {
        return Err(locator.error(raw_every.span(), "`every` must be above zero"));
    }
    Ok(FaultSpec {
        kind: info.kind,
        at,
        target,
        duration,
        every,
        rate,
        offset,
        delay,
    })
}

/// The fault's target, checked against the hosts its kind acts on and the
/// topology; on Redis nodes, the primary unless the file names one.
fn fault_target(
    locator: &Locator<'_>,
    spanned: &Spanned<RawFault>,
    info: &FaultKindInfo,
    topology: &Topology,
    clients: usize,
) -> Result<Target, ScenarioError> {
    let raw = spanned.get_ref();
    let name = info.name;
    let target_span = raw.target.as_ref().map_or(spanned.span(), Spanned::span);
    let target = match &raw.target {
        Some(target) => parse_target(locator, target, topology, clients)?,
        None if info.hosts == Hosts::RedisNodes && topology.has_primary() => Target::Primary,
        None if info.hosts == Hosts::RedisNodes => {
            return Err(locator.error(
                spanned.span(),
                format!(
                    "a {name} fault needs `target`: redlock nodes are independent primaries, name one (redis:N)"
                ),
            ));
        }
        None => {
            return Err(locator.error(spanned.span(), format!("a {name} fault needs `target`")));
        }
    };
    let on_client = matches!(target, Target::Client(_) | Target::AnyClient);
    let on_redis = matches!(target, Target::Primary | Target::Redis(_));
    let fits = match info.hosts {
        Hosts::Clients => on_client,
        Hosts::RedisNodes => on_redis,
        Hosts::ClientsOrRedis => on_client || on_redis,
        Hosts::Any => true,
    };
    if !fits {
        return Err(locator.error(
            target_span.clone(),
            format!("a {name} fault targets {}", info.hosts.wanted()),
        ));
    }
    if !(info.applies)(topology) {
        return Err(locator.error(
            raw.kind.span(),
            format!(
                "a {name} fault does not apply to topology kind {:?}",
                topology.kind_name()
            ),
        ));
    }
    if info.primary_only && target != Target::Primary {
        // The world acts on whichever node is primary; naming one would
        // promise something it does not do.
        return Err(locator.error(
            target_span,
            format!(
                "a {name} fault targets redis:primary (the node that is primary when it fires)"
            ),
        ));
    }
    Ok(target)
}

/// Every parameter the fault's kind requires is given, and none it never
/// takes.
fn check_fault_parameters(
    locator: &Locator<'_>,
    spanned: &Spanned<RawFault>,
    info: &FaultKindInfo,
) -> Result<(), ScenarioError> {
    let raw = spanned.get_ref();
    let name = info.name;
    let parameters = [
        (
            "duration",
            info.duration,
            raw.duration.as_ref().map(Spanned::span),
        ),
        ("rate", info.rate, raw.rate.as_ref().map(Spanned::span)),
        (
            "offset",
            info.offset,
            raw.offset.as_ref().map(Spanned::span),
        ),
        ("delay", info.delay, raw.delay.as_ref().map(Spanned::span)),
    ];
    for (key, use_, span) in parameters {
        match (use_, span) {
            (Use::Required, None) => {
                return Err(locator.error(spanned.span(), format!("a {name} fault needs `{key}`")));
            }
            (Use::Never, Some(span)) => {
                return Err(
                    locator.error(span, format!("`{key}` does not apply to a {name} fault"))
                );
            }
            _ => {}
        }
    }
    Ok(())
}

fn parse_target(
    locator: &Locator<'_>,
    value: &Spanned<String>,
    topology: &Topology,
    clients: usize,
) -> Result<Target, ScenarioError> {
    let text = value.get_ref().as_str();
    let bad = |message: String| Err(locator.error(value.span(), message));
    match text.split_once(':') {
        Some(("client", "any")) => Ok(Target::AnyClient),
        Some(("redis", "primary")) if !topology.has_primary() => {
            bad("redlock nodes are independent primaries: name one (redis:N)".to_owned())
        }
        Some(("redis", "primary")) => Ok(Target::Primary),
        Some(("client", n)) => match n.parse::<usize>() {
            Ok(n) if n < clients => Ok(Target::Client(n)),
            Ok(n) => bad(format!(
                "target client:{n} does not exist: there are {clients} clients (client:0 to client:{})",
                clients - 1
            )),
            Err(_) => bad(format!(
                "bad target {text:?}: expected client:N or client:any"
            )),
        },
        Some(("redis", n)) => {
            let nodes = topology.node_count();
            match n.parse::<usize>() {
                Ok(n) if n < nodes => Ok(Target::Redis(n)),
                Ok(n) => bad(format!(
                    "target redis:{n} does not exist: the topology has {nodes} node(s)"
                )),
                Err(_) => bad(format!(
                    "bad target {text:?}: expected redis:N or redis:primary"
                )),
            }
        }
        None if text == "storage" => Ok(Target::Storage),
        _ => bad(format!(
            "unknown target {text:?}; expected client:N, client:any, redis:N, redis:primary or storage"
        )),
    }
}

pub(crate) mod raw;
#[cfg(test)]
mod tests;
