//! Reading scenario files. Parsing is two steps: serde + toml read the raw
//! file (unknown keys are rejected there, with their position); then each
//! value is checked against the rest and against the rules in
//! [`names`](super::names) (ranges ordered, targets that exist in the
//! topology, parameters the fault kind takes, renewals inside the ttl),
//! keeping the position of the offending value.

use std::{path::Path, time::Duration};

use serde::Deserialize;
use toml::Spanned;

use super::{
    mix,
    names::{EXPECTS, FAULT_KINDS, FENCINGS, Hosts, PROPERTIES, TOPOLOGY_KINDS, Use},
    text::{Locator, ScenarioError},
};
use crate::config::{
    ClientsConfig, DurationRange, FaultSpec, FencingMode, LockConfig, Scenario, Target, Topology,
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Spanned<String>,
    description: String,
    seeds: Option<Spanned<u64>>,
    duration: Spanned<String>,
    expect: Spanned<String>,
    property: Option<Spanned<String>>,
    #[serde(default)]
    topology: Option<Spanned<RawTopology>>,
    lock: Spanned<RawLock>,
    #[serde(default)]
    clients: Option<RawClients>,
    #[serde(default)]
    fault: Vec<Spanned<RawFault>>,
    mix: Option<Spanned<mix::RawMix>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTopology {
    kind: Spanned<String>,
    replicas: Option<Spanned<usize>>,
    nodes: Option<Spanned<usize>>,
    replication_lag: Option<Spanned<String>>,
    sentinels: Option<Spanned<usize>>,
    sentinel_lag: Option<Spanned<String>>,
    shards: Option<Spanned<usize>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLock {
    ttl: Spanned<String>,
    renew_every: Option<Spanned<String>>,
    drift_factor: Option<Spanned<f64>>,
    fencing: Option<Spanned<String>>,
    wait_replicas: Option<Spanned<u32>>,
    wait: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClients {
    count: Option<Spanned<usize>>,
    hold: Option<Spanned<String>>,
    think: Option<Spanned<String>>,
    unfenced_register: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFault {
    kind: Spanned<String>,
    at: Spanned<String>,
    target: Option<Spanned<String>>,
    duration: Option<Spanned<String>>,
    every: Option<Spanned<String>>,
    rate: Option<Spanned<f64>>,
    offset: Option<Spanned<String>>,
    delay: Option<Spanned<String>>,
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

/// Parses and checks a scenario from `text`; `file` labels its errors.
pub fn parse_scenario(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
    let locator = Locator { file, text };
    let raw: RawScenario = toml::from_str(text).map_err(|error| {
        locator.error(
            error.span().unwrap_or(0..0),
            error.message().trim().to_owned(),
        )
    })?;

    let name = raw.name.get_ref().trim().to_owned();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(locator.error(
            raw.name.span(),
            "name must be non-empty and use only letters, digits, '-' and '_' (it names report files)",
        ));
    }
    let seeds = match &raw.seeds {
        Some(seeds) if *seeds.get_ref() == 0 => {
            return Err(locator.error(seeds.span(), "seeds must be at least 1"));
        }
        Some(seeds) => *seeds.get_ref(),
        None => 100,
    };
    let duration = locator.duration(&raw.duration)?;
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
        .map(|f| one_of(&locator, f, "fencing", &FENCINGS))
        .transpose()?
        .unwrap_or(FencingMode::TimeMixed);
    let wait_replicas = lock_raw.wait_replicas.as_ref().map_or(0, |w| *w.get_ref());
    let wait = lock_raw
        .wait
        .as_ref()
        .map(|w| locator.duration(w))
        .transpose()?;
    let lock = LockConfig {
        ttl,
        renew_every,
        drift_factor,
        fencing,
        wait_replicas,
        wait,
    };
    // The lock's own validation, reported at the [lock] table.
    if let Err(error) = crate::client::lock_options(&lock).validate() {
        use lock_core::OptionsError;
        let span = match error {
            OptionsError::DriftFactor { .. } => lock_raw.drift_factor.as_ref().map(Spanned::span),
            OptionsError::RenewEvery { .. } => lock_raw.renew_every.as_ref().map(Spanned::span),
            OptionsError::WaitReplicasTimeout { .. } => {
                lock_raw.wait_replicas.as_ref().map(Spanned::span)
            }
            _ => None,
        }
        .unwrap_or_else(|| lock_raw.ttl.span());
        return Err(locator.error(span, format!("invalid lock options: {error}")));
    }
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
    };
    if clients.count == 0 || clients.count > 64 {
        let span = count.map_or(0..0, Spanned::span);
        return Err(locator.error(span, "clients.count must be between 1 and 64"));
    }

    let mut faults = Vec::new();
    for spanned in &raw.fault {
        faults.push(fault(
            &locator,
            spanned,
            &topology,
            clients.count,
            duration,
        )?);
    }

    let mix = raw
        .mix
        .as_ref()
        .map(|spanned| mix::parse(&locator, spanned, &topology, &lock))
        .transpose()?;

    Ok(Scenario {
        name,
        description: raw.description.trim().to_owned(),
        seeds,
        duration,
        expect,
        property,
        topology,
        lock,
        clients,
        faults,
        mix,
    })
}

fn topology(
    locator: &Locator<'_>,
    spanned: &Spanned<RawTopology>,
) -> Result<Topology, ScenarioError> {
    let raw = spanned.get_ref();
    let kinds = TOPOLOGY_KINDS.map(|(name, _)| (name, name));
    let kind = one_of(locator, &raw.kind, "topology kind", &kinds)?;
    // A key that belongs to another kind is a mistake, not a no-op.
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
    let replicas = || {
        let replicas = raw.replicas.as_ref().map_or(1, |r| *r.get_ref());
        if replicas == 0 || replicas > 8 {
            let span = raw.replicas.as_ref().map_or(spanned.span(), Spanned::span);
            return Err(locator.error(span, format!("{kind} needs 1 to 8 replicas")));
        }
        Ok(replicas)
    };
    let replication_lag = || match &raw.replication_lag {
        Some(lag) => locator.range(lag),
        None => Ok(DurationRange {
            min: Duration::from_millis(1),
            max: Duration::from_millis(20),
        }),
    };
    match kind {
        "single" => Ok(Topology::Single),
        "primary-replica" => Ok(Topology::PrimaryReplica {
            replicas: replicas()?,
            replication_lag: replication_lag()?,
        }),
        "sentinel" => {
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
                replicas: replicas()?,
                sentinels,
                replication_lag: replication_lag()?,
                sentinel_lag,
            })
        }
        "cluster" => {
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
            Ok(Topology::Cluster {
                shards,
                replicas,
                replication_lag: replication_lag()?,
            })
        }
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

fn fault(
    locator: &Locator<'_>,
    spanned: &Spanned<RawFault>,
    topology: &Topology,
    clients: usize,
    run: Duration,
) -> Result<FaultSpec, ScenarioError> {
    let raw = spanned.get_ref();
    let kinds = FAULT_KINDS.map(|info| (info.name, info));
    let info = one_of(locator, &raw.kind, "fault kind", &kinds)?;
    let name = info.name;
    let at = locator.range(&raw.at)?;
    if at.min >= run {
        return Err(locator.error(raw.at.span(), "the fault starts after the run ends"));
    }
    // A fault on Redis nodes hits the primary unless the file names one.
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

#[cfg(test)]
mod tests {
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
}
