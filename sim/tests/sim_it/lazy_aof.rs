//! The chaos mode's `lazy_aof` preload library on a real `redis-server`: a
//! `kill -9` loses the AOF writes no fsync covered, as a machine crash
//! does, and nothing a fsync covered. Without the library the same kill
//! loses nothing (the page cache keeps it), which is why the chaos mode
//! needs it for `restart-without-fsync`.
//!
//! `appendfsync no` makes "not covered" certain: the server then never
//! fsyncs its AOF, so every write since the start is held. `appendfsync
//! always` fsyncs after every write, so nothing is held.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// One server process on `port` over `dir`, killed (`SIGKILL`) on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(dir: &Path, port: u16, appendfsync: &str, preload: Option<&Path>) -> Server {
    let binary = std::env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".into());
    let mut command = Command::new(&binary);
    command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args([
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            appendfsync,
        ])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(library) = preload {
        command.env("LD_PRELOAD", library);
    }
    let child = command.spawn().unwrap_or_else(|error| {
        panic!(
            "the lazy_aof test needs a real redis-server ({error}): \
             `apt-get install redis-server` (scripts/test.sh does), or set REDIS_SERVER_BIN"
        )
    });
    let server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    // Listening is not enough: a server loading its AOF answers LOADING.
    while ping(port).is_err() {
        assert!(
            Instant::now() < deadline,
            "{binary} did not start on {port}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    server
}

fn connect(port: u16) -> redis::RedisResult<redis::Connection> {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))?.get_connection()
}

fn ping(port: u16) -> redis::RedisResult<()> {
    redis::cmd("PING").query(&mut connect(port)?)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("lazy-aof-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory under the target dir");
    dir
}

/// Writes two keys, kills the server with `SIGKILL`, starts it again on the
/// same AOF and returns how many keys it came back with.
fn keys_after_a_kill(name: &str, appendfsync: &str, preloaded: bool) -> i64 {
    let dir = scratch(name);
    let library = sim::chaos::lazy_aof::install(&dir).expect("the library is written");
    let preload = preloaded.then_some(library.as_path());
    let port = free_port();
    let server = start(&dir, port, appendfsync, preload);
    let mut conn = connect(port).expect("a connection");
    let _: () = redis::cmd("SET")
        .arg("lock")
        .arg("a")
        .query(&mut conn)
        .expect("SET");
    let _: () = redis::cmd("SET")
        .arg("fence")
        .arg("1")
        .query(&mut conn)
        .expect("SET");
    drop(server);
    let _server = start(&dir, port, appendfsync, preload);
    redis::cmd("DBSIZE")
        .query(&mut connect(port).expect("a connection after the restart"))
        .expect("DBSIZE")
}

#[test]
fn a_kill_loses_the_writes_no_fsync_covered() {
    assert_eq!(keys_after_a_kill("no-fsync", "no", true), 0);
}

#[test]
fn a_kill_keeps_the_writes_a_fsync_covered() {
    assert_eq!(keys_after_a_kill("always", "always", true), 2);
}

#[test]
fn without_the_library_a_kill_loses_nothing() {
    assert_eq!(keys_after_a_kill("unloaded", "no", false), 2);
}
