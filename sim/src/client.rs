//! A simulated client: the production lock adapter, unchanged, over
//! turmoil's TCP, running a workload that writes to the fenced storage
//! inside its critical sections.
//!
//! The adapter sees three injected things and nothing else: a connector
//! that dials the current primary (like a Sentinel-aware client; in the
//! Sentinel topology, a dialer, and lock-core's own Sentinel mode asks the
//! simulated sentinels; in a cluster, the same dialer, and lock-core's
//! Cluster mode routes by slot), a [`SimClock`] with this client's drift,
//! and entropy from the seed.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use lock_core::{
    AcquireError, Event, Fencing, LockGuard, LockOptions, Locker, LockerBuilder, LostReason,
    Observed, ReadGuard, ReleaseError,
    internal::{ConnectFuture, Connector, Dialer, Driver, Entropy, NodeAddress, RedisStream},
};

use crate::{
    clock::{self, ClockControl, SimClock},
    config::{DurationRange, FencingMode, LockConfig, Scenario, Topology, WorkloadKind},
    freeze::{FreezeSwitch, Frozen},
    history::{Op, Phase, Process, Recorder},
    net::BASE_LATENCY,
    rng::Rng,
    server::sentinel::{MASTER_NAME, SENTINEL_PORT, sentinel_host},
    storage::{self, WriteResult},
};

/// How long a client takes between checking its lease and sending its
/// second write.
const PREPARE: DurationRange = DurationRange {
    min: Duration::from_millis(10),
    max: Duration::from_millis(100),
};

/// The key every client contends for.
pub const KEY: &str = "resource";

/// The namespace the clients' locks live in: lock-core's default, which
/// the clients keep.
pub const NAMESPACE: &str = "lock";

/// The Redis names of the lock every client contends for, as the adapter
/// derives them ([`KeyNames`](lock_core::scripts::KeyNames)): the one place
/// the simulator, the chaos mode and the checkers read them from.
pub fn key_names() -> lock_core::scripts::KeyNames {
    lock_core::scripts::KeyNames::new(NAMESPACE, KEY)
}

/// The deadlines a client holds, on its own clock (offsets from its
/// clock's origin), by token: the world reads them when it changes the
/// client's clock, to record where they now fall in true time.
#[derive(Debug, Clone, Default)]
pub struct Deadlines(Arc<Mutex<BTreeMap<String, Duration>>>);

impl Deadlines {
    fn with<T>(&self, f: impl FnOnce(&mut BTreeMap<String, Duration>) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The held tokens and their local deadlines, in token order.
    pub fn held(&self) -> Vec<(String, Duration)> {
        self.with(|held| held.iter().map(|(t, d)| (t.clone(), *d)).collect())
    }
}

/// Which Redis node clients should talk to, like a Sentinel's answer.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    primary: Arc<Mutex<usize>>,
}

impl Discovery {
    /// The node clients dial now.
    pub fn primary(&self) -> usize {
        *self.primary.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Points clients at `node` from their next connection on.
    pub fn set_primary(&self, node: usize) {
        *self.primary.lock().unwrap_or_else(PoisonError::into_inner) = node;
    }
}

/// The Redis port every simulated node listens on.
pub const REDIS_PORT: u16 = 6379;

pub use crate::net::redis_host;

/// The name of client `index`.
pub fn client_host(index: usize) -> String {
    format!("client-{index}")
}

/// The seed of client `index`'s randomness in seed `seed` of a run: the
/// simulated client and the chaos mode's real one draw the same workload
/// from it.
pub fn client_seed(seed: u64, index: usize) -> u64 {
    Rng::fork(seed, 0xC11E + index as u64).next_u64()
}

/// Connects to the node discovery names as primary, or, for a Redlock
/// node, always to the same node.
struct SimConnector {
    discovery: Discovery,
    node: Option<usize>,
}

impl Connector for SimConnector {
    fn connect(&self) -> ConnectFuture<'_> {
        let host = redis_host(self.node.unwrap_or_else(|| self.discovery.primary()));
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect((host.as_str(), REDIS_PORT)).await?;
            Ok(Box::new(stream) as Box<dyn RedisStream>)
        })
    }
}

/// Dials any simulated host by name: lock-core's Sentinel mode reaches the
/// sentinels, and the nodes they name, through it, and its Cluster mode
/// the nodes the slot table and redirections name.
struct SimDialer;

impl Dialer for SimDialer {
    fn dial<'a>(&'a self, host: &'a str, port: u16) -> ConnectFuture<'a> {
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect((host, port)).await?;
            Ok(Box::new(stream) as Box<dyn RedisStream>)
        })
    }
}

/// splitmix64 from the seed: tokens and jitter replay exactly. Tokens end
/// in the client's name instead of a pid and host, which differ per run.
struct SeededEntropy(AtomicU64, String);

impl Entropy for SeededEntropy {
    fn owner_suffix(&self) -> &str {
        &self.1
    }

    fn next_u64(&self) -> u64 {
        let mut z = self
            .0
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Everything one client needs, built by the world.
#[derive(Clone)]
pub struct ClientSetup {
    /// The client's index.
    pub index: usize,
    /// The scenario (for lock options and workload ranges).
    pub scenario: Arc<Scenario>,
    /// The seed of this client's randomness.
    pub seed: u64,
    /// Where the history goes.
    pub recorder: Recorder,
    /// The client's clock model.
    pub clock: ClockControl,
    /// Which node is primary.
    pub discovery: Discovery,
    /// Test-only: count validity from the reply instead of the send.
    pub broken_validity: bool,
    /// Test-only: a fair waiter's place lasts ten times the waiter ttl.
    pub stretched_waiter_ttl: bool,
    /// Where the client keeps its deadlines for the world.
    pub deadlines: Deadlines,
}

/// The lock options a scenario asks for.
pub fn lock_options(lock: &LockConfig) -> LockOptions {
    let mut opts = LockOptions::new(lock.ttl)
        .drift_factor(lock.drift_factor)
        .fencing(match lock.fencing {
            FencingMode::None => Fencing::None,
            FencingMode::Counter => Fencing::Counter,
            FencingMode::TimeMixed => Fencing::TimeMixed,
        })
        .wait(lock.wait.unwrap_or(lock.ttl * 2));
    if let Some(every) = lock.renew_every {
        opts = opts.renew_every(every);
    }
    let renew_every = lock.renew_every.unwrap_or(lock.ttl / 3);
    if lock.wait_replicas > 0 {
        opts = opts.wait_replicas(lock.wait_replicas, renew_every / 4);
    }
    if let Some((local, replicas)) = lock.wait_aof {
        // Three quarters of the command timeout (half a renewal period),
        // or what WAIT leaves of it: at ttl 1 s, 125 ms, above the 100 ms
        // a WAITAOF may wait for the server's next fsync.
        let timeout = if lock.wait_replicas > 0 {
            renew_every / 8
        } else {
            renew_every * 3 / 8
        };
        opts = opts.wait_aof(local, replicas, timeout);
    }
    opts
}

/// `opts` with a fair waiter's place lasting ten times its waiter ttl: the
/// broken fair client of the simulator's test-only `stretched_waiter_ttl`
/// and of the chaos mode's `--plant stretched-waiter-ttl`, whose server
/// keeps a paused or dead waiter's place that much longer than the
/// checker (F4) allows.
pub(crate) fn stretch_waiter_ttl(opts: LockOptions) -> LockOptions {
    let stretched = opts.effective_waiter_ttl() * 10;
    opts.waiter_ttl(stretched)
}

/// A hold of the contended lock, of whichever kind the workload takes
/// (the simulator's clients and the chaos mode's real ones both hold it).
pub(crate) enum Guard {
    /// A plain or fair lock's, a writer's or a semaphore permit's.
    Lock(LockGuard),
    /// A reader's.
    Read(ReadGuard),
}

impl Guard {
    /// Acquires the contended lock as the workload's kind says (`reading`:
    /// a read-write workload's reader).
    pub(crate) async fn acquire(
        locker: &Locker,
        opts: &LockOptions,
        scenario: &Scenario,
        reading: bool,
    ) -> Result<Self, AcquireError> {
        let workload = scenario.clients.workload;
        match workload.kind {
            WorkloadKind::Mutex | WorkloadKind::Fair => {
                locker.acquire(KEY, opts).await.map(Self::Lock)
            }
            WorkloadKind::ReadWrite if reading => {
                locker.acquire_read(KEY, opts).await.map(Self::Read)
            }
            WorkloadKind::ReadWrite => locker.acquire_write(KEY, opts).await.map(Self::Lock),
            WorkloadKind::Semaphore => locker
                .acquire_permit(KEY, workload.permits, opts)
                .await
                .map(Self::Lock),
        }
    }

    pub(crate) fn token(&self) -> &str {
        match self {
            Self::Lock(guard) => guard.token(),
            Self::Read(guard) => guard.token(),
        }
    }

    /// The fence, for the holds that write (a reader has none).
    pub(crate) fn fence(&self) -> Option<u64> {
        match self {
            Self::Lock(guard) => Some(guard.fence()),
            Self::Read(_) => None,
        }
    }

    pub(crate) fn is_held(&self) -> bool {
        match self {
            Self::Lock(guard) => guard.is_held(),
            Self::Read(guard) => guard.is_held(),
        }
    }

    pub(crate) async fn lost(&self) -> LostReason {
        match self {
            Self::Lock(guard) => guard.lost().await,
            Self::Read(guard) => guard.lost().await,
        }
    }

    pub(crate) async fn release(self) -> Result<(), ReleaseError> {
        match self {
            Self::Lock(guard) => guard.release().await,
            Self::Read(guard) => guard.release().await,
        }
    }
}

/// What the observer needs to know of the acquire under way: whether it
/// is a read (its grant is a shared hold), and whether its first refusal
/// was recorded (the start of its wait).
/// The chaos mode's real clients keep one too.
#[derive(Debug, Default)]
pub(crate) struct Attempt {
    pub(crate) reading: AtomicBool,
    pub(crate) waiting: AtomicBool,
}

impl Attempt {
    /// The history's entry for what an observer saw of the lock `token`
    /// during this attempt (`None` for what the history does not record).
    /// `true_deadline` turns a validity deadline into true time (the caller
    /// may keep it, too); `lost_at` is the true time of a loss.
    pub(crate) fn history_op(
        &self,
        observed: &Observed<'_>,
        token: String,
        true_deadline: impl FnOnce(Instant) -> Duration,
        lost_at: impl FnOnce() -> Duration,
    ) -> Option<Op> {
        let op = match observed.event {
            Event::Acquired { fence, valid_until } => Op::AcquireOk {
                fence: *fence,
                valid_until: true_deadline(*valid_until),
                shared: self.reading.load(Ordering::Relaxed),
                token,
            },
            // The first refusal of this acquire: the client now waits.
            Event::Contended { .. } if !self.waiting.swap(true, Ordering::Relaxed) => Op::Waiting,
            Event::Renewed { valid_until } => Op::Renewed {
                valid_until: true_deadline(*valid_until),
                token,
            },
            Event::Lost { reason } => Op::Lost {
                token,
                reason: reason.to_string(),
                valid_until: lost_at(),
            },
            Event::Released { outcome } => Op::ReleaseOk {
                token,
                outcome: format!("{outcome:?}"),
            },
            Event::AcquireFailed(failure) => Op::AcquireFail {
                error: failure.to_string(),
            },
            Event::RenewFailed(failure) => Op::RenewFailed {
                token,
                reason: format!("{failure:?}"),
            },
            _ => return None,
        };
        Some(op)
    }
}

/// Runs one client host: connect, then acquire-write-hold-write-release
/// forever, all inside the freeze wrapper.
pub async fn run(setup: ClientSetup, freeze: FreezeSwitch) -> turmoil::Result {
    Frozen::new(workload(setup), freeze).await
}

async fn workload(setup: ClientSetup) -> turmoil::Result {
    let origin = tokio::time::Instant::now().into_std();
    let sim_clock = SimClock::new(setup.clock.clone(), origin);
    let record = ClientRecord {
        recorder: setup.recorder.clone(),
        sim_clock: sim_clock.clone(),
        process: Process::Client(setup.index),
    };
    let attempt = Arc::new(Attempt::default());
    let observer = ClientObserver {
        attempt: Arc::clone(&attempt),
        record: record.clone(),
        sim_clock: sim_clock.clone(),
        deadlines: setup.deadlines.clone(),
    };
    let entropy = SeededEntropy(AtomicU64::new(setup.seed), client_host(setup.index));
    let rng = Rng::new(setup.seed ^ 0x5EED_C11E);
    let scenario = Arc::clone(&setup.scenario);
    let mut opts = lock_options(&scenario.lock);
    if scenario.clients.workload.kind == WorkloadKind::Fair {
        opts = opts.fair();
        if setup.stretched_waiter_ttl {
            opts = stretch_waiter_ttl(opts);
        }
    }
    if setup.broken_validity {
        opts = opts.sabotage_validity_from_reply();
    }
    let (locker, driver) = connect(&setup, &sim_clock, &entropy, observer).await;

    let contender = Contender {
        locker: &locker,
        opts: &opts,
        scenario: &scenario,
        record: &record,
        attempt: &attempt,
        rng,
        index: setup.index,
        write_seq: 0,
    };
    let own_locks = own_locks(&locker, &opts, &scenario, setup.index, setup.seed);
    let work = futures_util::future::join(contender.run(), own_locks);
    tokio::select! {
        biased;
        () = driver => {}
        _ = work => {}
    }
    Ok(())
}

/// Records this client's operations at true sim time and on its own clock.
#[derive(Clone)]
struct ClientRecord {
    recorder: Recorder,
    sim_clock: SimClock,
    process: Process,
}

impl ClientRecord {
    fn op(&self, op: Op) {
        self.recorder
            .record(clock::now(), self.sim_clock.local_now(), self.process, op);
    }
}

/// Turns the adapter's events on the contended lock into history
/// operations, and keeps the client's deadlines for the world.
#[derive(Clone)]
struct ClientObserver {
    attempt: Arc<Attempt>,
    record: ClientRecord,
    sim_clock: SimClock,
    deadlines: Deadlines,
}

impl ClientObserver {
    fn observe(&self, observed: &Observed<'_>) {
        // The checkers watch the contended lock; a client's own locks
        // (`locks` > 1) only share its calls.
        if observed.key != KEY {
            return;
        }
        let token = observed.token.to_owned();
        if matches!(observed.event, Event::Lost { .. } | Event::Released { .. }) {
            self.deadlines.with(|held| held.remove(&token));
        }
        if let Some(op) = self.op_of(observed, token) {
            self.record.op(op);
        }
    }

    /// The history operation for one event, if the history records it.
    fn op_of(&self, observed: &Observed<'_>, token: String) -> Option<Op> {
        self.attempt.history_op(
            observed,
            token,
            |valid_until| self.deadline(observed.token, valid_until),
            clock::now,
        )
    }

    /// Keeps `token`'s new deadline on the client's clock, and returns it
    /// in true time.
    fn deadline(&self, token: &str, valid_until: Instant) -> Duration {
        let local = self.sim_clock.local_of(valid_until);
        self.deadlines
            .with(|held| held.insert(token.to_owned(), local));
        self.sim_clock.true_time_of(valid_until)
    }
}

/// Connects, retrying: the primary (or a Redlock majority) may be down or
/// cut off at start.
async fn connect(
    setup: &ClientSetup,
    sim_clock: &SimClock,
    entropy: &SeededEntropy,
    observer: ClientObserver,
) -> (Locker, Driver) {
    let scenario = &setup.scenario;
    loop {
        let builder = builder_for(setup)
            .clock(sim_clock.clone())
            .entropy(SeededEntropy(
                AtomicU64::new(entropy.next_u64()),
                format!("{}:sim", client_host(setup.index)),
            ))
            .redis_settings(redis::RedisConnectionInfo::default().set_skip_set_lib_name())
            .connect_timeout(scenario.lock.ttl)
            .observer({
                let observer = observer.clone();
                move |observed: &Observed<'_>| observer.observe(observed)
            });
        match builder.connect().await {
            Ok(pair) => break pair,
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The builder for the scenario's topology, over the simulated network.
fn builder_for(setup: &ClientSetup) -> LockerBuilder {
    let scenario = &setup.scenario;
    match scenario.topology {
        Topology::Redlock { nodes } => {
            LockerBuilder::redlock_with_connectors((0..nodes).map(|node| SimConnector {
                discovery: setup.discovery.clone(),
                node: Some(node),
            }))
        }
        Topology::Single | Topology::PrimaryReplica { .. } => {
            LockerBuilder::with_connector(SimConnector {
                discovery: setup.discovery.clone(),
                node: None,
            })
        }
        Topology::Sentinel { sentinels, .. } => LockerBuilder::sentinel_with_dialer(
            SimDialer,
            (0..sentinels)
                .map(|index| NodeAddress::new(sentinel_host(index), SENTINEL_PORT))
                .collect(),
            MASTER_NAME,
        ),
        // Every node is a seed, in index order, as users list them.
        Topology::Cluster { .. } => LockerBuilder::cluster_with_dialer(
            SimDialer,
            (0..scenario.topology.node_count())
                .map(|index| NodeAddress::new(redis_host(index), REDIS_PORT))
                .collect(),
        ),
    }
}

/// The client's work on the contended lock: acquire, write, hold, write,
/// release, think, forever.
struct Contender<'a> {
    locker: &'a Locker,
    opts: &'a LockOptions,
    scenario: &'a Scenario,
    record: &'a ClientRecord,
    attempt: &'a Attempt,
    rng: Rng,
    index: usize,
    /// The sequence number of the client's last write.
    write_seq: u64,
}

impl Contender<'_> {
    async fn run(mut self) {
        loop {
            if let Some(guard) = self.acquire().await {
                self.hold(guard).await;
            }
            self.think().await;
        }
    }

    /// One acquire, recorded; `None` when it was cancelled or failed.
    async fn acquire(&mut self) -> Option<Guard> {
        let workload = self.scenario.clients.workload;
        let reading =
            workload.kind == WorkloadKind::ReadWrite && self.rng.chance(workload.read_share);
        self.attempt.reading.store(reading, Ordering::Relaxed);
        self.attempt.waiting.store(false, Ordering::Relaxed);
        self.record.op(Op::AcquireInvoke);
        let Some(acquired) = acquire(
            self.locker,
            self.opts,
            self.scenario,
            reading,
            &mut self.rng,
        )
        .await
        else {
            // Cancelled: the adapter undoes what the attempt set.
            self.record.op(Op::AcquireCancel);
            return None;
        };
        // On an error, the observer recorded why; the caller backs off a
        // little.
        acquired.ok()
    }

    /// Writes once on entry, holds, then writes again (the second write is
    /// the one a long pause turns stale), then releases or drops the guard.
    async fn hold(&mut self, guard: Guard) {
        let token = guard.token().to_owned();
        let fence = self.fence_of(&guard);
        if let Some(fence) = fence {
            self.write(&token, fence).await;
        }
        let hold = self.rng.duration(self.scenario.clients.hold);
        tokio::select! {
            biased;
            _ = guard.lost() => {}
            () = tokio::time::sleep(hold) => {
                // Check the lease, then take a while to produce the
                // write: a process pause in this window is the one no
                // lease can catch (Kleppmann's GC pause). Only the
                // fence at the storage refuses the stale write.
                if let (true, Some(fence)) = (guard.is_held(), fence) {
                    tokio::time::sleep(self.rng.duration(PREPARE)).await;
                    self.write(&token, fence).await;
                }
            }
        }
        if self.rng.chance(self.scenario.clients.drop_guard) {
            // The adapter releases a dropped guard in the background.
            self.record.op(Op::GuardDropped { token });
            drop(guard);
        } else {
            self.record.op(Op::ReleaseInvoke { token });
            // The observer records the outcome.
            let _ = guard.release().await;
        }
    }

    /// The fence this hold writes with, if it writes: readers and
    /// semaphore holders share the resource, so only an exclusive hold
    /// writes to the storage.
    fn fence_of(&self, guard: &Guard) -> Option<u64> {
        guard
            .fence()
            .filter(|_| self.scenario.clients.workload.kind != WorkloadKind::Semaphore)
            // `fencing = "none"`: the client does not use a fence. The
            // plain lock then issues 0; the family's kinds always issue
            // one, which such a client leaves unsent.
            .map(|fence| {
                if self.scenario.lock.fencing == FencingMode::None {
                    0
                } else {
                    fence
                }
            })
    }

    /// One fenced write to the storage (and, with `unfenced_register`, one
    /// plain one); every write carries a value unique in the run: client
    /// index, sequence.
    async fn write(&mut self, token: &str, fence: u64) {
        self.write_seq += 1;
        let value = (self.index as u64) << 32 | self.write_seq;
        let timeout = self.scenario.lock.ttl;
        let record = |op| self.record.op(op);
        fenced_write(&record, (token.to_owned(), fence, value), timeout).await;
        if self.scenario.clients.unfenced_register {
            plain_write(&record, token, timeout).await;
        }
    }

    async fn think(&mut self) {
        tokio::time::sleep(self.rng.duration(self.scenario.clients.think)).await;
    }
}

/// Client `client`'s own lock number `lock`: a name that repeats the
/// contended lock's hash tag (`{lock:resource}:…`), so its keys share the
/// slot (and, in a cluster, the node and a migration) with it.
pub fn own_key(client: usize, lock: usize) -> String {
    format!("{KEY}}}:own-{client}-{lock}")
}

/// Acquires the contended lock, or, with the scenario's `cancel` chance,
/// stops waiting after a delay (`None`): mostly while a command is out, or
/// anywhere below the ttl. The chaos mode's real clients draw the same.
pub(crate) async fn acquire(
    locker: &Locker,
    opts: &LockOptions,
    scenario: &Scenario,
    reading: bool,
    rng: &mut Rng,
) -> Option<Result<Guard, AcquireError>> {
    let acquire = Guard::acquire(locker, opts, scenario, reading);
    if !rng.chance(scenario.clients.cancel) {
        return Some(acquire.await);
    }
    let within = if rng.between(0, 1) == 0 {
        // An attempt's round trip: the acquire may have set the key.
        BASE_LATENCY * 3
    } else {
        scenario.lock.ttl
    };
    let after = rng.duration(DurationRange {
        min: Duration::ZERO,
        max: within,
    });
    tokio::select! {
        biased;
        acquired = acquire => Some(acquired),
        () = tokio::time::sleep(after) => None,
    }
}

/// Client `index`'s own locks (`clients.locks` − 1 of them, numbered
/// from 1), each in its loop ([`own_lock`]) with randomness of its own
/// drawn from the client's `seed`: the simulated client and the chaos
/// mode's real one run the same.
pub(crate) async fn own_locks(
    locker: &Locker,
    opts: &LockOptions,
    scenario: &Scenario,
    index: usize,
    seed: u64,
) {
    let loops = (1..scenario.clients.locks).map(|lock| {
        own_lock(
            locker,
            opts,
            scenario,
            own_key(index, lock),
            Rng::new(seed ^ (0x5EED_0000 + lock as u64)),
        )
    });
    futures_util::future::join_all(loops).await;
}

/// A lock of the client's own, uncontended: acquired, held, released, in
/// a loop, on the same locker as the contended one, so that their
/// operations meet in group-commit batches.
async fn own_lock(
    locker: &Locker,
    opts: &LockOptions,
    scenario: &Scenario,
    key: String,
    mut rng: Rng,
) {
    loop {
        if let Ok(guard) = locker.acquire(&key, opts).await {
            tokio::time::sleep(rng.duration(scenario.clients.hold)).await;
            if rng.chance(scenario.clients.drop_guard) {
                drop(guard);
            } else {
                let _ = guard.release().await;
            }
        }
        tokio::time::sleep(rng.duration(scenario.clients.think)).await;
    }
}

async fn fenced_write(
    record: &impl Fn(Op),
    (token, fence, value): (String, u64, u64),
    timeout: Duration,
) {
    record(Op::WriteInvoke {
        token: token.clone(),
        fence,
        value,
    });
    let line = format!("F {token} {fence} {value}");
    match storage::request(&line, timeout).await {
        WriteResult::Accepted => record(Op::WriteOk {
            token,
            fence,
            value,
            accepted: true,
        }),
        WriteResult::Rejected => record(Op::WriteOk {
            token,
            fence,
            value,
            accepted: false,
        }),
        WriteResult::Unknown => record(Op::WriteInfo {
            token,
            fence,
            value,
        }),
    }
}

async fn plain_write(record: &impl Fn(Op), token: &str, timeout: Duration) {
    record(Op::RegisterWrite {
        token: token.to_owned(),
        phase: Phase::Start,
    });
    let _ = storage::request(&format!("P {token} 0"), timeout).await;
    record(Op::RegisterWrite {
        token: token.to_owned(),
        phase: Phase::End,
    });
}
