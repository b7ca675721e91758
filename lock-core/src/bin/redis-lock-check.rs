//! `redis-lock-check URL`: runs the deployment check against one Redis and
//! prints what in its configuration can break the lock.
//!
//! Exit status: 0 when the check read what it needs and nothing fails it;
//! 1 when a finding fails it: an `unsafe` or `unavailable` one, or an
//! `unknown` one (a setting the server would not show: what was not read
//! is not passed) that is not `--accept`ed, and with `--strict` a warning
//! too; 2 when the check could not run (bad arguments, no connection, a
//! refused authentication).

use std::{collections::BTreeSet, process::ExitCode, time::Duration};

use clap::{Parser, builder::PossibleValuesParser};
use lock_core::{CheckOptions, DeploymentReport, Finding, FindingKind, LockOptions, Severity};

/// Checks a Redis server's configuration against what a redis-lock needs:
/// eviction, persistence, replication, role and clock.
#[derive(Debug, Parser)]
#[command(name = "redis-lock-check", version)]
struct Args {
    /// The server to check: redis://[user:password@]host:port/db.
    url: String,
    /// The ttl of the locks.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    ttl: Duration,
    /// Replica acknowledgements the locks WAIT for (`LockOptions::wait_replicas`).
    #[arg(long, default_value_t = 0)]
    wait_replicas: u32,
    /// Local fsyncs the locks' WAITAOF asks for, 0 or 1
    /// (`LockOptions::wait_aof(local, …)`): with 1, `aof-not-always` is
    /// not a finding on Redis 8.0 and later, whose WAITAOF waits for the
    /// fsync (Valkey's does not).
    #[arg(long, default_value_t = 0)]
    wait_aof_local: u32,
    /// The locks' drift factor; the drift margin (ttl × factor + 2 ms) is
    /// the largest server clock offset not reported.
    #[arg(long, default_value_t = 0.01)]
    drift_factor: f64,
    /// The largest server clock offset not reported, instead of the drift margin.
    #[arg(long, value_parser = humantime::parse_duration)]
    max_clock_offset: Option<Duration>,
    /// The longest a replica may go without acknowledging before it counts
    /// as not in sync (replicas acknowledge every second).
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    max_replica_lag: Duration,
    /// A finding you accept (say, `no-persistence` when restarts are
    /// delayed past the ttl, or `persistence-unreadable` once you checked
    /// it in your provider's console): still printed, but it does not fail
    /// the check.
    #[arg(long, value_name = "KIND", value_parser = kind_parser())]
    accept: Vec<FindingKind>,
    /// Fail on every finding not accepted, warnings too.
    #[arg(long)]
    strict: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// How long to wait for the connection and for each reply.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    timeout: Duration,
}

fn kind_parser() -> impl clap::builder::TypedValueParser<Value = FindingKind> {
    use clap::builder::TypedValueParser;
    PossibleValuesParser::new(FindingKind::ALL.map(FindingKind::name)).try_map(|name| name.parse())
}

impl Args {
    /// Returns true if `finding` fails the check. A setting that could not
    /// be read fails it as an unsafe one does: a check never passes what it
    /// did not read, unless told to.
    fn fails(&self, finding: &Finding) -> bool {
        let serious = matches!(
            finding.severity,
            Severity::Unsafe | Severity::Unavailable | Severity::Unknown
        );
        (serious || self.strict) && !self.accept.contains(&finding.kind)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    let report = match run(&args).await {
        Ok(report) => report,
        Err(error) => {
            eprintln!("redis-lock-check: could not run: {error}");
            return ExitCode::from(2);
        }
    };
    let failing: BTreeSet<FindingKind> = report
        .findings
        .iter()
        .filter(|finding| args.fails(finding))
        .map(|finding| finding.kind)
        .collect();
    if args.json {
        println!("{}", json(&args, &report));
    } else {
        print_human(&args, &report, &failing);
    }
    if failing.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn run(args: &Args) -> Result<DeploymentReport, Box<dyn std::error::Error>> {
    let mut lock = LockOptions::new(args.ttl)
        .drift_factor(args.drift_factor)
        .wait_replicas(args.wait_replicas, Duration::from_secs(1));
    if args.wait_aof_local > 0 {
        lock = lock.wait_aof(args.wait_aof_local, 0, Duration::from_secs(1));
    }
    lock.validate()?;
    let mut opts = CheckOptions::for_lock(&lock);
    if let Some(offset) = args.max_clock_offset {
        opts = opts.max_clock_offset(offset);
    }
    opts = opts.max_replica_lag(args.max_replica_lag);
    let client = redis::Client::open(args.url.as_str())?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(args.timeout))
        .set_response_timeout(Some(args.timeout));
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|error| match error.kind() {
            redis::ErrorKind::AuthenticationFailed => {
                format!("the server refused the authentication (check the URL's user and password): {error}")
            }
            _ => format!("cannot connect: {error}"),
        })?;
    Ok(lock_core::check_deployment(&mut conn, &opts).await?)
}

fn print_human(args: &Args, report: &DeploymentReport, failing: &BTreeSet<FindingKind>) {
    println!("{report}");
    let accepted: Vec<&str> = report
        .findings
        .iter()
        .filter(|finding| args.accept.contains(&finding.kind))
        .map(|finding| finding.kind.name())
        .collect();
    if !accepted.is_empty() {
        println!("accepted: {}", accepted.join(", "));
    }
    if failing.is_empty() {
        println!("check passed");
        return;
    }
    let names: Vec<&str> = failing.iter().map(|kind| kind.name()).collect();
    println!("check FAILED: {}", names.join(", "));
    let unread: Vec<&str> = report
        .findings
        .iter()
        .filter(|finding| finding.severity == Severity::Unknown && failing.contains(&finding.kind))
        .map(|finding| finding.kind.name())
        .collect();
    if !unread.is_empty() {
        println!(
            "not checked: {} (the server would not show it; check it another way, then --accept it)",
            unread.join(", ")
        );
    }
}

fn json(args: &Args, report: &DeploymentReport) -> serde_json::Value {
    let findings: Vec<_> = report
        .findings
        .iter()
        .map(|finding| {
            serde_json::json!({
                "kind": finding.kind.name(),
                "severity": finding.severity.name(),
                "meaning": finding.kind.meaning(),
                "observed": finding.observed,
                "safety_row": finding.safety_row,
                "evidence": finding.kind.evidence(),
                "fix": finding.fix,
                "accepted": args.accept.contains(&finding.kind),
                "fails": args.fails(finding),
            })
        })
        .collect();
    let readings: serde_json::Map<_, _> = report
        .readings
        .iter()
        .map(|reading| (reading.name.clone(), reading.value.clone().into()))
        .collect();
    serde_json::json!({
        "passed": !report.findings.iter().any(|finding| args.fails(finding)),
        "safe": report.is_safe(),
        "findings": findings,
        "readings": readings,
    })
}
