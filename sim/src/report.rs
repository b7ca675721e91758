//! The timeline report: one self-contained HTML file (inline SVG and CSS,
//! nothing fetched) that shows a failing run so a person can see the
//! failure: who believed they held the lock when, what the authoritative
//! Redis actually held, where the faults struck, which writes storage took,
//! and where the checkers found the violation.
//!
//! The picture is drawn lane by lane by a `Timeline`: the faults, one
//! lane per client, the authoritative key, the storage; then the marks
//! that cross lanes (violations, overlapping beliefs).

use std::{collections::BTreeMap, fmt::Write as _, time::Duration};

use crate::{
    checker::{self, Hold, HoldEnd},
    config::{Scenario, Topology},
    history::{Op, Phase, Process},
    outcome::{ConcreteFault, SeedOutcome},
    scenario,
};

const LEFT: f64 = 110.0;
const WIDTH: f64 = 1100.0;
const LANE: f64 = 44.0;
/// The top of the fault lane.
const FAULT_Y: f64 = 30.0;
const COLORS: [&str; 8] = [
    "#2b7bb9", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
];
const FAULT_COLOR: &str = "#f4a259";

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn color(client: usize) -> &'static str {
    COLORS[client % COLORS.len()]
}

/// Renders the report for one seed; `shrunk` is the smallest failing
/// schedule, if one was found.
pub fn render_html(
    scenario: &Scenario,
    outcome: &SeedOutcome,
    shrunk: Option<&[ConcreteFault]>,
) -> String {
    let mut timeline = Timeline::new(scenario, outcome);
    timeline.lanes();
    timeline.axis();
    timeline.faults();
    timeline.beliefs();
    timeline.waits();
    timeline.authoritative_key();
    timeline.storage_writes();
    timeline.violations();
    timeline.overlaps();
    page(scenario, outcome, shrunk, &timeline.finish())
}

/// The SVG picture of one run, drawn one lane at a time.
struct Timeline<'a> {
    scenario: &'a Scenario,
    outcome: &'a SeedOutcome,
    holds: Vec<Hold>,
    /// Which client each owner token belongs to.
    client_of: BTreeMap<&'a str, usize>,
    svg: String,
}

impl<'a> Timeline<'a> {
    fn new(scenario: &'a Scenario, outcome: &'a SeedOutcome) -> Self {
        let holds = checker::holds(&outcome.history, scenario.duration);
        let client_of = outcome
            .history
            .entries
            .iter()
            .filter_map(|entry| match (&entry.process, &entry.op) {
                (Process::Client(client), Op::AcquireOk { token, .. }) => {
                    Some((token.as_str(), *client))
                }
                _ => None,
            })
            .collect();
        let mut svg = String::new();
        let height = Self::storage_y(scenario) + LANE + 30.0;
        let _ = write!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="sans-serif" font-size="12">"#,
            LEFT + WIDTH + 20.0
        );
        Self {
            scenario,
            outcome,
            holds,
            client_of,
            svg,
        }
    }

    /// The x of true time `t`.
    fn x(&self, t: Duration) -> f64 {
        let run = self.scenario.duration.as_secs_f64().max(0.001);
        LEFT + t.as_secs_f64().min(run) / run * WIDTH
    }

    fn client_y(client: usize) -> f64 {
        FAULT_Y + LANE * (client as f64 + 1.0)
    }

    fn key_y(scenario: &Scenario) -> f64 {
        Self::client_y(scenario.clients.count)
    }

    fn storage_y(scenario: &Scenario) -> f64 {
        Self::key_y(scenario) + LANE
    }

    /// The bottom of the last lane.
    fn bottom(&self) -> f64 {
        Self::storage_y(self.scenario) + LANE
    }

    /// The labels and rules of every lane.
    fn lanes(&mut self) {
        let key = match self.scenario.topology {
            Topology::Redlock { .. } => "majority key",
            Topology::Single | Topology::PrimaryReplica { .. } | Topology::Sentinel { .. } => {
                "primary key"
            }
            Topology::Cluster { .. } => "slot owner key",
        };
        let mut lanes = vec![(FAULT_Y, "faults".to_owned())];
        lanes.extend(
            (0..self.scenario.clients.count)
                .map(|client| (Self::client_y(client), format!("client-{client}"))),
        );
        lanes.push((Self::key_y(self.scenario), key.to_owned()));
        lanes.push((Self::storage_y(self.scenario), "storage".to_owned()));
        for (y, label) in lanes {
            let _ = write!(
                self.svg,
                r##"<text x="8" y="{}">{}</text><line x1="{LEFT}" x2="{}" y1="{}" y2="{}" stroke="#ddd"/>"##,
                y + 20.0,
                escape(&label),
                LEFT + WIDTH,
                y + LANE - 4.0,
                y + LANE - 4.0
            );
        }
    }

    /// The time axis, with a rule every step.
    fn axis(&mut self) {
        let run = self.scenario.duration.as_secs_f64().max(0.001);
        let step = if run > 20.0 {
            5.0
        } else if run > 5.0 {
            1.0
        } else {
            0.5
        };
        let height = self.bottom() + 30.0;
        let mut tick = 0.0;
        while tick <= run + 1e-9 {
            let tx = LEFT + tick / run * WIDTH;
            let _ = write!(
                self.svg,
                r##"<line x1="{tx}" x2="{tx}" y1="{FAULT_Y}" y2="{}" stroke="#f0f0f0"/><text x="{tx}" y="{}" text-anchor="middle" fill="#666">{tick}s</text>"##,
                self.bottom(),
                height - 8.0
            );
            tick += step;
        }
    }

    /// Each fault: a band in the fault lane, and a shade over the lane of
    /// the host it hit.
    fn faults(&mut self) {
        let mut open: BTreeMap<(String, String), Duration> = BTreeMap::new();
        let mut bands = Vec::new();
        for entry in &self.outcome.history.entries {
            if let Op::Fault {
                kind,
                target,
                phase,
            } = &entry.op
            {
                match phase {
                    Phase::Start => {
                        open.insert((kind.clone(), target.clone()), entry.at);
                    }
                    Phase::End => {
                        if let Some(start) = open.remove(&(kind.clone(), target.clone())) {
                            bands.push((kind.clone(), target.clone(), start, entry.at));
                        }
                    }
                }
            }
            if let Op::Failover { new_primary, .. } = &entry.op {
                bands.push((
                    "failover".into(),
                    format!("redis:{new_primary}"),
                    entry.at,
                    entry.at,
                ));
            }
        }
        for ((kind, target), start) in open {
            bands.push((kind, target, start, self.scenario.duration));
        }
        for (kind, target, start, end) in &bands {
            let (x0, x1) = (self.x(*start), self.x(*end).max(self.x(*start) + 2.0));
            let target_y = match target.split_once(':') {
                Some(("client", n)) => n.parse::<usize>().ok().map(Self::client_y),
                Some(("redis", _)) => Some(Self::key_y(self.scenario)),
                _ if target == "storage" => Some(Self::storage_y(self.scenario)),
                _ => None,
            };
            let _ = write!(
                self.svg,
                r##"<rect x="{x0}" y="{}" width="{}" height="{}" fill="{FAULT_COLOR}" opacity="0.8"><title>{} {} {:?}–{:?}</title></rect><text x="{}" y="{}" font-size="10">{}</text>"##,
                FAULT_Y + 4.0,
                x1 - x0,
                LANE - 12.0,
                escape(kind),
                escape(target),
                start,
                end,
                x0 + 2.0,
                FAULT_Y + 18.0,
                escape(&format!("{kind} {target}"))
            );
            if let Some(y) = target_y {
                let _ = write!(
                    self.svg,
                    r##"<rect x="{x0}" y="{y}" width="{}" height="{}" fill="{FAULT_COLOR}" opacity="0.25"/>"##,
                    x1 - x0,
                    LANE - 4.0
                );
            }
        }
    }

    /// What each client believed it held, and where it learnt it lost it.
    fn beliefs(&mut self) {
        for hold in &self.holds {
            let y = Self::client_y(hold.client);
            let end = match hold.ended_by {
                HoldEnd::EndOfRun => self.scenario.duration,
                _ => hold.end,
            };
            // A reader's (shared) hold is drawn hatched-light and says so.
            let (share, opacity) = if hold.shared {
                ("a shared (read) hold", "0.45")
            } else {
                ("an exclusive hold", "1")
            };
            let _ = write!(
                self.svg,
                r##"<rect x="{}" y="{}" width="{}" height="{}" fill="{}" opacity="{opacity}" rx="3"><title>client-{} held fence {} from {:?} to {:?} (ended by {:?}): {share}</title></rect>"##,
                self.x(hold.start),
                y + 8.0,
                (self.x(end) - self.x(hold.start)).max(1.0),
                LANE - 20.0,
                color(hold.client),
                hold.client,
                hold.fence,
                hold.start,
                end,
                hold.ended_by
            );
            if let Some(index) = hold.lost_entry {
                let at = self.outcome.history.entries[index].at;
                let _ = write!(
                    self.svg,
                    r##"<text x="{}" y="{}" fill="#c00" font-weight="bold" text-anchor="middle">✕<title>Lost at {at:?}</title></text>"##,
                    self.x(at),
                    y + 8.0
                );
            }
        }
    }

    /// When each client started waiting (its first refused acquire): a
    /// tick on its lane, which the fairness checker orders waits by.
    fn waits(&mut self) {
        for entry in &self.outcome.history.entries {
            let (Process::Client(client), Op::Waiting) = (entry.process, &entry.op) else {
                continue;
            };
            let y = Self::client_y(client);
            let x = self.x(entry.at);
            let _ = write!(
                self.svg,
                r##"<line x1="{x}" x2="{x}" y1="{}" y2="{}" stroke="#555" stroke-width="1"><title>client-{client} started waiting at {:?}</title></line>"##,
                y + 4.0,
                y + LANE - 8.0,
                entry.at
            );
        }
    }

    /// Who the authoritative Redis said held the key, over time: on the
    /// primary of record (in the Sentinel topology, the one the sentinels
    /// named at that instant), marked with its node wherever it changed.
    fn authoritative_key(&mut self) {
        let has_primary = self.scenario.topology.has_primary();
        let mut last: Option<(Duration, Option<&str>, usize)> = None;
        let mut segments = Vec::new();
        for entry in &self.outcome.history.entries {
            if let Op::Oracle { owner, primary, .. } = &entry.op {
                if let Some((start, previous, node)) = last.take() {
                    segments.push((start, entry.at, previous, node));
                }
                last = Some((entry.at, owner.as_deref(), *primary));
            }
        }
        if let Some((start, owner, node)) = last {
            segments.push((start, self.scenario.duration, owner, node));
        }
        let y = Self::key_y(self.scenario);
        let mut shown_primary = 0;
        for (start, end, owner, node) in segments {
            if has_primary && node != shown_primary {
                shown_primary = node;
                let _ = write!(
                    self.svg,
                    r##"<line x1="{x}" x2="{x}" y1="{}" y2="{}" stroke="#333"/><text x="{}" y="{}" font-size="10">redis-{node}<title>from {start:?} the authoritative primary is redis-{node}</title></text>"##,
                    y + 2.0,
                    y + LANE - 6.0,
                    self.x(start) + 2.0,
                    y + LANE - 6.0,
                    x = self.x(start),
                );
            }
            let Some(owner) = owner else { continue };
            let client = self.client_of.get(owner).copied();
            let on = if has_primary {
                format!(" on redis-{node}")
            } else {
                String::new()
            };
            let _ = write!(
                self.svg,
                r##"<rect x="{}" y="{}" width="{}" height="{}" fill="{}" opacity="0.6"><title>key owned by {}{on} from {start:?} to {end:?}</title></rect>"##,
                self.x(start),
                y + 8.0,
                (self.x(end) - self.x(start)).max(1.0),
                LANE - 20.0,
                client.map_or("#999", color),
                client.map_or_else(|| owner.to_owned(), |c| format!("client-{c}"))
            );
        }
    }

    /// Storage writes: filled when accepted, hollow red when refused.
    fn storage_writes(&mut self) {
        let y = Self::storage_y(self.scenario) + 20.0;
        for entry in &self.outcome.history.entries {
            if let (
                Process::Storage,
                Op::WriteOk {
                    token,
                    fence,
                    accepted,
                    ..
                },
            ) = (&entry.process, &entry.op)
            {
                let client = self.client_of.get(token.as_str()).copied().unwrap_or(0);
                let (fill, stroke) = if *accepted {
                    (color(client), color(client))
                } else {
                    ("white", "#c00")
                };
                let _ = write!(
                    self.svg,
                    r##"<circle cx="{}" cy="{y}" r="4" fill="{fill}" stroke="{stroke}" stroke-width="2"><title>{} write by client-{client}, fence {fence}, at {:?}</title></circle>"##,
                    self.x(entry.at),
                    if *accepted { "accepted" } else { "REJECTED" },
                    entry.at
                );
            }
        }
    }

    /// Each violation: a red line across every lane, labelled.
    fn violations(&mut self) {
        for violation in &self.outcome.verdict.violations {
            let vx = self.x(violation.at);
            let _ = write!(
                self.svg,
                r##"<line x1="{vx}" x2="{vx}" y1="{FAULT_Y}" y2="{}" stroke="#d00" stroke-width="2" stroke-dasharray="4 2"><title>{}</title></line>"##,
                self.bottom(),
                escape(&violation.message)
            );
        }
    }

    /// Two clients believing they hold at once where that is a violation
    /// (S1, or F1 for a writer), shaded red in both lanes: readers may
    /// share, and a semaphore's holders may overlap up to its permits.
    fn overlaps(&mut self) {
        if self.scenario.clients.workload.kind == crate::config::WorkloadKind::Semaphore {
            return;
        }
        let mut shades = Vec::new();
        for (i, a) in self.holds.iter().enumerate() {
            for b in &self.holds[i + 1..] {
                let shared = a.shared && b.shared;
                if !shared && a.client != b.client && b.start < a.end && a.start < b.end {
                    let (start, end) = (a.start.max(b.start), a.end.min(b.end));
                    shades.extend([(a.client, start, end), (b.client, start, end)]);
                }
            }
        }
        for (client, start, end) in shades {
            let _ = write!(
                self.svg,
                r##"<rect x="{}" y="{}" width="{}" height="{}" fill="#d00" opacity="0.55"><title>overlap: two holders</title></rect>"##,
                self.x(start),
                Self::client_y(client) + 4.0,
                (self.x(end) - self.x(start)).max(2.0),
                LANE - 12.0
            );
        }
    }

    fn finish(mut self) -> String {
        self.svg.push_str("</svg>");
        self.svg
    }
}

/// The page around the picture: legend, violations, facts, the schedule.
fn page(
    scenario: &Scenario,
    outcome: &SeedOutcome,
    shrunk: Option<&[ConcreteFault]>,
    svg: &str,
) -> String {
    let mut violations = String::new();
    for violation in &outcome.verdict.violations {
        let _ = write!(
            violations,
            "<li><b>{:?}</b> at {:?}: {}</li>",
            violation.property,
            violation.at,
            escape(&violation.message)
        );
    }
    if violations.is_empty() {
        violations.push_str("<li>none</li>");
    }
    let validity = if outcome.verdict.invalid.is_empty() {
        "<p>valid: the run had its grants and the evidence of each fault</p>".to_owned()
    } else {
        let reasons: String = outcome
            .verdict
            .invalid
            .iter()
            .map(|reason| format!("<li>{}</li>", escape(reason)))
            .collect();
        format!(
            "<p><b>inconclusive</b> unless it shows a violation: the run proves nothing</p><ul>{reasons}</ul>"
        )
    };
    let mut facts: Vec<String> = outcome.verdict.facts.iter().map(|f| escape(f)).collect();
    if outcome.verdict.overtakings > 0 {
        facts.push(format!(
            "{} grant(s) overtook a live waiter",
            outcome.verdict.overtakings
        ));
    }
    let schedule = shrunk.unwrap_or(&outcome.schedule);
    let shrunk_note = if shrunk.is_some() {
        format!(
            "shrunk from {} to {} fault(s); still violates",
            outcome.schedule.len(),
            schedule.len()
        )
    } else {
        "as drawn from the seed".to_owned()
    };
    format!(
        r##"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{name} seed {seed}</title>
<style>
body {{ font-family: sans-serif; margin: 24px; color: #222; }}
pre {{ background: #f6f6f6; padding: 12px; }}
.legend span {{ display: inline-block; margin-right: 18px; }}
.sw {{ display: inline-block; width: 14px; height: 10px; margin-right: 4px; vertical-align: middle; }}
</style></head><body>
<h1>{name} — seed {seed}</h1>
<p>{description}</p>
<p class="legend">
<span><i class="sw" style="background:{c0}"></i>a client believes it holds the lock</span>
<span><i class="sw" style="background:#d00"></i>two clients believe it at once</span>
<span><i class="sw" style="background:{FAULT_COLOR}"></i>fault</span>
<span><b style="color:#c00">✕</b> lost</span>
<span>● write accepted &nbsp; <span style="color:#c00">○</span> write refused by the fence</span>
<span>"primary key" (Redlock: "majority key"): who the authoritative Redis (Redlock: a majority of nodes; Sentinel: the primary the sentinels name at that instant, marked where it changes) says holds it</span>
</p>
{svg}
<h2>Violations</h2><ul>{violations}</ul>
<h2>Validity</h2>{validity}
<h2>Facts seen</h2><p>{facts}</p>
<h2>Fault schedule ({shrunk_note})</h2>
<pre>{toml}</pre>
<p>Replay: <code>cargo run --release -p sim -- replay scenarios/{name}.toml --seed {seed}</code></p>
</body></html>
"##,
        name = escape(&scenario.name),
        seed = outcome.seed,
        description = escape(&scenario.description),
        c0 = COLORS[0],
        facts = facts.join(", "),
        toml = escape(&scenario::schedule_toml(schedule)),
    )
}
