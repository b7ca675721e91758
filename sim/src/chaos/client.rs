//! A client process of a real run (`sim chaos-client ARGS`): the
//! production adapter over real TCP, running the same workload as the
//! simulated client, writing every event it sees as a JSON line on stdout,
//! stamped with `CLOCK_MONOTONIC` at the moment it happens.
//!
//! It is a process of its own so that `SIGSTOP` freezes all of it at once:
//! its tasks, its connections, its watchdog. Every connection it opens,
//! whatever address a server names, goes through the controller's proxy
//! for this client's link to that port, so that partitions and latency
//! hit this client alone.

use std::{
    collections::BTreeMap,
    io::{BufRead, Write},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use lock_core::{
    Event, LockOptions, Locker, LockerBuilder, Observed, ReleaseOutcome,
    internal::{
        Clock, ConnectFuture, Connector, Dialer, Entropy, NodeAddress, OsEntropy, RedisStream,
    },
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::{
    plant::{Plant, client_scenario},
    wire::{ClientArgs, ClientCommand, ClientLine, Reach, mono_ns, since},
};
use crate::{
    client::{
        Attempt, Guard, KEY, acquire, client_host, lock_options, own_locks, stretch_waiter_ttl,
    },
    config::{DurationRange, FencingMode, WorkloadKind},
    history::{Op, Phase},
    rng::Rng,
};

/// The operating system's random bits, with tokens ending in the client's
/// name (`client-N:chaos`) instead of a pid and host: the checkers tell
/// whose key sits on Redis by its token (A1), as in the simulator, where
/// they end in `client-N:sim`.
struct NamedEntropy(String);

impl Entropy for NamedEntropy {
    fn owner_suffix(&self) -> &str {
        &self.0
    }

    fn next_u64(&self) -> u64 {
        OsEntropy.next_u64()
    }
}

/// How long a client takes between checking its lease and sending its
/// second write (as the simulated client).
const PREPARE: DurationRange = DurationRange {
    min: Duration::from_millis(10),
    max: Duration::from_millis(100),
};

/// How long after its release a `zombie-writes` client writes again.
const ZOMBIE_AFTER: Duration = Duration::from_millis(50);

/// How long after its release deleted the key a `late-release` client
/// records the release.
const LATE_RELEASE: Duration = Duration::from_millis(100);

/// How long a `redlock-every-node` client waits for each node's `PONG`.
const EVERY_NODE_TIMEOUT: Duration = Duration::from_millis(100);

/// How long a `redlock-every-node` client waits before it asks every node
/// again, when one did not answer.
const EVERY_NODE_RETRY: Duration = Duration::from_millis(50);

/// The client's clock: the machine's monotonic clock, with the drift and
/// steps the controller orders. `local(t) = base_local + (t − base_true)
/// × (1 + rate)`, all in ns since the epoch.
#[derive(Debug, Clone)]
struct DriftClock {
    model: Arc<Mutex<Model>>,
    /// An instant and its monotonic reading, to turn one into the other.
    origin: Instant,
    origin_mono: u64,
    epoch_ns: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Model {
    base_true: i128,
    base_local: i128,
    rate: f64,
}

impl Model {
    fn local_at(self, true_ns: i128) -> i128 {
        self.base_local + ((true_ns - self.base_true) as f64 * (1.0 + self.rate)).round() as i128
    }

    fn true_at(self, local_ns: i128) -> i128 {
        self.base_true + ((local_ns - self.base_local) as f64 / (1.0 + self.rate)).round() as i128
    }
}

impl DriftClock {
    fn new(epoch_ns: u64) -> Self {
        let origin = Instant::now();
        let origin_mono = mono_ns();
        Self {
            model: Arc::new(Mutex::new(Model::default())),
            origin,
            origin_mono,
            epoch_ns,
        }
    }

    fn model(&self) -> std::sync::MutexGuard<'_, Model> {
        self.model.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// True time now, ns since the epoch.
    fn true_now(&self) -> i128 {
        i128::from(mono_ns()) - i128::from(self.epoch_ns)
    }

    /// The local reading now, ns since the epoch.
    fn local_now(&self) -> i128 {
        self.model().local_at(self.true_now())
    }

    fn rebase(&self, change: impl FnOnce(&mut Model)) {
        let now = self.true_now();
        let mut model = self.model();
        let local = model.local_at(now);
        model.base_true = now;
        model.base_local = local;
        change(&mut model);
    }

    /// The instant the adapter sees for a local reading.
    fn instant_of(&self, local_ns: i128) -> Instant {
        let origin_local = i128::from(self.origin_mono) - i128::from(self.epoch_ns);
        let offset = local_ns - origin_local;
        if offset >= 0 {
            self.origin + Duration::from_nanos(offset as u64)
        } else {
            self.origin
                .checked_sub(Duration::from_nanos(offset.unsigned_abs() as u64))
                .unwrap_or(self.origin)
        }
    }

    /// The true time (since the epoch) at which the clock reads `instant`.
    fn true_time_of(&self, instant: Instant) -> Duration {
        let origin_local = i128::from(self.origin_mono) - i128::from(self.epoch_ns);
        let local = if instant >= self.origin {
            origin_local + instant.duration_since(self.origin).as_nanos() as i128
        } else {
            origin_local - self.origin.duration_since(instant).as_nanos() as i128
        };
        Duration::from_nanos(self.model().true_at(local).max(0) as u64)
    }
}

impl Clock for DriftClock {
    fn now(&self) -> Instant {
        self.instant_of(self.local_now())
    }
}

/// Dials through this client's proxies: a real port becomes the port of
/// the proxy of this client's link to it.
#[derive(Debug, Clone)]
struct LinkDialer {
    links: Arc<BTreeMap<u16, u16>>,
}

impl LinkDialer {
    async fn open(&self, port: u16) -> std::io::Result<Box<dyn RedisStream>> {
        let via = self.links.get(&port).copied().unwrap_or(port);
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", via)).await?;
        stream.set_nodelay(true)?;
        Ok(Box::new(stream) as Box<dyn RedisStream>)
    }
}

impl Dialer for LinkDialer {
    fn dial<'a>(&'a self, _host: &'a str, port: u16) -> ConnectFuture<'a> {
        Box::pin(self.open(port))
    }
}

/// Dials the node the controller names as primary (or a fixed node, for
/// Redlock).
struct PrimaryConnector {
    dialer: LinkDialer,
    nodes: Arc<Vec<u16>>,
    primary: Arc<AtomicUsize>,
    fixed: Option<usize>,
}

impl Connector for PrimaryConnector {
    fn connect(&self) -> ConnectFuture<'_> {
        let node = self
            .fixed
            .unwrap_or_else(|| self.primary.load(Ordering::SeqCst));
        let port = self.nodes.get(node).copied().unwrap_or(0);
        Box::pin(self.dialer.open(port))
    }
}

/// Writes history lines on stdout, one whole line at a time.
#[derive(Clone)]
struct Out {
    clock: DriftClock,
}

impl Out {
    fn record(&self, op: Op) {
        let line = ClientLine {
            mono: mono_ns(),
            local: Duration::from_nanos(self.clock.local_now().max(0) as u64),
            op,
        };
        let Ok(mut text) = serde_json::to_string(&line) else {
            return;
        };
        text.push('\n');
        let stdout = std::io::stdout();
        let mut stdout = stdout.lock();
        // The controller gone means the run is over: nothing to do.
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
    }
}

/// Runs the client process until it is killed. Returns an error only when
/// it could not start.
pub fn main(args_json: &str) -> Result<(), String> {
    let mut args: ClientArgs = serde_json::from_str(args_json)
        .map_err(|error| format!("bad client arguments: {error}"))?;
    // A planted client may run a workload other than the file's (the
    // controller's checkers keep the file's).
    args.scenario = client_scenario(&args.scenario, &args.plants);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start a runtime: {error}"))?;
    runtime.block_on(workload(args));
    Ok(())
}

/// A locker builder that reaches the deployment as `reach` says, through
/// `dialer`'s links (`primary`: the node a primary-replica client follows).
fn builder_for(reach: &Reach, dialer: &LinkDialer, primary: &Arc<AtomicUsize>) -> LockerBuilder {
    match reach {
        Reach::Primary { nodes, .. } => LockerBuilder::with_connector(PrimaryConnector {
            dialer: dialer.clone(),
            nodes: Arc::new(nodes.clone()),
            primary: Arc::clone(primary),
            fixed: None,
        }),
        Reach::Redlock { nodes } => {
            let shared = Arc::new(nodes.clone());
            LockerBuilder::redlock_with_connectors((0..nodes.len()).map(|node| PrimaryConnector {
                dialer: dialer.clone(),
                nodes: Arc::clone(&shared),
                primary: Arc::clone(primary),
                fixed: Some(node),
            }))
        }
        Reach::Sentinel { sentinels, master } => LockerBuilder::sentinel_with_dialer(
            dialer.clone(),
            sentinels
                .iter()
                .map(|port| NodeAddress::new("127.0.0.1", *port))
                .collect(),
            master,
        ),
        Reach::Cluster { nodes } => LockerBuilder::cluster_with_dialer(
            dialer.clone(),
            nodes
                .iter()
                .map(|port| NodeAddress::new("127.0.0.1", *port))
                .collect(),
        ),
    }
}

async fn workload(args: ClientArgs) {
    let clock = DriftClock::new(args.epoch_ns);
    let out = Out {
        clock: clock.clone(),
    };
    let dialer = LinkDialer {
        links: Arc::new(args.links.clone()),
    };
    let primary = Arc::new(AtomicUsize::new(match &args.reach {
        Reach::Primary { primary, .. } => *primary,
        _ => 0,
    }));
    let held = Held::default();
    listen_for_commands(
        Arc::clone(&primary),
        clock.clone(),
        out.clone(),
        held.clone(),
    );

    let attempt = Arc::new(Attempt::default());
    let late_lost = args.plants.contains(&Plant::LateLost);
    let ttl = args.scenario.lock.ttl;
    let observer = {
        let attempt = Arc::clone(&attempt);
        let out = out.clone();
        let clock = clock.clone();
        let held = held.clone();
        move |observed: &Observed<'_>| {
            if observed.key != KEY {
                return;
            }
            let token = observed.token.to_owned();
            match observed.event {
                Event::Acquired { valid_until, .. } | Event::Renewed { valid_until } => {
                    held.with(|map| map.insert(token.clone(), *valid_until));
                }
                Event::Lost { .. } | Event::Released { .. } => {
                    held.with(|map| map.remove(&token));
                }
                _ => {}
            }
            let Some(op) = attempt.history_op(
                observed,
                token,
                |valid_until| clock.true_time_of(valid_until),
                || since(clock.epoch_ns, mono_ns()),
            ) else {
                return;
            };
            // `late-lost`: the client learns of its loss a ttl late (the
            // record is stamped when it is written).
            if late_lost && matches!(op, Op::Lost { .. }) {
                let out = out.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(ttl).await;
                    out.record(op);
                });
                return;
            }
            out.record(op);
        }
    };
    let scenario = &args.scenario;
    let mut opts = lock_options(&scenario.lock);
    if scenario.clients.workload.kind == WorkloadKind::Fair {
        opts = opts.fair();
        // `stretched-waiter-ttl`: the client's place outlives the waiter
        // ttl the checker holds it to (the file's).
        if args.plants.contains(&Plant::StretchedWaiterTtl) {
            opts = stretch_waiter_ttl(opts);
        }
    }
    let (locker, driver) = loop {
        let builder = builder_for(&args.reach, &dialer, &primary);
        let builder = builder
            .clock(clock.clone())
            .entropy(NamedEntropy(format!("{}:chaos", client_host(args.index))))
            .connect_timeout(scenario.lock.ttl)
            .observer(observer.clone());
        match builder.connect().await {
            Ok(pair) => break pair,
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    // The client's own locks (`clients.locks` > 1) share the contended
    // lock's locker, so their operations meet in its batches; the
    // observer records the contended lock's events alone, as the
    // simulator's does.
    let own_locks = own_locks(&locker, &opts, scenario, args.index, args.seed);
    let work = futures_util::future::join(
        cycle(&locker, &opts, &args, &dialer, &out, &attempt),
        own_locks,
    );
    tokio::select! {
        biased;
        () = driver => {}
        _ = work => {}
    }
}

/// Acquire, write, hold, write, release, think: forever. Readers and
/// semaphore holders share the resource, so only an exclusive hold writes
/// to the storage, as in the simulated client.
async fn cycle(
    locker: &Locker,
    opts: &LockOptions,
    args: &ClientArgs,
    dialer: &LinkDialer,
    out: &Out,
    attempt: &Attempt,
) {
    let scenario = &args.scenario;
    let mut rng = Rng::new(args.seed ^ 0x5EED_C11E);
    let timeout = scenario.lock.ttl;
    let mut seq = 0u64;
    let mut next_value = || {
        seq += 1;
        (args.index as u64) << 32 | seq
    };
    let workload = scenario.clients.workload;
    let planted = |plant| args.plants.contains(&plant);
    loop {
        // `redlock-every-node`: no acquire unless every node answers.
        if planted(Plant::RedlockEveryNode)
            && !every_node_answers(dialer, &args.reach, EVERY_NODE_TIMEOUT).await
        {
            tokio::time::sleep(EVERY_NODE_RETRY).await;
            continue;
        }
        let reading = workload.kind == WorkloadKind::ReadWrite && rng.chance(workload.read_share);
        attempt.reading.store(reading, Ordering::Relaxed);
        attempt.waiting.store(false, Ordering::Relaxed);
        out.record(Op::AcquireInvoke);
        // `write-as-read`: a writer takes a read lock, and the history
        // (from `attempt.reading`) says it believes the hold exclusive.
        let take_read = reading || planted(Plant::WriteAsRead);
        let Some(acquired) = acquire(locker, opts, scenario, take_read, &mut rng).await else {
            out.record(Op::AcquireCancel);
            tokio::time::sleep(rng.duration(scenario.clients.think)).await;
            continue;
        };
        let Ok(guard) = acquired else {
            if planted(Plant::GiveUpOnFailure) {
                // The worker's loop ends at its first failed acquire; the
                // process lives on, idle, until the run kills it.
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(rng.duration(scenario.clients.think)).await;
            continue;
        };
        let token = guard.token().to_owned();
        // `fencing = "none"`: the client sends no fence (the plain lock
        // issues 0 then; the family's kinds always issue one).
        let fence = guard
            .fence()
            .filter(|_| workload.kind != WorkloadKind::Semaphore)
            .map(|fence| {
                if scenario.lock.fencing == FencingMode::None {
                    0
                } else {
                    fence
                }
            });
        let write = |value| {
            fenced_write(
                out,
                dialer,
                args.storage,
                &token,
                fence.unwrap_or(0),
                value,
                timeout,
            )
        };
        if fence.is_some() {
            write(next_value()).await;
            if scenario.clients.unfenced_register {
                plain_write(out, dialer, args.storage, &token, timeout).await;
            }
        }
        let hold = rng.duration(scenario.clients.hold);
        tokio::select! {
            biased;
            _ = guard.lost() => {}
            () = tokio::time::sleep(hold) => {
                if guard.is_held() && fence.is_some() {
                    tokio::time::sleep(rng.duration(PREPARE)).await;
                    write(next_value()).await;
                    if scenario.clients.unfenced_register {
                        plain_write(out, dialer, args.storage, &token, timeout).await;
                    }
                }
            }
        }
        end_hold(guard, &token, args, &mut rng, out, dialer).await;
        if planted(Plant::ZombieWrites) && fence.is_some() {
            tokio::time::sleep(ZOMBIE_AFTER).await;
            write(next_value()).await;
        }
        tokio::time::sleep(rng.duration(scenario.clients.think)).await;
    }
}

/// Ends a hold of `guard` (token `token`) as the client's plants and the
/// file's `drop_guard` chance say: released (or, planted, released late,
/// without the owner check, or never), or the guard dropped.
async fn end_hold(
    guard: Guard,
    token: &str,
    args: &ClientArgs,
    rng: &mut Rng,
    out: &Out,
    dialer: &LinkDialer,
) {
    let planted = |plant| args.plants.contains(&plant);
    let scenario = &args.scenario;
    let timeout = scenario.lock.ttl;
    if planted(Plant::NeverRelease) {
        // The client says it is done and never releases: the guard's
        // renewals go on (forgotten, it is never dropped).
        out.record(Op::ReleaseInvoke {
            token: token.to_owned(),
        });
        std::mem::forget(guard);
    } else if rng.chance(scenario.clients.drop_guard) {
        out.record(Op::GuardDropped {
            token: token.to_owned(),
        });
        drop(guard);
    } else if planted(Plant::SkipOwnerCheck) {
        release_without_owner_check(guard, token, out, dialer, &args.reach, timeout).await;
    } else if planted(Plant::LateRelease) {
        // The client goes on as if it held after its key is gone.
        let _ = guard.release().await;
        tokio::time::sleep(LATE_RELEASE).await;
        out.record(Op::ReleaseInvoke {
            token: token.to_owned(),
        });
    } else {
        out.record(Op::ReleaseInvoke {
            token: token.to_owned(),
        });
        let _ = guard.release().await;
    }
}

/// The deadlines this client holds, on its own clock, by token: a clock
/// change moves where they fall in true time, which the history must say
/// (`Deadline`), as the simulator's world does.
#[derive(Debug, Clone, Default)]
struct Held(Arc<Mutex<BTreeMap<String, Instant>>>);

impl Held {
    fn with<T>(&self, f: impl FnOnce(&mut BTreeMap<String, Instant>) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Reads the controller's commands from stdin on a thread of its own.
fn listen_for_commands(primary: Arc<AtomicUsize>, clock: DriftClock, out: Out, held: Held) {
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { return };
            match serde_json::from_str::<ClientCommand>(&line) {
                Ok(ClientCommand::Primary { node }) => primary.store(node, Ordering::SeqCst),
                Ok(ClientCommand::Drift { rate }) => {
                    clock.rebase(|model| model.rate = rate);
                    remap(&clock, &out, &held);
                }
                Ok(ClientCommand::Jump { ns }) => {
                    clock.rebase(|model| model.base_local += i128::from(ns));
                    remap(&clock, &out, &held);
                }
                Err(_) => {}
            }
        }
    });
}

/// Records where each held deadline falls in true time after a clock change.
fn remap(clock: &DriftClock, out: &Out, held: &Held) {
    for (token, deadline) in held.with(|map| map.clone()) {
        out.record(Op::Deadline {
            token,
            valid_until: clock.true_time_of(deadline),
        });
    }
}

/// `skip-owner-check`'s release of `guard` (token `token`): a plain `DEL`
/// ([`plain_delete`]), its outcome recorded as lock-core's would be.
async fn release_without_owner_check(
    guard: Guard,
    token: &str,
    out: &Out,
    dialer: &LinkDialer,
    reach: &Reach,
    timeout: Duration,
) {
    out.record(Op::ReleaseInvoke {
        token: token.to_owned(),
    });
    let outcome = match plain_delete(dialer, reach, timeout).await {
        Some(true) => ReleaseOutcome::Deleted,
        Some(false) => ReleaseOutcome::NotOwner,
        None => ReleaseOutcome::Unknown,
    };
    out.record(Op::ReleaseOk {
        token: token.to_owned(),
        outcome: format!("{outcome:?}"),
    });
    // Its own release now finds the key gone or another's, and leaves it
    // (its outcome is recorded too: `NotOwner`).
    drop(guard);
}

/// `skip-owner-check`'s delete: a plain `DEL` of the lock key on the
/// primary at start (the plant is refused where there is none), whoever
/// owns it. Whether it deleted a key; `None` without an answer in time.
async fn plain_delete(dialer: &LinkDialer, reach: &Reach, timeout: Duration) -> Option<bool> {
    let Reach::Primary { nodes, primary } = reach else {
        return None;
    };
    let port = *nodes.get(*primary)?;
    let key = crate::client::key_names().lock;
    let exchange = async {
        let stream = dialer.open(port).await.ok()?;
        let (read, mut write) = tokio::io::split(stream);
        let command = format!("*2\r\n$3\r\nDEL\r\n${}\r\n{key}\r\n", key.len());
        write.write_all(command.as_bytes()).await.ok()?;
        let mut answer = String::new();
        BufReader::new(read).read_line(&mut answer).await.ok()?;
        Some(answer.trim() == ":1")
    };
    tokio::time::timeout(timeout, exchange).await.ok().flatten()
}

/// `redlock-every-node`'s health check: whether every node of a Redlock
/// answers a `PING` within `timeout`, each through this client's link to
/// it (a node cut off from this client does not). Outside Redlock, true.
async fn every_node_answers(dialer: &LinkDialer, reach: &Reach, timeout: Duration) -> bool {
    let Reach::Redlock { nodes } = reach else {
        return true;
    };
    let ping = |port: u16| async move {
        let exchange = async {
            let stream = dialer.open(port).await.ok()?;
            let (read, mut write) = tokio::io::split(stream);
            write.write_all(b"*1\r\n$4\r\nPING\r\n").await.ok()?;
            let mut answer = String::new();
            BufReader::new(read).read_line(&mut answer).await.ok()?;
            Some(answer.trim() == "+PONG")
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .ok()
            .flatten()
            .unwrap_or(false)
    };
    futures_util::future::join_all(nodes.iter().map(|&port| ping(port)))
        .await
        .into_iter()
        .all(|answered| answered)
}

/// One request to the storage; `None` when it got no answer in time.
async fn storage_request(
    dialer: &LinkDialer,
    storage: u16,
    line: &str,
    timeout: Duration,
) -> Option<String> {
    let exchange = async {
        let stream = dialer.open(storage).await.ok()?;
        let (read, mut write) = tokio::io::split(stream);
        write.write_all(line.as_bytes()).await.ok()?;
        write.write_all(b"\n").await.ok()?;
        let mut answer = String::new();
        BufReader::new(read).read_line(&mut answer).await.ok()?;
        Some(answer.trim().to_owned())
    };
    tokio::time::timeout(timeout, exchange).await.ok().flatten()
}

async fn fenced_write(
    out: &Out,
    dialer: &LinkDialer,
    storage: u16,
    token: &str,
    fence: u64,
    value: u64,
    timeout: Duration,
) {
    let token = token.to_owned();
    out.record(Op::WriteInvoke {
        token: token.clone(),
        fence,
        value,
    });
    let answer = storage_request(
        dialer,
        storage,
        &format!("F {token} {fence} {value}"),
        timeout,
    )
    .await;
    out.record(match answer.as_deref() {
        Some("1") => Op::WriteOk {
            token,
            fence,
            value,
            accepted: true,
        },
        Some("0") => Op::WriteOk {
            token,
            fence,
            value,
            accepted: false,
        },
        _ => Op::WriteInfo {
            token,
            fence,
            value,
        },
    });
}

async fn plain_write(out: &Out, dialer: &LinkDialer, storage: u16, token: &str, timeout: Duration) {
    out.record(Op::RegisterWrite {
        token: token.to_owned(),
        phase: Phase::Start,
    });
    let _ = storage_request(dialer, storage, &format!("P {token} 0"), timeout).await;
    out.record(Op::RegisterWrite {
        token: token.to_owned(),
        phase: Phase::End,
    });
}
