//! What a node says of its replication and waits for from it: `ROLE`,
//! `INFO` (its server and replication sections), `WAIT` (replicas that
//! applied every write so far) and `WAITAOF` (writes fsynced to the AOF).
//! The stream itself is [`replication`](crate::server::replication)'s.

use std::time::Duration;

use redis_protocol::resp2::types::OwnedFrame as Frame;

use crate::server::{
    frame::{bulk, error, parse_i64},
    node::{NodeHandle, PORT, Role},
};

/// `ROLE`: `master` with its offset, or `slave` with its primary and the
/// offset it applied.
pub(super) fn role(node: &NodeHandle) -> Frame {
    let state = node.0.borrow();
    match &state.role {
        Role::Primary => Frame::Array(vec![
            bulk(b"master"),
            Frame::Integer(state.offset as i64),
            Frame::Array(Vec::new()),
        ]),
        Role::Replica { of } => Frame::Array(vec![
            bulk(b"slave"),
            bulk(of.as_bytes()),
            Frame::Integer(i64::from(PORT)),
            bulk(b"connected"),
            Frame::Integer(state.offset as i64),
        ]),
    }
}

/// `INFO [section]`: its `server` section (the flavour's version lines)
/// and its `replication` section.
pub(super) fn info(node: &NodeHandle, section: Option<&[u8]>) -> Frame {
    let state = node.0.borrow();
    let role = match state.role {
        Role::Primary => "master",
        Role::Replica { .. } => "slave",
    };
    let section = section.map(<[u8]>::to_ascii_lowercase);
    let mut text = String::new();
    if section.as_deref().is_none_or(|s| s == b"server") {
        text.push_str("# Server\r\n");
        text.push_str(&state.flavour.version_lines());
    }
    if section.as_deref().is_none_or(|s| s == b"replication") {
        text.push_str(&format!(
            "# Replication\r\nrole:{role}\r\nconnected_slaves:{}\r\nmaster_repl_offset:{}\r\n",
            state.streams.len(),
            state.offset
        ));
    }
    bulk(text.as_bytes())
}

/// WAIT: blocks until `replicas` replicas acknowledged every write made so
/// far, or `timeout` ms pass (0: forever); answers how many did.
pub(super) async fn wait(node: &NodeHandle, replicas: &[u8], timeout: &[u8]) -> Frame {
    let (Some(wanted), Some(timeout_ms)) = (parse_i64(replicas), parse_i64(timeout)) else {
        return error("ERR value is not an integer or out of range");
    };
    if timeout_ms < 0 {
        return error("ERR timeout is negative");
    }
    if node.0.borrow().role != Role::Primary {
        return error(
            "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
        );
    }
    let (target, acks_changed) = {
        let state = node.0.borrow();
        (state.offset, std::rc::Rc::clone(&state.acks_changed))
    };
    let acked = || {
        node.0
            .borrow()
            .acked
            .values()
            .filter(|offset| **offset >= target)
            .count() as i64
    };
    let deadline = deadline(timeout_ms);
    tokio::pin!(deadline);
    // Woken by each acknowledgement, not polled.
    let acked = loop {
        if acked() >= wanted {
            break acked();
        }
        tokio::select! {
            biased;
            () = acks_changed.notified() => {}
            () = &mut deadline => break acked(),
        }
    };
    let mut state = node.0.borrow_mut();
    if state.deposed && acked < wanted {
        state.deposed_acks.short_waits += 1;
    }
    Frame::Integer(acked)
}

/// WAITAOF (Redis 7.2+, Valkey): answers `[local, replicas]`, how many of
/// this node (0 or 1) and of its replicas fsynced every write made so far,
/// waiting up to `timeout` ms (0: forever) for the counts asked.
///
/// `numlocal` 1 on a node whose AOF is behind waits for the node's next
/// once-a-second fsync, or, on Valkey, for its next cron tick, which
/// acknowledges the write without fsyncing it (`aof_cron`,
/// `Flavour::acks_unsynced_aof`). The simulated replicas keep no AOF, so
/// they never count, as a real replica with `appendonly no` never does.
pub(super) async fn waitaof(
    node: &NodeHandle,
    numlocal: &[u8],
    numreplicas: &[u8],
    timeout: &[u8],
) -> Frame {
    let (Some(local), Some(replicas), Some(timeout_ms)) = (
        parse_i64(numlocal),
        parse_i64(numreplicas),
        parse_i64(timeout),
    ) else {
        return error("ERR value is not an integer or out of range");
    };
    if !(0..=1).contains(&local) {
        return error("ERR value is out of range, value must between 0 and 1");
    }
    if timeout_ms < 0 {
        return error("ERR timeout is negative");
    }
    let (target, aof, synced) = {
        let state = node.0.borrow();
        if state.role != Role::Primary {
            return error(
                "ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.",
            );
        }
        let aof = state.persistence != crate::config::Persistence::None;
        if local == 1 && !aof {
            return error(
                "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.",
            );
        }
        (state.offset, aof, std::rc::Rc::clone(&state.aof_synced))
    };
    let fsynced = || aof && node.0.borrow().fsynced_offset >= target;
    let deadline = deadline(timeout_ms);
    tokio::pin!(deadline);
    if local == 1 && !fsynced() {
        node.0.borrow_mut().aof_waiters += 1;
        loop {
            tokio::select! {
                biased;
                () = synced.notified() => {
                    if fsynced() {
                        break;
                    }
                }
                () = &mut deadline => break,
            }
        }
        node.0.borrow_mut().aof_waiters -= 1;
    }
    if replicas > 0 {
        // No replica will ever count: wait out the timeout.
        (&mut deadline).await;
    }
    Frame::Array(vec![
        Frame::Integer(i64::from(fsynced())),
        Frame::Integer(0),
    ])
}

/// Resolves after `timeout_ms` ms of a `WAIT` or `WAITAOF` (0: never).
async fn deadline(timeout_ms: i64) {
    match timeout_ms {
        0 => std::future::pending().await,
        ms => tokio::time::sleep(Duration::from_millis(ms as u64)).await,
    }
}
