//! The public API: [`Locker`](locker::Locker), its builder and the
//! [`LockGuard`](guard::LockGuard).

pub(crate) mod guard;
pub(crate) mod locker;
