//! `redis-lock-check` against real servers: its exit status, its human
//! report and its JSON.

mod support;

use std::process::{Command, Output};

use support::{RedisServer, states};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_redis-lock-check"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// AOF with an fsync per write: nothing to report about persistence.
const DURABLE: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];

/// A server with two unsafe settings: an evicting policy under a memory
/// cap, and no persistence (the test servers' default).
fn unsafe_server() -> RedisServer {
    RedisServer::start_with(&["--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"])
}

#[test]
fn a_safe_server_passes() {
    let server = RedisServer::start_with(&DURABLE);
    let output = run(&[&server.url()]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("no findings"), "{text}");
    assert!(text.ends_with("check passed\n"), "{text}");
}

#[test]
fn an_unsafe_server_fails_with_each_finding_explained() {
    let server = unsafe_server();
    let output = run(&[&server.url(), "--ttl", "10s"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    for expected in [
        "UNSAFE      eviction-policy:",
        "read: maxmemory-policy allkeys-lru, maxmemory 104857600",
        "safety table: \"Eviction of a held key under memory pressure\"",
        "evidence: scenarios/eviction.toml (simulated)",
        "fix: set maxmemory-policy noeviction",
        "UNSAFE      no-persistence:",
        "longer than the lock ttl (10s)",
        "check FAILED: eviction-policy, no-persistence",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
}

#[test]
fn accepted_findings_are_printed_but_do_not_fail() {
    let server = unsafe_server();
    let output = run(&[
        &server.url(),
        "--accept",
        "eviction-policy",
        "--accept",
        "no-persistence",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("UNSAFE      eviction-policy:"), "{text}");
    assert!(
        text.contains("accepted: eviction-policy, no-persistence"),
        "{text}"
    );
    let output = run(&[&server.url(), "--accept", "no-persistence"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
}

#[test]
fn strict_fails_on_warnings_too() {
    // An evicting policy without a memory cap is a warning.
    let server = RedisServer::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--maxmemory-policy",
        "volatile-ttl",
    ]);
    let output = run(&[&server.url()]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert!(stdout(&output).contains("WARNING     eviction-policy:"));
    let output = run(&[&server.url(), "--strict"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
}

#[test]
fn json_lists_every_finding() {
    let server = unsafe_server();
    let output = run(&[&server.url(), "--json", "--accept", "no-persistence"]);
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("stdout is one JSON document");
    assert_eq!(report["passed"], false);
    assert_eq!(report["safe"], false);
    let findings = report["findings"].as_array().expect("a findings array");
    let summary: Vec<_> = findings
        .iter()
        .map(|finding| {
            (
                finding["kind"].as_str().unwrap_or_default(),
                finding["severity"].as_str().unwrap_or_default(),
                finding["accepted"].as_bool(),
                finding["fails"].as_bool(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("eviction-policy", "unsafe", Some(false), Some(true)),
            ("no-persistence", "unsafe", Some(true), Some(false)),
        ]
    );
    assert_eq!(
        findings[0]["safety_row"],
        "Eviction of a held key under memory pressure"
    );
    assert_eq!(
        findings[0]["evidence"],
        serde_json::json!(["scenarios/eviction.toml"])
    );
    assert_eq!(report["readings"]["maxmemory-policy"], "\"allkeys-lru\"");
}

#[test]
fn an_unreachable_server_is_an_error_not_a_pass() {
    let port = {
        let server = RedisServer::start();
        server.port()
        // Dropped here: nothing listens on the port any more.
    };
    let output = run(&[&format!("redis://127.0.0.1:{port}/"), "--timeout", "1s"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot connect"), "{stderr}");
    assert!(output.stdout.is_empty());

    let output = run(&["redis://127.0.0.1:1/", "--accept", "eviction"]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "an unknown kind is a usage error"
    );
}

#[test]
fn a_refused_authentication_cannot_run() {
    let server = RedisServer::start_with(&DURABLE);
    let _: String = server.query(&["CONFIG", "SET", "requirepass", "secret"]);
    // No password: every read is refused with NOAUTH.
    let output = run(&[&server.url()]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    let text = stderr(&output);
    assert!(
        text.starts_with("redis-lock-check: could not run: "),
        "{text}"
    );
    assert!(text.contains("NOAUTH"), "{text}");
    assert!(output.stdout.is_empty(), "{}", stdout(&output));
    // A wrong one: the connection's AUTH is refused.
    let wrong = format!("redis://:wrong@127.0.0.1:{}/", server.port());
    let output = run(&[&wrong]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    let text = stderr(&output);
    assert!(text.contains("refused the authentication"), "{text}");
    // The right one: the check runs and passes.
    let right = format!("redis://:secret@127.0.0.1:{}/", server.port());
    let output = run(&[&right]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
}

#[test]
fn settings_the_server_will_not_show_fail_unless_accepted() {
    let server = RedisServer::start_with(&DURABLE);
    let acl = |user: &str, rules: &[&str]| {
        let mut args = vec!["ACL", "SETUSER", user, "on", ">pw"];
        args.extend_from_slice(rules);
        let _: String = server.query(&args);
    };
    acl("no-config", &["~*", "+@all", "-config"]);
    acl("ping-only", &["+ping"]);
    let url = |user: &str| format!("redis://{user}:pw@127.0.0.1:{}/", server.port());

    // Without CONFIG, INFO shows AOF on but not its fsync policy, nor
    // min-replicas-to-write: two settings not checked.
    let output = run(&[&url("no-config")]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    for expected in [
        "UNKNOWN     persistence-unreadable:",
        "NOPERM",
        "check FAILED: persistence-unreadable, replication-unreadable",
        "not checked: persistence-unreadable, replication-unreadable",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    // Checked another way and accepted: it passes, and says what it accepted.
    let output = run(&[
        &url("no-config"),
        "--accept",
        "persistence-unreadable",
        "--accept",
        "replication-unreadable",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("accepted: persistence-unreadable, replication-unreadable"),
        "{text}"
    );

    // Nothing readable at all: it fails, naming everything it did not read.
    let output = run(&[&url("ping-only"), "--json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("stdout is one JSON document");
    assert_eq!(report["passed"], false);
    assert_eq!(report["safe"], false);
    let findings = report["findings"].as_array().expect("a findings array");
    assert_eq!(findings.len(), 4, "{report}");
    for finding in findings {
        assert_eq!(finding["severity"], "unknown", "{finding}");
        assert_eq!(finding["fails"], true, "{finding}");
    }
}

#[test]
fn a_replica_in_its_initial_sync_fails_the_check() {
    let (primary, replica) = states::replica_in_initial_sync(&DURABLE);
    let output = run(&[&primary.url()]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    let named = format!("127.0.0.1:{} (wait_bgsave: in a full sync)", replica.port());
    for expected in [
        format!("role                   primary, 1 replica(s) attached: {named}"),
        "UNSAFE      failover-can-lose-lock:".to_owned(),
        "WARNING     replica-not-in-sync:".to_owned(),
        "check FAILED: failover-can-lose-lock".to_owned(),
    ] {
        assert!(text.contains(&expected), "missing {expected:?} in:\n{text}");
    }
    // Locks that WAIT for it: every grant would wait in vain.
    let output = run(&[&primary.url(), "--wait-replicas", "1"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("check FAILED: replica-not-in-sync"), "{text}");
}

#[test]
fn a_lagging_replica_fails_locks_that_wait_for_it() {
    let primary = RedisServer::start_with(&DURABLE);
    let replica = RedisServer::replica_of(&primary);
    let output = run(&[&primary.url(), "--wait-replicas", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));

    states::stop_acknowledging(&primary, &replica, 2);
    let output = run(&[
        &primary.url(),
        "--wait-replicas",
        "1",
        "--max-replica-lag",
        "1s",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    let named = format!("127.0.0.1:{} (online, lag ", replica.port());
    assert!(text.contains(&named), "{text}");
    assert!(text.contains("check FAILED: replica-not-in-sync"), "{text}");
}

#[test]
fn a_server_still_loading_fails_the_check() {
    let server = states::loading();
    // Loading is what fails it, not the fixture's lack of persistence.
    let output = run(&[&server.url(), "--accept", "no-persistence"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("UNAVAILABLE loading:"), "{text}");
    assert!(text.contains("read: INFO loading:1 ("), "{text}");
    assert!(text.contains("check FAILED: loading\n"), "{text}");
}
