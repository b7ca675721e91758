//! `redis-lock-check` against real servers: its exit status, its human
//! report and its JSON.

mod support;

use std::process::{Command, Output};

use support::RedisServer;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_redis-lock-check"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A server with two unsafe settings: an evicting policy under a memory
/// cap, and no persistence (the test servers' default).
fn unsafe_server() -> RedisServer {
    RedisServer::start_with(&["--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"])
}

#[test]
fn a_safe_server_passes() {
    let server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
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
