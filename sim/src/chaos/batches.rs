//! Group commit seen on real servers: whether a call of the lock script
//! carried several operations, the simulator's fact `batched-script-call`
//! (which its nodes count as they run each call), read here from
//! `MONITOR` on every node of the deployment.
//!
//! Only runs whose clients hold several locks (`clients.locks` > 1) watch:
//! `MONITOR` costs a server some of its speed, and the watch ends at the
//! first batched call it sees.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    net::TcpStream,
    task::JoinHandle,
};

use crate::server::scripts;

/// A watch over every node for a batched call of the lock script.
pub(super) struct BatchWatch {
    seen: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<()>>,
}

impl BatchWatch {
    /// Starts watching the nodes listening on `ports` (through direct
    /// connections, which no fault cuts; a node that restarts is watched
    /// again once it answers).
    pub(super) fn start(ports: &[u16]) -> Self {
        let seen = Arc::new(AtomicBool::new(false));
        let tasks = ports
            .iter()
            .map(|&port| tokio::spawn(watch_node(port, Arc::clone(&seen))))
            .collect();
        Self { seen, tasks }
    }

    /// Stops watching; whether a batched call was seen.
    pub(super) fn finish(self) -> bool {
        for task in &self.tasks {
            task.abort();
        }
        self.seen.load(Ordering::Relaxed)
    }
}

/// Reads `MONITOR` on the node at `port` until a batched call is seen (by
/// this watch or another node's), reconnecting while the node is down.
async fn watch_node(port: u16, seen: Arc<AtomicBool>) {
    while !seen.load(Ordering::Relaxed) {
        if monitor(port, &seen).await.is_err() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// One `MONITOR` connection, read until it closes or a batched call shows.
async fn monitor(port: u16, seen: &AtomicBool) -> std::io::Result<()> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
    stream.write_all(b"MONITOR\r\n").await?;
    let mut lines = BufReader::new(stream).lines();
    while let Some(line) = lines.next_line().await? {
        if batched(&line) {
            seen.store(true, Ordering::Relaxed);
            return Ok(());
        }
    }
    Err(std::io::ErrorKind::UnexpectedEof.into())
}

/// Whether one `MONITOR` line (`+TIME [DB ADDRESS] "CMD" "ARG" …`) is a
/// call of the lock script with more than one operation, counted as the
/// simulator's node counts them.
fn batched(line: &str) -> bool {
    let Some(at) = line.find("] ") else {
        return false;
    };
    let args = quoted_args(&line[at + 2..]);
    let [command, script, numkeys, rest @ ..] = args.as_slice() else {
        return false;
    };
    let script = match command.to_ascii_uppercase().as_slice() {
        b"EVALSHA" => std::str::from_utf8(script).ok().and_then(scripts::known),
        b"EVAL" => lock_core::scripts::ALL
            .into_iter()
            .find(|known| known.source.as_bytes() == script.as_slice()),
        _ => None,
    };
    let Some(script) = script else {
        return false;
    };
    let Some(numkeys) = std::str::from_utf8(numkeys)
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
    else {
        return false;
    };
    rest.get(numkeys..)
        .is_some_and(|argv| scripts::operations(script, argv) > 1)
}

/// The arguments of a `MONITOR` line, each a double-quoted string with
/// Redis's escapes (`\"`, `\\`, `\n`, `\r`, `\t`, `\a`, `\b`, `\xHH`).
fn quoted_args(text: &str) -> Vec<Vec<u8>> {
    let mut args = Vec::new();
    let mut bytes = text.bytes();
    while let Some(byte) = bytes.next() {
        if byte != b'"' {
            continue;
        }
        let mut arg = Vec::new();
        while let Some(byte) = bytes.next() {
            match byte {
                b'"' => break,
                b'\\' => match bytes.next() {
                    Some(b'n') => arg.push(b'\n'),
                    Some(b'r') => arg.push(b'\r'),
                    Some(b't') => arg.push(b'\t'),
                    Some(b'a') => arg.push(0x07),
                    Some(b'b') => arg.push(0x08),
                    Some(b'x') => {
                        let hex = [bytes.next().unwrap_or(b'0'), bytes.next().unwrap_or(b'0')];
                        let value = std::str::from_utf8(&hex)
                            .ok()
                            .and_then(|h| u8::from_str_radix(h, 16).ok());
                        arg.push(value.unwrap_or(b'?'));
                    }
                    Some(other) => arg.push(other),
                    None => break,
                },
                other => arg.push(other),
            }
        }
        args.push(arg);
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(args: &[&str]) -> String {
        let quoted: Vec<String> = args.iter().map(|a| format!("\"{a}\"")).collect();
        format!(
            "+1764280000.123456 [0 127.0.0.1:41234] {}",
            quoted.join(" ")
        )
    }

    #[test]
    fn a_lock_script_call_with_two_operations_is_batched_and_one_is_not() {
        let sha = lock_core::scripts::LOCK.sha1;
        // Two keys per lock (the lock and its fence floor), then one
        // operation's code and two arguments per lock.
        let two = line(&[
            "EVALSHA",
            sha,
            "4",
            "{lock:resource}",
            "{lock:resource}:f",
            "{lock:resource}:own-0-1}",
            "{lock:resource}:f",
            "n",
            "tok-a",
            "1000",
            "n",
            "tok-b",
            "1000",
        ]);
        assert!(batched(&two));
        let one = line(&[
            "EVALSHA",
            sha,
            "2",
            "{lock:resource}",
            "{lock:resource}:f",
            "r",
            "tok-a",
            "1000",
        ]);
        assert!(!batched(&one));
        // Not the lock script, not a script, not a command line at all.
        assert!(!batched(&two.replace(sha, &"0".repeat(40))));
        assert!(!batched(&line(&["GET", "{lock:resource}"])));
        assert!(!batched("+OK"));
    }

    #[test]
    fn quoted_args_undo_redis_escapes() {
        let args = quoted_args(r#""a\"b" "c\\d" "\x41\n" """#);
        assert_eq!(
            args,
            vec![
                b"a\"b".to_vec(),
                b"c\\d".to_vec(),
                b"A\n".to_vec(),
                Vec::new()
            ]
        );
    }
}
