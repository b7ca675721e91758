//! The scenario file reference (`sim reference`, kept as
//! `docs/scenarios.md`): every key of every table with its TOML type,
//! whether it is required, its default and its unit, then the choices of
//! every names table. Rendered from the parser's own sources, so it cannot
//! describe a format the parser does not read:
//!
//! - the keys, their types, enumerations, required keys and descriptions
//!   come from the JSON Schema ([`json_schema`]), which
//!   the parser's raw serde types derive;
//! - the defaults come from parsing small probe files and writing them back
//!   with [`to_toml`], every key explicit: a default is what the parser
//!   fills in (and, for `renew_every` and `wait`, what the simulated client
//!   builds from the lock table: `crate::client::lock_options`);
//! - the choices come from [`names`](super::names).
//!
//! What no source above holds is kept here, checked against the schema by
//! the tests below: each key's unit ([`UNITS`]), and for a key whose absence
//! means something other than one fixed value, what it means
//! ([`WHEN_ABSENT`]). A key added to the raw types without a row in
//! [`UNITS`] fails `every_key_has_a_unit_and_every_unit_a_key`; the
//! rendered text differing from `docs/scenarios.md` fails
//! `docs_scenarios_md_is_generated`.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    time::Duration,
};

use serde_json::{Map, Value};

use super::{
    names::{
        EXPECTS, FAULT_KINDS, FENCINGS, FLAVOURS, PERSISTENCES, PROPERTIES, TOPOLOGY_KINDS, Use,
        WORKLOAD_KINDS,
    },
    parse::parse_scenario,
    schema::json_schema,
    text::duration_text,
    write::to_toml,
};
use crate::config::{Property, Scenario};

/// How to regenerate the reference, for the drift test's message and the
/// file's own header.
pub const REGENERATE: &str = "cargo run -p sim -- reference > docs/scenarios.md";

const DURATION: &str = "duration: a number and a unit, `\"500ms\"`, `\"2s\"`, `\"1m\"`";
const RANGE: &str = "duration, or a range `\"min..max\"` to draw from";
const COUNT: &str = "count";
const CHANCE: &str = "chance, from 0 to 1";
const NAME: &str = "name (the choices are listed)";

/// Each key's unit, by `table.key` (`key` alone at the top level).
pub const UNITS: &[(&str, &str)] = &[
    ("name", "text: letters, digits, `-`, `_`"),
    ("description", "text"),
    ("seeds", COUNT),
    ("min_grants", COUNT),
    ("max_stall", DURATION),
    ("duration", DURATION),
    ("expect", NAME),
    ("property", NAME),
    ("topology.kind", NAME),
    ("topology.replicas", COUNT),
    ("topology.nodes", COUNT),
    ("topology.replication_lag", RANGE),
    ("topology.sentinels", COUNT),
    ("topology.sentinel_lag", RANGE),
    ("topology.shards", COUNT),
    ("topology.node_timeout", DURATION),
    ("server.flavour", NAME),
    ("server.persistence", NAME),
    ("lock.ttl", "duration, whole milliseconds"),
    ("lock.renew_every", DURATION),
    ("lock.drift_factor", "fraction of the ttl (0.01 is 1 %)"),
    ("lock.fencing", NAME),
    ("lock.wait_replicas", "count of replicas"),
    ("lock.wait_aof", "`[local, replicas]`: two counts"),
    ("lock.wait", DURATION),
    ("clients.count", COUNT),
    ("clients.hold", RANGE),
    ("clients.think", RANGE),
    ("clients.unfenced_register", "true or false"),
    ("clients.locks", "count of locks per client"),
    ("clients.drop_guard", CHANCE),
    ("clients.cancel", CHANCE),
    ("workload.kind", NAME),
    ("workload.permits", "count of holders"),
    ("workload.read_share", CHANCE),
    ("fault.kind", NAME),
    (
        "fault.at",
        "time from the run's start, or a range drawn per seed",
    ),
    (
        "fault.target",
        "host: `client:N`, `client:any`, `redis:N`, `redis:primary`, `storage`",
    ),
    ("fault.duration", RANGE),
    ("fault.every", RANGE),
    ("fault.rate", "relative rate error (0.01 is 1 % fast)"),
    ("fault.offset", "signed duration (`\"2s\"`, `\"-3s\"`)"),
    ("fault.delay", RANGE),
    ("mix.kinds", "names of fault kinds"),
    ("mix.episodes", "count, or a range of counts `\"4..12\"`"),
    ("mix.drift", "relative rate error"),
    ("mix.jump", DURATION),
    ("mix.pairs", CHANCE),
];

/// What an absent key means, where that is not one fixed value the parser
/// fills in (those come from the probes).
pub const WHEN_ABSENT: &[(&str, &str)] = &[
    ("lock.wait_aof", "no `WAITAOF`"),
    ("topology.nodes", "none: `redlock` requires it"),
    (
        "fault.target",
        "`redis:primary` for a fault on Redis nodes where the topology has a primary; required otherwise",
    ),
    (
        "fault.duration",
        "none: the fault has no end (where its kind allows that)",
    ),
    ("fault.every", "none: the fault happens once"),
    ("fault.rate", "none (`clock-drift` requires it)"),
    ("fault.offset", "none (`clock-jump` requires it)"),
    ("fault.delay", "none (`latency` requires it)"),
    ("mix.drift", "half the lock's `drift_factor`"),
    ("mix.jump", "2 × the lock's ttl"),
];

/// The smallest file the parser accepts; probes add one table to it.
const PROBE_BASE: &str = "name = \"probe\"\ndescription = \"\"\nduration = \"10s\"\n\
                          expect = \"safe\"\n[lock]\nttl = \"1s\"\n";

/// The scenario file reference, as Markdown.
pub fn markdown() -> String {
    let schema = json_schema();
    let defaults = probed_defaults();
    let mut out = String::new();
    header(&mut out);
    let root = object_properties(&schema);
    let required = required_keys(&schema);
    let top: Vec<(&String, &Value)> = root.iter().filter(|(_, v)| table_of(v).is_none()).collect();
    out.push_str("## Top-level keys\n\n");
    key_table(&mut out, "", &top, &required, &defaults);
    for (name, value) in &root {
        if let Some((table, array)) = table_of(value) {
            let heading = if array {
                format!("[[{name}]]")
            } else {
                format!("[{name}]")
            };
            let _ = writeln!(out, "## `{heading}`\n");
            if let Some(text) = description(value) {
                let required = if required.contains(name) {
                    " Required."
                } else {
                    ""
                };
                let _ = writeln!(out, "{text}.{required}\n");
            }
            let properties = object_properties(table);
            let keys: Vec<(&String, &Value)> = properties.iter().collect();
            key_table(&mut out, name, &keys, &required_keys(table), &defaults);
        }
    }
    choices(&mut out);
    out
}

fn header(out: &mut String) {
    out.push_str("# Scenario file reference\n\n");
    out.push_str(
        "<!-- Generated by `sim reference` from the parser's own types and tables \
         (sim/src/scenario/reference.rs); do not edit. -->\n\n",
    );
    let _ = writeln!(
        out,
        "Every key a scenario file may hold, with its TOML type, its default and its unit, \
         generated from the parser (`sim/src/scenario/`): a key the parser does not read \
         cannot appear here, and `sim/src/scenario/reference.rs`'s test fails when this \
         file differs from what it generates. Regenerate it with `{REGENERATE}`. \
         What each fault does and how the suite uses the keys is in \
         [scenarios/README.md](../scenarios/README.md); `sim schema` prints the same format \
         as a JSON Schema for editors. The parser stays the judge: ranges, targets and how \
         values fit together are checked there, with `file:line:col` errors.\n"
    );
    out.push_str(
        "A duration is a number and a unit (`ms`, `s`, `m`, …; several add up: `\"1s 500ms\"`). \
         A range `\"min..max\"` is drawn from, per seed or per use as the key says; \
         a single duration is a range of one value.\n\n",
    );
}

/// The object schema of a table-valued property, and whether it is an array
/// of tables; `None` for a plain key.
fn table_of(value: &Value) -> Option<(&Value, bool)> {
    if value.get("properties").is_some() {
        return Some((value, false));
    }
    let items = value.get("items")?;
    items.get("properties").map(|_| (items, true))
}

fn object_properties(value: &Value) -> Map<String, Value> {
    value
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn required_keys(value: &Value) -> Vec<String> {
    value
        .get("required")
        .and_then(Value::as_array)
        .map(|keys| {
            keys.iter()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn description(value: &Value) -> Option<String> {
    value
        .get("description")
        .and_then(Value::as_str)
        .map(|text| text.trim_end_matches('.').to_owned())
}

/// One row per key: its type, default, unit and meaning.
fn key_table(
    out: &mut String,
    table: &str,
    keys: &[(&String, &Value)],
    required: &[String],
    defaults: &BTreeMap<String, String>,
) {
    out.push_str("| key | type | default | unit | meaning |\n|---|---|---|---|---|\n");
    for (key, value) in keys {
        let path = key_path(table, key);
        let default = if required.contains(key) {
            "required".to_owned()
        } else {
            default_text(&path, defaults)
        };
        let unit = unit_of(&path).unwrap_or("(no unit listed)");
        let meaning = description(value).unwrap_or_default();
        let _ = writeln!(
            out,
            "| `{key}` | {} | {} | {} | {} |",
            cell(&type_text(value)),
            cell(&default),
            cell(unit),
            cell(&meaning)
        );
    }
    out.push('\n');
}

fn key_path(table: &str, key: &str) -> String {
    if table.is_empty() {
        key.to_owned()
    } else {
        format!("{table}.{key}")
    }
}

fn unit_of(path: &str) -> Option<&'static str> {
    UNITS
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, unit)| *unit)
}

/// What an absent key means: the explained meaning, else the value the
/// probes found, else the property rule, else "none".
fn default_text(path: &str, defaults: &BTreeMap<String, String>) -> String {
    if let Some((_, text)) = WHEN_ABSENT.iter().find(|(p, _)| *p == path) {
        return (*text).to_owned();
    }
    if let Some((_, text)) = lock_defaults().into_iter().find(|(p, _)| *p == path) {
        return text;
    }
    if path == "property" {
        let expected: Vec<String> = PROPERTIES
            .iter()
            .filter(|(_, property, _)| Property::expected_by_default(*property))
            .map(|(name, _, _)| format!("`{name}`"))
            .collect();
        return format!(
            "none: the expectation is about every property expected by default ({})",
            expected.join(", ")
        );
    }
    defaults
        .get(path)
        .cloned()
        .unwrap_or_else(|| "none".to_owned())
}

/// The lock options the simulated client builds from a `[lock]` table
/// without `renew_every` and `wait`, as fractions of the ttl: lock-core's
/// defaults, or the client's own where it sets one.
fn lock_defaults() -> Vec<(&'static str, String)> {
    let Ok(scenario) = parse_scenario("probe", PROBE_BASE) else {
        return Vec::new();
    };
    let options = crate::client::lock_options(&scenario.lock);
    let ttl = scenario.lock.ttl;
    vec![
        (
            "lock.renew_every",
            relative_to(options.effective_renew_every(), ttl),
        ),
        ("lock.wait", relative_to(options.effective_wait(), ttl)),
    ]
}

/// `value` as a multiple or a fraction of the ttl where it is one
/// ("ttl / 3", "2 × ttl"), else as a duration.
fn relative_to(value: Duration, ttl: Duration) -> String {
    let close = |x: f64| (x - x.round()).abs() < 1e-6 && x.round() >= 1.0;
    let (value_s, ttl_s) = (value.as_secs_f64(), ttl.as_secs_f64());
    if value == ttl {
        "one ttl".to_owned()
    } else if value_s > ttl_s && close(value_s / ttl_s) {
        format!("{} × ttl", (value_s / ttl_s).round())
    } else if value_s > 0.0 && close(ttl_s / value_s) {
        format!("ttl / {}", (ttl_s / value_s).round())
    } else {
        format!("`{}`", duration_text(value))
    }
}

/// The TOML type of a key, with its choices where the schema lists them.
fn type_text(value: &Value) -> String {
    if let Some(names) = value.get("enum").and_then(Value::as_array) {
        let names: Vec<String> = names
            .iter()
            .filter_map(Value::as_str)
            .map(|name| format!("`\"{name}\"`"))
            .collect();
        return format!("string: {}", names.join(", "));
    }
    match value.get("type").and_then(Value::as_str) {
        Some("string") => "string".to_owned(),
        Some("integer") => "integer".to_owned(),
        Some("number") => "float".to_owned(),
        Some("boolean") => "boolean".to_owned(),
        Some("object") => "table".to_owned(),
        Some("array") => value.get("items").map_or_else(
            || "array".to_owned(),
            |items| format!("array of {}", type_text(items)),
        ),
        _ => "any".to_owned(),
    }
}

/// Text made safe for one Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The probe files: the smallest file, then one per topology kind, per
/// workload kind with keys of its own, and one with a mix.
fn probes() -> Vec<String> {
    let mut files = vec![PROBE_BASE.to_owned()];
    for (kind, keys) in TOPOLOGY_KINDS {
        // `nodes` has no default: redlock requires it.
        let nodes = if keys.contains(&"nodes") {
            "nodes = 3\n"
        } else {
            ""
        };
        files.push(format!(
            "{PROBE_BASE}[topology]\nkind = \"{kind}\"\n{nodes}"
        ));
    }
    for (kind, _) in WORKLOAD_KINDS {
        files.push(format!("{PROBE_BASE}[workload]\nkind = \"{kind}\"\n"));
    }
    files.push(format!(
        "{PROBE_BASE}[mix]\nkinds = [\"pause\"]\nepisodes = \"1\"\n"
    ));
    files
}

/// The value the parser fills in for each absent key, by `table.key`, read
/// back from the probes as the writer spells it. A key whose default
/// differs by the table's kind lists each kind's.
fn probed_defaults() -> BTreeMap<String, String> {
    let mut by_kind: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for file in probes() {
        let Ok(scenario) = parse_scenario("probe", &file) else {
            continue;
        };
        let given: toml::Table = toml::from_str(&file).unwrap_or_default();
        let Ok(written) = toml::from_str::<toml::Table>(&to_toml(&scenario)) else {
            continue;
        };
        record_defaults(&mut by_kind, &given, &written, &scenario);
    }
    by_kind
        .into_iter()
        .map(|(path, mut values)| {
            values.sort();
            values.dedup();
            let distinct: BTreeSet<&String> = values.iter().map(|(_, value)| value).collect();
            let text = if let [(_, only)] = values.as_slice() {
                format!("`{only}`")
            } else if distinct.len() == 1 {
                format!("`{}`", values[0].1)
            } else {
                values
                    .iter()
                    .map(|(kind, value)| format!("`{value}` ({kind})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            (path, text)
        })
        .collect()
}

/// Every key the writer wrote that the probe did not give, with the kind
/// of its table (topology, workload) where it has one.
fn record_defaults(
    by_kind: &mut BTreeMap<String, Vec<(String, String)>>,
    given: &toml::Table,
    written: &toml::Table,
    scenario: &Scenario,
) {
    for (key, value) in written {
        let Some(table) = value.as_table() else {
            if !given.contains_key(key) {
                by_kind
                    .entry(key.clone())
                    .or_default()
                    .push((String::new(), value.to_string()));
            }
            continue;
        };
        let given_table = given.get(key).and_then(toml::Value::as_table);
        let kind = match key.as_str() {
            "topology" => scenario.topology.kind_name().to_owned(),
            _ => table
                .get("kind")
                .and_then(toml::Value::as_str)
                .unwrap_or("")
                .to_owned(),
        };
        for (inner, value) in table {
            let was_given = given_table.is_some_and(|t| t.contains_key(inner));
            if !was_given && inner != "kind" {
                by_kind
                    .entry(format!("{key}.{inner}"))
                    .or_default()
                    .push((kind.clone(), value.to_string()));
            }
        }
        if key == "clients" {
            // The writer leaves these out at their defaults.
            let clients = &scenario.clients;
            let left_out = [
                ("locks", clients.locks.to_string()),
                ("drop_guard", format!("{:?}", clients.drop_guard)),
                ("cancel", format!("{:?}", clients.cancel)),
            ];
            for (inner, value) in left_out {
                if !table.contains_key(inner) {
                    let path = format!("clients.{inner}");
                    by_kind
                        .entry(path)
                        .or_default()
                        .push((String::new(), value));
                }
            }
        }
        if given_table.is_none() && table.contains_key("kind") {
            by_kind
                .entry(format!("{key}.kind"))
                .or_default()
                .push((String::new(), table["kind"].to_string()));
        }
    }
}

/// The names tables' choices.
fn choices(out: &mut String) {
    out.push_str("## Fault kinds\n\n");
    out.push_str(
        "Which targets each kind takes, which of its parameters it requires (✓), may take (optional) \
         or refuses (–), and the topology kinds it applies to (with the kind's default keys: a \
         cluster without replicas has no shard failover, one with one shard no slot migration), \
         and the `[server] flavour`s it needs where not every server has what it models.\n\n",
    );
    out.push_str("| kind | targets | `duration` | `rate` | `offset` | `delay` | topologies |\n");
    out.push_str("|---|---|---|---|---|---|---|\n");
    let topologies = probe_topologies();
    for info in &FAULT_KINDS {
        let uses = [info.duration, info.rate, info.offset, info.delay].map(|u| match u {
            Use::Required => "✓",
            Use::Optional => "optional",
            Use::Never => "–",
        });
        let mut applies = topologies
            .iter()
            .filter(|topology| (info.applies)(topology))
            .map(crate::config::Topology::kind_name)
            .collect::<Vec<&str>>()
            .join(", ");
        let serving: Vec<String> = FLAVOURS
            .iter()
            .filter(|(_, flavour)| (info.serves)(*flavour))
            .map(|(name, _)| format!("`{name}`"))
            .collect();
        if serving.len() < FLAVOURS.len() {
            let _ = write!(applies, "; flavour {}", serving.join(", "));
        }
        let mut targets = info.hosts.wanted().to_owned();
        if info.primary_only {
            targets = "`redis:primary` only".to_owned();
        }
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} | {} |",
            info.name,
            cell(&targets),
            uses[0],
            uses[1],
            uses[2],
            uses[3],
            applies
        );
    }
    out.push_str("\n## Topology kinds\n\n| kind | keys besides `kind` |\n|---|---|\n");
    for (kind, keys) in TOPOLOGY_KINDS {
        let keys: Vec<String> = keys.iter().map(|key| format!("`{key}`")).collect();
        let keys = if keys.is_empty() {
            "none".to_owned()
        } else {
            keys.join(", ")
        };
        let _ = writeln!(out, "| `{kind}` | {keys} |");
    }
    out.push_str(
        "\n## Properties\n\n| property | what it checks | expected by default |\n|---|---|---|\n",
    );
    for (name, property, meaning) in PROPERTIES {
        let expected = if property.expected_by_default() {
            "yes"
        } else {
            "no"
        };
        let _ = writeln!(out, "| `{name}` | {} | {expected} |", cell(meaning));
    }
    out.push('\n');
    let lists: [(&str, Vec<&str>); 5] = [
        (
            "Expectations (`expect`)",
            EXPECTS.iter().map(|row| row.0).collect(),
        ),
        (
            "Workload kinds (`[workload] kind`)",
            WORKLOAD_KINDS.iter().map(|row| row.0).collect(),
        ),
        (
            "Server flavours (`[server] flavour`)",
            FLAVOURS.iter().map(|row| row.0).collect(),
        ),
        (
            "Persistence (`[server] persistence`)",
            PERSISTENCES.iter().map(|row| row.0).collect(),
        ),
        (
            "Fencing (`[lock] fencing`)",
            FENCINGS.iter().map(|row| row.0).collect(),
        ),
    ];
    for (title, names) in lists {
        let names: Vec<String> = names.iter().map(|name| format!("`\"{name}\"`")).collect();
        let _ = writeln!(out, "## {title}\n\n{}\n", names.join(", "));
    }
}

/// One topology per kind, with the kind's default keys, as the probes
/// parse them.
fn probe_topologies() -> Vec<crate::config::Topology> {
    probes()
        .iter()
        .filter(|file| file.contains("[topology]"))
        .filter_map(|file| parse_scenario("probe", file).ok())
        .map(|scenario| scenario.topology)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `table.key` the schema has.
    fn schema_paths() -> Vec<String> {
        let schema = json_schema();
        let mut paths = Vec::new();
        for (name, value) in object_properties(&schema) {
            match table_of(&value) {
                None => paths.push(name),
                Some((table, _)) => {
                    for key in object_properties(table).keys() {
                        paths.push(format!("{name}.{key}"));
                    }
                }
            }
        }
        paths
    }

    #[test]
    fn every_key_has_a_unit_and_every_unit_a_key() {
        let paths = schema_paths();
        for path in &paths {
            assert!(
                unit_of(path).is_some(),
                "the scenario key `{path}` has no unit: add a row to UNITS in sim/src/scenario/reference.rs"
            );
        }
        for (path, _) in UNITS.iter().chain(WHEN_ABSENT) {
            assert!(
                paths.iter().any(|p| p == path),
                "`{path}` is no scenario key"
            );
        }
    }

    #[test]
    fn every_probe_parses_and_every_optional_key_has_a_default() {
        for file in probes() {
            assert!(
                parse_scenario("probe", &file).is_ok(),
                "probe does not parse:\n{file}"
            );
        }
        let defaults = probed_defaults();
        assert_eq!(defaults.get("seeds").map(String::as_str), Some("`100`"));
        assert_eq!(
            defaults.get("clients.count").map(String::as_str),
            Some("`3`")
        );
        assert_eq!(
            defaults.get("workload.permits").map(String::as_str),
            Some("`2`")
        );
        let text = markdown();
        assert!(!text.contains("(no unit listed)"));
        assert!(
            text.contains("| `replication_lag` | string | `\"1ms..20ms\"` |"),
            "{text}"
        );
        assert!(
            text.contains("| `renew_every` | string | ttl / 3 |"),
            "{text}"
        );
        assert!(text.contains("| `wait` | string | 2 × ttl |"), "{text}");
    }

    #[test]
    fn docs_scenarios_md_is_generated() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/scenarios.md");
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        let generated = markdown();
        let first_difference = on_disk
            .lines()
            .zip(generated.lines())
            .position(|(disk, fresh)| disk != fresh)
            .map_or_else(
                || "the files differ in length".to_owned(),
                |index| {
                    format!(
                        "line {}:\n  on disk:   {}\n  generated: {}",
                        index + 1,
                        on_disk.lines().nth(index).unwrap_or_default(),
                        generated.lines().nth(index).unwrap_or_default()
                    )
                },
            );
        assert!(
            on_disk == generated,
            "docs/scenarios.md differs from what `sim reference` generates ({first_difference}): \
             regenerate it with `{REGENERATE}` (do not edit it by hand)"
        );
    }
}
