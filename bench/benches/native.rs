//! The renewal the lock sends on Valkey 8.1+, a native
//! `SET key token IFEQ token PX ttl`, against the lock script's renew
//! operation that it replaces (and that Redis 7 still gets), on the same
//! Valkey in the same run: a lone renewal, and a group-commit batch of 16
//! (one `EVALSHA` of 16 operations against a pipeline of 16 `SET … IFEQ`).
//! The release: on Valkey 9.0+ the lock sends `DELIFEQ key token`, with
//! the waiters' `PUBLISH` pipelined right behind it for an announced
//! release (every lock but a Redlock node's), where Valkey 8.1 (no
//! `DELIFEQ`) gets the script's release; so on Valkey 9 both releases are
//! measured both ways, each followed by a `SET` that puts the key back
//! (not counted). On Valkey 8.1 the release is the script only.
//!
//! Each case reports the client's wall time per renewal (one call at a
//! time on one multiplexed connection: a round trip on loopback) and
//! Valkey's own CPU time per renewal (`INFO commandstats` usec, reset
//! before each case). Rounds interleave the cases, their order rotating,
//! and the tables give medians over rounds and the median of the per-round
//! ratios with their spread.
//!
//! Needs Valkey 8.1 or later as `redis-server` on `PATH`:
//! `PATH="$(bash scripts/servers.sh valkey-9.1 | tail -n 1):$PATH" cargo bench -p bench --bench native`
//! (or `valkey-8.1`)
//! (or `REDIS_URL` naming one). Without one it prints why and exits: a
//! benchmark, unlike a test, may skip. `--quick` runs fewer rounds.
#![warn(clippy::too_many_lines)]

use std::time::Instant;

use bench::{
    api::scripts,
    raw::{fresh_key, runtime},
    raw_connection, spawn_redis_server,
    stats::{loadavg, median, spread},
};
use redis::{Value, aio::MultiplexedConnection};

/// Renewals of one case in one round.
const PER_ROUND: usize = 2_000;
/// Locks renewed by one batch.
const BATCH: usize = 16;
const TTL_MS: u64 = 30_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    ScriptLone,
    NativeLone,
    ScriptBatch,
    NativeBatch,
    ScriptRelease,
    NativeRelease,
    ScriptAnnounced,
    NativeAnnounced,
}

impl Case {
    /// Every case Valkey 8.1 can run.
    const VALKEY_8: [Self; 5] = [
        Self::ScriptLone,
        Self::NativeLone,
        Self::ScriptBatch,
        Self::NativeBatch,
        Self::ScriptRelease,
    ];

    /// Every case, `DELIFEQ`'s included: Valkey 9.0 and later.
    const VALKEY_9: [Self; 8] = [
        Self::ScriptLone,
        Self::NativeLone,
        Self::ScriptBatch,
        Self::NativeBatch,
        Self::ScriptRelease,
        Self::NativeRelease,
        Self::ScriptAnnounced,
        Self::NativeAnnounced,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::ScriptLone => "lone renewal, script (EVALSHA renew)",
            Self::NativeLone => "lone renewal, native (SET IFEQ PX)",
            Self::ScriptBatch => "16 renewals, script (one EVALSHA of 16)",
            Self::NativeBatch => "16 renewals, native (pipeline of 16 SET IFEQ)",
            Self::ScriptRelease => "unannounced release, script (EVALSHA release quiet)",
            Self::NativeRelease => "unannounced release, native (DELIFEQ)",
            Self::ScriptAnnounced => "announced release, script (EVALSHA release, PUBLISH inside)",
            Self::NativeAnnounced => "announced release, native (DELIFEQ + PUBLISH pipelined)",
        }
    }

    /// The commands whose server time the case costs.
    fn commands(self) -> &'static [&'static str] {
        match self {
            Self::ScriptLone | Self::ScriptBatch => &["evalsha"],
            Self::NativeLone | Self::NativeBatch => &["set"],
            Self::ScriptRelease | Self::ScriptAnnounced => &["evalsha"],
            Self::NativeRelease => &["delifeq"],
            Self::NativeAnnounced => &["delifeq", "publish"],
        }
    }

    /// Renewals (or releases) one call performs.
    fn ops_per_call(self) -> usize {
        match self {
            Self::ScriptBatch | Self::NativeBatch => BATCH,
            _ => 1,
        }
    }
}

/// One round's figures for one case, per renewal.
#[derive(Clone, Copy)]
struct Sample {
    wall_us: f64,
    server_us: f64,
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let rt = runtime();
    rt.block_on(async {
        let (url, _child) = match std::env::var("REDIS_URL") {
            Ok(url) => (url, None),
            Err(_) => match spawn_redis_server() {
                Ok(server) => (server.url.clone(), Some(server)),
                Err(error) => {
                    println!("native: SKIPPED, no redis-server to spawn ({error})");
                    return;
                }
            },
        };
        let mut conn = raw_connection(&url).await;
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut conn)
            .await
            .expect("INFO server");
        let Some((version, major)) = valkey_version(&info) else {
            println!(
                "native: SKIPPED, the server at {url} is not Valkey 8.1+ (SET IFEQ is Valkey's); \
                 put Valkey first on PATH: PATH=\"$(bash scripts/valkey.sh | tail -n 1):$PATH\""
            );
            return;
        };
        bench::raw::load_lock_script(&mut conn).await;
        let rounds = if quick { 4 } else { 12 };
        println!(
            "# native: Valkey {version} at {url}, {rounds} rounds x {PER_ROUND} calls per case, \
             load average {} at start",
            loadavg()
        );
        let keys: Vec<String> = (0..BATCH).map(|_| fresh_key("{native}")).collect();
        for key in &keys {
            let _: () = redis::cmd("SET")
                .arg(key)
                .arg("token")
                .arg("PX")
                .arg(TTL_MS)
                .query_async(&mut conn)
                .await
                .expect("SET");
        }
        let cases: &[Case] = if major >= 9 {
            &Case::VALKEY_9
        } else {
            &Case::VALKEY_8
        };
        let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); cases.len()];
        for round in 0..rounds {
            for turn in 0..cases.len() {
                let index = (turn + round) % cases.len();
                samples[index].push(run_case(&mut conn, cases[index], &keys).await);
            }
        }
        println!("load average {} at end\n", loadavg());
        report(cases, &samples, &version, major);
    });
}

/// Prints the table of `cases` and the same-run ratios of their pairs.
fn report(cases: &[Case], samples: &[Vec<Sample>], version: &str, major: u32) {
    println!("| case | wall µs per op (median) | Valkey CPU µs per op (median) |");
    println!("|---|---|---|");
    for (case, samples) in cases.iter().zip(samples) {
        println!(
            "| {} | {:.1} | {:.2} |",
            case.name(),
            median(samples.iter().map(|s| s.wall_us)),
            median(samples.iter().map(|s| s.server_us)),
        );
    }
    println!("\nSame-run ratios, script / native, median of the per-round ratios [min, max]:");
    let pairs = [
        ("lone renewal", Case::ScriptLone, Case::NativeLone),
        ("16 renewals", Case::ScriptBatch, Case::NativeBatch),
        (
            "unannounced release",
            Case::ScriptRelease,
            Case::NativeRelease,
        ),
        (
            "announced release",
            Case::ScriptAnnounced,
            Case::NativeAnnounced,
        ),
    ];
    let of = |case: Case| cases.iter().position(|c| *c == case).map(|i| &samples[i]);
    for (label, script, native) in pairs {
        let (Some(s), Some(n)) = (of(script), of(native)) else {
            continue;
        };
        let ratios = |f: fn(&Sample) -> f64| -> Vec<f64> {
            s.iter().zip(n).map(|(s, n)| f(s) / f(n)).collect()
        };
        let wall = ratios(|s| s.wall_us);
        let server = ratios(|s| s.server_us);
        println!(
            "- {label}: wall {} , Valkey CPU {}",
            spread(&wall),
            spread(&server)
        );
    }
    if major < 9 {
        println!(
            "- release: no native command on Valkey {version} (DELIFEQ is Valkey 9, DELEX \
             IFEQ Redis 8.4): the script only"
        );
    }
}

/// Runs `PER_ROUND` calls of `case` and returns its cost per operation.
async fn run_case(conn: &mut MultiplexedConnection, case: Case, keys: &[String]) -> Sample {
    let _: String = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await
        .expect("CONFIG RESETSTAT");
    let started = Instant::now();
    for call in 0..PER_ROUND {
        match case {
            Case::ScriptLone => {
                let key = &keys[call % keys.len()];
                expect_int(script_renewals(conn, &keys_of(key)).await, 1);
            }
            Case::NativeLone => {
                let key = &keys[call % keys.len()];
                let reply: Value = native_renewal(key).query_async(conn).await.expect("SET");
                assert_eq!(reply, Value::Okay, "SET IFEQ renews our key");
            }
            Case::ScriptBatch => {
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                let reply = script_renewals(conn, &keys).await;
                assert_eq!(reply, Value::Array(vec![Value::Int(1); BATCH]));
            }
            Case::NativeBatch => {
                let mut pipe = redis::pipe();
                for key in keys {
                    pipe.add_command(native_renewal(key));
                }
                let replies: Vec<Value> = pipe.query_async(conn).await.expect("pipeline");
                assert!(replies.iter().all(|reply| *reply == Value::Okay));
            }
            Case::ScriptRelease | Case::ScriptAnnounced => {
                let key = &keys[call % keys.len()];
                let op = if case == Case::ScriptRelease {
                    scripts::op::RELEASE_QUIET
                } else {
                    scripts::op::RELEASE
                };
                let reply: Value = redis::cmd("EVALSHA")
                    .arg(scripts::LOCK.sha1)
                    .arg(1)
                    .arg(key)
                    .arg(op)
                    .arg("token")
                    .query_async(conn)
                    .await
                    .expect("EVALSHA release");
                expect_int(reply, 1);
                put_back(conn, key).await;
            }
            Case::NativeRelease => {
                let key = &keys[call % keys.len()];
                let reply: Value = native_release(key)
                    .query_async(conn)
                    .await
                    .expect("DELIFEQ");
                expect_int(reply, 1);
                put_back(conn, key).await;
            }
            Case::NativeAnnounced => {
                let key = &keys[call % keys.len()];
                // The lock's pipeline: the delete, its wake-up behind it.
                let mut pipe = redis::pipe();
                pipe.add_command(native_release(key));
                pipe.cmd("PUBLISH")
                    .arg(format!("{key}:released"))
                    .arg("released");
                let replies: Vec<Value> = pipe.query_async(conn).await.expect("pipeline");
                assert_eq!(
                    replies.first(),
                    Some(&Value::Int(1)),
                    "DELIFEQ deletes our key"
                );
                put_back(conn, key).await;
            }
        }
    }
    let elapsed = started.elapsed();
    let ops = (PER_ROUND * case.ops_per_call()) as f64;
    let mut server_us = 0.0;
    for command in case.commands() {
        server_us += command_usec(conn, command).await;
    }
    Sample {
        wall_us: elapsed.as_secs_f64() * 1e6 / ops,
        server_us: server_us / ops,
    }
}

/// Sets `key` back to the token after a release (its cost is `SET`'s, not
/// counted).
async fn put_back(conn: &mut MultiplexedConnection, key: &str) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("token")
        .arg("PX")
        .arg(TTL_MS)
        .query_async(conn)
        .await
        .expect("SET");
}

/// What the lock sends for a release on Valkey 9.0+.
fn native_release(key: &str) -> redis::Cmd {
    let mut call = redis::cmd("DELIFEQ");
    call.arg(key).arg("token");
    call
}

fn keys_of(key: &str) -> [&str; 1] {
    [key]
}

/// The lock script's renew operation for every key in one `EVALSHA`.
async fn script_renewals(conn: &mut MultiplexedConnection, keys: &[&str]) -> Value {
    let mut call = redis::cmd("EVALSHA");
    call.arg(scripts::LOCK.sha1).arg(keys.len()).arg(keys);
    for _ in keys {
        call.arg(scripts::op::RENEW).arg("token").arg(TTL_MS);
    }
    call.query_async(conn).await.expect("EVALSHA renew")
}

/// What the lock sends for a lone renewal on Valkey 8.1+.
fn native_renewal(key: &str) -> redis::Cmd {
    let mut call = redis::cmd("SET");
    call.arg(key)
        .arg("token")
        .arg("IFEQ")
        .arg("token")
        .arg("PX")
        .arg(TTL_MS);
    call
}

fn expect_int(reply: Value, expected: i64) {
    assert_eq!(reply, Value::Int(expected), "the script's answer");
}

/// The `usec` Valkey spent on `command` since the last `CONFIG RESETSTAT`.
async fn command_usec(conn: &mut MultiplexedConnection, command: &str) -> f64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO commandstats");
    let prefix = format!("cmdstat_{command}:");
    stats
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|line| {
            line.split(',')
                .find_map(|pair| pair.strip_prefix("usec="))
                .and_then(|usec| usec.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
}

/// `valkey_version` and its major version, when it is 8.1 or later.
fn valkey_version(info: &str) -> Option<(String, u32)> {
    let version = info
        .lines()
        .find_map(|line| line.strip_prefix("valkey_version:"))?
        .trim();
    let mut parts = version.split('.').map(|part| part.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) if (major, minor) >= (8, 1) => Some((version.to_owned(), major)),
        _ => None,
    }
}
