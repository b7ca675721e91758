//! turmoil's idle skipping (vendor/turmoil, vendor/tokio) is exact on its
//! own, without the lock: hosts whose tasks race at the same instant, wake
//! each other over the network and across runtimes, and sleep for odd
//! spans log the same events in the same order, at the same sim times,
//! with skipping off and on.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, UNIX_EPOCH},
};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use turmoil::net::{TcpListener, TcpStream};

type Log = Arc<Mutex<Vec<String>>>;

fn note(log: &Log, what: String) {
    let at = turmoil::sim_elapsed().unwrap_or_default();
    log.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(format!("{at:?} {what}"));
}

/// Many local tasks come due at the same instant, each waking a partner
/// through a channel, and a `Send` task on the runtime's own scheduler
/// comes due a little later.
async fn racer(log: Log, seed: u64) -> turmoil::Result {
    let mut round = 0u64;
    loop {
        round += 1;
        // Sleep a seed-dependent, odd span: many idle steps in between.
        let nap = 7 + (seed.wrapping_mul(31).wrapping_add(round * 13)) % 90;
        tokio::time::sleep(Duration::from_millis(nap)).await;
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<u64>();
        let wake_at = tokio::time::Instant::now() + Duration::from_millis(3);
        for task in 0..40u64 {
            let (log, sender) = (Arc::clone(&log), sender.clone());
            tokio::task::spawn_local(async move {
                tokio::time::sleep_until(wake_at).await;
                note(&log, format!("racer {round}: timer {task}"));
                let _ = sender.send(task);
            });
        }
        drop(sender);
        let partner_log = Arc::clone(&log);
        tokio::task::spawn_local(async move {
            while let Some(task) = receiver.recv().await {
                note(&partner_log, format!("racer {round}: partner saw {task}"));
            }
        })
        .await?;
        // A Send task on the runtime's own scheduler, woken by a timer.
        let log_send = format!("racer {round}: send task");
        let done = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            log_send
        })
        .await?;
        note(&log, done);
    }
}

async fn echo_server() -> turmoil::Result {
    let listener = TcpListener::bind(("0.0.0.0", 9000)).await?;
    loop {
        let (mut stream, _) = listener.accept().await?;
        tokio::task::spawn_local(async move {
            let mut buffer = [0u8; 64];
            while let Ok(read) = stream.read(&mut buffer).await {
                if read == 0 {
                    break;
                }
                // Answer after a pause: the server idles in between.
                tokio::time::sleep(Duration::from_millis(u64::from(buffer[0]) % 11)).await;
                if stream.write_all(&buffer[..read]).await.is_err() {
                    break;
                }
            }
        });
    }
}

/// Several connections, each read by a `Send` task on the runtime's own
/// scheduler: replies delivered in the same step wake them from outside the
/// runtime (its injection queue), and each wakes a collector from inside
/// (its local run queue). Which queue runs next depends on the scheduler's
/// fairness tick, which every idle step moves: a skip that moved it wrong
/// would reorder this log.
async fn pinger(log: Log, seed: u64) -> turmoil::Result {
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<(u64, u8)>();
    let collector_log = Arc::clone(&log);
    let collector = tokio::spawn(async move {
        while let Some((connection, byte)) = receiver.recv().await {
            note(
                &collector_log,
                format!("collector: {connection} got {byte}"),
            );
        }
    });
    let mut readers = Vec::new();
    for connection in 0..6u64 {
        let mut stream = loop {
            match TcpStream::connect(("server", 9000)).await {
                Ok(stream) => break stream,
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        };
        let (log, sender) = (Arc::clone(&log), sender.clone());
        readers.push(tokio::spawn(async move {
            for ping in 0..40u64 {
                // Every connection sends the same byte at once: the server
                // answers them all after the same pause.
                let byte = (seed.wrapping_add(ping * 7) % 251) as u8;
                if stream.write_all(&[byte]).await.is_err() {
                    return;
                }
                let mut answer = [0u8; 1];
                if stream.read_exact(&mut answer).await.is_err() {
                    return;
                }
                note(&log, format!("reader {connection} got {}", answer[0]));
                let _ = sender.send((connection, answer[0]));
                let nap = tokio::time::Instant::now() + Duration::from_millis(u64::from(byte) % 37);
                tokio::time::sleep_until(nap).await;
            }
        }));
    }
    drop(sender);
    for reader in readers {
        reader.await?;
    }
    collector.await?;
    Ok(())
}

fn run(seed: u64, skip_idle: bool) -> Vec<String> {
    let mut builder = turmoil::Builder::new();
    builder
        .rng_seed(seed)
        .epoch(UNIX_EPOCH)
        .tick_duration(Duration::from_millis(1))
        .simulation_duration(Duration::from_secs(30))
        .min_message_latency(Duration::ZERO)
        .max_message_latency(Duration::from_millis(3))
        .skip_idle(skip_idle);
    let mut sim = builder.build();
    let log: Log = Arc::default();
    sim.host("server", echo_server);
    let racer_log = Arc::clone(&log);
    sim.host("racer", move || racer(Arc::clone(&racer_log), seed));
    let pinger_log = Arc::clone(&log);
    sim.host("pinger", move || pinger(Arc::clone(&pinger_log), seed));
    let end = Duration::from_secs(3);
    while sim.elapsed() < end {
        let until = sim.idle_until().min(end);
        if until > sim.elapsed() {
            sim.skip_to(until).expect("within the duration");
        } else {
            sim.step().expect("the hosts run");
        }
    }
    let events = log.lock().unwrap_or_else(PoisonError::into_inner).clone();
    drop(sim);
    events
}

#[test]
fn idle_skipping_leaves_the_same_log_as_stepping() {
    for seed in 0..4 {
        let stepped = run(seed, false);
        let skipped = run(seed, true);
        assert!(
            stepped.len() > 500,
            "seed {seed}: only {} events",
            stepped.len()
        );
        if let Some(first) = stepped.iter().zip(&skipped).position(|(a, b)| a != b) {
            panic!(
                "seed {seed}: the logs part at event {first}: stepped {:?}, skipped {:?}",
                stepped.get(first),
                skipped.get(first)
            );
        }
        assert_eq!(stepped.len(), skipped.len(), "seed {seed}");
    }
}

#[test]
fn without_skipping_no_step_is_jumped() {
    let mut sim = turmoil::Builder::new().build();
    sim.host("idle", || async {
        std::future::pending::<()>().await;
        Ok(())
    });
    sim.step().expect("a step");
    assert_eq!(sim.idle_until(), sim.elapsed());
}
