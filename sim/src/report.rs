//! The timeline report: one self-contained HTML file (inline SVG and CSS,
//! nothing fetched) that shows a failing run so a person can see the
//! failure: who believed they held the lock when, what the authoritative
//! Redis actually held, where the faults struck, which writes storage took,
//! and where the checkers found the violation.

use std::{collections::BTreeMap, fmt::Write as _, time::Duration};

use crate::{
    checker::{self, HoldEnd},
    config::Scenario,
    history::{Op, Phase, Process},
    outcome::{ConcreteFault, SeedOutcome},
    shrink,
};

const LEFT: f64 = 110.0;
const WIDTH: f64 = 1100.0;
const LANE: f64 = 44.0;
const COLORS: [&str; 8] = [
    "#2b7bb9", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
];

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Renders the report for one seed; `shrunk` is the smallest failing
/// schedule, if one was found.
pub fn render_html(
    scenario: &Scenario,
    outcome: &SeedOutcome,
    shrunk: Option<&[ConcreteFault]>,
) -> String {
    let run = scenario.duration.as_secs_f64().max(0.001);
    let x = |t: Duration| LEFT + t.as_secs_f64().min(run) / run * WIDTH;
    let clients = scenario.clients.count;
    let holds = checker::holds(&outcome.history, scenario.duration);
    let client_of: BTreeMap<&str, usize> =
        holds.iter().map(|h| (h.token.as_str(), h.client)).collect();
    let color = |client: usize| COLORS[client % COLORS.len()];

    // Lanes: faults, one per client, the authoritative Redis, storage.
    let fault_y = 30.0;
    let client_y = |client: usize| fault_y + LANE * (client as f64 + 1.0);
    let redis_y = client_y(clients);
    let storage_y = redis_y + LANE;
    let height = storage_y + LANE + 30.0;

    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="sans-serif" font-size="12">"#,
        LEFT + WIDTH + 20.0
    );
    let mut lane = |y: f64, label: &str| {
        let _ = write!(
            svg,
            r##"<text x="8" y="{}">{}</text><line x1="{LEFT}" x2="{}" y1="{}" y2="{}" stroke="#ddd"/>"##,
            y + 20.0,
            escape(label),
            LEFT + WIDTH,
            y + LANE - 4.0,
            y + LANE - 4.0
        );
    };
    lane(fault_y, "faults");
    for client in 0..clients {
        lane(client_y(client), &format!("client-{client}"));
    }
    let oracle_lane = if matches!(scenario.topology, crate::config::Topology::Redlock { .. }) {
        "majority key"
    } else {
        "primary key"
    };
    lane(redis_y, oracle_lane);
    lane(storage_y, "storage");

    // Time axis.
    let step = if run > 20.0 {
        5.0
    } else if run > 5.0 {
        1.0
    } else {
        0.5
    };
    let mut tick = 0.0;
    while tick <= run + 1e-9 {
        let tx = LEFT + tick / run * WIDTH;
        let _ = write!(
            svg,
            r##"<line x1="{tx}" x2="{tx}" y1="{fault_y}" y2="{}" stroke="#f0f0f0"/><text x="{tx}" y="{}" text-anchor="middle" fill="#666">{tick}s</text>"##,
            storage_y + LANE,
            height - 8.0
        );
        tick += step;
    }

    // Faults: a band in the fault lane, and over the lane they hit.
    let mut open: BTreeMap<(String, String), Duration> = BTreeMap::new();
    let mut bands = Vec::new();
    for entry in &outcome.history.entries {
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
        bands.push((kind, target, start, scenario.duration));
    }
    for (kind, target, start, end) in &bands {
        let (x0, x1) = (x(*start), x(*end).max(x(*start) + 2.0));
        let target_y = match target.split_once(':') {
            Some(("client", n)) => n.parse::<usize>().ok().map(client_y),
            Some(("redis", _)) => Some(redis_y),
            _ if target == "storage" => Some(storage_y),
            _ => None,
        };
        let _ = write!(
            svg,
            r##"<rect x="{x0}" y="{}" width="{}" height="{}" fill="#f4a259" opacity="0.8"><title>{} {} {:?}–{:?}</title></rect><text x="{}" y="{}" font-size="10">{}</text>"##,
            fault_y + 4.0,
            x1 - x0,
            LANE - 12.0,
            escape(kind),
            escape(target),
            start,
            end,
            x0 + 2.0,
            fault_y + 18.0,
            escape(&format!("{kind} {target}"))
        );
        if let Some(y) = target_y {
            let _ = write!(
                svg,
                r##"<rect x="{x0}" y="{y}" width="{}" height="{}" fill="#f4a259" opacity="0.25"/>"##,
                x1 - x0,
                LANE - 4.0
            );
        }
    }

    // Beliefs: what each client thought it held.
    for hold in &holds {
        let y = client_y(hold.client);
        let end = match hold.ended_by {
            HoldEnd::EndOfRun => scenario.duration,
            _ => hold.end,
        };
        let _ = write!(
            svg,
            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="{}" rx="3"><title>client-{} held fence {} from {:?} to {:?} (ended by {:?})</title></rect>"##,
            x(hold.start),
            y + 8.0,
            (x(end) - x(hold.start)).max(1.0),
            LANE - 20.0,
            color(hold.client),
            hold.client,
            hold.fence,
            hold.start,
            end,
            hold.ended_by
        );
        if let Some(index) = hold.lost_entry {
            let at = outcome.history.entries[index].at;
            let _ = write!(
                svg,
                r##"<text x="{}" y="{}" fill="#c00" font-weight="bold" text-anchor="middle">✕<title>Lost at {at:?}</title></text>"##,
                x(at),
                y + 8.0
            );
        }
    }

    // The authoritative primary's key owner over time.
    let mut last: Option<(Duration, Option<String>)> = None;
    let mut segments = Vec::new();
    for entry in &outcome.history.entries {
        if let Op::Oracle { owner, .. } = &entry.op {
            if let Some((start, previous)) = last.take() {
                segments.push((start, entry.at, previous));
            }
            last = Some((entry.at, owner.clone()));
        }
    }
    if let Some((start, owner)) = last {
        segments.push((start, scenario.duration, owner));
    }
    for (start, end, owner) in segments {
        let Some(owner) = owner else { continue };
        let client = client_of.get(owner.as_str()).copied();
        let _ = write!(
            svg,
            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="{}" opacity="0.6"><title>key owned by {} from {start:?} to {end:?}</title></rect>"##,
            x(start),
            redis_y + 8.0,
            (x(end) - x(start)).max(1.0),
            LANE - 20.0,
            client.map_or("#999", color),
            client.map_or_else(|| owner.clone(), |c| format!("client-{c}"))
        );
    }

    // Storage writes: filled when accepted, hollow red when refused.
    for entry in &outcome.history.entries {
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
            let client = client_of.get(token.as_str()).copied().unwrap_or(0);
            let (fill, stroke) = if *accepted {
                (color(client), color(client))
            } else {
                ("white", "#c00")
            };
            let _ = write!(
                svg,
                r##"<circle cx="{}" cy="{}" r="4" fill="{fill}" stroke="{stroke}" stroke-width="2"><title>{} write by client-{client}, fence {fence}, at {:?}</title></circle>"##,
                x(entry.at),
                storage_y + 20.0,
                if *accepted { "accepted" } else { "REJECTED" },
                entry.at
            );
        }
    }

    // Violations: a red line across every lane, labelled.
    for violation in &outcome.verdict.violations {
        let vx = x(violation.at);
        let _ = write!(
            svg,
            r##"<line x1="{vx}" x2="{vx}" y1="{fault_y}" y2="{}" stroke="#d00" stroke-width="2" stroke-dasharray="4 2"><title>{}</title></line>"##,
            storage_y + LANE,
            escape(&violation.message)
        );
    }
    // Overlapping beliefs (S1) shaded red.
    for (i, a) in holds.iter().enumerate() {
        for b in &holds[i + 1..] {
            if a.client != b.client && b.start < a.end && a.start < b.end {
                let (start, end) = (a.start.max(b.start), a.end.min(b.end));
                for client in [a.client, b.client] {
                    let _ = write!(
                        svg,
                        r##"<rect x="{}" y="{}" width="{}" height="{}" fill="#d00" opacity="0.55"><title>overlap: two holders</title></rect>"##,
                        x(start),
                        client_y(client) + 4.0,
                        (x(end) - x(start)).max(2.0),
                        LANE - 12.0
                    );
                }
            }
        }
    }
    svg.push_str("</svg>");

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
    let facts: Vec<String> = outcome.verdict.facts.iter().map(|f| escape(f)).collect();
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
<span><i class="sw" style="background:#f4a259"></i>fault</span>
<span><b style="color:#c00">✕</b> lost</span>
<span>● write accepted &nbsp; <span style="color:#c00">○</span> write refused by the fence</span>
<span>"primary key" (Redlock: "majority key"): who the authoritative Redis (Redlock: a majority of nodes) says holds it</span>
</p>
{svg}
<h2>Violations</h2><ul>{violations}</ul>
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
        toml = escape(&shrink::schedule_toml(schedule)),
    )
}
