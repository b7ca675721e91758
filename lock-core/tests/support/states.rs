//! Servers held in a passing state long enough to check them: a replica in
//! its initial sync, a replica that stopped acknowledging, a server still
//! loading its dataset. Each state lasts far longer than a test needs
//! (configured, not raced), so what the test reads is what it set up.
#![allow(dead_code, unreachable_pub)]

use std::{
    thread,
    time::{Duration, Instant},
};

use super::RedisServer;

/// How long a test waits for a state to show.
const SHOWS_WITHIN: Duration = Duration::from_secs(10);

/// Polls `INFO section` on `server` until a line satisfies `shows`, and
/// returns that line.
pub fn until_info(server: &RedisServer, section: &str, shows: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + SHOWS_WITHIN;
    loop {
        let info: String = server.query(&["INFO", section]);
        if let Some(line) = info.lines().find(|line| shows(line)) {
            return line.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "INFO {section} on port {} never showed the state awaited:\n{info}",
            server.port()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// A primary whose one replica stays in its initial sync (`wait_bgsave`):
/// the primary delays the diskless sync by ten minutes, waiting for more
/// replicas, and `ROLE` lists no replica meanwhile. Returns (primary,
/// replica).
pub fn replica_in_initial_sync(primary_args: &[&str]) -> (RedisServer, RedisServer) {
    let mut args = vec![
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "600",
    ];
    args.extend_from_slice(primary_args);
    let primary = RedisServer::start_with(&args);
    let port = primary.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let attached = format!("port={},state=wait_bgsave", replica.port());
    until_info(&primary, "replication", |line| line.contains(&attached));
    (primary, replica)
}

/// Freezes `replica` (SIGSTOP) and returns once its primary has gone at
/// least `lag` seconds without its acknowledgement.
pub fn stop_acknowledging(primary: &RedisServer, replica: &RedisServer, lag: u64) {
    replica.pause();
    let listed = format!("port={},state=online", replica.port());
    until_info(primary, "replication", |line| {
        line.contains(&listed)
            && line
                .split(',')
                // Valkey lists more fields after `lag` (`type=replica`).
                .find_map(|field| field.strip_prefix("lag="))
                .and_then(|seconds| seconds.trim().parse::<u64>().ok())
                .is_some_and(|seconds| seconds >= lag)
    });
}

/// A server restarted onto an RDB it loads for about 20 s (1 ms per key,
/// answering clients between keys), returned while `INFO` says
/// `loading:1`. It runs without AOF, so that the RDB is what it loads.
pub fn loading() -> RedisServer {
    let mut server = RedisServer::start_with(&[
        "--key-load-delay",
        "1000",
        // Between batches of this many bytes the loading server answers
        // clients; the default (2 MB) is the whole dataset here.
        "--loading-process-events-interval-bytes",
        "1024",
        // Uncompressed values make every key count towards those bytes.
        "--rdbcompression",
        "no",
        "--enable-debug-command",
        "yes",
    ]);
    let _: String = server.query(&["DEBUG", "POPULATE", "20000", "loading-fixture", "100"]);
    let _: String = server.query(&["SAVE"]);
    server.restart_keeping_data();
    until_info(&server, "persistence", |line| line == "loading:1");
    server
}
