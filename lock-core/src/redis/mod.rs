//! The tokio + redis-rs adapter: [`Locker`] drives [`LockMachine`](crate::LockMachine)s
//! over one multiplexed connection and hands out [`LockGuard`]s.

mod connector;
mod driver;
mod error;
mod locker;
mod wire;

pub use connector::{
    Clock, ConnectFuture, Connector, Entropy, Observed, Observer, OsEntropy, RedisStream,
    TcpConnector, TokioClock,
};
pub use error::{AcquireError, ConnectError, ReleaseError};
pub use locker::{Driver, LockGuard, Locker, LockerBuilder};
