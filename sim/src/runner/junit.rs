//! A run's results as JUnit XML, the format GitHub (through a test-report
//! action), GitLab and Jenkins display: one `<testcase>` per scenario
//! file, with its seeds and time; an unmet expectation is a `<failure>`
//! whose message names the first failing seed, the command that replays
//! it and its report.

use std::io::{self, Write};

use quick_xml::{Writer, events::BytesText};

use super::{RunFile, Shard, Summary};
use crate::{config::Expect, scenario::property_name};

/// Where a run's seeds ran, which decides how a failing seed is replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `sim run` (and `sim merge`): `sim replay FILE --seed S` replays it.
    Simulated,
    /// `sim chaos`: `sim chaos FILE --seed S` runs it again on real
    /// processes; `sim replay` runs its schedule in simulation.
    Real,
}

impl Source {
    fn suite(self) -> &'static str {
        match self {
            Self::Simulated => "sim run",
            Self::Real => "sim chaos",
        }
    }

    /// The command that replays `seed` of `file`, in words.
    fn replay(self, file: &str, seed: u64) -> String {
        match self {
            Self::Simulated => format!("replay: sim replay {file} --seed {seed}"),
            Self::Real => format!(
                "rerun: sim chaos {file} --seed {seed} (its schedule in simulation: \
                 sim replay {file} --seed {seed})"
            ),
        }
    }
}

/// How one scenario's testcase ends.
enum Status {
    Passed,
    /// The expectation is not met: the failure's one-line message.
    Failed(String),
    /// A shard of a run expecting a violation that its seeds did not show:
    /// only the merged shards can say.
    Undecided,
    /// No violation the expectation is about, and a seed that proved
    /// nothing: the message says which and why.
    Inconclusive(String),
}

fn status(summary: &Summary, source: Source) -> Status {
    if summary.status == super::Status::Inconclusive {
        let seed = summary.first_inconclusive_seed.unwrap_or_default();
        let report = summary
            .report
            .as_deref()
            .map_or_else(String::new, |path| format!("; report: {path}"));
        return Status::Inconclusive(format!(
            "inconclusive: {} of {} seeds proved nothing; seed {seed}: {}; {}{report}",
            summary.inconclusive,
            summary.seeds,
            summary.inconclusive_reasons.join("; "),
            source.replay(&summary.file, seed)
        ));
    }
    if summary.met && !summary.fails_run() {
        return Status::Passed;
    }
    if !summary.fails_run() {
        return Status::Undecided;
    }
    let file = summary.file.as_str();
    let report = summary.report.as_deref().map_or_else(
        || "no report written".to_owned(),
        |path| format!("report: {path}"),
    );
    let about = summary.property.map_or_else(
        || "a violation".to_owned(),
        |property| format!("a violation of {}", property_name(property)),
    );
    let message = match (summary.expect, summary.first_failing_seed) {
        (Expect::Safe, Some(seed)) => format!(
            "expected safe, but seed {seed} is the first of {} to break it ({}); {}; {report}",
            summary.seeds,
            violated(summary),
            source.replay(file, seed)
        ),
        (Expect::Violation, _) | (Expect::Safe, None) => {
            let other = summary
                .first_violating_seed
                .map_or_else(String::new, |seed| {
                    format!(
                        "; seed {seed} violated {}: {}; {report}",
                        violated(summary),
                        source.replay(file, seed)
                    )
                });
            format!(
                "expected {about}, but none of {} seeds showed it (no failing seed){other}",
                summary.seeds
            )
        }
    };
    Status::Failed(message)
}

/// The properties the seeds violated, with how many seeds each.
fn violated(summary: &Summary) -> String {
    summary
        .violations
        .iter()
        .map(|(property, seeds)| format!("{property} on {seeds} seeds"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn seconds(wall_ms: u128) -> String {
    format!("{:.3}", wall_ms as f64 / 1000.0)
}

/// XML 1.0 allows no control characters but tab, newline and carriage
/// return, even escaped: drop the others (a file name could hold one).
fn xml_text(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || matches!(c, '\t' | '\n' | '\r'))
        .collect()
}

/// Writes `file` as JUnit XML to `out`: one `<testsuite>` named after the
/// command, one `<testcase>` per scenario in the run's order.
pub fn write(file: &RunFile, source: Source, out: impl Write) -> io::Result<()> {
    let statuses: Vec<Status> = file
        .scenarios
        .iter()
        .map(|summary| status(summary, source))
        .collect();
    let failures = statuses
        .iter()
        .filter(|s| matches!(s, Status::Failed(_) | Status::Inconclusive(_)))
        .count();
    let skipped = statuses
        .iter()
        .filter(|s| matches!(s, Status::Undecided))
        .count();
    let wall_ms: u128 = file.scenarios.iter().map(|s| s.wall_ms).sum();
    let suite = if file.shard == Shard::WHOLE {
        source.suite().to_owned()
    } else {
        format!("{} (shard {})", source.suite(), file.shard)
    };
    let (tests, failures, skipped) = (
        file.scenarios.len().to_string(),
        failures.to_string(),
        skipped.to_string(),
    );
    let total_time = seconds(wall_ms);
    let suite_attributes = [
        ("name", suite.as_str()),
        ("tests", &tests),
        ("failures", &failures),
        ("errors", "0"),
        ("skipped", &skipped),
        ("time", &total_time),
    ];
    let mut writer = Writer::new_with_indent(out, b' ', 2);
    writer.write_event(quick_xml::events::Event::Decl(
        quick_xml::events::BytesDecl::new("1.0", Some("UTF-8"), None),
    ))?;
    writer
        .create_element("testsuites")
        .with_attributes(suite_attributes)
        .write_inner_content(|writer| {
            writer
                .create_element("testsuite")
                .with_attributes(suite_attributes)
                .write_inner_content(|writer| {
                    for (summary, status) in file.scenarios.iter().zip(&statuses) {
                        testcase(writer, summary, status)?;
                    }
                    Ok(())
                })?;
            Ok(())
        })?;
    writer.get_mut().write_all(b"\n")
}

fn testcase<W: Write>(
    writer: &mut Writer<W>,
    summary: &Summary,
    status: &Status,
) -> io::Result<()> {
    let file = xml_text(&summary.file);
    let seeds = summary.seeds.to_string();
    let time = seconds(summary.wall_ms);
    let out = xml_text(&summary_line(summary));
    writer
        .create_element("testcase")
        .with_attributes([
            ("name", summary.name.as_str()),
            ("classname", &file),
            ("file", &file),
            ("time", &time),
        ])
        .write_inner_content(|writer| {
            writer
                .create_element("properties")
                .write_inner_content(|writer| {
                    writer
                        .create_element("property")
                        .with_attributes([("name", "seeds"), ("value", seeds.as_str())])
                        .write_empty()?;
                    Ok(())
                })?;
            match status {
                Status::Passed => {}
                Status::Failed(message) => {
                    let message = xml_text(message);
                    writer
                        .create_element("failure")
                        .with_attributes([("message", message.as_str()), ("type", "unmet")])
                        .write_text_content(BytesText::new(&message))?;
                }
                Status::Inconclusive(message) => {
                    let message = xml_text(message);
                    writer
                        .create_element("failure")
                        .with_attributes([("message", message.as_str()), ("type", "inconclusive")])
                        .write_text_content(BytesText::new(&message))?;
                }
                Status::Undecided => {
                    writer
                        .create_element("skipped")
                        .with_attribute((
                            "message",
                            "no seed of this shard showed the expected violation: \
                             merge the shards for the verdict",
                        ))
                        .write_empty()?;
                }
            }
            writer
                .create_element("system-out")
                .write_text_content(BytesText::new(&out))?;
            Ok(())
        })?;
    Ok(())
}

/// The scenario's row of the table, in words.
fn summary_line(summary: &Summary) -> String {
    let violations = if summary.violations.is_empty() {
        "no violations".to_owned()
    } else {
        format!("violations: {}", violated(summary))
    };
    let facts: Vec<&str> = summary.facts.iter().map(String::as_str).collect();
    format!(
        "{} seeds, {violations}; facts: {}",
        summary.seeds,
        if facts.is_empty() {
            "-".to_owned()
        } else {
            facts.join(", ")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Property;

    fn summary(expect: Expect, first_failing_seed: Option<u64>) -> Summary {
        Summary {
            name: "tiny".to_owned(),
            file: "dir/<odd> & \"name\".toml".to_owned(),
            expect,
            property: None,
            shard: Shard::WHOLE,
            seeds: 7,
            stopped: false,
            violations: first_failing_seed
                .map(|_| ("lease-exclusion".to_owned(), 2))
                .into_iter()
                .collect(),
            facts: ["failover".to_owned()].into_iter().collect(),
            overtakings: 0,
            first_failing_seed,
            first_violating_seed: first_failing_seed,
            inconclusive: 0,
            first_inconclusive_seed: None,
            inconclusive_reasons: Vec::new(),
            status: if (expect == Expect::Safe) == first_failing_seed.is_none() {
                super::super::Status::Met
            } else {
                super::super::Status::Missed
            },
            met: (expect == Expect::Safe) == first_failing_seed.is_none(),
            wall_ms: 1234,
            report: first_failing_seed.map(|seed| format!("reports/tiny-{seed}.html")),
            shrunk_property: first_failing_seed.map(|_| Property::LeaseExclusion),
            shrunk_schedule: None,
        }
    }

    fn xml(scenarios: Vec<Summary>, source: Source) -> String {
        let mut out = Vec::new();
        write(
            &RunFile {
                shard: Shard::WHOLE,
                scenarios,
            },
            source,
            &mut out,
        )
        .expect("writing to a Vec cannot fail");
        String::from_utf8(out).expect("the writer writes the UTF-8 it is given")
    }

    #[test]
    fn an_unsafe_safe_scenario_fails_with_its_replay_and_report() {
        let text = xml(
            vec![summary(Expect::Safe, None), summary(Expect::Safe, Some(3))],
            Source::Simulated,
        );
        let doc = roxmltree::Document::parse(&text).expect("valid XML");
        let cases: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        assert_eq!(cases.len(), 2);
        assert_eq!(
            cases[0].attribute("file"),
            Some("dir/<odd> & \"name\".toml")
        );
        assert_eq!(cases[0].attribute("time"), Some("1.234"));
        assert!(!cases[0].children().any(|n| n.has_tag_name("failure")));
        let failure = cases[1]
            .children()
            .find(|n| n.has_tag_name("failure"))
            .expect("a failure");
        let message = failure.attribute("message").expect("a message");
        assert!(
            message.contains("seed 3")
                && message.contains("sim replay dir/<odd> & \"name\".toml --seed 3")
                && message.contains("report: reports/tiny-3.html"),
            "{message}"
        );
    }

    #[test]
    fn a_violation_no_seed_showed_fails_without_a_seed() {
        let text = xml(vec![summary(Expect::Violation, None)], Source::Real);
        let doc = roxmltree::Document::parse(&text).expect("valid XML");
        let failure = doc
            .descendants()
            .find(|n| n.has_tag_name("failure"))
            .expect("a failure");
        let message = failure.attribute("message").expect("a message");
        assert!(message.contains("none of 7 seeds"), "{message}");
        assert!(!message.contains("--seed"), "{message}");
    }

    #[test]
    fn an_inconclusive_scenario_fails_as_inconclusive_with_its_reasons() {
        let mut never = summary(Expect::Safe, None);
        never.inconclusive = 7;
        never.first_inconclusive_seed = Some(0);
        never.inconclusive_reasons = vec!["0 grants, fewer than the 1".to_owned()];
        never.judge();
        let text = xml(vec![never], Source::Real);
        let doc = roxmltree::Document::parse(&text).expect("valid XML");
        let failure = doc
            .descendants()
            .find(|n| n.has_tag_name("failure"))
            .expect("a failure");
        assert_eq!(failure.attribute("type"), Some("inconclusive"));
        let message = failure.attribute("message").expect("a message");
        assert!(
            message.contains("7 of 7 seeds proved nothing") && message.contains("0 grants"),
            "{message}"
        );
    }
}
