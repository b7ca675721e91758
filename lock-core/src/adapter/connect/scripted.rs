//! Scripted Redis nodes on in-memory streams, for unit tests: a tiny RESP
//! server that hands each command's name to a script and writes back what
//! the script answers.

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

/// Reads RESP arrays of bulk strings from `stream` and answers each with
/// `answer(name)`, the command's upper-cased name (`None`: no answer, a
/// node that hears and never replies). Ends when the peer closes.
pub(crate) async fn serve(mut stream: DuplexStream, answer: impl Fn(&str) -> Option<&'static str>) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        while let Some((command, used)) = parse_command(&buffer) {
            buffer.drain(..used);
            let Some(reply) = answer(&command) else {
                continue;
            };
            if stream.write_all(reply.as_bytes()).await.is_err() {
                return;
            }
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
        }
    }
}

/// The upper-cased command name of the first complete RESP array in
/// `buffer`, and the bytes it used.
fn parse_command(buffer: &[u8]) -> Option<(String, usize)> {
    let line = |at: usize| -> Option<(&[u8], usize)> {
        let end = buffer[at..].windows(2).position(|w| w == b"\r\n")? + at;
        Some((&buffer[at..end], end + 2))
    };
    let (header, mut at) = line(0)?;
    let count: usize = std::str::from_utf8(header.strip_prefix(b"*")?)
        .ok()?
        .parse()
        .ok()?;
    let mut name = None;
    for _ in 0..count {
        let (length, next) = line(at)?;
        let length: usize = std::str::from_utf8(length.strip_prefix(b"$")?)
            .ok()?
            .parse()
            .ok()?;
        let word = buffer.get(next..next + length)?;
        name.get_or_insert_with(|| String::from_utf8_lossy(word).to_ascii_uppercase());
        at = next + length + 2;
        if buffer.len() < at {
            return None;
        }
    }
    Some((name?, at))
}
