//! Timing rule 3 at the machine's edge: a driver that wakes after the
//! deadline (a paused process) may find a renewal's success and the expiry
//! timer due at once, and lock-core's drive loop hands over replies first.
//! The hold must still end at the deadline: a success that arrives after
//! it does not revive the lock, `Lost` comes exactly once, and `is_held`
//! never turns true again. Only the public sans-IO API is used.

use std::time::{Duration, Instant};

use lock_core::{Command, Event, LockMachine, LockOptions, LostReason, Machine, Reply};

#[test]
fn a_renewal_answered_after_the_deadline_does_not_revive_the_hold() {
    let opts = LockOptions::new(Duration::from_secs(1));
    let mut machine = LockMachine::new(&opts, "late", "token".into(), 7).expect("valid options");
    let t0 = Instant::now();
    machine.acquire(t0).expect("a fresh machine");
    let (acquire, _) = machine.poll_command().expect("the acquire goes out");
    machine.handle_reply(
        t0 + Duration::from_millis(1),
        acquire,
        Reply::Granted {
            fence: 1,
            replicas: None,
            aof: None,
        },
    );
    assert!(matches!(machine.poll_event(), Some(Event::Acquired { .. })));
    let deadline = machine.valid_until().expect("held");

    // The renewal goes out on its timer...
    let renew_at = machine.poll_timeout().expect("a renewal is scheduled");
    machine.handle_timeout(renew_at);
    let (renewal, command) = machine.poll_command().expect("the renewal goes out");
    assert!(matches!(command, Command::Renew { .. }));

    // ...and the driver next runs past the deadline, reply first.
    let woke = deadline + Duration::from_millis(5);
    machine.handle_reply(
        woke,
        renewal,
        Reply::Renewed {
            replicas: None,
            aof: None,
        },
    );
    machine.handle_timeout(woke);
    let events: Vec<Event> = std::iter::from_fn(|| machine.poll_event()).collect();
    assert_eq!(
        events,
        [Event::Lost {
            reason: LostReason::Expired
        }],
        "the deadline ended the hold before the late success"
    );
    assert!(!machine.is_held(woke));
    assert_eq!(machine.valid_until(), None);
}
