//! A contention workload for the topology tests: tasks over several
//! lockers take one key in turn, and a shared flag catches two holders
//! inside the critical section at once.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use lock_core::{LockOptions, Locker};

/// What the workload saw, in order.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// A task got the lock with this fence.
    Granted { at: Instant, fence: u64 },
    /// A task left the critical section.
    Released { at: Instant },
}

/// The running workload; [`Workload::finish`] stops and checks it.
pub struct Workload {
    steps: Arc<Mutex<Vec<Step>>>,
    double_holder: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Two tasks per locker contend for `key`, each holding it ~40 ms (or until
/// it is lost). After a failed acquire a task pauses `after_failure`.
pub fn contend(
    lockers: &[Locker],
    key: &'static str,
    opts: &LockOptions,
    after_failure: Duration,
) -> Workload {
    let steps = Arc::new(Mutex::new(Vec::new()));
    let inside = Arc::new(AtomicBool::new(false));
    let double_holder = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for locker in lockers {
        for _ in 0..2 {
            let (locker, opts) = (locker.clone(), opts.clone());
            let (steps, inside, double, stop) = (
                Arc::clone(&steps),
                Arc::clone(&inside),
                Arc::clone(&double_holder),
                Arc::clone(&stop),
            );
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Acquire) {
                    let Ok(guard) = locker.acquire(key, &opts).await else {
                        tokio::time::sleep(after_failure).await;
                        continue;
                    };
                    if inside.swap(true, Ordering::AcqRel) {
                        double.store(true, Ordering::Release);
                    }
                    steps.lock().expect("steps").push(Step::Granted {
                        at: Instant::now(),
                        fence: guard.fence(),
                    });
                    tokio::select! {
                        _ = guard.lost() => {}
                        () = tokio::time::sleep(Duration::from_millis(40)) => {}
                    }
                    inside.store(false, Ordering::Release);
                    steps
                        .lock()
                        .expect("steps")
                        .push(Step::Released { at: Instant::now() });
                    let _ = guard.release().await;
                }
            }));
        }
    }
    Workload {
        steps,
        double_holder,
        stop,
        tasks,
    }
}

impl Workload {
    /// Stops the tasks, asserts there was never a double holder and that
    /// fences increased grant after grant, and returns every step.
    pub async fn finish(self) -> Vec<Step> {
        self.stop.store(true, Ordering::Release);
        for task in self.tasks {
            task.await.expect("workload task");
        }
        assert!(
            !self.double_holder.load(Ordering::Acquire),
            "two holders were inside the critical section at once"
        );
        let steps = self.steps.lock().expect("steps").clone();
        let fences: Vec<u64> = grants(&steps).map(|(_, fence)| fence).collect();
        for pair in fences.windows(2) {
            assert!(pair[1] > pair[0], "fences go backwards: {pair:?}");
        }
        steps
    }
}

/// The grants among `steps`: when, and with which fence.
pub fn grants(steps: &[Step]) -> impl Iterator<Item = (Instant, u64)> + '_ {
    steps.iter().filter_map(|step| match *step {
        Step::Granted { at, fence } => Some((at, fence)),
        Step::Released { .. } => None,
    })
}
