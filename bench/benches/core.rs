//! The sans-IO machine's own cost per lock cycle, with no I/O at all: what
//! the lock adds on top of the Redis round trips.
#![warn(clippy::too_many_lines)]

use std::{
    hint::black_box,
    time::{Duration, Instant},
};

use bench::api::{Command, LockMachine, LockOptions, Machine, Reply};
use criterion::{Criterion, criterion_group, criterion_main};

fn cycle(opts: &LockOptions, t0: Instant) -> usize {
    let mut machine = LockMachine::new(opts, "orders:42", "token".into(), 1).expect("valid");
    let mut commands = 0;
    machine.acquire(t0).expect("idle");
    let (id, _) = machine.poll_command().expect("acquire");
    machine.handle_reply(
        t0,
        id,
        Reply::Granted {
            fence: 1,
            replicas: None,
            aof: None,
        },
    );
    while machine.poll_event().is_some() {}
    // One renewal.
    let at = machine.poll_timeout().expect("renewal timer");
    machine.handle_timeout(at);
    if let Some((id, Command::Renew { .. })) = machine.poll_command() {
        machine.handle_reply(
            at,
            id,
            Reply::Renewed {
                replicas: None,
                aof: None,
            },
        );
        commands += 1;
    }
    while machine.poll_event().is_some() {}
    machine.release(at);
    if let Some((id, _)) = machine.poll_command() {
        machine.handle_reply(at, id, Reply::Released);
        commands += 1;
    }
    while machine.poll_event().is_some() {}
    commands + 1
}

fn machine(c: &mut Criterion) {
    let opts = LockOptions::new(Duration::from_secs(30));
    let t0 = Instant::now();
    c.bench_function("machine: acquire, renew, release (no I/O)", |b| {
        b.iter(|| black_box(cycle(black_box(&opts), t0)))
    });
}

criterion_group!(benches, machine);
criterion_main!(benches);
