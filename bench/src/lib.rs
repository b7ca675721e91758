//! Benchmarks of `lock-core` against real Redis and its peers.
