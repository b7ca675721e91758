//! Where connections come from: streams ([`connector`], [`dial`], TLS),
//! the transport a URL picks, one node's connection and its upkeep, and
//! what topology discovery reads (Sentinel, the cluster's slot map).

pub(crate) mod attempts;
pub(crate) mod connector;
pub(crate) mod dial;
pub(crate) mod endpoint;
pub(crate) mod error;
pub(crate) mod first;
pub(crate) mod node;
pub(crate) mod reply;
#[cfg(test)]
pub(crate) mod scripted;
pub mod sentinel;
pub mod slots;
#[cfg(feature = "tls")]
pub(crate) mod tls;
pub(crate) mod upkeep;
