//! The history's entries as a real run records them, from every source,
//! stamped with the shared monotonic clock.

use std::sync::{Arc, Mutex, PoisonError};

use crate::chaos::wire::{mono_ns, since};
use crate::history::{Entry, Op, Process};

/// The history entries, from every source, before ordering.
#[derive(Debug, Clone, Default)]
pub(super) struct Entries(Arc<Mutex<Vec<Entry>>>);

impl Entries {
    pub(super) fn push(&self, entry: Entry) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(entry);
    }

    pub(super) fn take(&self) -> Vec<Entry> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The controller's own recorder: stamps with the shared clock now.
#[derive(Debug, Clone)]
pub(super) struct Recorder {
    pub(super) entries: Entries,
    pub(super) epoch: u64,
}

impl Recorder {
    pub(super) fn record(&self, process: Process, op: Op) {
        self.record_at(mono_ns(), process, op);
    }

    /// A slot migration moved `key` from node `from` to node `to`.
    pub(super) fn record_migrated(&self, key: String, from: usize, to: usize) {
        self.record(Process::Controller, Op::Migrated { key, from, to });
    }

    pub(super) fn record_at(&self, mono: u64, process: Process, op: Op) {
        let at = since(self.epoch, mono);
        self.entries.push(Entry {
            at,
            local: at,
            process,
            op,
        });
    }
}
