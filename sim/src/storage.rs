//! The fenced resource: a storage host that accepts a write iff its fence is
//! at least the highest fence it has accepted, plus an unfenced register
//! that accepts everything (to show what fencing prevents).
//!
//! The protocol is one line per request over turmoil TCP:
//! `F <token> <fence> <value>` answers `1` (accepted) or `0` (rejected);
//! `P <token> <value>` (the plain register) always answers `1`.

use std::{cell::RefCell, rc::Rc, time::Duration};

use crate::{
    clock,
    history::{Op, Phase, Process, Recorder},
};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use turmoil::net::{TcpListener, TcpStream};

/// The storage host's name.
pub const HOST: &str = "storage";
/// The storage port.
pub const PORT: u16 = 7000;

/// The highest fence accepted so far, shared across connections.
#[derive(Debug, Default)]
struct Fenced {
    highest: Option<u64>,
}

/// Runs the storage host until the simulation ends, recording every
/// decision it makes (in its own order, which is what S4 checks).
pub async fn serve(recorder: Recorder) -> turmoil::Result {
    let listener = TcpListener::bind(("0.0.0.0", PORT)).await?;
    let state = Rc::new(RefCell::new(Fenced::default()));
    loop {
        let (stream, _) = listener.accept().await?;
        let state = Rc::clone(&state);
        let recorder = recorder.clone();
        tokio::task::spawn_local(async move {
            // A connection that breaks mid-request just ends.
            let _ = handle(stream, state, recorder).await;
        });
    }
}

async fn handle(
    stream: TcpStream,
    state: Rc<RefCell<Fenced>>,
    recorder: Recorder,
) -> std::io::Result<()> {
    let record = |op| {
        let now = clock::now();
        recorder.record(now, now, Process::Storage, op);
    };
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Some(line) = lines.next_line().await? {
        let mut words = line.split_whitespace();
        let answer = match (words.next(), words.next(), words.next(), words.next()) {
            (Some("F"), Some(token), Some(fence), Some(value)) => {
                match (fence.parse::<u64>(), value.parse::<u64>()) {
                    (Ok(fence), Ok(value)) => {
                        let mut state = state.borrow_mut();
                        let accepted = state.highest.is_none_or(|highest| fence >= highest);
                        if accepted {
                            state.highest = Some(fence);
                        }
                        record(Op::WriteOk {
                            token: token.to_owned(),
                            fence,
                            value,
                            accepted,
                        });
                        if accepted { "1\n" } else { "0\n" }
                    }
                    _ => "E\n",
                }
            }
            (Some("P"), Some(token), Some(_value), None) => {
                record(Op::RegisterWrite {
                    token: token.to_owned(),
                    phase: Phase::End,
                });
                "1\n"
            }
            _ => "E\n",
        };
        write.write_all(answer.as_bytes()).await?;
    }
    Ok(())
}

/// A write's fate as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteResult {
    /// Storage accepted it.
    Accepted,
    /// Storage refused it: a higher fence had been accepted.
    Rejected,
    /// No answer within the timeout.
    Unknown,
}

/// Sends one request on a fresh connection and waits up to `timeout`.
pub async fn request(line: &str, timeout: Duration) -> WriteResult {
    let exchange = async {
        let stream = TcpStream::connect((HOST, PORT)).await.ok()?;
        let (read, mut write) = stream.into_split();
        write.write_all(line.as_bytes()).await.ok()?;
        write.write_all(b"\n").await.ok()?;
        let mut answer = String::new();
        BufReader::new(read).read_line(&mut answer).await.ok()?;
        match answer.trim() {
            "1" => Some(WriteResult::Accepted),
            "0" => Some(WriteResult::Rejected),
            _ => None,
        }
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .ok()
        .flatten()
        .unwrap_or(WriteResult::Unknown)
}
