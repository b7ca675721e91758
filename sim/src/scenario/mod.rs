//! Scenario files: TOML in, a checked [`Scenario`](crate::config::Scenario)
//! out, every mistake reported as `file:line:col: message`, and the same
//! format written back out (scenarios, and shrunk fault schedules).
//!
//! [`names`] is the one table of fault kinds, properties and topology kinds
//! that the parser, the writer, the world and the reports share.

mod mix;
pub mod names;
mod parse;
mod text;
mod write;

pub use names::{kind_name, property_name};
pub use parse::{load, parse_scenario};
pub use text::{ScenarioError, duration_text, offset_text, quoted, range_text};
pub use write::{schedule_toml, to_toml};
