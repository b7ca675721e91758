//! An atomic slot migration on a real Valkey 9 cluster, as the simulator's
//! `atomic-slot-migration` fault models it (`world::atomic_migration`):
//! the lock's slot moves from its owner to the primary of another shard
//! (picked as [`super::migrate`] picks it) by one `CLUSTER MIGRATESLOTS
//! SLOTSRANGE slot slot NODE target-id` sent to the owner. Valkey does
//! the rest by itself: snapshot, stream, pause, cut-over.
//!
//! Valkey runs the migration as a job both ends list in `CLUSTER
//! GETSLOTMIGRATIONS` (one map per job, recent ones included: `name`, the
//! same on both ends, `operation` `EXPORT` on the source and `IMPORT` on
//! the target, `slot_ranges` as `start-end`, `source_node`, `target_node`,
//! `state`, …). The target's job reaches `success` when it has taken the
//! slot, the simulator's end of the cut-over; the source's, once it has
//! heard so. A job that fails or is cancelled ends `failed` or
//! `canceled`. Measured on Valkey 9.1.2 in the chaos cluster: a slot of
//! two keys moves 50-120 ms after the command (the target's `success`),
//! most of it the snapshot, which reaches the target just before the
//! cut-over (`world::atomic_migration` has the measurement); the
//! scenario files draw the simulator's `duration` from 40-110 ms to match.
//!
//! What the simulator draws and a real server does not take: the time
//! before the snapshot arrives (the fault's duration). Valkey snapshots,
//! streams until the target has caught up and asks for the pause itself; the fault's end does
//! nothing here, so a fault timed against the simulator's cut-over may
//! meet the real migration still under way.
//!
//! The move is recorded (`Op::Migrated`, one per key, as the simulator's
//! cut-over records the keys the source drops) when a poll first sees the
//! target's job succeed, [`POLL_EVERY`] or so after it did; the keys are
//! those the target holds in the slot then.

use std::{collections::HashMap, time::Duration};

use redis::aio::MultiplexedConnection;
use tokio::task::JoinHandle;

use super::{
    ChaosError,
    deploy::{Deployment, admin},
    migrate::{self, Plan},
};

/// How often the target's job is polled: a fraction of the simulator's
/// cut-over (8 ms), so the record of the move lags it by little.
const POLL_EVERY: Duration = Duration::from_millis(2);

/// How long one poll waits for its answer before it asks again.
const ANSWER_WITHIN: Duration = Duration::from_millis(100);

/// How long the job is followed before it is given up on (a job left
/// behind by a failover of either end never ends on the node polled).
const GIVE_UP_AFTER: Duration = Duration::from_secs(10);

/// An atomic migration under way: its poller, stopped when this drops.
pub(super) struct AtomicMigration {
    poller: JoinHandle<()>,
}

impl Drop for AtomicMigration {
    fn drop(&mut self) {
        self.poller.abort();
    }
}

/// Starts migrating the slot of `key` from its owner to the primary of
/// another shard (`pick` chooses among them) with `CLUSTER MIGRATESLOTS`;
/// once the target has taken the slot, `on_moved` hears each key it holds
/// (the keys the source dropped). `None` when the cluster has no other
/// shard or cannot be read.
pub(super) async fn begin(
    deployment: &Deployment,
    key: &str,
    pick: u64,
    on_moved: impl Fn(String, usize, usize) + Send + 'static,
) -> Result<Option<AtomicMigration>, ChaosError> {
    let (ports, announced) = migrate::ports_of(deployment);
    begin_among(&ports, &announced, key, pick, on_moved).await
}

/// [`begin`] on the cluster whose nodes are `ports` (port, running), by
/// index, announcing `announced` (`migrate::cluster_nodes`).
async fn begin_among(
    ports: &[(u16, bool)],
    announced: &[(u16, u16)],
    key: &str,
    pick: u64,
    on_moved: impl Fn(String, usize, usize) + Send + 'static,
) -> Result<Option<AtomicMigration>, ChaosError> {
    let Some(plan) = migrate::plan(ports, announced, key, pick).await else {
        return Ok(None);
    };
    // The target's jobs of before: the new one is the one not among them
    // (MIGRATESLOTS answers OK, without the job's name).
    let mut target = admin(plan.target.port).await?;
    let before = jobs(&mut target).await.unwrap_or_default();
    let mut source = admin(plan.owner.port).await?;
    redis::cmd("CLUSTER")
        .arg("MIGRATESLOTS")
        .arg("SLOTSRANGE")
        .arg(plan.slot)
        .arg(plan.slot)
        .arg("NODE")
        .arg(&plan.target.id)
        .query_async::<()>(&mut source)
        .await
        .map_err(|error| ChaosError::Io {
            what: "atomic slot migration: CLUSTER MIGRATESLOTS".to_owned(),
            source: std::io::Error::other(error.to_string()),
        })?;
    let old: Vec<String> = before.into_iter().map(|job| job.name).collect();
    let poller = tokio::spawn(follow(plan, old, target, on_moved));
    Ok(Some(AtomicMigration { poller }))
}

/// Polls the target (on `conn`) until the migration of `plan` (its job
/// not named in `old`) ends; on success, reports each key the target
/// holds in the slot.
async fn follow(
    plan: Plan,
    old: Vec<String>,
    mut conn: MultiplexedConnection,
    on_moved: impl Fn(String, usize, usize),
) {
    let range = format!("{0}-{0}", plan.slot);
    let give_up = tokio::time::Instant::now() + GIVE_UP_AFTER;
    while tokio::time::Instant::now() < give_up {
        tokio::time::sleep(POLL_EVERY).await;
        let Ok(Some(jobs)) = tokio::time::timeout(ANSWER_WITHIN, jobs(&mut conn)).await else {
            // A slow or lost answer: ask again on a new connection.
            if let Ok(new) = admin(plan.target.port).await {
                conn = new;
            }
            continue;
        };
        let Some(job) = jobs.into_iter().find(|job| {
            job.operation == "IMPORT" && job.slot_ranges == range && !old.contains(&job.name)
        }) else {
            continue;
        };
        match job.state.as_str() {
            "success" => {
                for key in keys_in_slot(&mut conn, plan.slot).await {
                    on_moved(key, plan.from_index, plan.to_index);
                }
                return;
            }
            // (Not a prefix: the cut-over's states are `failover-…`.)
            "failed" | "canceled" | "cancelled" => return,
            _ => {}
        }
    }
}

/// One job of `CLUSTER GETSLOTMIGRATIONS`, the fields this reads.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Job {
    name: String,
    operation: String,
    slot_ranges: String,
    state: String,
}

impl Job {
    /// The job one map of the reply describes (`None` without a name).
    fn from_map(map: &HashMap<String, redis::Value>) -> Option<Self> {
        let field = |name: &str| {
            map.get(name)
                .and_then(|value| redis::from_redis_value_ref::<String>(value).ok())
                .unwrap_or_default()
        };
        let name = field("name");
        (!name.is_empty()).then(|| Self {
            name,
            operation: field("operation"),
            slot_ranges: field("slot_ranges"),
            state: field("state"),
        })
    }
}

/// The jobs the node on `conn` lists (`None` if it does not answer).
async fn jobs(conn: &mut MultiplexedConnection) -> Option<Vec<Job>> {
    let maps: Vec<HashMap<String, redis::Value>> = redis::cmd("CLUSTER")
        .arg("GETSLOTMIGRATIONS")
        .query_async(conn)
        .await
        .ok()?;
    Some(maps.iter().filter_map(Job::from_map).collect())
}

/// The keys the node on `conn` holds in `slot` (a handful: the lock's).
async fn keys_in_slot(conn: &mut MultiplexedConnection, slot: u16) -> Vec<String> {
    redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(1_000)
        .query_async(conn)
        .await
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(value: &str) -> redis::Value {
        redis::Value::BulkString(value.as_bytes().to_vec())
    }

    #[test]
    fn a_job_is_read_from_its_map_and_one_without_a_name_is_skipped() {
        let mut map = HashMap::new();
        for (field, value) in [
            ("name", "5168"),
            ("operation", "IMPORT"),
            ("slot_ranges", "15495-15495"),
            ("state", "success"),
        ] {
            map.insert(field.to_owned(), text(value));
        }
        map.insert("create_time".to_owned(), redis::Value::Int(1_795_950_835));
        let job = Job::from_map(&map).expect("a named job");
        assert_eq!(
            job,
            Job {
                name: "5168".to_owned(),
                operation: "IMPORT".to_owned(),
                slot_ranges: "15495-15495".to_owned(),
                state: "success".to_owned(),
            }
        );
        map.remove("name");
        assert_eq!(Job::from_map(&map), None);
    }
}
