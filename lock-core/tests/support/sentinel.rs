//! A Sentinel group of real processes (the `servers` crate's): one
//! primary, one replica and three sentinels by default, with a small
//! `down-after-milliseconds`, and the failovers a lock must survive.
#![allow(dead_code, unreachable_pub)]

use std::ops::{Deref, DerefMut};

// Each test binary uses a subset.
#[allow(unused_imports)]
pub use servers::sentinel::{MASTER_NAME, SentinelSetup, is_master};

/// A running group ([`servers::SentinelGroup`], whose methods it has),
/// every process killed on drop.
pub struct SentinelGroup(servers::SentinelGroup);

impl SentinelGroup {
    /// The default group: 1 primary, 1 replica, 3 sentinels, down after 1 s.
    pub fn start() -> Self {
        Self::start_with(&SentinelSetup::default())
    }

    /// Starts a group and waits until every sentinel knows the primary, the
    /// replicas and every other sentinel, so a failover can run at once.
    pub fn start_with(setup: &SentinelSetup) -> Self {
        Self(
            servers::SentinelGroup::start(super::binaries(), setup)
                .unwrap_or_else(|error| panic!("{error}")),
        )
    }
}

impl Deref for SentinelGroup {
    type Target = servers::SentinelGroup;

    fn deref(&self) -> &servers::SentinelGroup {
        &self.0
    }
}

impl DerefMut for SentinelGroup {
    fn deref_mut(&mut self) -> &mut servers::SentinelGroup {
        &mut self.0
    }
}
