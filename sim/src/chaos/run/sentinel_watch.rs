//! A Sentinel run's failovers, recorded when they have completed: a
//! majority of the sentinels name a new primary and that node answers
//! `ROLE master`. Sentinel runs its own detection and election, so the
//! controller cannot say when a failover happened; it watches for one, as
//! a client would see it.

use std::time::Duration;

use redis::aio::MultiplexedConnection;

use super::{
    node_ops::{is_master, key_owner},
    recorder::Recorder,
};
use crate::chaos::deploy::{MASTER, admin};
use crate::history::{Op, Process};

/// How often the sentinels are asked.
const EVERY: Duration = Duration::from_millis(10);

/// Watches the sentinels on `sentinels` for a new primary among the nodes
/// (`nodes[i]`: the ports node `i` answers on, its own and any announced),
/// starting from node `primary`, and records each completed failover.
pub(super) async fn watch(
    nodes: Vec<Vec<u16>>,
    sentinels: Vec<u16>,
    mut primary: usize,
    recorder: Recorder,
) {
    let majority = sentinels.len() / 2 + 1;
    let mut conns: Vec<Option<MultiplexedConnection>> = vec![None; sentinels.len()];
    loop {
        tokio::time::sleep(EVERY).await;
        let mut named = vec![0usize; nodes.len()];
        for (&port, conn) in sentinels.iter().zip(&mut conns) {
            if let Some(node) = named_primary(port, conn, &nodes).await {
                named[node] += 1;
            }
        }
        let Some(new) = (0..nodes.len()).find(|&n| n != primary && named[n] >= majority) else {
            continue;
        };
        let Some(&port) = nodes[new].first() else {
            continue;
        };
        if !is_master(port).await {
            continue;
        }
        recorder.record(
            Process::Controller,
            Op::Failover {
                old_primary: primary,
                new_primary: new,
                // Read from the old primary only when the controller
                // promotes; Sentinel's own failover is seen afterwards.
                old_owner: None,
                new_owner: key_owner(port).await,
            },
        );
        primary = new;
    }
}

/// The node the sentinel on `port` names primary, if it answers (over
/// `conn`, dialled again after a failure).
async fn named_primary(
    port: u16,
    conn: &mut Option<MultiplexedConnection>,
    nodes: &[Vec<u16>],
) -> Option<usize> {
    if conn.is_none() {
        *conn = admin(port).await.ok();
    }
    let answer = tokio::time::timeout(
        Duration::from_millis(200),
        redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER)
            .query_async::<(String, u16)>(conn.as_mut()?),
    )
    .await;
    let Ok(Ok((_, named))) = answer else {
        *conn = None;
        return None;
    };
    nodes.iter().position(|ports| ports.contains(&named))
}
