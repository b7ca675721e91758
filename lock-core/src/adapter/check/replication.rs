//! The replication rule: which replicas are attached, which keep up, and
//! what the locks' `WAIT` and the server's `min-replicas-to-write` need of
//! them.

use super::{
    CheckOptions,
    read::{Replica, Server},
    report::{Finding, FindingKind, Severity, row},
};

/// The replicas of a primary, as far as they could be read.
pub(super) struct Replicas {
    /// Every replica attached, whatever its state.
    pub(super) attached: Vec<Replica>,
    /// Why `attached` may miss replicas that are not online: `INFO
    /// replication` could not be read, and `ROLE` lists only those online.
    pub(super) online_only: Option<String>,
}

impl Replicas {
    /// The replicas of `server`: from `INFO replication` where it lists
    /// them, else those `ROLE` listed.
    pub(super) fn of(server: &Server, from_role: &[Replica]) -> Self {
        match server.attached_replicas() {
            Some(attached) => Self {
                attached,
                online_only: None,
            },
            None => Self {
                attached: from_role.to_vec(),
                online_only: Some(server.info_error("connected_slaves")),
            },
        }
    }

    /// The replicas that are online and acknowledged within `max_lag`.
    fn in_sync(&self, opts: &CheckOptions) -> usize {
        self.attached
            .iter()
            .filter(|replica| !is_behind(replica, opts))
            .count()
    }

    /// Those that are not, each with why: `10.0.0.3:6380 (wait_bgsave: in
    /// its initial sync)`.
    fn behind(&self, opts: &CheckOptions) -> Vec<String> {
        self.attached
            .iter()
            .filter(|replica| is_behind(replica, opts))
            .map(describe)
            .collect()
    }

    /// `N replica(s) attached`, naming each and its state.
    pub(super) fn describe(&self) -> String {
        let mut text = format!("{} replica(s) attached", self.attached.len());
        if !self.attached.is_empty() {
            let each: Vec<String> = self.attached.iter().map(describe).collect();
            text = format!("{text}: {}", each.join(", "));
        }
        if self.online_only.is_some() {
            text.push_str(" (from ROLE, which lists only replicas online)");
        }
        text
    }
}

fn is_behind(replica: &Replica, opts: &CheckOptions) -> bool {
    !replica.is_online()
        || replica
            .lag
            .is_some_and(|lag| std::time::Duration::from_secs(lag) > opts.max_replica_lag)
}

/// `10.0.0.2:6380 (online, lag 0 s)`, `10.0.0.3:6380 (wait_bgsave: in its
/// initial sync)`.
fn describe(replica: &Replica) -> String {
    let state = match (replica.state.as_str(), replica.lag) {
        ("online", Some(lag)) => format!("online, lag {lag} s"),
        ("online", None) => "online".to_owned(),
        (state @ ("wait_bgsave" | "send_bulk"), _) => format!("{state}: in a full sync"),
        (state, _) => format!("{state}: not online"),
    };
    format!("{} ({state})", replica.address)
}

/// The findings about a primary's replicas.
pub(super) fn replication(
    server: &Server,
    opts: &CheckOptions,
    replicas: &Replicas,
    found: &mut Vec<Finding>,
) {
    let wait = opts.wait_replicas;
    let attached = replicas.attached.len();
    let in_sync = replicas.in_sync(opts);
    let behind = replicas.behind(opts);
    let min_to_write = server.config("min-replicas-to-write");
    let min_described = min_to_write.map_or_else(
        || {
            format!(
                "min-replicas-to-write unreadable ({})",
                server.config_error("min-replicas-to-write").unwrap_or("?")
            )
        },
        |value| format!("min-replicas-to-write {value}"),
    );
    let behind_described = if behind.is_empty() {
        String::new()
    } else {
        format!(", {} not in sync ({})", behind.len(), behind.join(", "))
    };
    if attached > 0 && wait == 0 {
        found.push(Finding {
            kind: FindingKind::FailoverCanLoseLock,
            severity: Severity::Unsafe,
            observed: format!(
                "{attached} replica(s) attached{behind_described}, the locks WAIT for 0, \
                 {min_described}"
            ),
            safety_row: row::FAILOVER,
            fix: format!(
                "LockOptions::wait_replicas(n, timeout) with 1 ≤ n ≤ {attached}, so a grant \
                 counts only once a replica has it, and a failover that promotes the most \
                 up-to-date replica (Sentinel does); min-replicas-to-write alone bounds a cut-off \
                 primary's writes but does not make any one grant reach a replica"
            ),
        });
    }
    let wait = usize::try_from(wait).unwrap_or(usize::MAX);
    if wait > attached {
        found.push(Finding {
            kind: FindingKind::TooFewReplicasForWait,
            severity: Severity::Unavailable,
            observed: format!("the locks WAIT for {wait} replica(s), {attached} attached"),
            safety_row: row::FAILOVER,
            fix: format!("attach replicas, or lower wait_replicas to at most {attached}"),
        });
    }
    if !behind.is_empty() {
        found.push(not_in_sync(&behind, attached, in_sync, wait, opts));
    }
    let mut unread = Vec::new();
    if let Some(error) = &replicas.online_only {
        unread.push(format!(
            "{error}: ROLE lists only replicas online, so replicas in a full sync are not counted"
        ));
    }
    if min_to_write.is_none() {
        unread.push(min_described);
    }
    if !unread.is_empty() {
        found.push(Finding {
            kind: FindingKind::ReplicationUnreadable,
            severity: Severity::Unknown,
            observed: unread.join("; "),
            safety_row: row::FAILOVER,
            fix: "allow INFO for this user (ACL +info), and make sure min-replicas-to-write is at \
                  most the replicas you have (in your provider's console if CONFIG is disabled): \
                  above it, every write is refused"
                .into(),
        });
    }
    if let Some(min_to_write) = min_to_write {
        min_replicas(server, min_to_write, in_sync, found);
    }
}

/// The finding about replicas `behind` (not in sync), of `attached`.
fn not_in_sync(
    behind: &[String],
    attached: usize,
    in_sync: usize,
    wait: usize,
    opts: &CheckOptions,
) -> Finding {
    // A replica that is not online never acknowledges a WAIT: if the
    // others cannot make up the count, every grant is refused until it
    // catches up. Otherwise it is one failover away from lost locks.
    let starved = wait > in_sync && wait <= attached;
    Finding {
        kind: FindingKind::ReplicaNotInSync,
        severity: if starved {
            Severity::Unavailable
        } else {
            Severity::Warning
        },
        observed: format!(
            "{} of {attached} replica(s) not in sync: {}; {in_sync} in sync, the locks WAIT \
             for {wait}",
            behind.len(),
            behind.join(", ")
        ),
        safety_row: row::FAILOVER,
        fix: format!(
            "find why the replica does not keep up: a replication backlog \
             (repl-backlog-size) too small for the write rate sends it through full resyncs \
             in a loop; a slow disk, network or host delays its acknowledgements (lag \
             allowed: {:?}); a replica in its first sync catches up once the snapshot is \
             loaded",
            opts.max_replica_lag
        ),
    }
}

/// `min-replicas-to-write` against the replicas that count for it.
fn min_replicas(server: &Server, min_to_write: &str, in_sync: usize, found: &mut Vec<Finding>) {
    let wanted = min_to_write.parse::<usize>().unwrap_or(0);
    let max_lag = server
        .config("min-replicas-max-lag")
        .and_then(|lag| lag.parse::<u64>().ok())
        .unwrap_or(0);
    // Redis enforces the minimum only when both settings are nonzero.
    if wanted == 0 || max_lag == 0 {
        return;
    }
    let good = server
        .info("min_slaves_good_slaves")
        .and_then(|count| count.parse::<usize>().ok())
        .unwrap_or(in_sync);
    if good < wanted {
        found.push(Finding {
            kind: FindingKind::MinReplicasUnmet,
            severity: Severity::Unavailable,
            observed: format!(
                "min-replicas-to-write {wanted}, min-replicas-max-lag {max_lag}, {good} good \
                 replica(s)"
            ),
            safety_row: row::FAILOVER,
            fix: format!(
                "attach replicas that keep up (lag under {max_lag} s), or lower \
                 min-replicas-to-write to at most {good}"
            ),
        });
    }
}
