//! Benchmarks of `lock-core` against real Redis and its peers.
//!
//! [`redis_for_bench`] finds a Redis by the first route that works, and
//! says which: `REDIS_URL`; a testcontainers container (the `redis:5.0`
//! image; `scripts/redis-image.sh` builds it locally where no registry is
//! reachable); a `redis-server` spawned on a loopback port of its own (the
//! `servers` crate's, as the tests start theirs).
//! [`redis_nodes_for_bench`] does the same for N independent nodes (for
//! Redlock): spawned `redis-server`s, else testcontainers containers.
#![warn(clippy::too_many_lines)]

use testcontainers::{ContainerAsync, runners::AsyncRunner};
use testcontainers_modules::redis::Redis;

/// How the Redis under test was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `REDIS_URL` from the environment.
    Env,
    /// A testcontainers container.
    Container,
    /// A `redis-server` child process.
    Spawned,
}

/// A running Redis for a benchmark; dropping it stops what it started.
pub struct RedisUnderTest {
    /// `redis://host:port/`.
    pub url: String,
    /// How it was obtained.
    pub route: Route,
    _container: Option<ContainerAsync<Redis>>,
    _server: Option<servers::Server>,
}

const HOW_TO_GET_REDIS: &str = "no Redis reachable: set REDIS_URL, run scripts/redis-image.sh \
    (Docker), or `apt-get install redis-server`";

/// The first Redis that works: `REDIS_URL`, then testcontainers, then a
/// spawned `redis-server`. Prints the route. Panics with how to get one.
pub async fn redis_for_bench() -> RedisUnderTest {
    if let Ok(url) = std::env::var("REDIS_URL")
        && !url.is_empty()
    {
        eprintln!("bench: Redis from REDIS_URL ({url})");
        return RedisUnderTest {
            url,
            route: Route::Env,
            _container: None,
            _server: None,
        };
    }
    match redis_container().await {
        Ok(redis) => return redis,
        Err(error) => eprintln!("bench: testcontainers unavailable ({error}); trying redis-server"),
    }
    match spawn_redis_server() {
        Ok(redis) => redis,
        Err(error) => panic!("{HOW_TO_GET_REDIS} ({error})"),
    }
}

/// A Redis on this machine's loopback for the latency benches: `REDIS_URL`,
/// then a spawned `redis-server`, then testcontainers (whose port proxy
/// adds ~80 µs per round trip, which would hide what the lock costs).
/// Prints the route. Panics with how to get one.
pub async fn loopback_redis_for_bench() -> RedisUnderTest {
    if std::env::var("REDIS_URL").is_ok_and(|url| !url.is_empty()) {
        return redis_for_bench().await;
    }
    match spawn_redis_server() {
        Ok(redis) => redis,
        Err(error) => {
            eprintln!("bench: cannot spawn redis-server ({error}); trying the other routes");
            redis_for_bench().await
        }
    }
}

const HOW_TO_GET_REDIS_NODES: &str = "no independent Redis nodes: `apt-get install redis-server` \
    (spawned on free loopback ports), or run scripts/redis-image.sh (Docker)";

/// `n` independent Redis primaries (for Redlock): `n` spawned
/// `redis-server`s on free loopback ports, else `n` testcontainers
/// containers. `REDIS_URL` names one server, so it is no route here. Prints
/// the route. Panics with how to get them.
pub async fn redis_nodes_for_bench(n: usize) -> Vec<RedisUnderTest> {
    // On any failure the nodes already started are dropped, hence stopped.
    let spawned: Result<Vec<_>, String> = (0..n).map(|_| spawn_redis_server()).collect();
    let spawn_error = match spawned {
        Ok(nodes) => {
            eprintln!("bench: {n} Redis nodes from spawned redis-server processes");
            return nodes;
        }
        Err(error) => error,
    };
    eprintln!("bench: cannot spawn {n} redis-server ({spawn_error}); trying testcontainers");
    let mut nodes = Vec::with_capacity(n);
    for _ in 0..n {
        match redis_container().await {
            Ok(node) => nodes.push(node),
            Err(error) => panic!(
                "{HOW_TO_GET_REDIS_NODES} (redis-server: {spawn_error}; testcontainers: {error})"
            ),
        }
    }
    eprintln!("bench: {n} Redis nodes from testcontainers");
    nodes
}

/// Redis from testcontainers (the `redis:5.0` image).
pub async fn redis_container() -> Result<RedisUnderTest, String> {
    let container = Redis::default().start().await.map_err(|e| e.to_string())?;
    let host = container.get_host().await.map_err(|e| e.to_string())?;
    let port = container
        .get_host_port_ipv4(6379)
        .await
        .map_err(|e| e.to_string())?;
    let url = format!("redis://{host}:{port}/");
    eprintln!("bench: Redis from testcontainers ({url})");
    Ok(RedisUnderTest {
        url,
        route: Route::Container,
        _container: Some(container),
        _server: None,
    })
}

/// A `redis-server` from `PATH` on a loopback port of its own, without
/// persistence, its data on tmpfs.
pub fn spawn_redis_server() -> Result<RedisUnderTest, String> {
    let binaries = servers::Binaries::on_path().map_err(|error| error.to_string())?;
    let server = servers::Server::start(&binaries).map_err(|error| error.to_string())?;
    let url = server.url();
    eprintln!(
        "bench: Redis from a spawned redis-server ({url}, {})",
        binaries.identity()
    );
    Ok(RedisUnderTest {
        url,
        route: Route::Spawned,
        _container: None,
        _server: Some(server),
    })
}

/// A multiplexed redis-rs connection with `TCP_NODELAY`, the baseline
/// client every lock operation is compared with.
pub async fn raw_connection(url: &str) -> redis::aio::MultiplexedConnection {
    use redis::IntoConnectionInfo;
    // redis-rs leaves TCP_NODELAY off by default; every client here sets it.
    let info = url
        .into_connection_info()
        .expect("a valid url")
        .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
    let client = redis::Client::open(info).expect("a valid url");
    client
        .get_multiplexed_async_connection()
        .await
        .expect("connect to the bench Redis")
}
pub mod api;
pub mod compare;
pub mod regime;
pub mod stats;

/// The raw commands the benchmarks use as baselines, and their helpers.
pub mod raw {
    use std::sync::atomic::{AtomicU64, Ordering};

    use crate::api::scripts;
    use redis::aio::MultiplexedConnection;

    static KEY: AtomicU64 = AtomicU64::new(0);

    /// A key never used before in this process: `prefix:N`.
    pub fn fresh_key(prefix: &str) -> String {
        format!("{prefix}:{}", KEY.fetch_add(1, Ordering::Relaxed))
    }

    /// The time-mixed fence floor the benches' lockers use (the default
    /// namespace's, `{lock}:fence-floor`), for raw calls of the lock script
    /// that send the same Redis work as they do.
    pub fn fence_floor() -> String {
        let defaults = crate::api::LockOptions::new(std::time::Duration::from_secs(30));
        scripts::KeyNames::new(defaults.key_namespace(), "")
            .fence
            .to_string()
    }

    /// The single-threaded runtime every benchmark runs on.
    pub fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime")
    }

    /// `PING`.
    pub async fn ping(conn: &mut MultiplexedConnection) {
        let _: String = redis::cmd("PING").query_async(conn).await.expect("PING");
    }

    /// `SET key token NX PX 30000`.
    pub async fn set_nx_px(conn: &mut MultiplexedConnection, key: &str) {
        let _: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg("token")
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query_async(conn)
            .await
            .expect("SET NX PX");
    }

    /// `SCRIPT LOAD` of lock-core's lock script, so [`evalsha`] finds it.
    pub async fn load_lock_script(conn: &mut MultiplexedConnection) {
        load_script(conn, scripts::LOCK).await;
    }

    /// `SCRIPT LOAD` of every lock-core script (the lock family's too).
    pub async fn load_all_scripts(conn: &mut MultiplexedConnection) {
        for script in scripts::ALL {
            load_script(conn, script).await;
        }
    }

    async fn load_script(conn: &mut MultiplexedConnection, script: scripts::Script) {
        let _: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(script.source)
            .query_async(conn)
            .await
            .expect("SCRIPT LOAD");
    }

    /// `EVALSHA` of lock-core's script with `keys` and `args` (the script
    /// must be loaded): the same Redis work as the lock's own call.
    pub async fn evalsha(conn: &mut MultiplexedConnection, keys: &[&str], args: &[&str]) {
        let _: redis::Value = redis::cmd("EVALSHA")
            .arg(scripts::LOCK.sha1)
            .arg(keys.len())
            .arg(keys)
            .arg(args)
            .query_async(conn)
            .await
            .expect("EVALSHA");
    }

    /// The owner-checked release the lock sends, as a raw call.
    pub async fn release(conn: &mut MultiplexedConnection, key: &str) {
        evalsha(conn, &[key], &[scripts::op::RELEASE, "token"]).await;
    }
}
