//! No import circle between the files of the workspace's crates.

use std::{
    fs,
    path::{Path, PathBuf},
};

use modgraph::Graph;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn circles_of(root: &str) -> Vec<String> {
    let root = workspace().join(root);
    let graph = Graph::of_crate(&root).unwrap_or_else(|error| panic!("{error}"));
    assert!(
        graph.edges.len() > 1,
        "{} read as a single file",
        root.display()
    );
    graph
        .circles()
        .iter()
        .map(|circle| {
            let names: Vec<String> = circle
                .iter()
                .map(|file| {
                    file.strip_prefix(workspace())
                        .unwrap_or(file)
                        .display()
                        .to_string()
                })
                .collect();
            names.join(" <-> ")
        })
        .collect()
}

#[test]
fn lock_core_has_no_import_circle() {
    let circles = circles_of("lock-core/src/lib.rs");
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn sim_has_no_import_circle() {
    let circles = circles_of("sim/src/lib.rs");
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn bench_has_no_import_circle() {
    let circles = circles_of("bench/src/lib.rs");
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

/// A planted crate: `a` and `c` import each other (`c` through a re-export
/// in `b`), `d` only imports.
#[test]
fn a_planted_circle_is_found_through_a_re_export() {
    let dir = std::env::temp_dir().join(format!("modgraph-planted-{}", std::process::id()));
    fs::create_dir_all(dir.join("b")).unwrap_or_else(|error| panic!("{error}"));
    let files = [
        ("lib.rs", "mod a; mod b; mod d; mod e;\n"),
        (
            "a.rs",
            "use crate::b;\npub(crate) fn f() { let _ = b::Thing; }\n",
        ),
        ("b/mod.rs", "mod c;\npub(crate) use c::Thing;\n"),
        ("e.rs", "pub(crate) fn h() { redis::cmd(); }\n"),
        (
            "b/c.rs",
            "pub(crate) struct Thing;\nfn g() { crate::a::f() }\n",
        ),
        (
            "d.rs",
            "use super::a::f;\n#[cfg(test)]\nmod tests { use crate::d::*; }\n",
        ),
    ];
    for (name, text) in files {
        fs::write(dir.join(name), text).unwrap_or_else(|error| panic!("{error}"));
    }
    let graph = Graph::of_crate(&dir.join("lib.rs")).unwrap_or_else(|error| panic!("{error}"));
    let circles = graph.circles();
    fs::remove_dir_all(&dir).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        circles,
        vec![vec![dir.join("a.rs"), dir.join("b/c.rs")]],
        "the re-export is followed to the file that defines the item"
    );
}
