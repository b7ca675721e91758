//! The state every clone of a [`Locker`](crate::Locker), every guard and
//! the driver share: what the connections and locks share ([`Shared`]),
//! and the watchdog's registry of the locks it watches.

use std::{
    ops::{Deref, DerefMut},
    sync::Arc,
};

use super::{registry::Registry, shared::Shared, timer::TimerPool};
use crate::adapter::connect::connector::{Clock, Entropy, Observer};

pub(crate) struct Session {
    shared: Shared,
    pub(crate) watchdog: Registry,
    /// The run loops' timers, kept between calls.
    pub(crate) timers: TimerPool,
}

impl Session {
    pub(crate) fn new(
        redlock: bool,
        nodes: usize,
        clock: Arc<dyn Clock>,
        entropy: Arc<dyn Entropy>,
        observer: Option<Observer>,
    ) -> Self {
        Self {
            shared: Shared::new(redlock, nodes, clock, entropy, observer),
            watchdog: Registry::default(),
            timers: TimerPool::default(),
        }
    }
}

impl Deref for Session {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.shared
    }
}

impl DerefMut for Session {
    fn deref_mut(&mut self) -> &mut Shared {
        &mut self.shared
    }
}
