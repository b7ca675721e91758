//! Scenario files: TOML in, a checked [`Scenario`](crate::config::Scenario)
//! out, every mistake reported as `file:line:col: message`, and the same
//! format written back out (scenarios, and shrunk fault schedules).
//!
//! [`schema`] is the file format's JSON Schema, for editors, derived from
//! the parser's raw types.
//!
//! [`reference`](mod@reference) renders the file format's reference (`docs/scenarios.md`)
//! from the schema, the parser's defaults and the names tables.
//!
//! [`names`] is the one table of fault kinds, properties and topology kinds
//! that the parser, the writer, the world and the reports share.

mod mix;
pub mod names;
mod parse;
pub mod reference;
pub mod schema;
mod schema_names;
mod text;
mod write;

pub use names::{kind_name, property_name};
pub use parse::{load, parse_scenario};
pub use schema::json_schema;
pub(crate) use text::line_column;
pub use text::{ScenarioError, duration_text, offset_text, quoted, range_text};
pub use write::{schedule_toml, to_toml};
