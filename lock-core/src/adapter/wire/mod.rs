//! The wire: encoding commands and decoding replies (`codec`), sending a
//! call (`call`), group commit (`batch`) and its pipeline of native commands
//! (`native`), and routing by slot in a Redis Cluster (`route`).

pub(crate) mod batch;
pub(crate) mod call;
pub(crate) mod codec;
pub(crate) mod item;
pub(crate) mod native;
pub(crate) mod route;
