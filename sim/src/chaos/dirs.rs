//! Where a real run's servers keep their data.

use std::path::{Path, PathBuf};

use super::ChaosError;

/// Where one run's servers keep their data (node directories, a cluster
/// node's `nodes.conf`, a sentinel's config), removed when dropped, whatever
/// the outcome (the logs stay in the run's directory).
///
/// It is on a tmpfs when the machine has one (`/dev/shm`), so that no
/// server's `fsync` (a replica's received RDB before its rename, a cluster
/// node's `nodes.conf` at each epoch change, a sentinel's config rewrite, an
/// AOF) waits on the host's disk: on a machine writing heavily meanwhile (a
/// build beside the run), an ext4 `fsync` waits for a journal commit of
/// everything dirty, seconds, and a server stopped that long is a fault the
/// schedule did not draw. CI saw it: three cluster replicas stopped in
/// `Loading DB in memory`, their received RDBs not yet renamed, one of them
/// deaf to the controller for its whole 2 s timeout. A machine crash is
/// still the `lazy_aof` library's (`lazy_aof`), not the disk's. Without a
/// tmpfs, a `data` folder in the run's directory.
pub(super) struct DataDir(PathBuf);

impl DataDir {
    /// The directory.
    pub(super) fn path(&self) -> &Path {
        &self.0
    }

    /// A fresh data directory for the run whose logs go to `run_dir`.
    pub(super) fn new(run_dir: &std::path::Path) -> Result<Self, ChaosError> {
        let leaf = run_dir.file_name().unwrap_or_default();
        let path = match servers::tmpfs() {
            Some(shm) => shm.join("lock-sim-chaos").join(leaf),
            None => run_dir.join("data"),
        };
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(|source| ChaosError::Io {
            what: path.display().to_string(),
            source,
        })?;
        Ok(Self(path))
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        // The shared parent goes once its last run is gone.
        if let Some(parent) = self.0.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}
