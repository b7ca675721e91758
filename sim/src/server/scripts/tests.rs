use std::{cell::RefCell, rc::Rc};

use super::*;

fn now(ms: i64) -> NodeTime {
    NodeTime {
        ms,
        us: ms * 1000 + 7,
    }
}

fn strs(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// What a test's script published, in order.
type Published = Rc<RefCell<Vec<(Vec<u8>, Vec<u8>)>>>;

fn recorder() -> (Published, Publish) {
    let published: Published = Rc::default();
    let sink = Rc::clone(&published);
    let publish: Publish = Box::new(move |channel, message| {
        sink.borrow_mut().push((channel.to_vec(), message.to_vec()));
        1
    });
    (published, publish)
}

/// Runs the lock script at clock reading `at` ms (`writable`: on a
/// primary); the reply, the effects to replicate and what it published.
fn run_at(
    db: &mut Db,
    at: i64,
    writable: bool,
    keys: &[&str],
    args: &[&str],
) -> (Frame, Vec<Effect>, Published) {
    let (published, publish) = recorder();
    let (reply, effects) = run(
        scripts::LOCK,
        db,
        now(at),
        writable,
        &strs(keys),
        &strs(args),
        publish,
    );
    (reply, effects, published)
}

/// Runs the lock script at 0 ms.
fn run_at_zero(
    db: &mut Db,
    writable: bool,
    keys: &[&str],
    args: &[&str],
) -> (Frame, Vec<Effect>, Published) {
    run_at(db, 0, writable, keys, args)
}

/// The reply of the lock script on a primary at `at` ms.
fn call(db: &mut Db, keys: &[&str], args: &[&str], at: i64) -> Frame {
    run_at(db, at, true, keys, args).0
}

/// The reply of a one-operation call, which comes alone.
fn one(frame: Frame) -> Frame {
    match frame {
        Frame::Array(items) => panic!("expected one reply alone, got {items:?}"),
        other => other,
    }
}

fn granted(fence: i64) -> Frame {
    Frame::Integer(fence)
}

#[test]
fn every_path_of_every_operation() {
    let mut db = Db::default();
    let keys = ["{l}", "{l}:fence"];
    let acquire = |token: &'static str| ["t", token, "1000"];
    assert_eq!(
        one(call(&mut db, &keys, &acquire("a"), 5_000)),
        granted(5000007)
    );
    // Held by another owner: contended with its pttl.
    assert_eq!(
        one(call(&mut db, &keys, &acquire("b"), 5_400)),
        Frame::Integer(-2 - 600)
    );
    // Our own retry refreshes the ttl and issues a fresh fence.
    assert_eq!(
        one(call(&mut db, &keys, &acquire("a"), 5_500)),
        granted(5500007)
    );
    assert_eq!(db.pttl(b"{l}", now(5_500)), 1000);
    assert_eq!(
        one(call(&mut db, &["{l}"], &["r", "b", "1000"], 5_600)),
        Frame::Integer(0)
    );
    assert_eq!(
        one(call(&mut db, &["{l}"], &["r", "a", "1000"], 5_600)),
        Frame::Integer(1)
    );
    assert_eq!(
        one(call(&mut db, &["{l}"], &["d", "b"], 5_700)),
        Frame::Integer(0)
    );
    assert_eq!(
        one(call(&mut db, &["{l}"], &["d", "a"], 5_700)),
        Frame::Integer(1)
    );
    assert_eq!(
        one(call(&mut db, &["{l}"], &["d", "a"], 5_700)),
        Frame::Integer(0)
    );
    assert_eq!(
        one(call(&mut db, &["{l}"], &["r", "a", "1000"], 5_800)),
        Frame::Integer(0)
    );
    // The next grant's fence is above the last even if time went back;
    // the floor holds it, without a ttl.
    assert_eq!(
        one(call(&mut db, &keys, &acquire("c"), 1_000)),
        granted(5500008)
    );
    assert_eq!(db.pttl(b"{l}:fence", now(1_000)), -1);
}

#[test]
fn grants_behind_the_floor_are_counted() {
    let mut db = Db::default();
    let keys = ["{l}", "{l}:fence"];
    let acquire = |token: &'static str| ["t", token, "1000"];
    let ahead = call(&mut db, &keys, &acquire("a"), 5_000);
    assert_eq!(grants_behind_floor(&ahead, now(5_000).us), 0);
    call(&mut db, &["{l}"], &["d", "a"], 5_100);
    let behind = call(&mut db, &keys, &acquire("b"), 4_000);
    assert_eq!(behind, granted(5000008));
    assert_eq!(grants_behind_floor(&behind, now(4_000).us), 1);
    let counter = call(&mut db, &["{m}", "{c}"], &["c", "x", "10"], 0);
    assert_eq!(grants_behind_floor(&counter, now(0).us), 0);
    // Grants in one call count on from each other, a microsecond apart:
    // that is the floor ordering one call's grants, not a clock behind it.
    let batch = call(
        &mut db,
        &["{p}", "{l}:fence", "{q}", "{l}:fence", "{r}", "{l}:fence"],
        &["t", "a", "1000", "t", "a", "1000", "t", "a", "1000"],
        9_000,
    );
    assert_eq!(
        batch,
        Frame::Array(vec![granted(9000007), granted(9000008), granted(9000009)])
    );
    assert_eq!(grants_behind_floor(&batch, now(9_000).us), 0);
}

#[test]
fn the_fence_floor_outlives_its_locks_and_a_call_writes_it_back_once() {
    let mut db = Db::default();
    // Two locks of one namespace share its floor: the first grant swaps
    // the server time in, the call writes the second's fence back once.
    let (reply, effects, _) = run_at_zero(
        &mut db,
        true,
        &["{a}", "{ns}:fence-floor", "{b}", "{ns}:fence-floor"],
        &["t", "t", "1000", "t", "t", "1000"],
    );
    assert_eq!(reply, Frame::Array(vec![granted(7), granted(8)]));
    assert_eq!(
        effects.len(),
        4,
        "two SETs of locks, two of the floor: {effects:?}"
    );
    call(&mut db, &["{a}"], &["d", "t"], 10);
    call(&mut db, &["{b}"], &["d", "t"], 10);
    assert!(db.get(b"{a}", now(10)).unwrap().is_none());
    assert_eq!(
        db.get(b"{ns}:fence-floor", now(1_000_000)).unwrap(),
        Some(&b"8"[..]),
        "the floor stays, holding the last fence"
    );
}

#[test]
fn a_batch_runs_every_operation_in_order_and_announces_its_releases() {
    let mut db = Db::default();
    let (reply, effects, published) = run_at_zero(
        &mut db,
        true,
        &["{x}", "{y}", "{y}:fence", "{x}"],
        &["n", "t", "1000", "c", "u", "1000", "d", "t"],
    );
    assert_eq!(
        reply,
        Frame::Array(vec![granted(0), granted(1), Frame::Integer(1)])
    );
    assert_eq!(
        *published.borrow(),
        vec![(b"{x}:released".to_vec(), b"released".to_vec())]
    );
    // Effects replication: the writes, in order, not the script.
    assert_eq!(effects.len(), 4, "{effects:?}");
    assert_eq!(
        effects[3],
        Effect::Del {
            key: b"{x}".to_vec()
        }
    );
}

#[test]
fn a_quiet_release_deletes_and_announces_nothing() {
    let mut db = Db::default();
    let (reply, _, published) = run_at_zero(
        &mut db,
        true,
        &["{x}", "{y}", "{x}", "{y}"],
        &["n", "a", "1000", "n", "b", "1000", "q", "a", "d", "b"],
    );
    assert_eq!(
        reply,
        Frame::Array(vec![
            granted(0),
            granted(0),
            Frame::Integer(1),
            Frame::Integer(1)
        ])
    );
    assert!(db.get(b"{x}", now(10)).unwrap().is_none());
    assert_eq!(
        *published.borrow(),
        vec![(b"{y}:released".to_vec(), b"released".to_vec())]
    );
    assert_eq!(
        one(call(&mut db, &["{x}"], &["q", "a"], 0)),
        Frame::Integer(0)
    );
}

#[test]
fn compat_acquire_and_counter_fencing() {
    let mut db = Db::default();
    let keys = ["{l}", "{lock}:fence-counter"];
    for expected in [1, 2] {
        let reply = one(call(&mut db, &keys, &["C", "a", "10"], 0));
        assert_eq!(reply, granted(expected));
        call(&mut db, &["{l}"], &["d", "a"], 0);
    }
}

#[test]
fn writes_on_a_replica_fail_readonly_per_operation() {
    let mut db = Db::default();
    let (reply, effects, _) = run_at_zero(
        &mut db,
        false,
        &["{l}", "{l}:fence", "{m}"],
        &["t", "a", "10", "n", "b", "10"],
    );
    assert_eq!(reply, Frame::Array(vec![error(READONLY), error(READONLY)]));
    assert!(effects.is_empty());
    // Alone, an operation's error is the call's error reply.
    let (reply, _, _) = run_at_zero(&mut db, false, &["{m}"], &["n", "b", "10"]);
    assert_eq!(reply, error(READONLY));
}

#[test]
fn an_unknown_operation_or_a_missing_key_fails_the_call() {
    let mut db = Db::default();
    assert!(matches!(
        call(&mut db, &["{l}"], &["x", "t"], 0),
        Frame::Error(text) if text.starts_with("ERR lock.lua: unknown operation")
    ));
    // A renewal without its ttl: redis.call raises, the script stops.
    call(&mut db, &["{l}"], &["n", "t", "1000"], 0);
    assert!(matches!(
        call(&mut db, &["{l}"], &["r", "t"], 0),
        Frame::Error(text) if text.starts_with("ERR")
    ));
    // A nil key under redis.pcall: that operation's error entry alone.
    assert_eq!(
        one(call(&mut db, &[], &["n", "t", "1000"], 0)),
        error(BAD_ARGUMENT)
    );
}

#[test]
fn a_raised_error_keeps_the_writes_before_it() {
    // The fence floor holds a list: the acquire sets the lock, meets
    // WRONGTYPE at the floor under pcall, undoes the lock with a DEL, and
    // answers the error for that operation.
    let mut db = Db::default();
    data::execute(&mut db, &strs(&["LPUSH", "{f}:fence", "x"]), now(0));
    let (reply, effects, _) =
        run_at_zero(&mut db, true, &["{f}", "{f}:fence"], &["t", "a", "1000"]);
    assert!(matches!(reply, Frame::Error(text) if text.starts_with("WRONGTYPE")));
    assert!(!db.exists(b"{f}", now(0)));
    assert_eq!(
        effects.len(),
        2,
        "the SET, then its undoing DEL: {effects:?}"
    );
}

#[test]
fn conversions_follow_redis() {
    let lua = Lua::new_with(StdLib::NONE, LuaOptions::default()).expect("a Lua state");
    let reply = Frame::Array(vec![
        Frame::Integer(-3),
        Frame::BulkString(b"x".to_vec()),
        Frame::Null,
        Frame::SimpleString(b"OK".to_vec()),
    ]);
    let value = to_lua(&lua, &reply).expect("converts");
    let Value::Table(table) = &value else {
        panic!("an array becomes a table: {value:?}");
    };
    assert_eq!(table.raw_get::<Value>(3).ok(), Some(Value::Boolean(false)));
    // Back to Redis: the nil bulk (false) becomes a nil reply, the status
    // table a status, and the array stops at its first nil.
    assert_eq!(
        to_frame(&value),
        Frame::Array(vec![
            Frame::Integer(-3),
            Frame::BulkString(b"x".to_vec()),
            Frame::Null,
            Frame::SimpleString(b"OK".to_vec()),
        ])
    );
    assert_eq!(to_frame(&Value::Number(2.9)), Frame::Integer(2));
    assert_eq!(to_frame(&Value::Boolean(true)), Frame::Integer(1));
    assert_eq!(number_text(1000.0), "1000");
}

#[test]
fn successes_count_grants_and_renewals_but_not_refusals() {
    let mut db = Db::default();
    let keys = ["{lock:k}", "{lock:k}:fence", "{lock:k}"];
    let args = ["t", "t1", "1000", "r", "t1", "1000"];
    let reply = call(&mut db, &keys, &args, 1_000);
    assert_eq!(successes(scripts::LOCK, &strs(&args), &reply), (1, 1));
    let other = ["t", "t2", "1000", "r", "t2", "1000"];
    let reply = call(&mut db, &keys, &other, 1_100);
    assert_eq!(
        successes(scripts::LOCK, &strs(&other), &reply),
        (0, 0),
        "contended and not the owner"
    );
}

#[test]
fn a_script_may_not_create_or_read_globals() {
    ENGINE.with(|engine| {
        let created = engine.lua.load("leaked = 1").exec();
        assert!(
            created.is_err_and(|e| e.to_string().contains("create global variable 'leaked'")),
            "Redis refuses a global a script forgot to declare local"
        );
        let read = engine.lua.load("return undeclared").eval::<Value>();
        assert!(read.is_err_and(|e| e.to_string().contains("nonexistent global variable")));
    });
}

#[test]
fn a_lone_grant_swaps_the_server_time_into_the_floor_in_one_command() {
    let mut db = Db::default();
    let keys = ["{a}", "{ns}:fence-floor"];
    let (reply, effects, _) = run_at_zero(&mut db, true, &keys, &["t", "t", "1000"]);
    assert_eq!(reply, granted(7));
    assert_eq!(effects.len(), 2, "the lock's SET, the floor's: {effects:?}");
    // Behind the floor, the fence is written at once, above it.
    data::execute(&mut db, &strs(&["SET", "{ns}:fence-floor", "99"]), now(0));
    let (reply, effects, _) = run_at_zero(&mut db, true, &["{b}", keys[1]], &["t", "t", "1000"]);
    assert_eq!(reply, granted(100));
    assert_eq!(
        effects.len(),
        3,
        "the lock, the swap, the fence: {effects:?}"
    );
    assert_eq!(
        db.get(b"{ns}:fence-floor", now(0)).unwrap(),
        Some(&b"100"[..])
    );
}
