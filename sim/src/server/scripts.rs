//! lock-core's Lua script, run by an embedded Lua 5.1 (the version Redis
//! embeds) and addressed by its SHA1.
//!
//! [`run`] runs the very text of `lock.lua` (lock-core/src/scripts/, the
//! `include_str!` the adapter loads), so a slip in the script shows in the
//! simulation as it would in production. What surrounds it is Redis's
//! scripting contract, as Redis 7.0 keeps it:
//! - `redis.call` runs a command and raises its error, which aborts the
//!   script and becomes the call's error reply (writes made before it stay:
//!   Redis has no rollback); `redis.pcall` returns the error as a table
//!   `{err = …}`; `redis.error_reply` and `redis.status_reply` build them;
//! - replies convert both ways as Redis converts them: an integer to a Lua
//!   number and back (truncated), a bulk string to a string, a nil bulk to
//!   `false`, a status to `{ok = …}`, an array to a table (up to its first
//!   nil), `true` to 1 and `false` to a nil reply;
//! - `TIME` reads the node's own clock, frozen for the whole call;
//! - a write on a replica fails with `READONLY` at that write (a script
//!   without a `no-writes` flag is only checked when it writes);
//! - the script may not create or read undeclared globals;
//! - **effects replication** (Redis 7's only mode): what replicates is the
//!   writes the script made ([`Effect`]s), not the script, so a replica
//!   never re-runs it with its own clock.
//!
//! The differential test (sim/tests/sim_it/differential.rs) runs the same command
//! sequences here and on a real `redis-server` and compares the replies:
//! that is what holds this contract to Redis.
//!
//! Each thread keeps one Lua state (a world runs on one thread, and a
//! script call runs to completion without yielding), with the script
//! compiled once. The script keeps nothing between calls (its locals are
//! per call, globals are refused) and Lua 5.1's string hashing has no
//! random seed, so a call's outcome depends on its inputs alone: a replay
//! is exact.

use std::{cell::RefCell, fmt, rc::Rc};

use lock_core::scripts;
use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};
use redis_protocol::resp2::types::OwnedFrame as Frame;

use super::{
    cmd::data::{self, READONLY, is_write},
    db::{Db, Effect, NodeTime},
    frame::error,
};

/// Which of lock-core's scripts a SHA1 names.
pub fn known(sha1: &str) -> Option<scripts::Script> {
    scripts::ALL
        .into_iter()
        .find(|script| script.sha1.eq_ignore_ascii_case(sha1))
}

/// What Lua's redis library says of an argument that is neither a string
/// nor a number.
const BAD_ARGUMENT: &str = "ERR Lua redis lib command arguments must be strings or integers";

/// What `PUBLISH` from a script does: delivers `(channel, message)` and
/// answers how many subscribers got it.
pub type Publish = Box<dyn FnMut(&[u8], &[u8]) -> i64>;

/// The state of the one script call under way on this thread.
struct Call {
    db: Db,
    now: NodeTime,
    writable: bool,
    effects: Vec<Effect>,
    publish: Publish,
}

/// An error reply raised by `redis.call`: it aborts the script and becomes
/// the call's reply.
#[derive(Debug)]
struct Raised(String);

impl fmt::Display for Raised {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

/// A thread's Lua state, with lock-core's scripts compiled in it.
struct Engine {
    lua: Lua,
    compiled: Vec<(&'static str, Function)>,
    call: Rc<RefCell<Option<Call>>>,
}

thread_local! {
    static ENGINE: Engine = Engine::new()
        // The state is built from the embedded Lua and a fixed script: it
        // fails only if Lua cannot allocate, which aborts anyway.
        .expect("the embedded Lua starts and compiles lock-core's scripts");
}

impl Engine {
    fn new() -> mlua::Result<Self> {
        // Redis loads base, table, string and math (and libraries the
        // scripts do not use); no os or io: nothing reads the wall clock.
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        let call: Rc<RefCell<Option<Call>>> = Rc::default();
        let redis = lua.create_table()?;
        for (name, raise) in [("call", true), ("pcall", false)] {
            let call = Rc::clone(&call);
            let function = lua
                .create_function(move |lua, args: MultiValue| dispatch(lua, &call, args, raise))?;
            redis.raw_set(name, function)?;
        }
        for (name, field) in [("error_reply", "err"), ("status_reply", "ok")] {
            let function = lua.create_function(move |lua, text: mlua::LuaString| {
                let table = lua.create_table()?;
                table.raw_set(field, text)?;
                Ok(table)
            })?;
            redis.raw_set(name, function)?;
        }
        let globals = lua.globals();
        globals.raw_set("redis", redis)?;
        // Redis's global protection: a script that forgets `local` fails.
        lua.load(
            r#"setmetatable(_G, {
                __newindex = function(_, name)
                    error("Script attempted to create global variable '" .. tostring(name) .. "'", 2)
                end,
                __index = function(_, name)
                    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
                end,
            })"#,
        )
        .exec()?;
        let mut compiled = Vec::new();
        for script in scripts::ALL {
            let function = lua
                .load(script.source)
                .set_name("@user_script")
                .into_function()?;
            compiled.push((script.sha1, function));
        }
        Ok(Self {
            lua,
            compiled,
            call,
        })
    }

    fn run(&self, sha1: &str, keys: &[Vec<u8>], args: &[Vec<u8>]) -> Frame {
        let Some((_, function)) = self.compiled.iter().find(|(sha, _)| *sha == sha1) else {
            return error("NOSCRIPT No matching script. Please use EVAL.");
        };
        let outcome = self
            .set_arguments(keys, args)
            .and_then(|()| function.call::<Value>(()));
        match outcome {
            Ok(value) => to_frame(&value),
            Err(failure) => match failure.downcast_ref::<Raised>() {
                Some(Raised(text)) => Frame::Error(text.clone()),
                // The script's own error (Redis: "ERR user_script:N: …").
                None => error(&format!("ERR Error running script: {}", one_line(&failure))),
            },
        }
    }

    /// `KEYS` and `ARGV`, set past the global protection as Redis sets them.
    fn set_arguments(&self, keys: &[Vec<u8>], args: &[Vec<u8>]) -> mlua::Result<()> {
        let globals = self.lua.globals();
        for (name, list) in [("KEYS", keys), ("ARGV", args)] {
            let table = self.lua.create_table_with_capacity(list.len(), 0)?;
            for (index, item) in list.iter().enumerate() {
                table.raw_seti(index + 1, self.lua.create_string(item)?)?;
            }
            globals.raw_set(name, table)?;
        }
        Ok(())
    }
}

/// An error's text on one line (a RESP error cannot hold a line break).
fn one_line(failure: &mlua::Error) -> String {
    failure
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// `redis.call` (`raise`) and `redis.pcall`.
fn dispatch(
    lua: &Lua,
    call: &RefCell<Option<Call>>,
    args: MultiValue,
    raise: bool,
) -> mlua::Result<Value> {
    let reply = match arguments(&args) {
        Some(args) if !args.is_empty() => {
            let mut guard = call.borrow_mut();
            // A script only runs inside `run`, which sets the call first.
            let Some(call) = guard.as_mut() else {
                return Err(mlua::Error::runtime("redis.call outside a script call"));
            };
            execute(call, &args)
        }
        Some(_) => error("ERR Please specify at least one argument for this redis lib call"),
        None => error(BAD_ARGUMENT),
    };
    match reply {
        Frame::Error(text) if raise => Err(mlua::Error::external(Raised(text))),
        reply => to_lua(lua, &reply),
    }
}

/// Runs one command for a script: a data command on the keyspace, or a
/// `PUBLISH`.
fn execute(call: &mut Call, args: &[Vec<u8>]) -> Frame {
    if !call.writable && is_write(&args[0]) {
        return error(READONLY);
    }
    if args[0].eq_ignore_ascii_case(b"PUBLISH") {
        if args.len() != 3 {
            return error("ERR wrong number of arguments for 'publish' command");
        }
        return Frame::Integer((call.publish)(&args[1], &args[2]));
    }
    match data::execute(&mut call.db, args, call.now) {
        Some((reply, effects)) => {
            call.effects.extend(effects);
            reply
        }
        None => error("ERR Unknown Redis command called from script"),
    }
}

/// A command's arguments as Redis takes them from Lua: strings as they are,
/// numbers as their decimal text; `None` if any is of another type.
fn arguments(args: &MultiValue) -> Option<Vec<Vec<u8>>> {
    args.iter()
        .map(|arg| match arg {
            Value::String(text) => Some(text.as_bytes().to_vec()),
            Value::Integer(number) => Some(number.to_string().into_bytes()),
            Value::Number(number) => Some(number_text(*number).into_bytes()),
            _ => None,
        })
        .collect()
}

/// A Lua number as Redis writes it into a command (`%.17g`): integral
/// values without a fraction.
fn number_text(number: f64) -> String {
    if number.fract() == 0.0 && number.abs() < 1e17 {
        format!("{number:.0}")
    } else {
        format!("{number}")
    }
}

/// A Redis reply as a script sees it.
fn to_lua(lua: &Lua, reply: &Frame) -> mlua::Result<Value> {
    Ok(match reply {
        Frame::Integer(number) => Value::Integer(*number),
        Frame::BulkString(bytes) => Value::String(lua.create_string(bytes)?),
        Frame::Null => Value::Boolean(false),
        Frame::SimpleString(text) => Value::Table(field(lua, "ok", text)?),
        Frame::Error(text) => Value::Table(field(lua, "err", text.as_bytes())?),
        Frame::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (index, item) in items.iter().enumerate() {
                table.raw_seti(index + 1, to_lua(lua, item)?)?;
            }
            Value::Table(table)
        }
    })
}

/// `{name = text}`.
fn field(lua: &Lua, name: &str, text: &[u8]) -> mlua::Result<Table> {
    let table = lua.create_table()?;
    table.raw_set(name, lua.create_string(text)?)?;
    Ok(table)
}

/// A script's return value as Redis answers it.
fn to_frame(value: &Value) -> Frame {
    match value {
        Value::String(text) => Frame::BulkString(text.as_bytes().to_vec()),
        Value::Integer(number) => Frame::Integer(*number),
        // Redis truncates a Lua number to an integer reply.
        Value::Number(number) => Frame::Integer(*number as i64),
        Value::Boolean(true) => Frame::Integer(1),
        Value::Table(table) => table_frame(table),
        _ => Frame::Null,
    }
}

/// A table returned by a script: an error, a status, or an array up to its
/// first nil.
fn table_frame(table: &Table) -> Frame {
    if let Ok(Value::String(text)) = table.raw_get::<Value>("err") {
        return Frame::Error(text.to_string_lossy().replace(['\r', '\n'], " "));
    }
    if let Ok(Value::String(text)) = table.raw_get::<Value>("ok") {
        return Frame::SimpleString(text.as_bytes().to_vec());
    }
    let mut items = Vec::new();
    for index in 1.. {
        match table.raw_get::<Value>(index) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(item) => items.push(to_frame(&item)),
        }
    }
    Frame::Array(items)
}

/// Runs `script` with `keys` and `args` on `db` at the node's clock reading
/// `now`, in the embedded Lua. `writable`: the node is a primary; `publish`
/// delivers what the script publishes. Returns the reply and the effects
/// to replicate (those of the writes made before an error too).
pub fn run(
    script: scripts::Script,
    db: &mut Db,
    now: NodeTime,
    writable: bool,
    keys: &[Vec<u8>],
    args: &[Vec<u8>],
    publish: Publish,
) -> (Frame, Vec<Effect>) {
    ENGINE.with(|engine| {
        *engine.call.borrow_mut() = Some(Call {
            db: std::mem::take(db),
            now,
            writable,
            effects: Vec::new(),
            publish,
        });
        let reply = engine.run(script.sha1, keys, args);
        // Set just above, and only `run` takes it.
        let call = engine
            .call
            .borrow_mut()
            .take()
            .expect("the call set before the script ran");
        *db = call.db;
        (reply, call.effects)
    })
}

/// How many of a call's grants were issued while the server clock (`now_us`)
/// was behind the time-mixed fence floor by more than a millisecond, i.e.
/// behind an earlier fence: only the floor kept such a grant above the
/// fences before it. Within a millisecond, grants count on from the floor
/// a microsecond apart, one call's and those of calls in one tick of the
/// simulation (which share its instant): that is the floor ordering grants
/// of one instant, not a clock that went back.
pub fn grants_behind_floor(reply: &Frame, now_us: i64) -> usize {
    per_operation(reply)
        .iter()
        .filter(
            |reply| matches!(reply, Frame::Integer(fence) if *fence > now_us.saturating_add(1_000)),
        )
        .count()
}

/// A call's replies, one per operation: the array, or the lone reply of a
/// single-operation call.
fn per_operation(reply: &Frame) -> &[Frame] {
    match reply {
        Frame::Array(replies) => replies,
        single => std::slice::from_ref(single),
    }
}

/// The operation codes of a call, in order (the layout `lock.lua`'s header
/// describes), to read its reply per operation.
fn codes(args: &[Vec<u8>]) -> Vec<&[u8]> {
    let mut codes = Vec::new();
    let mut a = 0;
    while let Some(code) = args.get(a) {
        codes.push(code.as_slice());
        a += match code.as_slice() {
            b"d" | b"q" => 2,
            b"t" | b"T" | b"c" | b"C" | b"n" | b"N" | b"r" => 3,
            _ => break,
        };
    }
    codes
}

/// How many operations a call of `script` with arguments `args` carries:
/// `lock.lua` batches them, the lock family's scripts run one per call.
pub fn operations(script: scripts::Script, args: &[Vec<u8>]) -> usize {
    if script.sha1 == scripts::LOCK.sha1 {
        codes(args).len()
    } else {
        1
    }
}

/// How many of a call's operations succeeded as grants and as renewals,
/// given the script, the call's arguments and reply (observations for the
/// reports).
pub fn successes(script: scripts::Script, args: &[Vec<u8>], reply: &Frame) -> (usize, usize) {
    if script.sha1 != scripts::LOCK.sha1 {
        return family_successes(script, args, reply);
    }
    let mut counts = (0, 0);
    for (code, reply) in codes(args).into_iter().zip(per_operation(reply)) {
        match (code, reply) {
            (b"n" | b"N" | b"t" | b"T" | b"c" | b"C", Frame::Integer(fence)) if *fence >= 0 => {
                counts.0 += 1;
            }
            (b"r", Frame::Integer(1)) => counts.1 += 1,
            _ => {}
        }
    }
    counts
}

/// [`successes`] for the lock family's scripts, one operation per call
/// (each script's header lists its codes and replies): a grant is a fence
/// (> 0), or 0 for a reader; a renewal answers 1.
fn family_successes(script: scripts::Script, args: &[Vec<u8>], reply: &Frame) -> (usize, usize) {
    let code = args.first().map(Vec::as_slice).unwrap_or_default();
    let Frame::Integer(reply) = *reply else {
        return (0, 0);
    };
    let (grant, renewal) = match script.name {
        "fair" | "semaphore" => (code == b"a" && reply > 0, code == b"r" && reply == 1),
        "rwlock" => (
            (code == b"r" && reply == 0) || (code == b"w" && reply > 0),
            matches!(code, b"e" | b"f") && reply == 1,
        ),
        _ => (false, false),
    };
    (usize::from(grant), usize::from(renewal))
}

#[cfg(test)]
mod tests;
