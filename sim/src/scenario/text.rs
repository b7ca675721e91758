//! The scenario file format's values: locating a mistake (`file:line:col`)
//! and reading and writing durations, ranges and offsets.

use std::{fmt, ops::Range, time::Duration};

use toml::Spanned;

use crate::config::{DurationRange, SignedDuration};

/// A scenario file that could not be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file, as given.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong, in one sentence.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

impl std::error::Error for ScenarioError {}

/// The line and column (both 1-based, the column in characters) of byte
/// `offset` of `text`; an offset past the end is the end.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Turns byte offsets into line:col errors for one file.
pub(super) struct Locator<'a> {
    pub(super) file: &'a str,
    pub(super) text: &'a str,
}

impl Locator<'_> {
    pub(super) fn error(&self, span: Range<usize>, message: impl Into<String>) -> ScenarioError {
        let (line, column) = line_column(self.text, span.start);
        ScenarioError {
            file: self.file.to_owned(),
            line,
            column,
            message: message.into(),
        }
    }

    pub(super) fn duration(&self, value: &Spanned<String>) -> Result<Duration, ScenarioError> {
        humantime::parse_duration(value.get_ref().trim()).map_err(|error| {
            self.error(
                value.span(),
                format!(
                    "bad duration {:?}: {error} (write e.g. \"500ms\" or \"2s\")",
                    value.get_ref()
                ),
            )
        })
    }

    pub(super) fn range(&self, value: &Spanned<String>) -> Result<DurationRange, ScenarioError> {
        let text = value.get_ref();
        let Some((min, max)) = text.split_once("..") else {
            let fixed = self.duration(value)?;
            return Ok(DurationRange::fixed(fixed));
        };
        let parse = |part: &str| {
            humantime::parse_duration(part.trim()).map_err(|error| {
                self.error(
                    value.span(),
                    format!("bad range {text:?}: {part:?}: {error}"),
                )
            })
        };
        let (min, max) = (parse(min)?, parse(max)?);
        if min > max {
            return Err(self.error(
                value.span(),
                format!("bad range {text:?}: the start is after the end"),
            ));
        }
        Ok(DurationRange { min, max })
    }

    pub(super) fn signed(&self, value: &Spanned<String>) -> Result<SignedDuration, ScenarioError> {
        let text = value.get_ref().trim();
        let (negative, rest) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        let magnitude = humantime::parse_duration(rest.trim())
            .map_err(|error| self.error(value.span(), format!("bad offset {text:?}: {error}")))?;
        Ok(SignedDuration {
            negative,
            magnitude,
        })
    }
}

/// A duration in the file format, exact to the nanosecond ("1s 500ms").
pub fn duration_text(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

/// A range in the file format: one value when fixed, else "min..max".
pub fn range_text(range: DurationRange) -> String {
    if range.min == range.max {
        duration_text(range.min)
    } else {
        format!("{}..{}", duration_text(range.min), duration_text(range.max))
    }
}

/// A quoted TOML string.
pub fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// A clock-jump offset in the file format ("-3s").
pub fn offset_text(offset: SignedDuration) -> String {
    let sign = if offset.negative { "-" } else { "" };
    format!("{sign}{}", duration_text(offset.magnitude))
}
