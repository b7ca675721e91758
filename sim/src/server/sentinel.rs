//! A simulated Redis Sentinel: what a client asks a sentinel, answered from
//! the simulation's own record of who is primary.
//!
//! A real Sentinel group watches the primary, elects a leader when it
//! fails, promotes a replica and announces it on the `+switch-master`
//! channel: `<name> <old ip> <old port> <new ip> <new port>`. The leader
//! switches first; every other sentinel adopts the new configuration when
//! the leader's hello message reaches it (hellos go out every 2 s), and
//! announces `+switch-master` to its own subscribers then. Until it has, it
//! still names the old primary, and the old primary, not yet reconfigured
//! as a replica, still says `master` to `ROLE`: a client that asks that
//! sentinel is sent to the old primary, and stays there.
//!
//! The world plays the leader and hands each sentinel, the leader too, the
//! instant it adopts the failover ([`SentinelHandle::switch_at`]; none
//! before the promotion shows in the promoted replica's `INFO`, the leader
//! last); the sentinel's host switches and announces at that instant. Commands answered: `SENTINEL
//! GET-MASTER-ADDR-BY-NAME`, `PING`, `ROLE`, `SUBSCRIBE`/`UNSUBSCRIBE`,
//! and `CLIENT` (the handshake's `SETINFO`).

use std::{cell::RefCell, rc::Rc, time::Duration};

use redis_protocol::resp2::types::OwnedFrame as Frame;
use tokio::sync::Notify;

use super::{
    cmd::pubsub::{Push, Subscribers},
    conn::{self, Server, Session},
    frame::{bulk, error, ok},
    node::PORT,
};
use crate::{clock, net::redis_host};

/// The port every sentinel listens on.
pub const SENTINEL_PORT: u16 = 26379;

/// The name the sentinels monitor the primary under.
pub const MASTER_NAME: &str = "mymaster";

/// The channel failovers are announced on.
pub const SWITCH_MASTER: &[u8] = b"+switch-master";

/// The name of sentinel `index`.
pub fn sentinel_host(index: usize) -> String {
    format!("sentinel-{index}")
}

/// One sentinel's state: whom it names, and what it has not adopted yet.
#[derive(Debug)]
struct Sentinel {
    /// The node it names as the master.
    master: usize,
    /// A failover it adopts later: (true time, new master).
    pending: Option<(Duration, usize)>,
    /// Its connections' subscriptions.
    subscribers: Subscribers,
    next_id: u64,
    /// Wakes the host when the world hands it a failover to adopt later.
    pending_changed: Rc<Notify>,
}

/// The world's and the host's shared handle on one sentinel.
#[derive(Debug, Clone)]
pub struct SentinelHandle(Rc<RefCell<Sentinel>>);

impl Default for SentinelHandle {
    fn default() -> Self {
        Self(Rc::new(RefCell::new(Sentinel {
            master: 0,
            pending: None,
            subscribers: Subscribers::default(),
            next_id: 0,
            pending_changed: Rc::default(),
        })))
    }
}

impl SentinelHandle {
    /// The node this sentinel names as the master now.
    pub fn master(&self) -> usize {
        self.0.borrow().master
    }

    /// Adopts `master` at once and announces it (the failover's leader).
    pub fn switch_now(&self, master: usize) {
        self.0.borrow_mut().pending = None;
        self.switch(master);
    }

    /// Adopts `master` at true time `at` (when the leader's hello reaches
    /// this sentinel), replacing a failover not yet adopted.
    pub fn switch_at(&self, at: Duration, master: usize) {
        let changed = {
            let mut state = self.0.borrow_mut();
            state.pending = Some((at, master));
            Rc::clone(&state.pending_changed)
        };
        changed.notify_one();
    }

    fn switch(&self, master: usize) {
        let old = std::mem::replace(&mut self.0.borrow_mut().master, master);
        if old == master {
            return;
        }
        let payload = format!(
            "{MASTER_NAME} {} {PORT} {} {PORT}",
            redis_host(old),
            redis_host(master)
        );
        self.0
            .borrow()
            .subscribers
            .deliver(SWITCH_MASTER, payload.as_bytes());
    }

    /// Adopts the pending failover once its time comes, forever.
    async fn adopt_pending(self) {
        loop {
            let (pending, changed) = {
                let state = self.0.borrow();
                (state.pending, Rc::clone(&state.pending_changed))
            };
            match pending {
                Some((at, master)) if at <= clock::now() => {
                    self.0.borrow_mut().pending = None;
                    self.switch(master);
                }
                Some((at, _)) => {
                    // A newer failover may replace this one meanwhile.
                    tokio::select! {
                        biased;
                        () = changed.notified() => {}
                        () = tokio::time::sleep(at - clock::now()) => {}
                    }
                }
                None => changed.notified().await,
            }
        }
    }
}

/// Runs one sentinel's host: adopts failovers when due and serves
/// connections. A sentinel keeps its view across a restart (it persists
/// its configuration, as real sentinels rewrite theirs).
pub async fn serve(sentinel: SentinelHandle) -> turmoil::Result {
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", SENTINEL_PORT)).await?;
    tokio::task::spawn_local(sentinel.clone().adopt_pending());
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::task::spawn_local(conn::serve(sentinel.clone(), stream));
    }
}

impl Server for SentinelHandle {
    const READ_CHUNK: usize = 1024;

    fn open(&self) -> u64 {
        let mut state = self.0.borrow_mut();
        state.next_id += 1;
        state.next_id
    }

    async fn dispatch(&self, session: &mut Session, push: &Push, args: &[Vec<u8>]) -> Vec<Frame> {
        dispatch(self, session.id, push, args)
    }

    fn close(&self, id: u64) {
        self.0.borrow_mut().subscribers.close(id);
    }
}

/// Runs one command and returns its reply frames (SUBSCRIBE answers one
/// per channel).
fn dispatch(sentinel: &SentinelHandle, id: u64, push: &Push, args: &[Vec<u8>]) -> Vec<Frame> {
    let name = args[0].to_ascii_uppercase();
    match name.as_slice() {
        b"PING" => vec![Frame::SimpleString(b"PONG".to_vec())],
        b"CLIENT" => vec![ok()],
        b"ROLE" => vec![Frame::Array(vec![
            bulk(b"sentinel"),
            Frame::Array(vec![bulk(MASTER_NAME.as_bytes())]),
        ])],
        b"SENTINEL" if args.len() == 3 => {
            let sub = args[1].to_ascii_uppercase();
            if sub != b"GET-MASTER-ADDR-BY-NAME" {
                return vec![error(
                    "ERR the simulated sentinel answers only GET-MASTER-ADDR-BY-NAME",
                )];
            }
            if args[2] != MASTER_NAME.as_bytes() {
                return vec![Frame::Null];
            }
            let master = sentinel.master();
            vec![Frame::Array(vec![
                bulk(redis_host(master).as_bytes()),
                bulk(PORT.to_string().as_bytes()),
            ])]
        }
        b"SUBSCRIBE" if args.len() >= 2 => {
            sentinel
                .0
                .borrow_mut()
                .subscribers
                .subscribe(id, push, &args[1..])
        }
        b"UNSUBSCRIBE" => sentinel
            .0
            .borrow_mut()
            .subscribers
            .unsubscribe(id, &args[1..]),
        _ => vec![error(&format!(
            "ERR unknown command '{}' for a sentinel",
            String::from_utf8_lossy(&args[0])
        ))],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn a_sentinel_names_its_master_and_announces_a_switch() {
        let sentinel = SentinelHandle::default();
        let (push, mut pushes) = tokio::sync::mpsc::unbounded_channel();
        let ask = args(&["SENTINEL", "get-master-addr-by-name", MASTER_NAME]);
        assert_eq!(
            dispatch(&sentinel, 1, &push, &ask),
            vec![Frame::Array(vec![bulk(b"redis-0"), bulk(b"6379")])]
        );
        let unknown = args(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "other"]);
        assert_eq!(dispatch(&sentinel, 1, &push, &unknown), vec![Frame::Null]);
        let subscribed = dispatch(&sentinel, 1, &push, &args(&["SUBSCRIBE", "+switch-master"]));
        assert_eq!(subscribed.len(), 1);
        sentinel.switch_now(2);
        assert_eq!(
            pushes.try_recv().ok(),
            Some(Frame::Array(vec![
                bulk(b"message"),
                bulk(SWITCH_MASTER),
                bulk(b"mymaster redis-0 6379 redis-2 6379"),
            ]))
        );
        assert_eq!(
            dispatch(&sentinel, 1, &push, &ask),
            vec![Frame::Array(vec![bulk(b"redis-2"), bulk(b"6379")])]
        );
        sentinel.switch_now(2);
        assert!(pushes.try_recv().is_err(), "no switch, no announcement");
    }
}
