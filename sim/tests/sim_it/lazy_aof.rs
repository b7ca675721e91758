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
    path::{Path, PathBuf},
    time::Duration,
};

use servers::{Binaries, Launch, Server};

/// A server with an AOF fsynced as `appendfsync` says, `library`
/// preloaded when given.
fn start(appendfsync: &str, library: Option<&Path>) -> Server {
    let binaries = Binaries::for_tests()
        .unwrap_or_else(|error| panic!("the lazy_aof test needs a real redis-server: {error}"));
    let mut launch = Launch::server(&binaries);
    if let Some(library) = library {
        launch = launch.env("LD_PRELOAD", library);
    }
    let args = ["--appendonly", "yes", "--appendfsync", appendfsync];
    Server::launch(&launch, None, &args).unwrap_or_else(|error| panic!("{error}"))
}

/// Waits until `server` answers `PING`: listening is not enough, a server
/// loading its AOF answers LOADING.
fn wait_loaded(server: &Server) {
    servers::wait_for("the server loads its AOF", Duration::from_secs(10), || {
        server.try_query::<String>(&["PING"]).ok()
    });
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
    let mut server = start(appendfsync, preloaded.then_some(library.as_path()));
    wait_loaded(&server);
    let _: () = server.query(&["SET", "lock", "a"]);
    let _: () = server.query(&["SET", "fence", "1"]);
    // SIGKILL, then the same arguments (the library preloaded again) on
    // the same directory, as a machine that crashed comes back.
    server.restart_keeping_data();
    wait_loaded(&server);
    server.query(&["DBSIZE"])
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
