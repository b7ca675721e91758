//! A sealed batch sent as one pipeline of native commands, where the
//! server has them, with one script call for the rest: unfenced acquires
//! as `SET NX PX GET` (Redis 7+), releases as `DELIFEQ` or `DELEX … IFEQ`
//! with their announcement behind (Valkey 9+, Redis 8.4+), and renewals as
//! `SET … IFEQ` (Valkey 8.1+) when the batch holds nothing but renewals or
//! the server releases natively too. On Valkey 9 a batch of plain locks
//! without fences sends no script at all.
//!
//! Each native command does what its script operation does
//! ([`codec::encode`]) and costs the server less: inside a script every
//! command pays for the script's arguments, the call out of Lua and its
//! reply converted back (`bench/README.md`, "Where the time goes"). On
//! Valkey 8.1 a mixed batch keeps its renewals in the script call: one
//! `SET … IFEQ` beside a script call that goes out anyway saves the server
//! less than its pipeline entry costs the client.

use redis::{RedisError, Value};

use super::{
    call,
    codec::{self, BatchOp, OpKind, Plan},
    item::Item,
};
use crate::{
    Command, Failure, Fencing, Reply,
    adapter::connect::node::{Dialect, Live},
    scripts::LockKind,
};

/// Whether `items` go out as a pipeline (at least one has a native
/// command on a server of `dialect`) rather than as one script call.
pub(super) fn goes_native(items: &[Item], dialect: Dialect) -> bool {
    let renewals = renews_natively(items, dialect);
    items
        .iter()
        .any(|item| native_plan(item, dialect, renewals).is_some())
}

/// Whether the batch's renewals go as `SET … IFEQ`: on a server that has
/// it, when the batch holds only renewals or its releases are native too
/// (so that nothing else needs a script call).
fn renews_natively(items: &[Item], dialect: Dialect) -> bool {
    dialect.set_ifeq
        && (dialect.delifeq
            || dialect.delex_ifeq
            || items.iter().all(|item| {
                item.names.kind == LockKind::Plain && matches!(item.command, Command::Renew { .. })
            }))
}

/// The native command `item` goes out as, if any.
fn native_plan(item: &Item, dialect: Dialect, renewals: bool) -> Option<Plan> {
    if item.names.kind != LockKind::Plain {
        return None;
    }
    match item.command {
        Command::Acquire {
            fencing: Fencing::None,
            ..
        } if dialect.set_nx_get => Some(Plan::SetNxGet),
        Command::Renew { .. } if renewals => Some(Plan::SetIfEq),
        Command::Release if dialect.delifeq || dialect.delex_ifeq => Some(Plan::DelIfEq),
        _ => None,
    }
}

/// Sends `items` as one pipeline: each native command (a release with its
/// announcement behind it), then one script call for the other
/// operations, then the batch's `WAIT` and `WAITAOF` (which count every
/// write before them). Each operation takes its own answer. A connection
/// error fails them all; an error reply fails its own operation only.
///
/// An acquire whose `SET` found our own key (a retry after a reply we
/// never saw) counts as granted only once an owner-checked refresh of its
/// ttl succeeded, as the lone acquire does. A script call the server no
/// longer knows (`NOSCRIPT`, after a restart) goes out again on its own
/// once the scripts are loaded. A native renewal or release the server
/// refused ([`codec::refuses_native`]) changed nothing: those go out again
/// as one script call, and a refusal for good turns the command off on
/// the connection.
pub(super) async fn send(live: Live, items: Vec<Item>, waits: codec::Waits) -> Vec<Reply> {
    let dialect = live.dialect();
    let renewals = renews_natively(&items, dialect);
    let plans: Vec<Option<Plan>> = items
        .iter()
        .map(|item| native_plan(item, dialect, renewals))
        .collect();
    let scripted: Vec<usize> = (0..items.len()).filter(|&i| plans[i].is_none()).collect();
    let mut pipe = redis::pipe();
    // Where each native operation's answer is in the pipeline's.
    let mut native = Vec::new();
    let mut count = 0;
    for (index, item) in items.iter().enumerate() {
        if plans[index].is_some() {
            let encoded = codec::encode(&item.names, &item.token, &item.command, dialect);
            native.push((index, encoded.plan, count));
            pipe.add_command(encoded.call);
            count += 1;
            if let Some(announce) = encoded.announce {
                pipe.add_command(announce);
                count += 1;
            }
        }
    }
    // The script call moves into the pipeline; the rare `NOSCRIPT` answer
    // encodes it again rather than every batch copying it.
    let script_call = || codec::encode_batch(&ops_at(&items, scripted.iter().copied()), dialect);
    let script_at = (!scripted.is_empty()).then(|| {
        pipe.add_command(script_call());
        count += 1;
        count - 1
    });
    let answered = count;
    for wait in waits.cmds() {
        pipe.add_command(wait);
        count += 1;
    }
    let mut conn = live.conn.clone();
    let values = match conn.send_packed_commands(&pipe, 0, count).await {
        Ok(values) if values.len() == count => values,
        Ok(_) => return vec![Reply::Failed(Failure::Protocol); items.len()],
        Err(error) => return vec![Reply::Failed(codec::failure_of(&error)); items.len()],
    };
    let (answers, waited) = values.split_at(answered);
    if waits.waitaof_unknown(waited) {
        live.refusals.refuse_waitaof();
    }
    let mut replies = vec![Reply::Failed(Failure::Protocol); items.len()];
    let mut refused = Vec::new();
    for (index, plan, at) in native {
        let item = &items[index];
        let answer = &answers[at];
        let reply = match plan {
            Plan::SetNxGet => {
                call::set_nx_get_reply(&mut conn, answer, &item.names, &item.token, &item.command)
                    .await
            }
            Plan::SetIfEq | Plan::DelIfEq if refuses(&live, plan, answer) => {
                refused.push(index);
                continue;
            }
            Plan::SetIfEq => codec::decode_set_ifeq(answer),
            Plan::DelIfEq => codec::decode_del_if_eq(answer),
            // Only the plans above go in the pipeline.
            Plan::Script(_) => Reply::Failed(Failure::Protocol),
        };
        replies[index] = waits.apply(reply, waited);
    }
    if let Some(at) = script_at {
        let kinds = kinds_at(&items, &scripted);
        let decoded = match &answers[at] {
            Value::ServerError(error) if error.code() == "NOSCRIPT" => {
                call::batch(live.clone(), script_call(), waits, kinds).await
            }
            value => codec::decode_script(value, &kinds)
                .into_iter()
                .map(|reply| waits.apply(reply, waited))
                .collect(),
        };
        for (&index, reply) in scripted.iter().zip(decoded) {
            replies[index] = reply;
        }
    }
    if !refused.is_empty() {
        for (index, reply) in refused
            .iter()
            .zip(send_scripted(live, &items, &refused, waits).await)
        {
            replies[*index] = reply;
        }
    }
    replies
}

/// Whether the server refused the native command `plan` with `answer`
/// (see [`codec::refuses_native`]); a refusal for good turns it off on the
/// connection.
fn refuses(live: &Live, plan: Plan, answer: &Value) -> bool {
    let Value::ServerError(error) = answer else {
        return false;
    };
    let error = RedisError::from(error.clone());
    if !codec::refuses_native(&error) {
        return false;
    }
    if codec::refuses_for_good(&error) {
        if plan == Plan::SetIfEq {
            live.refusals.refuse_set_ifeq();
        } else {
            live.refusals.refuse_del_ifeq();
        }
    }
    tracing::debug!(%error, ?plan, "native command refused: sending the script's operation");
    true
}

/// Sends the operations of `items` at `indices` as one script call, with
/// `waits` behind it, every native command off.
async fn send_scripted(
    live: Live,
    items: &[Item],
    indices: &[usize],
    waits: codec::Waits,
) -> Vec<Reply> {
    let mut script = live.dialect();
    script.set_ifeq = false;
    script.delifeq = false;
    script.delex_ifeq = false;
    let cmd = codec::encode_batch(&ops_at(items, indices.iter().copied()), script);
    call::batch(live, cmd, waits, kinds_at(items, indices)).await
}

/// The script operations of `items` at `indices`, in that order.
pub(super) fn ops_at(items: &[Item], indices: impl IntoIterator<Item = usize>) -> Vec<BatchOp<'_>> {
    indices
        .into_iter()
        .map(|index| BatchOp {
            keys: &items[index].names,
            token: &items[index].token,
            command: &items[index].command,
        })
        .collect()
}

/// The operation kinds of `items` at `indices`, in that order.
fn kinds_at(items: &[Item], indices: &[usize]) -> Vec<OpKind> {
    indices
        .iter()
        .map(|&index| OpKind::of(&items[index].command))
        .collect()
}
