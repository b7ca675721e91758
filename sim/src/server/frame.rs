//! RESP frames, as the simulated Redis reads and writes them: building
//! replies, framing bytes off a buffer, and reading a command's arguments.
//!
//! Framing is check-then-parse, as in mini-redis: bytes accumulate in a
//! buffer, and only once a whole frame is there is it parsed and removed.
//! Replication links carry nested frames, framed by `redis-protocol`
//! ([`next_frame`]); client connections carry commands, read by the
//! stricter rules Redis applies to a request ([`next_command`]).

use redis_protocol::resp2::{
    decode::decode,
    encode::encode,
    types::{OwnedFrame as Frame, Resp2Frame},
};

/// An error reply. Line breaks in `text` become spaces, as Redis makes
/// them: an error is one line of the protocol, and a break inside it would
/// cut the reply in two.
pub fn error(text: &str) -> Frame {
    Frame::Error(text.replace(['\r', '\n'], " "))
}

/// `+OK`.
pub fn ok() -> Frame {
    Frame::SimpleString(b"OK".to_vec())
}

/// A bulk string.
pub fn bulk(bytes: &[u8]) -> Frame {
    Frame::BulkString(bytes.to_vec())
}

/// Parses a Redis integer argument.
pub fn parse_i64(arg: &[u8]) -> Option<i64> {
    std::str::from_utf8(arg).ok()?.parse().ok()
}

/// Serializes one frame.
pub fn to_bytes(frame: &Frame) -> Vec<u8> {
    let mut out = vec![0; frame.encode_len(false)];
    // The buffer is exactly `encode_len` long, so encoding cannot run out.
    let written = encode(&mut out, frame, false).unwrap_or(0);
    out.truncate(written);
    out
}

/// Takes one whole frame off the front of `buffer`, if there is one.
pub fn next_frame(buffer: &mut Vec<u8>) -> Result<Option<Frame>, String> {
    match decode(buffer) {
        Ok(Some((frame, used))) => {
            buffer.drain(..used);
            Ok(Some(frame))
        }
        Ok(None) => Ok(None),
        Err(problem) => Err(format!("ERR Protocol error: {problem:?}")),
    }
}

/// A client's command: its name and arguments, as bytes.
pub type Command = Vec<Vec<u8>>;

/// The longest count line (`*N`, `$N`) Redis reads before giving up on
/// it, as Redis's `PROTO_INLINE_MAX_SIZE`.
const MAX_COUNT_LINE: usize = 64 * 1024;

/// The most arguments one command may have (Redis: 1024 × 1024).
const MAX_ARGUMENTS: i64 = 1024 * 1024;

/// The longest argument (Redis's default `proto-max-bulk-len`, 512 MB).
const MAX_ARGUMENT_LEN: i64 = 512 * 1024 * 1024;

/// Takes one whole command off the front of `buffer`, if there is one,
/// reading it as Redis reads a client's request: an array (`*N`) of `N`
/// bulk strings, nothing else. `Ok(None)`: the command is not complete yet
/// (empty arrays before it are dropped, as Redis skips them). `Err`: the
/// bytes cannot be a command; the reply is that error, then the connection
/// closes. Unlike the general framing of [`next_frame`], a request never
/// nests, so no input can make it recurse.
///
/// The simulated Redis reads no inline commands (`PING\r\n`): a request
/// that does not start with `*` is a protocol error here.
pub fn next_command(buffer: &mut Vec<u8>) -> Result<Option<Command>, String> {
    loop {
        match parse_command(buffer)? {
            None => return Ok(None),
            Some((used, command)) => {
                buffer.drain(..used);
                if !command.is_empty() {
                    return Ok(Some(command));
                }
            }
        }
    }
}

/// The end of the `\r\n`-terminated line starting at `from`: the index of
/// its `\r`. `Ok(None)` while it is not all there; `too_long` once more
/// than Redis would wait for has come without one.
fn line_end(buffer: &[u8], from: usize, too_long: &str) -> Result<Option<usize>, String> {
    let rest = &buffer[from.min(buffer.len())..];
    match rest.windows(2).position(|pair| pair == b"\r\n") {
        Some(at) if at <= MAX_COUNT_LINE => Ok(Some(from + at)),
        Some(_) => Err(protocol_error(too_long)),
        None if rest.len() > MAX_COUNT_LINE => Err(protocol_error(too_long)),
        None => Ok(None),
    }
}

/// A count as Redis's `string2ll` reads it: an optional `-`, then digits
/// with no leading zero, within `i64`.
fn count(text: &[u8]) -> Option<i64> {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    let canonical = !digits.is_empty()
        && digits.iter().all(u8::is_ascii_digit)
        && (digits[0] != b'0' || text == b"0");
    if !canonical {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

fn protocol_error(problem: &str) -> String {
    format!("ERR Protocol error: {problem}")
}

/// Parses one command at the front of `buffer` without consuming it: the
/// bytes it takes and its arguments (none for an empty array).
fn parse_command(buffer: &[u8]) -> Result<Option<(usize, Command)>, String> {
    let Some(&first) = buffer.first() else {
        return Ok(None);
    };
    if first != b'*' {
        return Err(protocol_error(&format!(
            "expected '*', got '{}' (the simulated Redis reads no inline commands)",
            char::from(first).escape_default()
        )));
    }
    let Some(end) = line_end(buffer, 1, "too big mbulk count string")? else {
        return Ok(None);
    };
    let arguments = match count(&buffer[1..end]) {
        Some(n) if n <= MAX_ARGUMENTS => n,
        _ => return Err(protocol_error("invalid multibulk length")),
    };
    let mut at = end + 2;
    let mut command = Vec::new();
    for _ in 0..arguments.max(0) {
        let Some(&marker) = buffer.get(at) else {
            return Ok(None);
        };
        if marker != b'$' {
            return Err(protocol_error(&format!(
                "expected '$', got '{}'",
                char::from(marker).escape_default()
            )));
        }
        let Some(end) = line_end(buffer, at + 1, "too big bulk count string")? else {
            return Ok(None);
        };
        let len = match count(&buffer[at + 1..end]) {
            Some(n) if (0..=MAX_ARGUMENT_LEN).contains(&n) => n as usize,
            _ => return Err(protocol_error("invalid bulk length")),
        };
        let start = end + 2;
        // The argument and the two bytes after it, which Redis skips
        // without looking at them.
        if buffer.len() < start + len + 2 {
            return Ok(None);
        }
        command.push(buffer[start..start + len].to_vec());
        at = start + len + 2;
    }
    Ok(Some((at, command)))
}

/// A command frame as its arguments (an array of bulk strings).
pub fn arguments(frame: Frame) -> Option<Vec<Vec<u8>>> {
    let Frame::Array(items) = frame else {
        return None;
    };
    items
        .into_iter()
        .map(|item| match item {
            Frame::BulkString(bytes) | Frame::SimpleString(bytes) => Some(bytes),
            Frame::Integer(number) => Some(number.to_string().into_bytes()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_partial_input_waits() {
        let command = Frame::Array(vec![bulk(b"SET"), bulk(b"k"), bulk(b"v")]);
        let bytes = to_bytes(&command);
        let mut buffer = bytes[..5].to_vec();
        assert_eq!(
            next_frame(&mut buffer),
            Ok(None),
            "half a frame is not a frame"
        );
        buffer.extend_from_slice(&bytes[5..]);
        buffer.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        let frame = next_frame(&mut buffer).expect("valid").expect("whole");
        assert_eq!(
            arguments(frame),
            Some(vec![b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()])
        );
        assert_eq!(
            arguments(next_frame(&mut buffer).expect("valid").expect("whole")),
            Some(vec![b"PING".to_vec()])
        );
        assert!(buffer.is_empty());
        let mut garbage = b"?nonsense\r\n".to_vec();
        assert!(next_frame(&mut garbage).is_err());
    }

    #[test]
    fn commands_are_read_as_redis_reads_requests() {
        let mut buffer = b"*0\r\n*-1\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPI".to_vec();
        assert_eq!(
            next_command(&mut buffer),
            Ok(Some(vec![b"GET".to_vec(), b"k".to_vec()])),
            "empty arrays are skipped"
        );
        assert_eq!(next_command(&mut buffer), Ok(None), "half a command waits");
        buffer.extend_from_slice(b"NG\r\n");
        assert_eq!(next_command(&mut buffer), Ok(Some(vec![b"PING".to_vec()])));
        assert!(buffer.is_empty());
        let refused = [
            (
                &b"PING\r\n"[..],
                "expected '*', got 'P' (the simulated Redis reads no inline commands)",
            ),
            (b"*1\r\n*1\r\n", "expected '$', got '*'"),
            (b"*x\r\n", "invalid multibulk length"),
            (b"*01\r\n", "invalid multibulk length"),
            (b"*1048577\r\n", "invalid multibulk length"),
            (b"*1\r\n$-1\r\n", "invalid bulk length"),
            (b"*1\r\n$536870913\r\n", "invalid bulk length"),
            (b"*1\r\n$+4\r\n", "invalid bulk length"),
        ];
        for (bytes, problem) in refused {
            assert_eq!(
                next_command(&mut bytes.to_vec()),
                Err(format!("ERR Protocol error: {problem}")),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
        let mut endless = b"*1\r\n$".to_vec();
        endless.extend(std::iter::repeat_n(b'1', MAX_COUNT_LINE));
        assert_eq!(next_command(&mut endless), Ok(None));
        endless.push(b'1');
        assert_eq!(
            next_command(&mut endless),
            Err("ERR Protocol error: too big bulk count string".to_owned())
        );
    }
}
