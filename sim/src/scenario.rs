//! Scenario files: TOML in, a checked [`Scenario`] out, and every mistake
//! reported as `file:line:col: message`.
//!
//! Parsing is two steps. serde + toml read the raw file (unknown keys are
//! rejected there, with their position); then each value is checked
//! against the rest (ranges ordered, targets that exist in the topology,
//! renewals inside the ttl), keeping the position of the offending value.

use std::{fmt, ops::Range, path::Path, time::Duration};

use serde::Deserialize;
use toml::Spanned;

use crate::config::{
    ClientsConfig, DurationRange, Expect, FaultKind, FaultSpec, FencingMode, LockConfig, Property,
    Scenario, SignedDuration, Target, Topology,
};

/// A scenario file that could not be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file, as given.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong, in one sentence.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

impl std::error::Error for ScenarioError {}

/// Reads and checks the scenario file at `path`.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|error| ScenarioError {
        file: label.clone(),
        line: 1,
        column: 1,
        message: format!("cannot read the file: {error}"),
    })?;
    parse(&label, &text)
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTopology {
    kind: Spanned<String>,
    replicas: Option<Spanned<usize>>,
    nodes: Option<Spanned<usize>>,
    replication_lag: Option<Spanned<String>>,
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
    target: Spanned<String>,
    duration: Option<Spanned<String>>,
    every: Option<Spanned<String>>,
    rate: Option<Spanned<f64>>,
    offset: Option<Spanned<String>>,
    delay: Option<Spanned<String>>,
}

/// Turns byte offsets into line:col errors for one file.
struct Locator<'a> {
    file: &'a str,
    text: &'a str,
}

impl Locator<'_> {
    fn error(&self, span: Range<usize>, message: impl Into<String>) -> ScenarioError {
        let offset = span.start.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        ScenarioError {
            file: self.file.to_owned(),
            line,
            column,
            message: message.into(),
        }
    }

    fn duration(&self, value: &Spanned<String>) -> Result<Duration, ScenarioError> {
        humantime::parse_duration(value.get_ref().trim()).map_err(|error| {
            self.error(
                value.span(),
                format!(
                    "bad duration {:?}: {error} (write e.g. \"500ms\" or \"2s\")",
                    value.get_ref()
                ),
            )
        })
    }

    fn range(&self, value: &Spanned<String>) -> Result<DurationRange, ScenarioError> {
        let text = value.get_ref();
        let Some((min, max)) = text.split_once("..") else {
            let fixed = self.duration(value)?;
            return Ok(DurationRange::fixed(fixed));
        };
        let parse = |part: &str| {
            humantime::parse_duration(part.trim()).map_err(|error| {
                self.error(
                    value.span(),
                    format!("bad range {text:?}: {part:?}: {error}"),
                )
            })
        };
        let (min, max) = (parse(min)?, parse(max)?);
        if min > max {
            return Err(self.error(
                value.span(),
                format!("bad range {text:?}: the start is after the end"),
            ));
        }
        Ok(DurationRange { min, max })
    }

    fn signed(&self, value: &Spanned<String>) -> Result<SignedDuration, ScenarioError> {
        let text = value.get_ref().trim();
        let (negative, rest) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        let magnitude = humantime::parse_duration(rest.trim())
            .map_err(|error| self.error(value.span(), format!("bad offset {text:?}: {error}")))?;
        Ok(SignedDuration {
            negative,
            magnitude,
        })
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

const PROPERTIES: [(&str, Property); 7] = [
    ("lease-exclusion", Property::LeaseExclusion),
    ("server-oracle", Property::ServerOracle),
    ("tokens", Property::Tokens),
    ("fenced-writes", Property::FencedWrites),
    ("owner-only", Property::OwnerOnly),
    ("timely-loss", Property::TimelyLoss),
    ("liveness", Property::Liveness),
];

/// Every fault kind with its scenario-file name.
pub const FAULT_KINDS: [(&str, FaultKind); 10] = [
    ("pause", FaultKind::Pause),
    ("partition", FaultKind::Partition),
    ("partition-oneway", FaultKind::PartitionOneway),
    ("latency", FaultKind::Latency),
    ("failover", FaultKind::Failover),
    ("restart", FaultKind::Restart),
    ("clock-drift", FaultKind::ClockDrift),
    ("clock-jump", FaultKind::ClockJump),
    ("busy", FaultKind::Busy),
    ("crash", FaultKind::Crash),
];

/// Parses a scenario from `text`; `file` labels its errors.
pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
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
    let expect = one_of(
        &locator,
        &raw.expect,
        "expectation",
        &[("safe", Expect::Safe), ("violation", Expect::Violation)],
    )?;
    let property = raw
        .property
        .as_ref()
        .map(|p| one_of(&locator, p, "property", &PROPERTIES))
        .transpose()?;

    let topology = match &raw.topology {
        None => Topology::Single,
        Some(spanned) => {
            let topology = spanned.get_ref();
            let kind = one_of(
                &locator,
                &topology.kind,
                "topology kind",
                &[("single", 0), ("primary-replica", 1), ("redlock", 2)],
            )?;
            match kind {
                0 => Topology::Single,
                1 => {
                    let replicas = topology.replicas.as_ref().map_or(1, |r| *r.get_ref());
                    if replicas == 0 {
                        let span = topology
                            .replicas
                            .as_ref()
                            .map_or(spanned.span(), Spanned::span);
                        return Err(locator.error(span, "primary-replica needs at least 1 replica"));
                    }
                    let replication_lag = match &topology.replication_lag {
                        Some(lag) => locator.range(lag)?,
                        None => DurationRange {
                            min: Duration::from_millis(1),
                            max: Duration::from_millis(20),
                        },
                    };
                    Topology::PrimaryReplica {
                        replicas,
                        replication_lag,
                    }
                }
                _ => {
                    let Some(nodes) = &topology.nodes else {
                        return Err(locator.error(spanned.span(), "redlock needs `nodes`"));
                    };
                    if *nodes.get_ref() < 1 {
                        return Err(locator.error(nodes.span(), "redlock needs at least 1 node"));
                    }
                    return Err(locator.error(
                        topology.kind.span(),
                        "the redlock topology is not simulated yet (its core machine exists; the adapter and world do not)",
                    ));
                }
            }
        }
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
        .map(|f| {
            one_of(
                &locator,
                f,
                "fencing",
                &[
                    ("none", FencingMode::None),
                    ("counter", FencingMode::Counter),
                    ("time-mixed", FencingMode::TimeMixed),
                ],
            )
        })
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
    if let Topology::PrimaryReplica { replicas, .. } = topology
        && wait_replicas as usize > replicas
        && let Some(w) = &lock_raw.wait_replicas
    {
        return Err(locator.error(
            w.span(),
            format!("wait_replicas = {wait_replicas} but the topology has {replicas} replicas"),
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
    })
}

fn fault(
    locator: &Locator<'_>,
    spanned: &Spanned<RawFault>,
    topology: &Topology,
    clients: usize,
    run: Duration,
) -> Result<FaultSpec, ScenarioError> {
    let raw = spanned.get_ref();
    let kind = one_of(locator, &raw.kind, "fault kind", &FAULT_KINDS)?;
    let at = locator.range(&raw.at)?;
    if at.min >= run {
        return Err(locator.error(raw.at.span(), "the fault starts after the run ends"));
    }
    let target = parse_target(locator, &raw.target, topology, clients)?;
    let redis_only = matches!(
        kind,
        FaultKind::Failover | FaultKind::Restart | FaultKind::Busy | FaultKind::ClockJump
    );
    let is_redis = matches!(target, Target::Primary | Target::Redis(_));
    if redis_only && !is_redis {
        return Err(locator.error(
            raw.target.span(),
            format!(
                "a {} fault targets a Redis node (redis:N or redis:primary)",
                raw.kind.get_ref()
            ),
        ));
    }
    if kind == FaultKind::Pause && !matches!(target, Target::Client(_) | Target::AnyClient) {
        return Err(locator.error(
            raw.target.span(),
            "a pause targets a client (client:N or client:any)",
        ));
    }
    if kind == FaultKind::Failover && !matches!(topology, Topology::PrimaryReplica { .. }) {
        return Err(locator.error(
            raw.kind.span(),
            "failover needs topology kind = \"primary-replica\"",
        ));
    }
    let needs_duration = matches!(
        kind,
        FaultKind::Pause
            | FaultKind::Partition
            | FaultKind::PartitionOneway
            | FaultKind::Latency
            | FaultKind::Busy
    );
    let duration = raw
        .duration
        .as_ref()
        .map(|d| locator.range(d))
        .transpose()?;
    if needs_duration && duration.is_none() {
        return Err(locator.error(
            spanned.span(),
            format!("a {} fault needs `duration`", raw.kind.get_ref()),
        ));
    }
    let rate = raw.rate.as_ref().map(|r| *r.get_ref());
    if kind == FaultKind::ClockDrift {
        match &raw.rate {
            None => return Err(locator.error(spanned.span(), "a clock-drift fault needs `rate`")),
            Some(r) if !(r.get_ref().is_finite() && r.get_ref().abs() < 0.5) => {
                return Err(locator.error(
                    r.span(),
                    "rate must be a relative error between -0.5 and 0.5",
                ));
            }
            Some(_) => {}
        }
    }
    let offset = raw.offset.as_ref().map(|o| locator.signed(o)).transpose()?;
    if kind == FaultKind::ClockJump && offset.is_none() {
        return Err(locator.error(spanned.span(), "a clock-jump fault needs `offset`"));
    }
    let delay = raw.delay.as_ref().map(|d| locator.range(d)).transpose()?;
    if kind == FaultKind::Latency && delay.is_none() {
        return Err(locator.error(spanned.span(), "a latency fault needs `delay`"));
    }
    let every = raw.every.as_ref().map(|e| locator.range(e)).transpose()?;
    if let (Some(every), Some(raw_every)) = (every, &raw.every)
        && every.min.is_zero()
    {
        return Err(locator.error(raw_every.span(), "`every` must be above zero"));
    }
    Ok(FaultSpec {
        kind,
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
        let scenario = parse("good.toml", GOOD).expect("valid");
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
            let error = parse("bad.toml", &text).expect_err(to);
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
            parse("f.toml", &drift)
                .expect_err("rate")
                .message
                .contains("needs `rate`")
        );
        let pause = GOOD.replace("kind = \"failover\"", "kind = \"pause\"");
        assert!(parse("f.toml", &pause).is_err());
    }
}
