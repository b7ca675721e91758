//! Every metrics series moves as a lock's life says it should, against a
//! real `redis-server`: grants, contention, timeouts, renewals, losses
//! (a deleted key, a frozen server, a restarted one), every release
//! outcome and reconnections.
//!
//! The recorder is a small one written here rather than `metrics-util`'s
//! `DebuggingRecorder`: about sixty lines, no extra dependency tree to
//! build, and it keeps exactly what the assertions read (a counter's
//! value, a gauge's value, a histogram's samples) under keys that print
//! like the exporters' (`name{label=value}`).
//!
//! The recorder is global to the process, so the whole life is one test:
//! counts are exact wherever the lock's life fixes them, and where Redis
//! timing decides how many renewals happened, the counters must agree
//! with what the locker's observer saw.

#![cfg(all(feature = "redis", feature = "metrics"))]

mod support;

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, OnceLock, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use lock_core::{
    AcquireError, Event, LockOptions, LockerBuilder, LostReason, ReleaseError, RenewFailure,
};
use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};

/// One series: whichever of the three kinds it was registered as.
#[derive(Default)]
struct Series {
    counter: AtomicU64,
    gauge: Mutex<f64>,
    samples: Mutex<Vec<f64>>,
}

impl CounterFn for Series {
    fn increment(&self, value: u64) {
        self.counter.fetch_add(value, Ordering::Relaxed);
    }

    fn absolute(&self, value: u64) {
        self.counter.fetch_max(value, Ordering::Relaxed);
    }
}

impl GaugeFn for Series {
    fn increment(&self, value: f64) {
        *self.gauge.lock().unwrap_or_else(PoisonError::into_inner) += value;
    }

    fn decrement(&self, value: f64) {
        *self.gauge.lock().unwrap_or_else(PoisonError::into_inner) -= value;
    }

    fn set(&self, value: f64) {
        *self.gauge.lock().unwrap_or_else(PoisonError::into_inner) = value;
    }
}

impl HistogramFn for Series {
    fn record(&self, value: f64) {
        self.samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(value);
    }
}

/// The series by `name{label=value,...}`, labels sorted.
#[derive(Default, Clone)]
struct TestRecorder(Arc<Mutex<BTreeMap<String, Arc<Series>>>>);

impl TestRecorder {
    fn series(&self, key: &Key) -> Arc<Series> {
        let labels: BTreeMap<&str, &str> = key.labels().map(|l| (l.key(), l.value())).collect();
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let name = if labels.is_empty() {
            key.name().to_owned()
        } else {
            format!("{}{{{}}}", key.name(), labels.join(","))
        };
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(all.entry(name).or_default())
    }

    fn find(&self, name: &str) -> Arc<Series> {
        let all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(
            all.get(name)
                .unwrap_or_else(|| panic!("{name} is not registered; have {:?}", all.keys())),
        )
    }

    fn counter(&self, name: &str) -> u64 {
        self.find(name).counter.load(Ordering::Relaxed)
    }

    fn gauge(&self, name: &str) -> f64 {
        *self
            .find(name)
            .gauge
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn samples(&self, name: &str) -> Vec<f64> {
        self.find(name)
            .samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn names(&self) -> Vec<String> {
        let all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        all.keys().cloned().collect()
    }

    /// Waits (up to 20 s) until `counter` reaches `value`.
    async fn counter_reaches(&self, name: &str, value: u64) {
        for _ in 0..2_000 {
            if self.counter(name) >= value {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{name} stayed at {} (wanted {value})", self.counter(name));
    }
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.series(key))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.series(key))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.series(key))
    }
}

fn recorder() -> TestRecorder {
    static RECORDER: OnceLock<TestRecorder> = OnceLock::new();
    RECORDER
        .get_or_init(|| {
            let recorder = TestRecorder::default();
            metrics::set_global_recorder(recorder.clone())
                .expect("no other recorder in this test binary");
            recorder
        })
        .clone()
}

/// What the locker's observer saw of renewals.
#[derive(Default)]
struct Seen {
    renewed: AtomicU64,
    renew_failed: AtomicU64,
    renew_not_owner: AtomicU64,
}

const GRANTED: &str = "redis_lock_acquire_duration_seconds{outcome=granted}";
const TIMED_OUT: &str = "redis_lock_acquire_duration_seconds{outcome=timeout}";
const ERRORED: &str = "redis_lock_acquire_duration_seconds{outcome=error}";
const RENEWED: &str = "redis_lock_renewals_total{outcome=ok}";
const RENEW_FAILED: &str = "redis_lock_renewals_total{outcome=failed}";
const COMMAND_RECONNECTS: &str = "redis_lock_reconnects_total{connection=command}";
const PUBSUB_RECONNECTS: &str = "redis_lock_reconnects_total{connection=pubsub}";

#[tokio::test]
async fn every_series_moves_through_a_locks_life() {
    let recorder = recorder();
    let mut server = support::RedisServer::start();
    let seen = Arc::new(Seen::default());
    let locker = {
        let seen = Arc::clone(&seen);
        LockerBuilder::from_url(&server.url())
            .expect("url")
            .observer(move |observed| match observed.event {
                Event::Renewed { .. } => {
                    seen.renewed.fetch_add(1, Ordering::Relaxed);
                }
                Event::RenewFailed(failure) => {
                    seen.renew_failed.fetch_add(1, Ordering::Relaxed);
                    if *failure == RenewFailure::NotOwner {
                        seen.renew_not_owner.fetch_add(1, Ordering::Relaxed);
                    }
                }
                _ => {}
            })
            .spawn()
            .await
            .expect("connect")
    };
    let counter = |name: &str| recorder.counter(name);
    // ttl 600 ms: renewals every 200 ms, commands time out after 100 ms.
    let short = LockOptions::new(Duration::from_millis(600));

    // Every series is registered with the locker, before anything happens.
    let names = recorder.names();
    assert_eq!(names.len(), 28, "{names:#?}");
    assert!(names.iter().all(|name| name.starts_with("redis_lock_")));

    // A grant, then renewals while held.
    let a = locker.acquire("metrics:a", &short).await.expect("free");
    assert_eq!(counter("redis_lock_acquire_attempts_total"), 1);
    assert_eq!(counter("redis_lock_acquire_grants_total"), 1);
    assert_eq!(recorder.gauge("redis_lock_held"), 1.0);
    assert_eq!(recorder.samples(GRANTED).len(), 1);
    recorder.counter_reaches(RENEWED, 2).await;

    // Contention: an acquire that waits out its 300 ms, and a try_acquire.
    let error = locker
        .acquire("metrics:a", &short.clone().wait(Duration::from_millis(300)))
        .await
        .expect_err("held by a");
    assert!(matches!(error, AcquireError::Timeout { .. }), "{error}");
    assert!(
        locker
            .try_acquire("metrics:a", &short)
            .await
            .expect("answered")
            .is_none()
    );
    assert_eq!(counter("redis_lock_acquire_attempts_total"), 3);
    assert_eq!(counter("redis_lock_acquire_contentions_total"), 2);
    assert_eq!(counter("redis_lock_acquire_timeouts_total"), 2);
    assert_eq!(recorder.samples(TIMED_OUT).len(), 2);
    let waits = recorder.samples("redis_lock_wait_duration_seconds");
    assert_eq!(waits.len(), 1, "try_acquire does not wait");
    assert!(
        waits[0] >= 0.2,
        "waited from the first contended answer: {waits:?}"
    );

    // A handoff: b waits for a, a releases, b is granted.
    let waiter = {
        let locker = locker.clone();
        let opts = short.clone().wait(Duration::from_secs(10));
        tokio::spawn(async move { locker.acquire("metrics:a", &opts).await })
    };
    recorder
        .counter_reaches("redis_lock_acquire_contentions_total", 3)
        .await;
    a.release().await.expect("a held it");
    let b = waiter.await.expect("no panic").expect("granted after a");
    assert_eq!(counter("redis_lock_acquire_attempts_total"), 4);
    assert_eq!(counter("redis_lock_acquire_grants_total"), 2);
    assert_eq!(counter("redis_lock_releases_total{outcome=deleted}"), 1);
    assert_eq!(
        recorder.samples("redis_lock_wait_duration_seconds").len(),
        2
    );
    assert_eq!(
        recorder.samples("redis_lock_hold_duration_seconds").len(),
        1
    );
    assert_eq!(recorder.gauge("redis_lock_held"), 1.0);

    // A loss: the key is deleted behind b's back; its next renewal says so.
    server.cmd(&["DEL", b.redis_key()]);
    assert_eq!(b.lost().await, LostReason::NotOwner);
    assert_eq!(
        b.release().await,
        Err(ReleaseError::AlreadyLost(LostReason::NotOwner))
    );
    assert_eq!(counter("redis_lock_losses_total{reason=not_owner}"), 1);
    assert_eq!(counter("redis_lock_releases_total{outcome=not_owner}"), 1);
    assert_eq!(seen.renew_not_owner.load(Ordering::Relaxed), 1);
    assert!(counter(RENEW_FAILED) >= 1);
    assert_eq!(recorder.gauge("redis_lock_held"), 0.0);

    // A frozen server: renewals time out until validity runs out, the
    // release goes unanswered, and the connection is reopened once the
    // server answers again.
    let c = locker.acquire("metrics:c", &short).await.expect("free");
    // Counted from here: on a loaded machine a command of an earlier step
    // may have timed out and its connection been reopened already.
    let reconnects_before = counter(COMMAND_RECONNECTS);
    server.pause();
    assert_eq!(c.lost().await, LostReason::Expired);
    assert_eq!(
        c.release().await,
        Err(ReleaseError::AlreadyLost(LostReason::Expired))
    );
    assert_eq!(counter("redis_lock_losses_total{reason=expired}"), 1);
    assert_eq!(counter("redis_lock_releases_total{outcome=unknown}"), 1);
    assert_eq!(
        counter(COMMAND_RECONNECTS),
        reconnects_before,
        "still frozen"
    );
    server.resume();
    recorder
        .counter_reaches(COMMAND_RECONNECTS, reconnects_before + 1)
        .await;

    // A restart: the connection closes and is reopened, and the restarted
    // server (no persistence) has forgotten the key.
    let d = locker
        .acquire("metrics:d", &LockOptions::new(Duration::from_secs(3)))
        .await
        .expect("free");
    server.restart();
    assert_eq!(d.lost().await, LostReason::NotOwner);
    assert_eq!(
        d.release().await,
        Err(ReleaseError::AlreadyLost(LostReason::NotOwner))
    );
    assert_eq!(counter(COMMAND_RECONNECTS), reconnects_before + 2);

    // The whole life, series by series.
    assert_eq!(counter("redis_lock_acquire_attempts_total"), 6);
    assert_eq!(counter("redis_lock_acquire_grants_total"), 4);
    assert_eq!(counter("redis_lock_acquire_contentions_total"), 3);
    assert_eq!(counter("redis_lock_acquire_timeouts_total"), 2);
    for reason in [
        "invalid_options",
        "unavailable",
        "wrong_type",
        "not_replicated",
        "cancelled",
    ] {
        assert_eq!(
            counter(&format!(
                "redis_lock_acquire_errors_total{{reason={reason}}}"
            )),
            0,
            "{reason}"
        );
    }
    assert_eq!(counter("redis_lock_losses_total{reason=not_owner}"), 2);
    assert_eq!(counter("redis_lock_losses_total{reason=expired}"), 1);
    assert_eq!(counter("redis_lock_losses_total{reason=max_hold}"), 0);
    assert_eq!(counter("redis_lock_losses_total{reason=failover}"), 0);
    assert_eq!(counter("redis_lock_releases_total{outcome=deleted}"), 1);
    assert_eq!(counter("redis_lock_releases_total{outcome=not_owner}"), 2);
    assert_eq!(counter("redis_lock_releases_total{outcome=unknown}"), 1);
    assert_eq!(counter(COMMAND_RECONNECTS), reconnects_before + 2);
    assert_eq!(recorder.samples(GRANTED).len(), 4);
    assert_eq!(recorder.samples(TIMED_OUT).len(), 2);
    assert!(recorder.samples(ERRORED).is_empty());
    assert_eq!(
        recorder.samples("redis_lock_wait_duration_seconds").len(),
        2
    );
    assert_eq!(
        recorder.samples("redis_lock_hold_duration_seconds").len(),
        4
    );
    assert_eq!(recorder.gauge("redis_lock_held"), 0.0);
    // Renewals: as many as the observer saw, each with its round trip.
    let renewed = seen.renewed.load(Ordering::Relaxed);
    let renew_failed = seen.renew_failed.load(Ordering::Relaxed);
    assert!(renewed >= 2);
    assert_eq!(counter(RENEWED), renewed);
    assert_eq!(counter(RENEW_FAILED), renew_failed);
    assert_eq!(seen.renew_not_owner.load(Ordering::Relaxed), 2);
    assert!(
        renew_failed >= 3,
        "a deleted key, timeouts while frozen, a restart"
    );
    let ok_times = recorder.samples("redis_lock_renewal_duration_seconds{outcome=ok}");
    let failed_times = recorder.samples("redis_lock_renewal_duration_seconds{outcome=failed}");
    assert_eq!(ok_times.len() as u64, renewed);
    assert_eq!(failed_times.len() as u64, renew_failed);
    assert!(
        ok_times
            .iter()
            .chain(&failed_times)
            .all(|seconds| (0.0..60.0).contains(seconds))
    );

    // The pub/sub connection that wakes waiters, counted apart: the server
    // drops it while a waiter listens, and it is opened again. (Opening it
    // for this waiter may count already: the restart above broke it.)
    let options = LockOptions::new(Duration::from_secs(5)).wait(Duration::from_secs(30));
    let holder = locker.acquire("metrics:e", &options).await.expect("free");
    let waiter = tokio::spawn({
        let locker = locker.clone();
        let options = options.clone();
        async move { locker.acquire("metrics:e", &options).await }
    });
    let subscribed = || async {
        for _ in 0..2_000 {
            let channels: Vec<String> = server.query(&["PUBSUB", "CHANNELS", "*"]);
            if !channels.is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the waiter never subscribed");
    };
    subscribed().await;
    let pubsub_before = counter(PUBSUB_RECONNECTS);
    let killed: i64 = server.query(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert_eq!(killed, 1, "one pub/sub connection");
    recorder
        .counter_reaches(PUBSUB_RECONNECTS, pubsub_before + 1)
        .await;
    subscribed().await;
    holder.release().await.expect("the holder held it");
    let granted = waiter.await.expect("the waiter ran").expect("granted");
    granted.release().await.expect("the waiter held it");
    assert_eq!(counter(PUBSUB_RECONNECTS), pubsub_before + 1);
    assert_eq!(
        counter(COMMAND_RECONNECTS),
        reconnects_before + 2,
        "the command connection stayed"
    );
}
