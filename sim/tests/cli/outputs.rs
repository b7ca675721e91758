//! What `sim` writes for CI systems and editors: JUnit XML that parses,
//! with one testcase per scenario file and a planted unmet expectation as
//! a failure carrying its replay command; a JSON Schema of scenario files
//! that accepts every file the parser accepts and refuses malformed ones;
//! and the CI recipe of `docs/ci.md`, whose sharded commands give what one
//! run gives.
use std::{
    path::{Path, PathBuf},
    process::Output,
};

use super::{scratch, sim};

/// The small scenario files under `tests/outputs/`: one safe, one that
/// shows the violation it expects.
fn met_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/outputs");
    ["short-pauses.toml", "long-pauses.toml"]
        .iter()
        .map(|file| dir.join(file))
        .collect()
}

/// A file said to be safe that is not.
fn unmet_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/outputs/unmet/long-pauses-called-safe.toml")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn both(output: &Output) -> String {
    format!(
        "{}\n{}",
        stdout(output),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The `<testcase>` elements of a JUnit file, as (name, file, failure
/// message) with the seeds property checked present.
fn testcases(xml: &str) -> Vec<(String, String, Option<String>)> {
    let doc = roxmltree::Document::parse(xml).expect("valid XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let suites: Vec<_> = root
        .children()
        .filter(|n| n.has_tag_name("testsuite"))
        .collect();
    assert_eq!(suites.len(), 1, "{xml}");
    let cases: Vec<_> = suites[0]
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(
        suites[0].attribute("tests"),
        Some(cases.len().to_string().as_str())
    );
    cases
        .iter()
        .map(|case| {
            let seeds = case
                .descendants()
                .find(|n| n.has_tag_name("property") && n.attribute("name") == Some("seeds"))
                .and_then(|n| n.attribute("value"))
                .expect("a seeds property");
            assert!(seeds.parse::<u64>().is_ok_and(|n| n > 0), "seeds {seeds}");
            let time = case.attribute("time").expect("a time");
            assert!(time.parse::<f64>().is_ok(), "time {time}");
            (
                case.attribute("name").expect("a name").to_owned(),
                case.attribute("file").expect("a file").to_owned(),
                case.children()
                    .find(|n| n.has_tag_name("failure"))
                    .map(|f| f.attribute("message").expect("a message").to_owned()),
            )
        })
        .collect()
}

#[test]
fn junit_has_one_testcase_per_file_and_the_unmet_one_fails_with_its_replay() {
    let dir = scratch("junit");
    let junit = dir.join("out.xml");
    let json = dir.join("out.json");
    let mut files = met_files();
    files.push(unmet_file());
    let output = sim()
        .args(["run", "--jobs", "2", "--junit"])
        .arg(&junit)
        .arg("--json")
        .arg(&json)
        .arg("--report-dir")
        .arg(dir.join("reports"))
        .args(&files)
        .output()
        .expect("run sim");
    assert_eq!(output.status.code(), Some(1), "{}", both(&output));
    let cases = testcases(&std::fs::read_to_string(&junit).expect("junit written"));
    let names: Vec<&str> = cases.iter().map(|(name, _, _)| name.as_str()).collect();
    assert_eq!(
        names,
        ["short-pauses", "long-pauses", "long-pauses-called-safe"]
    );
    for ((_, file, _), given) in cases.iter().zip(&files) {
        assert_eq!(Path::new(file), given);
    }
    assert_eq!(cases[0].2, None);
    assert_eq!(cases[1].2, None);
    let message = cases[2].2.as_deref().expect("the unmet file fails");
    // The message names the seed and the report the JSON results name.
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written"))
            .expect("valid json");
    let unmet = &results["scenarios"][2];
    let seed = unmet["first_failing_seed"]
        .as_u64()
        .expect("a failing seed");
    let report = unmet["report"].as_str().expect("a report");
    let replay = format!("sim replay {} --seed {seed}", files[2].display());
    assert!(message.contains(&replay), "{message}\nwants {replay}");
    assert!(
        message.contains(&format!("report: {report}")),
        "{message}\nwants {report}"
    );
    assert!(Path::new(report).is_file(), "{report}");
}

/// `sim schema`'s output, checked against its own meta-schema.
fn schema() -> serde_json::Value {
    let output = sim().arg("schema").output().expect("run sim");
    assert!(output.status.success(), "{}", both(&output));
    let schema: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    jsonschema::meta::validate(&schema).expect("a valid draft-07 schema");
    schema
}

/// Every `*.toml` under `dir`, at any depth.
fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            files.extend(toml_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "toml") {
            files.push(path);
        }
    }
    files.sort();
    files
}

fn as_json(toml_text: &str) -> serde_json::Value {
    toml::from_str(toml_text).expect("TOML")
}

#[test]
fn the_schema_accepts_every_scenario_file_the_parser_accepts() {
    let validator = jsonschema::validator_for(&schema()).expect("a schema");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = toml_files(&root.join("../scenarios"));
    assert!(files.len() > 50, "{files:?}");
    files.extend(toml_files(&root.join("tests")));
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable");
        sim::scenario::parse_scenario(&file.display().to_string(), &text)
            .expect("the parser accepts it");
        let errors: Vec<String> = validator
            .iter_errors(&as_json(&text))
            .map(|error| format!("{}: {error}", error.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", file.display());
    }
}

/// A small good file, and mistakes made in it: each the parser refuses
/// with its `file:line:col`, and the schema refuses too.
const BASE: &str = r#"name = "base"
description = "a good file"
seeds = 2
duration = "4s"
expect = "safe"

[topology]
kind = "primary-replica"
replicas = 1

[lock]
ttl = "1s"
fencing = "counter"

[clients]
count = 3

[[fault]]
kind = "latency"
at = "1s"
target = "client:any"
duration = "500ms"
delay = "20ms"
"#;

const MALFORMED: [(&str, &str, &str); 13] = [
    (
        "an unknown top-level key",
        "seeds = 2",
        "seeds = 2\ncolour = \"red\"",
    ),
    (
        "an unknown key in [lock]",
        "ttl = \"1s\"",
        "ttl = \"1s\"\ntll = \"1s\"",
    ),
    ("an unknown table", "[clients]", "[client]"),
    ("a string for a number", "seeds = 2", "seeds = \"two\""),
    ("a number for a duration", "ttl = \"1s\"", "ttl = 1000"),
    ("a negative count", "count = 3", "count = -3"),
    (
        "an unknown expectation",
        "expect = \"safe\"",
        "expect = \"unsafe\"",
    ),
    (
        "an unknown fencing",
        "fencing = \"counter\"",
        "fencing = \"tokens\"",
    ),
    (
        "an unknown fault kind",
        "kind = \"latency\"",
        "kind = \"slowness\"",
    ),
    ("a missing required key", "duration = \"4s\"\n", ""),
    (
        "a fault parameter the kind needs, missing",
        "delay = \"20ms\"\n",
        "",
    ),
    (
        "a fault parameter the kind never takes",
        "delay = \"20ms\"",
        "delay = \"20ms\"\nrate = 0.1",
    ),
    (
        "a key of another topology",
        "replicas = 1",
        "replicas = 1\nshards = 3",
    ),
];

#[test]
fn the_schema_refuses_malformed_files_as_the_parser_does() {
    let validator = jsonschema::validator_for(&schema()).expect("a schema");
    assert!(validator.is_valid(&as_json(BASE)));
    sim::scenario::parse_scenario("base.toml", BASE).expect("the base file parses");
    // The line an editor reads the schema from is a comment to the parser.
    let with_schema_line = format!("#:schema ./scenario.schema.json\n{BASE}");
    sim::scenario::parse_scenario("base.toml", &with_schema_line).expect("it still parses");
    for (what, good, bad) in MALFORMED {
        assert_eq!(BASE.matches(good).count(), 1, "{what}: {good:?}");
        let text = BASE.replacen(good, bad, 1);
        assert!(
            sim::scenario::parse_scenario("bad.toml", &text).is_err(),
            "the parser accepts {what}"
        );
        assert!(
            !validator.is_valid(&as_json(&text)),
            "the schema accepts {what}:\n{text}"
        );
    }
}

/// The `sim` command lines of the workflow in `docs/ci.md`.
fn recipe_commands() -> Vec<String> {
    let recipe = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/ci.md");
    let text = std::fs::read_to_string(&recipe).expect("docs/ci.md");
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("- run: sim "))
        .map(str::to_owned)
        .collect()
}

/// Runs one of the recipe's commands in `dir` as shard `index` of
/// `count`, with `files` for `scenarios/` and the shard files for the
/// `shard-*.json` pattern (which a shell would expand).
fn run_recipe_line(dir: &Path, line: &str, index: u64, count: u64, files: &[PathBuf]) -> Output {
    let line = line
        .replace("${{ matrix.shard }}", &index.to_string())
        .replace("${{ strategy.job-total }}", &count.to_string());
    let mut command = sim();
    command.current_dir(dir);
    for word in line.split_whitespace() {
        if word == "scenarios/" {
            command.args(files);
        } else if word == "shard-*.json" {
            command.args((1..=count).map(|i| format!("shard-{i}.json")));
        } else {
            command.arg(word);
        }
    }
    command.output().expect("run sim")
}

/// A JUnit file without its wall-clock times.
fn without_times(xml: &str) -> String {
    let doc = roxmltree::Document::parse(xml).expect("valid XML");
    let mut out = String::new();
    for node in doc.descendants().filter(roxmltree::Node::is_element) {
        out.push_str(node.tag_name().name());
        for attribute in node.attributes().filter(|a| a.name() != "time") {
            out.push_str(&format!(" {}={:?}", attribute.name(), attribute.value()));
        }
        if let Some(text) = node.text().map(str::trim).filter(|t| !t.is_empty()) {
            out.push_str(&format!(" text={text:?}"));
        }
        out.push('\n');
    }
    out
}

/// The table and verdict, without the wall-clock line.
fn table(output: &Output) -> String {
    stdout(output)
        .lines()
        .filter(|line| !line.starts_with("ran in "))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// Runs the recipe's `sim run` (two shards) and `sim merge` lines on
/// `files`, and one unsharded run, and checks they agree on the exit
/// status, the table and the JUnit file.
fn check_recipe(name: &str, files: &[PathBuf], exit: i32) {
    let commands = recipe_commands();
    let [run, merge] = commands.as_slice() else {
        panic!("docs/ci.md should have one `sim run` and one `sim merge` line: {commands:?}");
    };
    assert!(
        run.starts_with("run ") && merge.starts_with("merge "),
        "{commands:?}"
    );
    let sharded = scratch(&format!("{name}-shards"));
    for index in 1..=2 {
        let output = run_recipe_line(&sharded, run, index, 2, files);
        assert!(
            output.status.code().is_some_and(|code| code <= exit),
            "{}",
            both(&output)
        );
    }
    let merged = run_recipe_line(&sharded, merge, 0, 2, files);
    let whole = scratch(&format!("{name}-whole"));
    let one = sim()
        .current_dir(&whole)
        .args(["run", "--junit", "sim-junit.xml"])
        .args(files)
        .output()
        .expect("run sim");
    assert_eq!(one.status.code(), Some(exit), "{}", both(&one));
    assert_eq!(merged.status.code(), Some(exit), "{}", both(&merged));
    assert_eq!(table(&merged), table(&one));
    let junit = |dir: &Path| {
        without_times(&std::fs::read_to_string(dir.join("sim-junit.xml")).expect("junit written"))
    };
    assert_eq!(junit(&sharded), junit(&whole));
}

#[test]
fn the_ci_recipe_with_two_shards_gives_what_one_run_gives() {
    check_recipe("recipe-met", &met_files(), 0);
}

#[test]
fn the_ci_recipe_fails_as_one_run_fails() {
    let mut files = met_files();
    files.push(unmet_file());
    check_recipe("recipe-unmet", &files, 1);
}
