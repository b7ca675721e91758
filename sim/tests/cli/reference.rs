//! `sim reference`: the scenario file reference it prints is the one kept
//! in `docs/scenarios.md`, and it has a row for every key the suite's
//! scenario files use.
use std::path::Path;

use super::sim;

/// What `sim reference` prints.
fn reference() -> String {
    let output = sim().arg("reference").output().expect("run sim");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

#[test]
fn sim_reference_prints_docs_scenarios_md() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let on_disk = std::fs::read_to_string(root.join("docs/scenarios.md")).unwrap_or_default();
    assert!(
        reference() == on_disk,
        "docs/scenarios.md is not what `sim reference` prints: regenerate it with \
         `cargo run -p sim -- reference > docs/scenarios.md`"
    );
}

#[test]
fn every_key_the_suite_uses_has_a_row() {
    let text = reference();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&root)
        .expect("scenarios/")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    assert!(files.len() > 10, "{} files", files.len());
    for file in files {
        let source = std::fs::read_to_string(&file).expect("read");
        let table: toml::Table = toml::from_str(&source).expect("TOML");
        for (key, value) in &table {
            let inner: Vec<&toml::Table> = match value {
                toml::Value::Table(table) => vec![table],
                toml::Value::Array(items) => {
                    items.iter().filter_map(toml::Value::as_table).collect()
                }
                _ => Vec::new(),
            };
            let heading = match value {
                toml::Value::Table(_) => format!("## `[{key}]`"),
                toml::Value::Array(_) if !inner.is_empty() => format!("## `[[{key}]]`"),
                _ => "## Top-level keys".to_owned(),
            };
            let section = text
                .split(&heading)
                .nth(1)
                .and_then(|rest| rest.split("\n## ").next())
                .unwrap_or_else(|| panic!("no section {heading}"));
            let keys: Vec<&String> = if inner.is_empty() {
                vec![key]
            } else {
                inner.iter().flat_map(|table| table.keys()).collect()
            };
            for key in keys {
                assert!(
                    section.contains(&format!("\n| `{key}` |")),
                    "{}: `{key}` has no row under {heading}",
                    file.display()
                );
            }
        }
    }
}
