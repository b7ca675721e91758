//! What a keyspace command answers: its reply and the writes it made, and
//! the error replies the command families share.

use redis_protocol::resp2::types::OwnedFrame as Frame;

use crate::server::{db::Effect, frame::error};

/// What a keyspace command answers, and the effects it had (what a
/// primary replicates and its AOF logs).
pub type Answer = (Frame, Vec<Effect>);

/// A reply that wrote nothing.
pub(crate) fn reply(frame: Frame) -> Answer {
    (frame, Vec::new())
}

/// The `ERR wrong number of arguments` answer to the command in `args`.
pub(crate) fn wrong_args(args: &[Vec<u8>]) -> Answer {
    let name = String::from_utf8_lossy(&args[0]).to_lowercase();
    reply(error(&format!(
        "ERR wrong number of arguments for '{name}' command"
    )))
}

/// The answer to an argument that should be an integer and is not.
pub(crate) fn not_integer() -> Answer {
    reply(error("ERR value is not an integer or out of range"))
}

/// Redis's bare syntax error.
pub(crate) fn syntax_error() -> Answer {
    reply(error("ERR syntax error"))
}
