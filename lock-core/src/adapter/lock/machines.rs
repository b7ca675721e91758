//! One lock's state machine as the adapter drives it: a single node's
//! [`LockMachine`], or a [`RedlockMachine`] over every node. Both keep the
//! one [`Machine`] contract, which the adapter drives through deref.

use std::{
    ops::{Deref, DerefMut},
    sync::Arc,
};

use crate::{
    LockMachine, LockOptions, Machine, OptionsError, RedlockError, RedlockMachine,
    scripts::KeyNames,
};

/// Either machine, held inline (no allocation per lock); every call goes
/// through [`Machine`].
pub(crate) enum AnyMachine {
    Single(LockMachine),
    Quorum(RedlockMachine),
}

impl AnyMachine {
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
        LockMachine::with_names(opts, Arc::new(names), token.into(), jitter_seed).map(Self::Single)
    }

    /// The key names and the token, shared (commands are encoded with them
    /// without holding the machine).
    pub(crate) fn shared_names(&self) -> (Arc<KeyNames>, Arc<str>) {
        match self {
            Self::Single(m) => m.shared_names(),
            Self::Quorum(m) => m.shared_names(),
        }
    }
}

impl Deref for AnyMachine {
    type Target = dyn Machine;

    fn deref(&self) -> &Self::Target {
        match self {
            Self::Single(m) => m,
            Self::Quorum(m) => m,
        }
    }
}

impl DerefMut for AnyMachine {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match self {
            Self::Single(m) => m,
            Self::Quorum(m) => m,
        }
    }
}
