//! Timing rule 9: a release left unknown is answered after its tries and
//! retried in the background until the key has surely expired. The case
//! it exists for: a holder whose renewals ran on Redis unanswered (a
//! one-way partition) loses the lock at its deadline, and its release
//! meets a connection still being re-established.

use super::*;

/// The command timeout of [`opts`]: renewals every 333 ms, half of that.
const COMMAND_TIMEOUT: Duration = ms(166);

/// Holds from `h.now`, then loses every reply (Redis still runs each
/// renewal) until the loss at the deadline; returns the loss's instant.
fn lost_with_renewals_unanswered(h: &mut Harness) -> Instant {
    let t0 = h.now;
    h.acquire();
    h.run_until(t0 + ms(10));
    assert!(h.machine.is_held(h.now));
    h.drop_replies = true;
    h.run_until(t0 + ms(1_000));
    let lost = h.lost();
    let [(lost_at, _)] = lost.as_slice() else {
        panic!("one loss expected: {:?}", h.events);
    };
    assert_eq!(*lost_at, t0 + ms(1_000) - DRIFT, "lost at the deadline");
    assert_eq!(
        h.redis.owner(h.now),
        Some("me"),
        "the renewals kept the key"
    );
    h.drop_replies = false;
    *lost_at
}

/// The latest instant the key may still exist: the last acquire or
/// renewal sent, plus the ttl and the drift.
fn key_may_live_until(h: &Harness) -> Instant {
    let last = h
        .sent
        .iter()
        .filter(|(_, _, command)| !matches!(command, Command::Release))
        .map(|(at, _, _)| *at)
        .max()
        .expect("an acquire was sent");
    last + ms(1_000) + DRIFT
}

fn releases_sent(h: &Harness) -> Vec<Instant> {
    h.sent
        .iter()
        .filter(|(_, _, command)| *command == Command::Release)
        .map(|(at, _, _)| *at)
        .collect()
}

/// Releases with the connection down: the tries fail at once.
fn release_while_reconnecting(h: &mut Harness) -> Instant {
    h.refuse_commands = true;
    let at = h.now;
    h.machine.release(at);
    h.run_until(at + ms(100));
    at
}

#[test]
fn a_release_after_a_loss_is_answered_then_retried_until_it_deletes_the_key() {
    let mut h = Harness::new(&opts());
    lost_with_renewals_unanswered(&mut h);
    let released_at = release_while_reconnecting(&mut h);
    // The caller's answer comes after the three tries, as before.
    let answered = h.events_of(|e| matches!(e, Event::Released { .. }));
    let [(at, Event::Released { outcome })] = answered.as_slice() else {
        panic!("one answer expected: {:?}", h.events);
    };
    assert_eq!(*outcome, ReleaseOutcome::Unknown);
    assert!(*at < released_at + ms(100), "answered at {at:?}");
    let before_answer = releases_sent(&h).into_iter().filter(|sent| sent <= at);
    assert_eq!(before_answer.count(), 3, "three tries before the answer");
    assert_eq!(h.machine.phase(), Phase::Released);
    assert!(!h.machine.is_released(), "still cleaning up");
    // The connection is back 300 ms later, with the key still on Redis.
    h.run_until(released_at + ms(300));
    assert_eq!(h.redis.owner(h.now), Some("me"));
    h.refuse_commands = false;
    let healed = h.now;
    // The next retry is at most a command timeout away, then a round trip.
    h.run_until(healed + COMMAND_TIMEOUT + h.delay * 2);
    assert_eq!(
        h.redis.owner(h.now),
        None,
        "the background retry deleted it"
    );
    assert!(h.machine.is_released());
    assert_eq!(h.machine.poll_timeout(), None);
    let sent = h.sent.len();
    h.run_until(healed + ms(5_000));
    assert_eq!(h.sent.len(), sent, "nothing sent once the key is gone");
    assert_eq!(answered.len(), 1);
    assert_eq!(
        h.events_of(|e| matches!(e, Event::Released { .. })).len(),
        1,
        "the caller is answered once"
    );
}

#[test]
fn the_retries_back_off_and_stop_at_the_keys_last_possible_expiry() {
    let mut h = Harness::new(&opts());
    lost_with_renewals_unanswered(&mut h);
    release_while_reconnecting(&mut h);
    // The connection never comes back.
    h.run_until(h.now + ms(5_000));
    let until = key_may_live_until(&h);
    let releases = releases_sent(&h);
    assert!(
        releases.len() > 3,
        "retried in the background: {releases:?}"
    );
    assert!(
        releases.iter().all(|at| *at < until),
        "a release sent after the key surely expired: {releases:?}, until {until:?}"
    );
    let last = *releases.last().expect("releases");
    assert!(
        last + COMMAND_TIMEOUT >= until,
        "stopped early: last try at {last:?}, key until {until:?}"
    );
    // Backoff, never a spin: retry_min is 10 ms, jittered down to half.
    for pair in releases.windows(2) {
        assert!(pair[1] - pair[0] > ms(5), "{releases:?}");
    }
    assert!(releases.len() <= 16, "{} tries", releases.len());
    assert!(h.machine.is_released());
    assert_eq!(h.machine.poll_timeout(), None);
}

#[test]
fn the_background_release_never_deletes_another_owners_key() {
    let mut h = Harness::new(&opts());
    lost_with_renewals_unanswered(&mut h);
    let released_at = release_while_reconnecting(&mut h);
    h.run_until(released_at + ms(300));
    // Our key went (say, an operator deleted it) and another owner took it.
    h.redis.key = Some(("other".into(), h.now + ms(60_000)));
    h.refuse_commands = false;
    h.run_until(h.now + ms(5_000));
    assert_eq!(
        h.redis.owner(h.now),
        Some("other"),
        "another owner's key untouched"
    );
    assert!(h.machine.is_released(), "NotOwner ends the clean-up");
    let sent = releases_sent(&h).len();
    assert!(sent > 3, "the background release was sent ({sent})");
}

#[test]
fn a_release_after_the_key_surely_expired_is_not_retried() {
    let mut h = Harness::new(&opts());
    lost_with_renewals_unanswered(&mut h);
    let until = key_may_live_until(&h);
    h.run_until(until + ms(10));
    release_while_reconnecting(&mut h);
    assert!(h.events.iter().any(|(_, e)| *e
        == Event::Released {
            outcome: ReleaseOutcome::Unknown
        }));
    assert!(
        h.machine.is_released(),
        "no clean-up once the key surely expired"
    );
    assert_eq!(h.machine.poll_timeout(), None);
    // Long after, with the connection still down: still the three tries.
    h.run_until(h.now + ms(5_000));
    assert_eq!(releases_sent(&h).len(), 3);
}

#[test]
fn an_abandoned_acquires_undo_is_retried_in_the_background_too() {
    let mut h = Harness::new(&opts().wait(ms(300)));
    let t0 = h.now;
    // The attempts run on Redis but their replies are lost.
    h.drop_replies = true;
    h.acquire();
    h.run_until(t0 + ms(250));
    assert_eq!(h.redis.owner(h.now), Some("me"), "an attempt set the key");
    // The give-up's undo meets a connection being re-established.
    h.drop_replies = false;
    h.refuse_commands = true;
    h.run_until(t0 + ms(700));
    assert!(
        h.events
            .iter()
            .any(|(_, e)| matches!(e, Event::AcquireFailed(AcquireFailure::TimedOut { .. }))),
        "{:?}",
        h.events
    );
    assert_eq!(h.machine.phase(), Phase::Released);
    assert_eq!(h.redis.owner(h.now), Some("me"));
    h.refuse_commands = false;
    let healed = h.now;
    h.run_until(healed + COMMAND_TIMEOUT + h.delay * 2);
    assert_eq!(h.redis.owner(h.now), None, "the undo was retried");
    assert!(h.machine.is_released());
}

#[test]
fn a_reconnect_sends_the_background_release_at_once() {
    let mut h = Harness::new(&opts());
    lost_with_renewals_unanswered(&mut h);
    let released_at = release_while_reconnecting(&mut h);
    h.run_until(released_at + ms(300));
    let before = releases_sent(&h).len();
    let backoff = h.machine.poll_timeout().expect("a retry is armed");
    h.refuse_commands = false;
    let reconnected = h.now;
    assert!(backoff > reconnected, "the retry waits on its backoff");
    h.machine.handle_reconnected(reconnected, 0);
    h.run_until(reconnected + h.delay * 2);
    assert_eq!(
        releases_sent(&h).get(before),
        Some(&reconnected),
        "the release goes with the connection, not at {backoff:?}"
    );
    assert_eq!(h.redis.owner(h.now), None, "and deletes the key");
    assert!(h.machine.is_released());
}

#[test]
fn a_reconnect_changes_nothing_for_a_lock_not_cleaning_up() {
    let mut h = Harness::new(&opts());
    let t0 = h.now;
    h.acquire();
    h.run_until(t0 + ms(10));
    assert!(h.machine.is_held(h.now));
    let renewal = h.machine.poll_timeout();
    let sent = h.sent.len();
    h.machine.handle_reconnected(h.now, 0);
    assert_eq!(h.machine.poll_timeout(), renewal);
    assert!(h.machine.poll_command().is_none());
    assert_eq!(h.sent.len(), sent);
}
