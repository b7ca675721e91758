//! The server a simulated node presents as: the lines its `INFO server`
//! answers, and what it does beyond Redis 7.0 (which commands it knows is
//! each command family's to say, e.g. [`strings::refused_by`](super::cmd::strings::refused_by)).

/// The server a simulated node presents as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Flavour {
    /// Redis 7.0 (`redis_version:7.0.15`): the lock sends its scripts and
    /// `SET … NX … GET`. `SET … IFEQ` is a syntax error, as on Redis 7.0.
    #[default]
    Redis7,
    /// Valkey 8.1 (`valkey_version:8.1.8`, `redis_version:7.2.4`): `SET …
    /// IFEQ` too, so the lock renews natively, and `WAITAOF`, which
    /// acknowledges the local AOF before it is fsynced (see
    /// [`Flavour::acks_unsynced_aof`]).
    Valkey81,
    /// Valkey 9.1 (`valkey_version:9.1.2`): Valkey 8.1's commands and
    /// `DELIFEQ key value`, compared with the real Valkey 9.1.2
    /// (`sim/tests/sim_it/differential.rs`, in `scripts/test.sh`'s matrix).
    Valkey91,
    /// Redis 8.2 (`redis_version:8.2.3`): Redis 7.0's commands and
    /// `WAITAOF`, which waits for the fsync; no `SET … IFEQ`, no `DELEX`.
    /// Its lock runs on the real Redis 8.2.3 in `scripts/test.sh`'s matrix.
    Redis82,
    /// Redis 8.4 (`redis_version:8.4.0`): `SET … IFEQ`, `WAITAOF` (which
    /// waits for the fsync), and `DELEX key IFEQ value`. Known only from
    /// its documentation: no Redis 8.4 is reachable to compare with.
    Redis84,
}

impl Flavour {
    /// Whether `WAITAOF` counts the local AOF once it is written rather
    /// than once it is fsynced, under `appendfsync everysec`.
    ///
    /// Valkey's `flushAppendOnlyFile`, on a pass with nothing left to
    /// write, advances the fsynced offset to the write offset unless an
    /// fsync is due, whether or not the last writes were fsynced; Redis
    /// fixed the same code in 8.0 (redis/redis#13793), Valkey had not in
    /// 8.1 nor in 9.1. Measured here on Valkey 9.1.2 (2026-11-29): the
    /// same probe lost the acknowledged key in 10 of 30 tries (Redis
    /// 8.2.3: 0 of 30, its `WAITAOF` answering only after the fsync, up to
    /// 0.9 s later), and `sim chaos` showed S1 on 5 of 33 real runs of
    /// `restart-without-fsync-waitaof-valkey9`. On Valkey 8.1.8:
    /// a `WAITAOF 1 0` pipelined behind a `SET` answers `[1, 0]` within
    /// 0.3–103 ms (its next event-loop pass; the cron's is 100 ms away at
    /// most), strace shows the reply written before the background
    /// `fdatasync` of the `SET` returned, and with a machine crash made
    /// real (the chaos mode's `lazy_aof`) the acknowledged key was gone
    /// after the restart in 15 of 30 tries.
    pub fn acks_unsynced_aof(self) -> bool {
        matches!(self, Self::Valkey81 | Self::Valkey91)
    }

    /// Whether a replica's full sync ends only at its next replication
    /// cron ([`REPLICATION_CRON`], on a phase of its own), not when the
    /// snapshot has arrived: until then it applies nothing of the new
    /// stream and acknowledges nothing, so a `WAIT` on its primary counts
    /// it out.
    ///
    /// Valkey 9.1 downloads the snapshot in a background thread ("Replica
    /// bio thread: Done downloading RDB"), and its main thread looks for
    /// the download's end in the replication cron ("Replica main thread
    /// detected RDB download completion"). Measured here on Valkey 9.1.2
    /// (2026-11-30, a primary and a quiet replica on loopback, as `sim
    /// chaos` configures them; the replica given a diverged history and
    /// pointed back with `REPLICAOF`, the primary's `SET` + `WAIT 1 5000`
    /// sent at once on one connection): in 24 full syncs the main thread
    /// noticed the download 32–939 ms after it ended, spread over the
    /// second, and the `WAIT` answered 208–1,096 ms after the `REPLICAOF`;
    /// the same probe answered within 39–103 ms on Redis 8.2.3 in 16 of 16.
    /// A chaos run's demoted old primary of
    /// `cluster-atomic-migration-failover` noticed its download 719 ms
    /// late. A partial resync downloads no snapshot and does not wait.
    /// (Redis 7.0.15 and Valkey 8.1.8 load at once, but about a third of
    /// the same probe's `WAIT`s answered only 150 ms–1 s after the
    /// `REPLICAOF`, their logs showing the sync loaded within 20 ms; not
    /// traced (perhaps an acknowledgement left to the cron), not modelled.)
    pub fn full_sync_waits_for_cron(self) -> bool {
        matches!(self, Self::Valkey91)
    }
}

/// How often a server's replication cron runs (`replicationCron`, once a
/// second).
pub const REPLICATION_CRON: std::time::Duration = std::time::Duration::from_secs(1);

/// The version a [`Flavour::Redis7`] node claims, so clients pick the
/// dialect of a current server (`SET … NX … GET`).
pub const VERSION: &str = "7.0.15";

/// The lines a node of [`Flavour::Valkey81`] answers instead (Valkey 8.1.8's:
/// the Redis release it forked from, then its own).
pub const VALKEY_VERSION_LINES: &str =
    "redis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.8\r\n";

impl Flavour {
    /// The version lines of its `INFO server` section (after the
    /// `# Server` header).
    pub fn version_lines(self) -> String {
        match self {
            Self::Redis7 => format!("redis_version:{VERSION}\r\n"),
            Self::Valkey81 => VALKEY_VERSION_LINES.to_owned(),
            Self::Valkey91 => {
                "redis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n".to_owned()
            }
            Self::Redis82 => "redis_version:8.2.3\r\n".to_owned(),
            Self::Redis84 => "redis_version:8.4.0\r\n".to_owned(),
        }
    }
}
