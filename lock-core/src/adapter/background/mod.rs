//! The background work the driver future runs: the watchdog, the pub/sub
//! wake-ups, following the Sentinels' primary and the cluster's upkeep.

pub(crate) mod cluster_upkeep;
pub(crate) mod driver;
pub(crate) mod follow;
pub(crate) mod pubsub;
pub(crate) mod watchdog;
