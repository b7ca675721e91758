//! What the deployment check reports: findings, their kinds and severities.

use std::{fmt, str::FromStr};

/// How much a [`Finding`] matters to the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Severity {
    /// Something the check needed could not be read; nothing is assumed.
    Unknown,
    /// Not unsafe by itself, but one ordinary event away from it.
    Warning,
    /// The lock cannot work: every acquire (or renewal) will fail.
    Unavailable,
    /// The lock can be granted to two holders, or silently vanish while held.
    Unsafe,
}

impl Severity {
    /// The lowercase name printed in reports: `unsafe`, `unavailable`, ...
    pub fn name(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Warning => "warning",
            Self::Unavailable => "unavailable",
            Self::Unsafe => "unsafe",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The rows of the safety table (`docs/safety.md`) that findings point
/// to, by the text of their "Fault" column.
pub(crate) mod row {
    pub(crate) const EVICTION: &str = "Eviction of a held key under memory pressure";
    pub(crate) const RESTART: &str = "Redis restart without persistence";
    pub(crate) const FAILOVER: &str = "Failover with async replication";
    pub(crate) const CLOCK_JUMP: &str = "Redis clock jump forward";
}

/// What a finding is about. Each kind has a stable name
/// ([`FindingKind::name`]) that `docs/operations.md`'s "Checking your deployment"
/// section and the command line's `--accept` use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum FindingKind {
    /// The node is a replica (or a Sentinel), not the primary.
    NotAPrimary,
    /// The node is still loading its dataset (after a restart, or a
    /// replica's full sync): it refuses every lock command with `LOADING`.
    Loading,
    /// `maxmemory-policy` is not `noeviction`: under memory pressure Redis
    /// may evict a held lock key (every `volatile-*` policy too, since the
    /// key has a ttl).
    EvictionPolicy,
    /// AOF is off: a restart loses every lock taken since the last RDB
    /// snapshot (all of them without a `save` schedule).
    NoPersistence,
    /// AOF is on without `appendfsync always`: a machine crash loses the
    /// last writes (about a second with `everysec`), lock keys among them.
    AofNotAlways,
    /// The primary has replicas and the locks do not `WAIT` for any: a
    /// failover can promote a replica that never saw a granted lock.
    FailoverCanLoseLock,
    /// The locks `WAIT` for more replicas than are connected: every grant
    /// is refused as not replicated.
    TooFewReplicasForWait,
    /// A replica is attached but not in sync: in its initial sync (or a
    /// resync loop), or not acknowledging. A failover to it loses the locks
    /// it lacks, and the locks' `WAIT` cannot count it.
    ReplicaNotInSync,
    /// Fewer good replicas than `min-replicas-to-write`: every write, so
    /// every acquire and renewal, is refused with `NOREPLICAS`.
    MinReplicasUnmet,
    /// The server's clock is further from the client's than the lock's
    /// drift margin: one of them is not synchronised, and a correction
    /// that steps the server's clock forward expires keys early.
    ClockOffset,
    /// The node's role could not be read.
    RoleUnreadable,
    /// The eviction settings could not be read.
    EvictionUnreadable,
    /// The persistence settings could not be read.
    PersistenceUnreadable,
    /// The replication settings could not be read.
    ReplicationUnreadable,
    /// The server's clock could not be read.
    ClockUnreadable,
}

impl FindingKind {
    /// Every kind, in report order (which is also their `Ord` order).
    pub const ALL: [Self; 15] = [
        Self::NotAPrimary,
        Self::Loading,
        Self::EvictionPolicy,
        Self::NoPersistence,
        Self::AofNotAlways,
        Self::FailoverCanLoseLock,
        Self::TooFewReplicasForWait,
        Self::ReplicaNotInSync,
        Self::MinReplicasUnmet,
        Self::ClockOffset,
        Self::RoleUnreadable,
        Self::EvictionUnreadable,
        Self::PersistenceUnreadable,
        Self::ReplicationUnreadable,
        Self::ClockUnreadable,
    ];

    /// The stable, kebab-case name of the kind, e.g. `eviction-policy`.
    pub fn name(self) -> &'static str {
        match self {
            Self::EvictionPolicy => "eviction-policy",
            Self::NoPersistence => "no-persistence",
            Self::AofNotAlways => "aof-not-always",
            Self::FailoverCanLoseLock => "failover-can-lose-lock",
            Self::TooFewReplicasForWait => "too-few-replicas-for-wait",
            Self::ReplicaNotInSync => "replica-not-in-sync",
            Self::MinReplicasUnmet => "min-replicas-unmet",
            Self::NotAPrimary => "not-a-primary",
            Self::Loading => "loading",
            Self::ClockOffset => "clock-offset",
            Self::EvictionUnreadable => "eviction-unreadable",
            Self::PersistenceUnreadable => "persistence-unreadable",
            Self::ReplicationUnreadable => "replication-unreadable",
            Self::RoleUnreadable => "role-unreadable",
            Self::ClockUnreadable => "clock-unreadable",
        }
    }

    /// One line on what the finding means for the lock.
    pub fn meaning(self) -> &'static str {
        match self {
            Self::EvictionPolicy => {
                "under memory pressure Redis may evict a held lock key, and another client then gets the lock"
            }
            Self::NoPersistence => {
                "a restart loses every lock taken since the last snapshot, and another client then gets the lock"
            }
            Self::AofNotAlways => {
                "a machine crash loses the last writes before the fsync, lock keys among them"
            }
            Self::FailoverCanLoseLock => {
                "a failover can promote a replica that never received a granted lock, and grant it again"
            }
            Self::TooFewReplicasForWait => {
                "the locks wait for more replica acknowledgements than there are replicas: every acquire fails"
            }
            Self::ReplicaNotInSync => {
                "a replica is attached but not in sync: a failover to it loses the locks it lacks, and WAIT cannot count it"
            }
            Self::MinReplicasUnmet => {
                "the primary refuses writes (NOREPLICAS): every acquire and renewal fails"
            }
            Self::NotAPrimary => {
                "the node is not the primary: locks taken here are refused or unsafe"
            }
            Self::Loading => {
                "the node is still loading its dataset: it refuses every lock command (LOADING) until done"
            }
            Self::ClockOffset => {
                "the server clock is far from the client's: one of them is unsynchronised, and a forward step of the server clock expires keys early"
            }
            Self::EvictionUnreadable => {
                "the eviction policy could not be read: eviction was not checked"
            }
            Self::PersistenceUnreadable => {
                "the persistence settings could not be read: restarts were not checked"
            }
            Self::ReplicationUnreadable => {
                "the replication settings could not be read: failover was not checked"
            }
            Self::RoleUnreadable => "the node's role could not be read",
            Self::ClockUnreadable => {
                "the server clock could not be read: its offset was not checked"
            }
        }
    }
}

impl FindingKind {
    /// The scenario files (paths in this repository) whose simulation shows
    /// the fault this finding exposes the lock to: `cargo run --release -p
    /// sim -- run PATH` reproduces it. Empty where no scenario applies.
    pub fn evidence(self) -> &'static [&'static str] {
        match self {
            Self::EvictionPolicy => &["scenarios/eviction.toml"],
            Self::NoPersistence => &["scenarios/restart-without-persistence.toml"],
            Self::AofNotAlways => &["scenarios/restart-without-fsync.toml"],
            Self::FailoverCanLoseLock => &["scenarios/failover-without-wait.toml"],
            Self::ClockOffset => &["scenarios/server-clock-jump.toml"],
            Self::NotAPrimary
            | Self::Loading
            | Self::TooFewReplicasForWait
            | Self::ReplicaNotInSync
            | Self::MinReplicasUnmet
            | Self::RoleUnreadable
            | Self::EvictionUnreadable
            | Self::PersistenceUnreadable
            | Self::ReplicationUnreadable
            | Self::ClockUnreadable => &[],
        }
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no [`FindingKind`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown finding kind {0:?}")]
pub struct UnknownKind(pub String);

impl FromStr for FindingKind {
    type Err = UnknownKind;

    /// Parses a kind's stable [`name`](Self::name).
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| UnknownKind(name.to_owned()))
    }
}

/// One thing the check found about the deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Finding {
    /// What the finding is about.
    pub kind: FindingKind,
    /// How much it matters.
    pub severity: Severity,
    /// What was read from the server, e.g. `maxmemory-policy allkeys-lru,
    /// maxmemory 104857600`, or the error that stopped the read.
    pub observed: String,
    /// The "Fault" column of the safety-table row (`docs/safety.md`) this maps to.
    pub safety_row: &'static str,
    /// What to change.
    pub fix: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<11} {}: {}",
            self.severity.name().to_uppercase(),
            self.kind,
            self.kind.meaning()
        )?;
        writeln!(f, "{:11} read: {}", "", self.observed)?;
        writeln!(f, "{:11} safety table: \"{}\"", "", self.safety_row)?;
        for scenario in self.kind.evidence() {
            writeln!(f, "{:11} evidence: {scenario} (simulated)", "")?;
        }
        write!(f, "{:11} fix: {}", "", self.fix)
    }
}

/// One value the check read, for the record: `("maxmemory-policy",
/// "noeviction")`, `("server clock offset", "+0.4 ms ± 0.1 ms")`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reading {
    /// What was read.
    pub name: String,
    /// Its value as read (or a summary of it).
    pub value: String,
}

/// The result of [`check_deployment`](super::check_deployment): what was
/// read, and what it means for the lock.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct DeploymentReport {
    /// The findings, most severe first. Empty means nothing to change.
    pub findings: Vec<Finding>,
    /// Every value the check read, in the order it read them.
    pub readings: Vec<Reading>,
}

impl DeploymentReport {
    /// Returns true if the check read everything it needs and no finding
    /// is [`Severity::Unsafe`]: what could not be read
    /// ([`Severity::Unknown`]) is not assumed safe.
    pub fn is_safe(&self) -> bool {
        !self
            .findings
            .iter()
            .any(|finding| matches!(finding.severity, Severity::Unsafe | Severity::Unknown))
    }

    /// The most severe finding's severity, if there is any finding.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|finding| finding.severity).max()
    }

    /// The finding of `kind`, if the check made one.
    pub fn finding(&self, kind: FindingKind) -> Option<&Finding> {
        self.findings.iter().find(|finding| finding.kind == kind)
    }

    /// The kinds of every finding, in report order.
    pub fn kinds(&self) -> Vec<FindingKind> {
        self.findings.iter().map(|finding| finding.kind).collect()
    }
}

impl fmt::Display for DeploymentReport {
    /// The human-readable report: the readings, then each finding with what
    /// was read, its safety-table row and its fix.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .readings
            .iter()
            .map(|reading| reading.name.len())
            .max()
            .unwrap_or(0);
        writeln!(f, "read:")?;
        for reading in &self.readings {
            writeln!(f, "  {:width$}  {}", reading.name, reading.value)?;
        }
        if self.findings.is_empty() {
            return write!(
                f,
                "no findings: nothing in this server's configuration breaks the lock"
            );
        }
        writeln!(f, "findings:")?;
        for (index, finding) in self.findings.iter().enumerate() {
            if index > 0 {
                writeln!(f)?;
            }
            writeln!(f, "{finding}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_names_scenarios_that_exist() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        for kind in FindingKind::ALL {
            for scenario in kind.evidence() {
                let path = std::path::Path::new(root).join(scenario);
                assert!(path.is_file(), "{kind}: {scenario} is missing");
            }
        }
        assert_eq!(
            FindingKind::EvictionPolicy.evidence(),
            ["scenarios/eviction.toml"]
        );
    }

    #[test]
    fn kind_names_are_unique_and_parse_back() {
        for kind in FindingKind::ALL {
            assert_eq!(kind.name().parse::<FindingKind>(), Ok(kind));
            let same = FindingKind::ALL
                .iter()
                .filter(|other| other.name() == kind.name())
                .count();
            assert_eq!(same, 1, "{kind:?}");
        }
        assert_eq!(
            "eviction".parse::<FindingKind>(),
            Err(UnknownKind("eviction".into()))
        );
    }

    #[test]
    fn the_docs_explain_every_kind_and_have_every_row() {
        let operations = include_str!("../../../../docs/operations.md");
        let section = operations
            .split("## Checking your deployment")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("docs/operations.md has a \"Checking your deployment\" section");
        for kind in FindingKind::ALL {
            assert!(
                section.contains(&format!("`{}`", kind.name())),
                "docs/operations.md does not explain {kind}"
            );
        }
        let safety = include_str!("../../../../docs/safety.md");
        for fault in [row::EVICTION, row::RESTART, row::FAILOVER, row::CLOCK_JUMP] {
            // A row's first cell starts with the fault (it may go on to
            // say more, in parentheses).
            assert!(
                safety.contains(&format!("\n| {fault} |"))
                    || safety.contains(&format!("\n| {fault} (")),
                "the safety table has no row {fault:?}"
            );
        }
    }

    #[test]
    fn severities_order_from_unknown_to_unsafe() {
        assert!(Severity::Unknown < Severity::Warning);
        assert!(Severity::Warning < Severity::Unavailable);
        assert!(Severity::Unavailable < Severity::Unsafe);
    }
}
