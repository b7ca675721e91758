//! The real-Redis fixture itself: every other integration test trusts that
//! a paused server is silent, a restarted one is empty, and a promoted
//! replica takes writes.

use crate::support;

use std::{
    process::Command,
    thread,
    time::{Duration, Instant},
};

use support::RedisServer;

/// Polls `condition` every 10 ms for up to 5 s.
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn start_answers_ping_on_its_own_port() {
    let first = RedisServer::start();
    let second = RedisServer::start();
    assert_ne!(first.port(), second.port());
    assert_eq!(first.url(), format!("redis://127.0.0.1:{}/", first.port()));
    assert_eq!(
        first.cmd(&["PING"]),
        redis::Value::SimpleString("PONG".into())
    );
    first.cmd(&["SET", "k", "first"]);
    assert_eq!(support::get(&second, "k"), None, "servers share no data");
}

#[test]
fn a_paused_server_times_out_and_answers_again_after_resume() {
    let server = RedisServer::start();
    server.cmd(&["SET", "k", "v"]);

    server.pause();
    let error = server
        .try_query::<String>(&["GET", "k"])
        .expect_err("a stopped process cannot answer");
    assert!(error.is_timeout(), "expected a timeout, got {error}");

    server.resume();
    assert_eq!(support::get(&server, "k").as_deref(), Some("v"));
}

#[test]
fn kill_ends_even_a_paused_server() {
    let mut server = RedisServer::start();
    server.pause();
    server.kill();
    let error = server
        .try_query::<String>(&["PING"])
        .expect_err("nothing listens any more");
    assert!(error.is_connection_refusal(), "got {error}");
}

#[test]
fn restart_keeps_the_port_and_empties_the_dataset() {
    let mut server = RedisServer::start();
    let port = server.port();
    server.cmd(&["SET", "k", "v"]);

    server.restart();
    assert_eq!(server.port(), port);
    assert_eq!(support::get(&server, "k"), None);
    server.cmd(&["SET", "k", "again"]);
}

#[test]
fn a_replica_receives_the_primarys_writes_and_refuses_its_own() {
    let primary = RedisServer::start();
    let replica = RedisServer::replica_of(&primary);

    // The replica acknowledges at once: no warm-up for a test's first WAIT.
    let client = redis::Client::open(primary.url()).expect("a url");
    let mut conn = client.get_connection().expect("connect");
    let (acked,): (i64,) = redis::pipe()
        .cmd("SET")
        .arg("k")
        .arg("v")
        .ignore()
        .cmd("WAIT")
        .arg(1)
        .arg(100)
        .query(&mut conn)
        .expect("SET, WAIT");
    assert_eq!(acked, 1);
    assert_eq!(support::get(&replica, "k").as_deref(), Some("v"));

    let error = replica
        .try_query::<String>(&["SET", "k", "mine"])
        .expect_err("a replica is read-only");
    assert_eq!(error.code(), Some("READONLY"), "got {error}");
}

#[test]
fn a_promoted_replica_takes_writes_and_restarts_as_a_primary() {
    let mut primary = RedisServer::start();
    let mut replica = RedisServer::replica_of(&primary);
    primary.cmd(&["SET", "k", "v"]);
    eventually("the key reaches the replica", || {
        support::get(&replica, "k").is_some()
    });

    primary.kill();
    replica.promote();
    replica.cmd(&["SET", "k", "promoted"]);
    assert_eq!(support::get(&replica, "k").as_deref(), Some("promoted"));

    replica.restart();
    let info: String = replica.query(&["INFO", "replication"]);
    assert!(info.contains("role:master"), "{info}");
}

#[test]
fn a_replica_via_a_cut_link_misses_later_writes() {
    let primary = RedisServer::start();
    let (replica, link) = RedisServer::replica_via(&primary);
    primary.cmd(&["SET", "before", "v"]);
    eventually("the key reaches the replica", || {
        support::get(&replica, "before").is_some()
    });

    link.drop_everything();
    primary.cmd(&["SET", "after", "v"]);
    thread::sleep(Duration::from_millis(200));
    assert_eq!(support::get(&replica, "after"), None);
}

/// Set in the child process that
/// `a_missing_redis_server_fails_the_test_and_says_how_to_get_one` starts.
const CHILD: &str = "FIXTURE_TEST_CHILD";

#[test]
fn a_missing_redis_server_fails_the_test_and_says_how_to_get_one() {
    if std::env::var_os(CHILD).is_some() {
        // The child: `REDIS_SERVER_BIN` points nowhere, so this must panic.
        RedisServer::start();
        return;
    }
    let this_test_binary = std::env::current_exe().expect("the test binary's path");
    // The libtest name: this module's path without the crate's name.
    let module = module_path!().split_once("::").map_or("", |(_, rest)| rest);
    let name = format!("{module}::a_missing_redis_server_fails_the_test_and_says_how_to_get_one");
    let output = Command::new(this_test_binary)
        .args(["--exact", name.as_str()])
        .env(CHILD, "1")
        .env("REDIS_SERVER_BIN", "/nonexistent/redis-server")
        .output()
        .expect("run the test binary");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !output.status.success(),
        "it must fail, not skip:\n{printed}"
    );
    assert!(
        printed.contains("apt-get install redis-server"),
        "the failure says how to get Redis:\n{printed}"
    );
}
