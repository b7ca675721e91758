//! The fenced storage a real run's clients write to.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt},
    net::TcpListener,
};

use super::recorder::Recorder;
use crate::history::{Op, Phase, Process};

/// The fenced storage: accepts a write iff its fence is at least the
/// highest accepted, recording each decision when it is made; with
/// `ignores_fences` (the planted bug `storage-ignores-fences`), every
/// write.
pub(super) async fn serve_storage(listener: TcpListener, recorder: Recorder, ignores_fences: bool) {
    let highest: Arc<Mutex<Option<u64>>> = Arc::default();
    while let Ok((stream, _)) = listener.accept().await {
        let recorder = recorder.clone();
        let highest = Arc::clone(&highest);
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut lines = tokio::io::BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let words: Vec<&str> = line.split_whitespace().collect();
                let answer = match words.as_slice() {
                    ["F", token, fence, value] => {
                        match (fence.parse::<u64>(), value.parse::<u64>()) {
                            (Ok(fence), Ok(value)) => {
                                let accepted = {
                                    let mut highest =
                                        highest.lock().unwrap_or_else(PoisonError::into_inner);
                                    let accepted =
                                        ignores_fences || highest.is_none_or(|h| fence >= h);
                                    if accepted && highest.is_none_or(|h| fence >= h) {
                                        *highest = Some(fence);
                                    }
                                    accepted
                                };
                                recorder.record(
                                    Process::Storage,
                                    Op::WriteOk {
                                        token: (*token).to_owned(),
                                        fence,
                                        value,
                                        accepted,
                                    },
                                );
                                if accepted { "1\n" } else { "0\n" }
                            }
                            _ => "E\n",
                        }
                    }
                    ["P", token, _] => {
                        recorder.record(
                            Process::Storage,
                            Op::RegisterWrite {
                                token: (*token).to_owned(),
                                phase: Phase::End,
                            },
                        );
                        "1\n"
                    }
                    _ => "E\n",
                };
                if write.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
    }
}
