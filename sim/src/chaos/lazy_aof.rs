//! The `lazy_aof` preload library (`sim/shim/lazy_aof.c`, built by
//! `sim/build.rs`): preloaded into a server that persists to an AOF, it
//! holds the server's AOF writes in the process until they are fsynced, so
//! that a `kill -9` loses what a machine crash loses — the writes since the
//! last fsync — and not merely what the page cache would have lost
//! (nothing). A restart fault on real processes then means what it means in
//! the simulator (`world::faults`: the node comes back with what its last
//! fsync covered).

use std::path::{Path, PathBuf};

use super::ChaosError;

/// The library, as built for this machine.
const LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/liblazy_aof.so"));

/// Writes the library into `dir` and returns its path, for `LD_PRELOAD`.
pub fn install(dir: &Path) -> Result<PathBuf, ChaosError> {
    let path = dir.join("liblazy_aof.so");
    std::fs::write(&path, LIBRARY).map_err(|source| ChaosError::Io {
        what: format!("writing {}", path.display()),
        source,
    })?;
    Ok(path)
}
