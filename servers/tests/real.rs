//! The crate against real servers: `REDIS_SERVER_BIN`, else the first
//! `redis-server` on `PATH` (checked to be `LOCK_TEST_SERVER`'s when set).

use std::{
    cell::Cell,
    net::TcpListener,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use servers::{
    Binaries, Family, Launch, Ready, Server, StartError, Want,
    cluster::{Cluster, ClusterSetup, slot_ranges},
};

fn binaries() -> Binaries {
    Binaries::for_tests().unwrap_or_else(|error| panic!("{error}"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("servers-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

#[test]
fn a_server_is_the_binary_it_came_from_and_dies_with_its_handle() {
    let binaries = binaries();
    let server = Server::start(&binaries).unwrap_or_else(|error| panic!("{error}"));
    let pong: String = server.query(&["PING"]);
    assert_eq!(pong, "PONG");
    assert_eq!(server.process().identity(), Some(binaries.identity()));
    let (port, dir) = (server.port(), server.process().dir().to_path_buf());
    assert!(dir.is_dir());
    drop(server);
    assert!(servers::connect(port).is_err(), "port {port} still answers");
    assert!(!dir.exists(), "{} was left", dir.display());
}

/// The first attempt is sent to a port a listener holds: the server exits
/// ("Address already in use") and the launch starts it again on ports of
/// its own.
#[test]
fn a_server_whose_port_is_taken_starts_again_on_the_next() {
    let binaries = binaries();
    let held = TcpListener::bind("127.0.0.1:0").expect("a port to hold");
    let taken = held.local_addr().expect("its address").port();
    let attempts = Cell::new(0);
    let process = Launch::server(&binaries)
        .start(|ports, _| {
            attempts.set(attempts.get() + 1);
            let port = if attempts.get() == 1 { taken } else { ports[0] };
            vec!["--port".to_owned(), port.to_string()]
        })
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(attempts.get(), 2);
    assert_ne!(process.port(), taken);
    let pong: String = process.query(&["PING"]);
    assert_eq!(pong, "PONG");
}

/// A binary whose `--version` claims the other family passes the lookup,
/// and the server it starts is refused from its own `INFO server`.
#[test]
fn a_server_that_is_not_the_one_wanted_is_refused_from_its_info() {
    let real = binaries();
    let (claimed, line) = match real.identity().family {
        Family::Redis => ("valkey", "Valkey server v=9.1.2 sha=0 malloc=libc"),
        Family::Valkey => ("redis", "Redis server v=8.2.3 sha=0 malloc=libc"),
    };
    let dir = scratch("liar");
    let liar = dir.join("redis-server");
    std::fs::write(
        &liar,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{line}'; exit 0; fi\nexec {} \"$@\"\n",
            real.server().display()
        ),
    )
    .expect("write the script");
    std::fs::set_permissions(&liar, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let want: Want = claimed.parse().expect("a want");
    let liar = Binaries::in_dir(&dir)
        .and_then(|binaries| binaries.expecting(want))
        .unwrap_or_else(|error| panic!("{error}"));
    match Server::start(&liar) {
        Err(StartError::WrongServer {
            found, want: named, ..
        }) => {
            assert_eq!(found, real.identity());
            assert_eq!(named, want);
        }
        Err(error) => panic!("refused for another reason: {error}"),
        Ok(server) => panic!("accepted the server on port {}", server.port()),
    }
}

#[test]
fn a_missing_server_says_how_to_get_one() {
    let error = Binaries::at("/nonexistent/redis-server").expect_err("no such binary");
    let text = error.to_string();
    assert!(text.contains("apt-get install redis-server"), "{text}");
}

/// Shard `s`'s primary is node `2s` with the `s`-th range `redis-cli`
/// would give it, and node `2s + 1` replicates it: the simulator's order.
#[test]
fn a_cluster_is_numbered_as_the_simulator_numbers_it() {
    let binaries = binaries();
    let cluster = Cluster::start(&binaries, &ClusterSetup::new(3, 1))
        .unwrap_or_else(|error| panic!("{error}"));
    let shards = cluster.shards();
    let nodes = cluster.nodes();
    for (shard, range) in slot_ranges(3).into_iter().enumerate() {
        let primary = nodes[2 * shard].port();
        let view = shards
            .iter()
            .find(|view| view.primary == primary)
            .unwrap_or_else(|| panic!("node {} is no primary: {shards:?}", 2 * shard));
        assert_eq!(view.slots, [range]);
        assert_eq!(view.replicas, [nodes[2 * shard + 1].port()]);
    }
}

/// A restart that keeps its directory appends to the same log: the line
/// the first start logged must not make the second look ready. Started
/// again at `--loglevel warning`, it never logs the line, so it is never
/// ready (after the 10 s a start is given).
#[test]
fn a_restart_is_ready_by_its_own_log_lines_only() {
    let binaries = binaries();
    let mut process = Launch::server(&binaries)
        .ready(Ready::Logs("Ready to accept"))
        .start(|_, _| Vec::new())
        .unwrap_or_else(|error| panic!("{error}"));
    let restarted = process.restart_with(false, |_, _| {
        ["--loglevel", "warning"].map(str::to_owned).to_vec()
    });
    assert!(
        matches!(restarted, Err(StartError::NotReady { .. })),
        "{restarted:?}"
    );
}
