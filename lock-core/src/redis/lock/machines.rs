//! One lock's state machine as the adapter drives it: a single node's
//! [`LockMachine`], or a [`RedlockMachine`] over every node. Both follow
//! the same drain rule; this enum only forwards.

use std::time::Instant;

use crate::{
    Command, CommandId, Event, LockMachine, LockOptions, OptionsError, RedlockError,
    RedlockMachine, Reply, scripts::KeyNames,
};

pub(crate) enum Machine {
    Single(LockMachine),
    Quorum(RedlockMachine),
}

impl Machine {
    /// A machine for `key` over `nodes` nodes (a quorum when `redlock`).
    pub(crate) fn new(
        redlock: bool,
        opts: &LockOptions,
        key: &str,
        token: String,
        nodes: usize,
        jitter_seed: u64,
    ) -> Result<Self, OptionsError> {
        if redlock {
            RedlockMachine::new(opts, key, token, nodes, jitter_seed)
                .map(Self::Quorum)
                .map_err(|error| match error {
                    RedlockError::Options(error) => error,
                    // A locker always has at least one node (`connect`
                    // refuses an empty list), so only options can be wrong.
                    RedlockError::NoNodes => unreachable!("a locker has nodes"),
                })
        } else {
            LockMachine::new(opts, key, token, jitter_seed).map(Self::Single)
        }
    }

    /// A single-node machine whose key names were built by the caller
    /// (a cluster's per-slot fence counter).
    pub(crate) fn single_with_names(
        opts: &LockOptions,
        names: KeyNames,
        token: String,
        jitter_seed: u64,
    ) -> Result<Self, OptionsError> {
        LockMachine::with_names(opts, std::sync::Arc::new(names), token.into(), jitter_seed)
            .map(Self::Single)
    }

    pub(crate) fn acquire(&mut self, now: Instant) {
        // A fresh machine is idle, so acquire cannot be refused.
        let _ = match self {
            Self::Single(m) => m.acquire(now),
            Self::Quorum(m) => m.acquire(now),
        };
    }

    pub(crate) fn release(&mut self, now: Instant) {
        match self {
            Self::Single(m) => m.release(now),
            Self::Quorum(m) => m.release(now),
        }
    }

    pub(crate) fn handle_wakeup(&mut self, now: Instant) {
        match self {
            Self::Single(m) => m.handle_wakeup(now),
            Self::Quorum(m) => m.handle_wakeup(now),
        }
    }

    pub(crate) fn handle_reply(&mut self, now: Instant, node: usize, id: CommandId, reply: Reply) {
        match self {
            Self::Single(m) => m.handle_reply(now, id, reply),
            Self::Quorum(m) => m.handle_reply(now, node, id, reply),
        }
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        match self {
            Self::Single(m) => m.handle_timeout(now),
            Self::Quorum(m) => m.handle_timeout(now),
        }
    }

    pub(crate) fn renewal_due(&self) -> Option<Instant> {
        match self {
            Self::Single(m) => m.renewal_due(),
            Self::Quorum(m) => m.renewal_due(),
        }
    }

    pub(crate) fn renew_early(&mut self, now: Instant) {
        match self {
            Self::Single(m) => m.renew_early(now),
            Self::Quorum(m) => m.renew_early(now),
        }
    }

    /// Returns true if the machine still waits for command `id` on `node`.
    pub(crate) fn awaits(&self, node: usize, id: CommandId) -> bool {
        match self {
            Self::Single(m) => m.in_flight() == Some(id),
            Self::Quorum(m) => m.awaits(node, id),
        }
    }

    pub(crate) fn poll_command(&mut self) -> Option<(usize, CommandId, Command)> {
        match self {
            Self::Single(m) => m.poll_command().map(|(id, c)| (0, id, c)),
            Self::Quorum(m) => m.poll_command(),
        }
    }

    pub(crate) fn poll_event(&mut self) -> Option<Event> {
        match self {
            Self::Single(m) => m.poll_event(),
            Self::Quorum(m) => m.poll_event(),
        }
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Self::Single(m) => m.poll_timeout(),
            Self::Quorum(m) => m.poll_timeout(),
        }
    }

    pub(crate) fn shared_names(&self) -> (std::sync::Arc<KeyNames>, std::sync::Arc<str>) {
        match self {
            Self::Single(m) => m.shared_names(),
            Self::Quorum(m) => m.shared_names(),
        }
    }

    pub(crate) fn is_released(&self) -> bool {
        match self {
            Self::Single(m) => m.state().is_released(),
            Self::Quorum(m) => m.is_released(),
        }
    }
}
