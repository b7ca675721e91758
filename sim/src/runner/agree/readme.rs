//! The README's guarantees table, its last column generated from one
//! `sim agree` archive: nobody edits what real processes showed by hand.
//!
//! The table follows a marker line naming the archive,
//! `<!-- agreement: DIR -->`, and a sentence this module writes (the run's
//! date, commit and command). Each row's scenario column links the files
//! it rests on (`[`name`](scenarios/name.toml)`); the last column becomes
//! what the archive's rows of those files say. The other columns are the
//! authors'. `sim agree --readme README.md --from DIR` rewrites the
//! README; `--check` says whether it is what its archive gives, which CI
//! runs.

use std::{fmt::Write as _, path::Path};

use super::{archive::load_table, row::Row, table::Header};
use crate::{config::Expect, scenario::names::PROPERTIES};

/// The marker line's start and end.
const MARKER: (&str, &str) = ("<!-- agreement: ", " -->");

/// Why the README's table could not be generated.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadmeError {
    /// The README has no marker line, or no table after it.
    #[error("{0}")]
    Shape(String),
    /// The archive could not be read.
    #[error(transparent)]
    Archive(#[from] super::archive::ArchiveError),
}

/// The archive directory the marker line of `readme` names.
pub fn marked_archive(readme: &str) -> Option<&str> {
    readme.lines().find_map(|line| {
        line.strip_prefix(MARKER.0)
            .and_then(|rest| rest.strip_suffix(MARKER.1))
            .map(str::trim)
    })
}

/// `readme` with the marker naming `archive` (relative to the README's
/// directory as `shown`), the sentence after it, and the table's last
/// column generated from the archive at `archive`.
pub fn render(readme: &str, archive: &Path, shown: &str) -> Result<String, ReadmeError> {
    let (header, rows) = load_table(archive)?;
    render_with(readme, &header, &rows, shown)
}

fn render_with(
    readme: &str,
    header: &Header,
    rows: &[Row],
    shown: &str,
) -> Result<String, ReadmeError> {
    let lines: Vec<&str> = readme.lines().collect();
    let marker = lines
        .iter()
        .position(|line| line.starts_with(MARKER.0) && line.ends_with(MARKER.1))
        .ok_or_else(|| {
            ReadmeError::Shape(format!(
                "no marker line `{}DIR{}` before the guarantees table",
                MARKER.0, MARKER.1
            ))
        })?;
    let table = (marker + 1..lines.len())
        .find(|&i| lines[i].starts_with('|'))
        .ok_or_else(|| ReadmeError::Shape("no table after the marker line".to_owned()))?;
    let mut out = String::new();
    for line in &lines[..marker] {
        out.push_str(line);
        out.push('\n');
    }
    let _ = writeln!(out, "{}{shown}{}", MARKER.0, MARKER.1);
    let _ = writeln!(out, "{}", sentence(header, rows, shown));
    out.push('\n');
    let mut index = table;
    // The header row and its separator stay as they are.
    for line in lines.iter().skip(table).take(2) {
        out.push_str(line);
        out.push('\n');
        index += 1;
    }
    while index < lines.len() && lines[index].starts_with('|') {
        out.push_str(&row_line(lines[index], rows));
        out.push('\n');
        index += 1;
    }
    for line in &lines[index..] {
        out.push_str(line);
        out.push('\n');
    }
    Ok(out)
}

/// The sentence that says where the last column comes from.
fn sentence(header: &Header, rows: &[Row], shown: &str) -> String {
    let ran = rows.iter().filter(|row| row.not_run.is_none()).count();
    let agree = rows
        .iter()
        .filter(|row| row.not_run.is_none() && row.agrees())
        .count();
    let runs: u64 = rows.iter().map(|row| row.real.seeds).sum();
    let commit = header.commit.get(..12).unwrap_or(&header.commit);
    format!(
        "The last column is generated, not written: `sim agree --readme README.md --from {shown}` fills it from one `sim agree` run over every scenario file ({date}, commit {commit}{dirty}: `{command}`; {machine}), whose archive [{shown}]({shown}/) keeps every real history (`sim agree --recheck {shown}` recomputes its table), and CI checks it is still what that archive says. {runs} real runs of {ran} files, as many per file as its plan chose (its row in [the archive's table]({shown}/table.md) says why); {agree} of the {ran} rows agree with the simulator. \"S1 on 3 of 10\": the file's property was violated on 3 of 10 real runs that proved something; \"safe, 10 of 10\": on none of them.",
        date = header.date,
        dirty = if header.commit.contains("uncommitted") {
            ", with uncommitted changes"
        } else {
            ""
        },
        command = header.command,
        machine = header.machine,
    )
}

/// One table line with its last cell generated from `rows` by the files
/// its other cells link.
fn row_line(line: &str, rows: &[Row]) -> String {
    let Some((head, _last)) = line.trim_end().trim_end_matches('|').rsplit_once('|') else {
        return line.to_owned();
    };
    let names = linked_scenarios(head);
    let cell = if names.is_empty() {
        "–".to_owned()
    } else if names.len() == 1 {
        cell_for(&names[0], rows)
    } else {
        names
            .iter()
            .map(|name| format!("`{name}`: {}", cell_for(name, rows)))
            .collect::<Vec<_>>()
            .join("; ")
    };
    format!("{head}| {cell} |")
}

/// The scenario files a row links, by name, in order.
fn linked_scenarios(cells: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = cells;
    while let Some(at) = rest.find("](scenarios/") {
        rest = &rest[at + "](scenarios/".len()..];
        if let Some(end) = rest.find(".toml)") {
            let name = rest[..end].to_owned();
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// What the archive's row for `name` says, in a few words.
fn cell_for(name: &str, rows: &[Row]) -> String {
    let Some(row) = rows.iter().find(|row| row.name == name) else {
        return "not in this run".to_owned();
    };
    if let Some(why) = &row.not_run {
        return format!("not run: {}", short_reason(why));
    }
    let real = row.real;
    if real.valid() == 0 {
        return format!(
            "inconclusive: none of {} runs proved something (the archive's `real.json` says why)",
            real.seeds
        );
    }
    let code = row.property.as_deref().map_or("a violation", code_of);
    // An unsafe file's violation not shown in fewer runs than an equal
    // rate needs: too few runs to say, not a disagreement.
    let chance = super::stats::chance_to_show(row.simulated.rate(), real.valid());
    let underpowered = row.expect == Expect::Violation && real.showing == 0 && chance < 0.95;
    let mut text = match row.expect {
        Expect::Violation if underpowered => format!(
            "{code} not shown in {} runs: too few (the simulator's {:.1} % shows in as many with {:.0} % probability)",
            real.valid(),
            100.0 * row.simulated.rate(),
            100.0 * chance
        ),
        Expect::Violation => format!("{code} on {} of {}", real.showing, real.valid()),
        Expect::Safe if real.showing == 0 => format!("safe, {} of {}", real.valid(), real.valid()),
        Expect::Safe => format!("**{code} on {} of {}**", real.showing, real.valid()),
    };
    if real.inconclusive > 0 {
        let _ = write!(text, "; {} inconclusive", real.inconclusive);
    }
    let wrong_verdict = match row.expect {
        Expect::Violation => real.showing == 0 && !underpowered,
        Expect::Safe => real.showing > 0,
    };
    if wrong_verdict || row.fisher_p < 0.05 {
        let _ = write!(
            text,
            " (**disagrees**: the simulator {} of {}, p = {:.3})",
            row.simulated.showing,
            row.simulated.valid(),
            row.fisher_p
        );
    }
    text
}

/// A property's short code (`S1`, `F3`, `A1`) from its name.
fn code_of(property: &str) -> &str {
    PROPERTIES
        .iter()
        .find(|(name, _, _)| *name == property)
        .and_then(|(_, _, description)| description.split([':', ' ']).next())
        .unwrap_or(property)
}

/// A refusal's reason without the file's place, and short.
fn short_reason(why: &str) -> String {
    // `FILE:LINE:COL: reason`: the file is the row's own.
    let reason = why
        .split_once(".toml:")
        .and_then(|(_, rest)| rest.split_once(": "))
        .map_or(why, |(_, reason)| reason);
    let mut short: String = reason.chars().take(120).collect();
    if short.len() < reason.len() {
        short.push('…');
    }
    short.replace('|', "/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::agree::Tally;

    fn row(name: &str, expect: Expect, property: Option<&str>, real: (u64, u64, u64)) -> Row {
        let mut row = Row {
            file: format!("scenarios/{name}.toml"),
            name: name.to_owned(),
            topology: "single".to_owned(),
            server: "redis-7.0".to_owned(),
            expect,
            property: property.map(str::to_owned),
            simulated: Tally {
                seeds: 100,
                showing: if expect == Expect::Violation { 50 } else { 0 },
                inconclusive: 0,
            },
            real: Tally {
                seeds: real.0,
                showing: real.1,
                inconclusive: real.2,
            },
            plan: String::new(),
            fisher_p: 1.0,
            real_ms: 0,
            not_run: None,
        };
        row.test();
        row
    }

    fn header() -> Header {
        Header {
            date: "2026-11-29T19:00:00Z".to_owned(),
            commit: "0123456789abcdef0123".to_owned(),
            command: "sim agree scenarios/ --budget 75m".to_owned(),
            machine: "2 cores".to_owned(),
            sim_seeds: 100,
            budget_s: 4500,
            sim_s: 1,
            partitions: String::new(),
        }
    }

    const README: &str = "# Lock\n\nIntro.\n\n<!-- agreement: old -->\nold sentence\n\n\
| Fault | Safe? | Scenario | On real processes |\n|---|---|---|---|\n\
| Pause | yes | [`a`](scenarios/a.toml) | hand-written |\n\
| Failover | no | [`b`](scenarios/b.toml), [`c`](scenarios/c.toml) | hand-written |\n\
| Reset | yes | unit tests | – |\n\
| Missing | yes | [`d`](scenarios/d.toml) | x |\n\nAfter.\n";

    #[test]
    fn the_last_column_says_what_the_archive_says_and_nothing_else_changes() {
        let mut refused = row("c", Expect::Safe, None, (0, 0, 0));
        refused.not_run = Some(
            "scenarios/c.toml:12:1: a server clock fault on a server that refuses it".to_owned(),
        );
        let rows = vec![
            row("a", Expect::Safe, None, (10, 0, 0)),
            row("b", Expect::Violation, Some("lease-exclusion"), (10, 3, 1)),
            refused,
        ];
        let out = render_with(README, &header(), &rows, "docs/agreement/x").expect("renders");
        assert!(out.starts_with("# Lock\n\nIntro.\n\n<!-- agreement: docs/agreement/x -->\n"));
        assert!(out.contains("commit 0123456789ab: `sim agree scenarios/ --budget 75m`"));
        assert!(out.contains("| Pause | yes | [`a`](scenarios/a.toml) | safe, 10 of 10 |\n"));
        assert!(
            out.contains("| `b`: S1 on 3 of 9; 1 inconclusive; `c`"),
            "{out}"
        );
        assert!(out.contains("; `c`: not run: a server clock fault on a server that refuses it |"));
        // Far fewer violations than the simulator's rate: a disagreement.
        let mut rare = row("a", Expect::Violation, Some("lease-exclusion"), (100, 1, 0));
        rare.test();
        assert!(cell_for("a", &[rare]).contains("(**disagrees**: the simulator 50 of 100, p = "));
        // Not shown in too few runs to expect it: said so, no disagreement.
        let mut few = row("a", Expect::Violation, Some("lease-exclusion"), (2, 0, 0));
        few.simulated.showing = 5;
        assert_eq!(
            cell_for("a", &[few]),
            "S1 not shown in 2 runs: too few (the simulator's 5.0 % shows in as many with 10 % probability)"
        );
        // Nothing proved: inconclusive.
        let none = row("a", Expect::Safe, None, (3, 0, 3));
        assert!(cell_for("a", &[none]).starts_with("inconclusive: none of 3 runs"));
        assert!(out.contains("| Reset | yes | unit tests | – |\n"));
        assert!(out.contains("| [`d`](scenarios/d.toml) | not in this run |\n"));
        assert!(out.ends_with("\nAfter.\n"));
        assert!(!out.contains("hand-written") && !out.contains("old sentence"));
        // Generated twice, the same.
        let again = render_with(&out, &header(), &rows, "docs/agreement/x").expect("renders");
        assert_eq!(again, out);
    }

    #[test]
    fn a_readme_without_its_marker_is_refused() {
        let error = render_with("# Lock\n| a | b |\n", &header(), &[], "x").expect_err("no marker");
        assert!(error.to_string().contains("no marker line"), "{error}");
        assert_eq!(marked_archive(README), Some("old"));
    }

    #[test]
    fn a_property_is_named_by_its_code() {
        assert_eq!(code_of("lease-exclusion"), "S1");
        assert_eq!(code_of("dead-waiter"), "F4");
        assert_eq!(code_of("no-orphans"), "A1");
    }
}
