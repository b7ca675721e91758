//! One operation as a batch holds it until the batch is sent: shared by the
//! batcher (`batch`), which collects them, and the native pipeline
//! (`native`), which sends them.

use std::sync::Arc;

use crate::{Command, scripts::KeyNames};

/// One operation waiting in an open batch.
pub(super) struct Item {
    pub(super) names: Arc<KeyNames>,
    pub(super) token: Arc<str>,
    pub(super) command: Command,
}
