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
fn servers_has_no_import_circle() {
    let circles = circles_of("servers/src/lib.rs");
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

/// Writes the planted crate `files` under a fresh directory named `name`,
/// and returns its circles with the directory.
fn planted(name: &str, files: &[(&str, &str)]) -> (Vec<Vec<PathBuf>>, PathBuf) {
    let dir = std::env::temp_dir().join(format!("modgraph-{name}-{}", std::process::id()));
    for (file, text) in files {
        let path = dir.join(file);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap_or_else(|error| panic!("{error}"));
        }
        fs::write(path, text).unwrap_or_else(|error| panic!("{error}"));
    }
    let graph = Graph::of_crate(&dir.join("lib.rs")).unwrap_or_else(|error| panic!("{error}"));
    let circles = graph.circles();
    fs::remove_dir_all(&dir).unwrap_or_else(|error| panic!("{error}"));
    (circles, dir)
}

/// The shape of `world/mod.rs` ↔ `world/faults.rs` before it was opened:
/// the parent re-exports a child's function with `pub use` and calls it by
/// its one-word name; the child uses the parent's items back.
#[test]
fn a_one_word_name_through_pub_use_ties_the_parent_to_the_child() {
    let (circles, dir) = planted(
        "pub-use",
        &[
            ("lib.rs", "mod w;\n"),
            (
                "w/mod.rs",
                "mod f;\npub use f::draw;\npub struct World;\npub const TICK: u32 = 1;\n\
                 pub fn run() -> Vec<u32> { draw() }\n",
            ),
            (
                "w/f.rs",
                "use super::{TICK, World};\npub fn draw() -> Vec<u32> { let _ = World; vec![TICK] }\n",
            ),
            // A lone name the module does not bind (a local, a prelude
            // type) ties nothing, nor does the re-export alone.
            (
                "other.rs",
                "pub fn g(draw: u32) -> Option<u32> { Some(draw) }\n",
            ),
        ],
    );
    assert_eq!(
        circles,
        vec![vec![dir.join("w/f.rs"), dir.join("w/mod.rs")]]
    );
    // The re-export alone, with no use of the name, is the interface.
    let (circles, _) = planted(
        "pub-use-alone",
        &[
            ("lib.rs", "mod w;\n"),
            ("w/mod.rs", "mod f;\npub use f::draw;\npub struct World;\n"),
            (
                "w/f.rs",
                "use super::World;\npub fn draw() { let _ = World; }\n",
            ),
        ],
    );
    assert_eq!(circles, Vec::<Vec<PathBuf>>::new());
}

/// The shape of `chaos/mod.rs` ↔ `chaos/run.rs` before it was opened: the
/// parent calls the child inside a macro (`tokio::select!`), the child uses
/// the parent's constant back.
#[test]
fn a_path_inside_a_macro_body_ties_its_file() {
    let (circles, dir) = planted(
        "macro",
        &[
            ("lib.rs", "mod c;\n"),
            (
                "c/mod.rs",
                "mod r;\npub const SLACK: u32 = 1;\n\
                 pub async fn go() -> u32 { tokio::select! { x = r::run() => x, } }\n",
            ),
            ("c/r.rs", "pub async fn run() -> u32 { super::SLACK }\n"),
        ],
    );
    assert_eq!(
        circles,
        vec![vec![dir.join("c/mod.rs"), dir.join("c/r.rs")]]
    );
    // Keywords, literals and a lone unbound name in a macro tie nothing.
    let (circles, _) = planted(
        "macro-words",
        &[
            ("lib.rs", "mod c;\n"),
            (
                "c/mod.rs",
                "mod r;\npub const SLACK: u32 = 1;\n\
                 pub fn go(r: u32) -> String { format!(\"{} {}\", r, vec![1u8].len()) }\n",
            ),
            ("c/r.rs", "pub fn run() -> u32 { super::SLACK }\n"),
        ],
    );
    assert_eq!(circles, Vec::<Vec<PathBuf>>::new());
}
