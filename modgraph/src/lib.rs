//! The import graph between the files of a crate, read with `syn`, and the
//! circles in it.
//!
//! A file imports another when one of its `use` items, or a path written
//! out in its code, names an item the other file defines: a path that
//! starts with `crate::`, `super::` or `self::`, one that starts with a
//! name the module declares (a child module, a `use` binding), and a lone
//! name that a `use` of the module binds, a `pub use` included (a parent's
//! `pub use child::f` followed by a call of `f()` ties the parent to the
//! child). Paths inside macro bodies count as in code: `tokio::select!`,
//! `format!` and the like are read as token sequences `a::b::c` and lone
//! names. Re-exports are followed to the file that defines the item, so a
//! parent's `pub use child::Item` does not make every user of `Item`
//! depend on the parent; a path that names a module, not an item, ties no
//! file (a glob import neither). Modules and items under `#[cfg(test)]`
//! are left out: a test module may look anywhere.
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

use syn::visit::Visit;

/// Why a crate could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// A source file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// A source file is not valid Rust.
    #[error("cannot parse {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What `syn` said.
        source: syn::Error,
    },
    /// A `mod name;` whose file is in neither place Rust looks.
    #[error("module {name} declared in {path} has no file")]
    MissingModule {
        /// The file with the declaration.
        path: PathBuf,
        /// The module's name.
        name: String,
    },
}

/// A module path from the crate root, such as `["redis", "connect"]`.
type ModPath = Vec<String>;

#[derive(Default)]
struct Module {
    /// The file the module's items are written in.
    file: PathBuf,
    children: BTreeSet<String>,
    /// `use` bindings: the name, then the path it stands for as written.
    bindings: BTreeMap<String, Vec<String>>,
}

/// A path as written, and where it was written.
struct Reference {
    file: PathBuf,
    module: ModPath,
    path: Vec<String>,
}

/// The files of one crate and the imports between them.
#[derive(Debug, Default)]
pub struct Graph {
    /// File → the files it imports from (never itself).
    pub edges: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
}

impl Graph {
    /// Reads the crate whose root file (`lib.rs` or `main.rs`) is `root`.
    pub fn of_crate(root: &Path) -> Result<Self, GraphError> {
        let mut modules = BTreeMap::new();
        let mut references = Vec::new();
        let file = parse(root)?;
        read_items(
            &file.items,
            root,
            root.parent().unwrap_or(Path::new("")),
            Vec::new(),
            &mut modules,
            &mut references,
        )?;
        let mut graph = Self::default();
        for module in modules.values() {
            graph.edges.entry(module.file.clone()).or_default();
        }
        for reference in references {
            if let Some(target) = resolve(&modules, &reference.module, &reference.path)
                && target != reference.file
            {
                graph
                    .edges
                    .entry(reference.file.clone())
                    .or_default()
                    .insert(target);
            }
        }
        Ok(graph)
    }

    /// The circles: every group of two or more files that reach each other
    /// through imports, each sorted, in a stable order.
    #[must_use]
    pub fn circles(&self) -> Vec<Vec<PathBuf>> {
        let files: Vec<&PathBuf> = self.edges.keys().collect();
        let reach = |from: &PathBuf| -> BTreeSet<PathBuf> {
            let mut seen = BTreeSet::new();
            let mut stack = vec![from.clone()];
            while let Some(file) = stack.pop() {
                for next in self.edges.get(&file).into_iter().flatten() {
                    if seen.insert(next.clone()) {
                        stack.push(next.clone());
                    }
                }
            }
            seen
        };
        let reaches: BTreeMap<&PathBuf, BTreeSet<PathBuf>> =
            files.iter().map(|file| (*file, reach(file))).collect();
        let mut circles: Vec<Vec<PathBuf>> = Vec::new();
        let mut placed = BTreeSet::new();
        for file in &files {
            if placed.contains(*file) || !reaches[file].contains(*file) {
                continue;
            }
            let circle: Vec<PathBuf> = files
                .iter()
                .filter(|other| reaches[file].contains(**other) && reaches[*other].contains(*file))
                .map(|other| (*other).clone())
                .collect();
            placed.extend(circle.iter().cloned());
            circles.push(circle);
        }
        circles
    }
}

fn parse(path: &Path) -> Result<syn::File, GraphError> {
    let text = fs::read_to_string(path).map_err(|source| GraphError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    syn::parse_file(&text).map_err(|source| GraphError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// Whether `attrs` put the item under a test-only `cfg`.
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg") && {
            let tokens = attr.meta.require_list().map(|list| list.tokens.to_string());
            tokens.is_ok_and(|text| {
                !text.contains("not")
                    && text
                        .split(|c: char| !c.is_alphanumeric() && c != '_')
                        .any(|word| word == "test" || word == "doctest")
            })
        }
    })
}

/// Where `mod name;` declared in `file` (whose children live in `dir`)
/// keeps its code, following an explicit `#[path]`.
fn module_file(
    attrs: &[syn::Attribute],
    dir: &Path,
    file: &Path,
    name: &str,
) -> Result<(PathBuf, PathBuf), GraphError> {
    for attr in attrs {
        if let syn::Meta::NameValue(value) = &attr.meta
            && value.path.is_ident("path")
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(text),
                ..
            }) = &value.value
        {
            let path = dir.join(text.value());
            let children = path.with_extension("");
            return Ok((path, children));
        }
    }
    let flat = dir.join(format!("{name}.rs"));
    if flat.exists() {
        return Ok((flat, dir.join(name)));
    }
    let nested = dir.join(name).join("mod.rs");
    if nested.exists() {
        return Ok((nested, dir.join(name)));
    }
    Err(GraphError::MissingModule {
        path: file.to_path_buf(),
        name: name.to_owned(),
    })
}

/// Records the module at `module` (written in `file`, its child files in
/// `dir`), its bindings and the paths its code names, then its children.
fn read_items(
    items: &[syn::Item],
    file: &Path,
    dir: &Path,
    module: ModPath,
    modules: &mut BTreeMap<ModPath, Module>,
    references: &mut Vec<Reference>,
) -> Result<(), GraphError> {
    let entry = modules.entry(module.clone()).or_default();
    entry.file = file.to_path_buf();
    for item in items {
        match item {
            syn::Item::Mod(decl) if test_only(&decl.attrs) => {}
            syn::Item::Mod(decl) => {
                let name = decl.ident.to_string();
                let mut child = module.clone();
                child.push(name.clone());
                modules
                    .entry(module.clone())
                    .or_default()
                    .children
                    .insert(name.clone());
                match &decl.content {
                    Some((_, inner)) => {
                        read_items(inner, file, &dir.join(&name), child, modules, references)?;
                    }
                    None => {
                        let (path, children) = module_file(&decl.attrs, dir, file, &name)?;
                        let parsed = parse(&path)?;
                        read_items(&parsed.items, &path, &children, child, modules, references)?;
                    }
                }
            }
            syn::Item::Use(use_item) if !test_only(&use_item.attrs) => {
                let mut found = Vec::new();
                use_tree(&use_item.tree, Vec::new(), &mut found);
                for (binding, path) in found {
                    if let Some(name) = binding {
                        modules
                            .entry(module.clone())
                            .or_default()
                            .bindings
                            .insert(name, path.clone());
                    }
                    // A re-export declares the module's interface; what its
                    // users take through it is followed to the defining file.
                    if matches!(use_item.vis, syn::Visibility::Inherited) {
                        references.push(Reference {
                            file: file.to_path_buf(),
                            module: module.clone(),
                            path,
                        });
                    }
                }
            }
            other => {
                if item_test_only(other) {
                    continue;
                }
                let mut paths = Paths::default();
                paths.visit_item(other);
                references.extend(paths.found.into_iter().map(|path| Reference {
                    file: file.to_path_buf(),
                    module: module.clone(),
                    path,
                }));
            }
        }
    }
    Ok(())
}

fn item_test_only(item: &syn::Item) -> bool {
    match item {
        syn::Item::Fn(item) => test_only(&item.attrs),
        syn::Item::Impl(item) => test_only(&item.attrs),
        syn::Item::Struct(item) => test_only(&item.attrs),
        syn::Item::Const(item) => test_only(&item.attrs),
        _ => false,
    }
}

/// Collects the paths written out from `crate`, `super` or `self`.
#[derive(Default)]
struct Paths {
    found: Vec<Vec<String>>,
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        // Every path is checked against the module's own names when
        // resolved: one from a child module or a `use` binding counts, a
        // lone name only when a `use` binds it (a local, a type parameter,
        // a prelude name resolve to nothing).
        if !segments.is_empty() {
            self.found.push(segments);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // A macro's body is tokens, not syntax `syn` can walk: read the
        // paths written in it from the tokens themselves.
        macro_paths(mac.tokens.clone(), &mut self.found);
        syn::visit::visit_macro(self, mac);
    }

    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {
        // Inline modules inside items are not modules of the crate's tree.
    }
}

/// Every path written in `tokens` (a macro's body), at any depth of
/// brackets: each run of identifiers joined by `::` (`run::run_seed`,
/// `super::SLACK`), and each lone identifier. Keywords other than the path
/// roots (`crate`, `super`, `self`) are not names and are skipped.
fn macro_paths(tokens: proc_macro2::TokenStream, found: &mut Vec<Vec<String>>) {
    let mut current: Vec<String> = Vec::new();
    // Whether the last tokens were `::`, so the next identifier extends
    // `current`.
    let mut joined = false;
    let mut colons = 0;
    for token in tokens {
        match token {
            proc_macro2::TokenTree::Ident(ident) => {
                let name = ident.to_string();
                if !joined {
                    flush(&mut current, found);
                }
                joined = false;
                colons = 0;
                let root = matches!(name.as_str(), "crate" | "super" | "self");
                if root || syn::parse_str::<syn::Ident>(&name).is_ok() {
                    current.push(name);
                } else {
                    // A keyword (`let`, `fn`, `in`) ends a path.
                    flush(&mut current, found);
                }
            }
            proc_macro2::TokenTree::Punct(punct) if punct.as_char() == ':' => {
                colons += 1;
                joined = colons == 2 && !current.is_empty();
            }
            proc_macro2::TokenTree::Group(group) => {
                flush(&mut current, found);
                joined = false;
                colons = 0;
                macro_paths(group.stream(), found);
            }
            _ => {
                flush(&mut current, found);
                joined = false;
                colons = 0;
            }
        }
    }
    flush(&mut current, found);
}

/// Ends the path being read in a macro's body, if any.
fn flush(current: &mut Vec<String>, found: &mut Vec<Vec<String>>) {
    if !current.is_empty() {
        found.push(std::mem::take(current));
    }
}

/// Expands a `use` tree into (the name it binds, the path it names).
fn use_tree(
    tree: &syn::UseTree,
    prefix: Vec<String>,
    found: &mut Vec<(Option<String>, Vec<String>)>,
) {
    match tree {
        syn::UseTree::Path(path) => {
            let mut prefix = prefix;
            prefix.push(path.ident.to_string());
            use_tree(&path.tree, prefix, found);
        }
        syn::UseTree::Name(name) if name.ident == "self" => {
            let binding = prefix.last().cloned();
            found.push((binding, prefix));
        }
        syn::UseTree::Name(name) => {
            let mut path = prefix;
            path.push(name.ident.to_string());
            found.push((Some(name.ident.to_string()), path));
        }
        syn::UseTree::Rename(rename) => {
            let mut path = prefix;
            if rename.ident != "self" {
                path.push(rename.ident.to_string());
            }
            found.push((Some(rename.rename.to_string()), path));
        }
        syn::UseTree::Glob(_) => found.push((None, prefix)),
        syn::UseTree::Group(group) => {
            for tree in &group.items {
                use_tree(tree, prefix.clone(), found);
            }
        }
    }
}

/// `path` as written in `module`, from the crate root; `None` for a path
/// into another crate or to a local name (a variable, a type parameter).
fn absolute(
    modules: &BTreeMap<ModPath, Module>,
    module: &[String],
    path: &[String],
) -> Option<ModPath> {
    let mut base: ModPath = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("self" | "super") => module.to_vec(),
        // Names the module declares shadow other crates, as in Rust.
        Some(first) => {
            let here = modules.get(module)?;
            if !here.children.contains(first) && !here.bindings.contains_key(first) {
                return None;
            }
            let mut full = module.to_vec();
            full.extend(path.iter().cloned());
            return Some(full);
        }
        None => return None,
    };
    let mut rest = if path[0] == "crate" || path[0] == "self" {
        &path[1..]
    } else {
        path
    };
    while rest.first().map(String::as_str) == Some("super") {
        base.pop()?;
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The file that defines what `path` (written in `module`) names.
fn resolve(
    modules: &BTreeMap<ModPath, Module>,
    module: &[String],
    path: &[String],
) -> Option<PathBuf> {
    let mut path = absolute(modules, module, path)?;
    // Each step follows one binding; a chain of re-exports is short.
    for _ in 0..32 {
        let mut at: ModPath = Vec::new();
        let mut followed = None;
        let mut item = false;
        for (index, segment) in path.iter().enumerate() {
            let current = modules.get(&at)?;
            if current.children.contains(segment) {
                at.push(segment.clone());
                continue;
            }
            if let Some(target) = current.bindings.get(segment) {
                let mut next = absolute(modules, &at, target)?;
                next.extend(path[index + 1..].iter().cloned());
                followed = Some(next);
            }
            item = true;
            break;
        }
        match followed {
            Some(next) if next != path => path = next,
            // A path that names a module, not an item in it, ties no file:
            // what is then taken through the module is.
            _ if !item => return None,
            _ => return modules.get(&at).map(|m| m.file.clone()),
        }
    }
    None
}
