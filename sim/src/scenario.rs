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
    let replicas = match topology {
        Topology::PrimaryReplica { replicas, .. } => replicas,
        Topology::Single | Topology::Redlock { .. } => 0,
    };
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

fn topology(
    locator: &Locator<'_>,
    spanned: &Spanned<RawTopology>,
) -> Result<Topology, ScenarioError> {
    let raw = spanned.get_ref();
    let kind = one_of(
        locator,
        &raw.kind,
        "topology kind",
        &[("single", 0), ("primary-replica", 1), ("redlock", 2)],
    )?;
    // A key that belongs to another kind is a mistake, not a no-op.
    let stray = |key: &str, span: Range<usize>| {
        Err(locator.error(
            span,
            format!(
                "`{key}` does not apply to topology kind {:?}",
                raw.kind.get_ref()
            ),
        ))
    };
    if kind != 1 {
        if let Some(replicas) = &raw.replicas {
            return stray("replicas", replicas.span());
        }
        if let Some(lag) = &raw.replication_lag {
            return stray("replication_lag", lag.span());
        }
    }
    if kind != 2
        && let Some(nodes) = &raw.nodes
    {
        return stray("nodes", nodes.span());
    }
    match kind {
        0 => Ok(Topology::Single),
        1 => {
            let replicas = raw.replicas.as_ref().map_or(1, |r| *r.get_ref());
            if replicas == 0 || replicas > 8 {
                let span = raw.replicas.as_ref().map_or(spanned.span(), Spanned::span);
                return Err(locator.error(span, "primary-replica needs 1 to 8 replicas"));
            }
            let replication_lag = match &raw.replication_lag {
                Some(lag) => locator.range(lag)?,
                None => DurationRange {
                    min: Duration::from_millis(1),
                    max: Duration::from_millis(20),
                },
            };
            Ok(Topology::PrimaryReplica {
                replicas,
                replication_lag,
            })
        }
        _ => {
            let Some(nodes) = &raw.nodes else {
                return Err(locator.error(spanned.span(), "redlock needs `nodes`"));
            };
            let count = *nodes.get_ref();
            if !(1..=9).contains(&count) {
                return Err(locator.error(nodes.span(), "redlock needs 1 to 9 nodes"));
            }
            Ok(Topology::Redlock { nodes: count })
        }
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
    let kind = one_of(locator, &raw.kind, "fault kind", &FAULT_KINDS)?;
    let name = raw.kind.get_ref();
    let at = locator.range(&raw.at)?;
    if at.min >= run {
        return Err(locator.error(raw.at.span(), "the fault starts after the run ends"));
    }
    let target = parse_target(locator, &raw.target, topology, clients)?;
    let on_client = matches!(target, Target::Client(_) | Target::AnyClient);
    let on_redis = matches!(target, Target::Primary | Target::Redis(_));
    let wrong_target = match kind {
        FaultKind::Pause => (!on_client).then_some("a client (client:N or client:any)"),
        // A client reads a monotonic clock, which never steps.
        FaultKind::Failover | FaultKind::Restart | FaultKind::Busy | FaultKind::ClockJump => {
            (!on_redis).then_some("a Redis node (redis:N or redis:primary)")
        }
        FaultKind::ClockDrift => {
            (!on_client && !on_redis).then_some("a client or a Redis node (storage has no clock)")
        }
        FaultKind::Partition
        | FaultKind::PartitionOneway
        | FaultKind::Latency
        | FaultKind::Crash => None,
    };
    if let Some(wanted) = wrong_target {
        return Err(locator.error(
            raw.target.span(),
            format!("a {name} fault targets {wanted}"),
        ));
    }
    if kind == FaultKind::Failover {
        if !matches!(topology, Topology::PrimaryReplica { .. }) {
            return Err(locator.error(
                raw.kind.span(),
                "failover needs topology kind = \"primary-replica\"",
            ));
        }
        if target != Target::Primary {
            // The world fails over whichever node is primary; naming one
            // would promise something it does not do.
            return Err(locator.error(
                raw.target.span(),
                "a failover fault targets redis:primary (the node that is primary when it fires)",
            ));
        }
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
    let duration_use = match kind {
        FaultKind::Pause
        | FaultKind::Partition
        | FaultKind::PartitionOneway
        | FaultKind::Latency
        | FaultKind::Busy => Use::Required,
        FaultKind::Restart | FaultKind::ClockDrift => Use::Optional,
        FaultKind::Failover | FaultKind::ClockJump | FaultKind::Crash => Use::Never,
    };
    let only = |wanted: FaultKind| {
        if kind == wanted {
            Use::Required
        } else {
            Use::Never
        }
    };
    let parameters = [
        (
            "duration",
            duration_use,
            raw.duration.as_ref().map(Spanned::span),
        ),
        (
            "rate",
            only(FaultKind::ClockDrift),
            raw.rate.as_ref().map(Spanned::span),
        ),
        (
            "offset",
            only(FaultKind::ClockJump),
            raw.offset.as_ref().map(Spanned::span),
        ),
        (
            "delay",
            only(FaultKind::Latency),
            raw.delay.as_ref().map(Spanned::span),
        ),
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

/// Whether a fault kind takes a parameter.
#[derive(Clone, Copy)]
enum Use {
    Required,
    Optional,
    Never,
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
        Some(("redis", "primary")) if matches!(topology, Topology::Redlock { .. }) => {
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

/// A duration in the file format, exact to the nanosecond ("1s 500ms").
pub fn duration_text(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

/// A range in the file format: one value when fixed, else "min..max".
pub fn range_text(range: DurationRange) -> String {
    if range.min == range.max {
        duration_text(range.min)
    } else {
        format!("{}..{}", duration_text(range.min), duration_text(range.max))
    }
}

/// A quoted TOML string.
pub fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// The name a fault kind has in scenario files.
pub fn kind_name(kind: FaultKind) -> &'static str {
    FAULT_KINDS
        .iter()
        .find(|(_, k)| *k == kind)
        .map_or("unknown", |(name, _)| name)
}

/// The name a property has in scenario files.
pub fn property_name(property: Property) -> &'static str {
    PROPERTIES
        .iter()
        .find(|(_, p)| *p == property)
        .map_or("unknown", |(name, _)| name)
}

/// Writes `scenario` back in the file format, every key explicit;
/// [`parse_scenario`] reads it back to an equal scenario.
pub fn to_toml(scenario: &Scenario) -> String {
    let mut out = String::new();
    let mut line = |text: String| {
        out.push_str(&text);
        out.push('\n');
    };
    line(format!("name = {}", quoted(&scenario.name)));
    line(format!("description = {}", quoted(&scenario.description)));
    line(format!("seeds = {}", scenario.seeds));
    line(format!(
        "duration = {}",
        quoted(&duration_text(scenario.duration))
    ));
    let expect = match scenario.expect {
        Expect::Safe => "safe",
        Expect::Violation => "violation",
    };
    line(format!("expect = {}", quoted(expect)));
    if let Some(property) = scenario.property {
        line(format!("property = {}", quoted(property_name(property))));
    }
    line(String::new());
    line("[topology]".to_owned());
    match &scenario.topology {
        Topology::Single => line("kind = \"single\"".to_owned()),
        Topology::PrimaryReplica {
            replicas,
            replication_lag,
        } => {
            line("kind = \"primary-replica\"".to_owned());
            line(format!("replicas = {replicas}"));
            line(format!(
                "replication_lag = {}",
                quoted(&range_text(*replication_lag))
            ));
        }
        Topology::Redlock { nodes } => {
            line("kind = \"redlock\"".to_owned());
            line(format!("nodes = {nodes}"));
        }
    }
    line(String::new());
    let lock = &scenario.lock;
    line("[lock]".to_owned());
    line(format!("ttl = {}", quoted(&duration_text(lock.ttl))));
    if let Some(renew_every) = lock.renew_every {
        line(format!(
            "renew_every = {}",
            quoted(&duration_text(renew_every))
        ));
    }
    // Debug keeps a decimal point, so the value reads back as a float.
    line(format!("drift_factor = {:?}", lock.drift_factor));
    let fencing = match lock.fencing {
        FencingMode::None => "none",
        FencingMode::Counter => "counter",
        FencingMode::TimeMixed => "time-mixed",
    };
    line(format!("fencing = {}", quoted(fencing)));
    line(format!("wait_replicas = {}", lock.wait_replicas));
    if let Some(wait) = lock.wait {
        line(format!("wait = {}", quoted(&duration_text(wait))));
    }
    line(String::new());
    let clients = &scenario.clients;
    line("[clients]".to_owned());
    line(format!("count = {}", clients.count));
    line(format!("hold = {}", quoted(&range_text(clients.hold))));
    line(format!("think = {}", quoted(&range_text(clients.think))));
    line(format!("unfenced_register = {}", clients.unfenced_register));
    for fault in &scenario.faults {
        line(String::new());
        line("[[fault]]".to_owned());
        line(format!("kind = {}", quoted(kind_name(fault.kind))));
        line(format!("at = {}", quoted(&range_text(fault.at))));
        line(format!("target = {}", quoted(&target_text(fault.target))));
        if let Some(duration) = fault.duration {
            line(format!("duration = {}", quoted(&range_text(duration))));
        }
        if let Some(every) = fault.every {
            line(format!("every = {}", quoted(&range_text(every))));
        }
        if let Some(rate) = fault.rate {
            line(format!("rate = {rate:?}"));
        }
        if let Some(offset) = fault.offset {
            line(format!("offset = {}", quoted(&offset_text(offset))));
        }
        if let Some(delay) = fault.delay {
            line(format!("delay = {}", quoted(&range_text(delay))));
        }
    }
    out
}

/// A clock-jump offset in the file format ("-3s").
pub fn offset_text(offset: SignedDuration) -> String {
    let sign = if offset.negative { "-" } else { "" };
    format!("{sign}{}", duration_text(offset.magnitude))
}

fn target_text(target: Target) -> String {
    match target {
        Target::Client(n) => format!("client:{n}"),
        Target::AnyClient => "client:any".to_owned(),
        Target::Primary => "redis:primary".to_owned(),
        Target::Redis(n) => format!("redis:{n}"),
        Target::Storage => "storage".to_owned(),
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
}
