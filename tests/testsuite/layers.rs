//! The house's floors, written down once: every module of src/ (a folder or a root file) stands
//! on one floor, and its code may name (`crate::X`) only modules on its own floor or below, with
//! no circle between modules anywhere. Test code is left out (a test may reach anywhere).
//!
//! From the ground up: what everything uses; the node's facts; the seams and what the toolbox is
//! made of; making, verifying and finding a toolbox; what serves on it and what it serves; the
//! operations; one node's calls; the cluster; and the command line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const FLOORS: &[&[&str]] = &[
    &["error", "paths", "secret", "reporter", "check", "labels"],
    &["host", "image", "rccl"],
    &["container_engine", "manager", "spec", "settings", "link", "registry"],
    &["plan", "apply", "verify", "toolbox", "doctor"],
    &["serving", "model", "spread", "bench", "router", "metrics", "watch"],
    &["ops"],
    &["node"],
    &["cluster"],
    &["commands", "cli", "output"],
];

/// The entry points: they stand above every floor.
const ENTRY_POINTS: &[&str] = &["lib", "main"];

#[test]
fn no_module_names_one_on_a_higher_floor_and_none_forms_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let floor_of: BTreeMap<&str, usize> =
        FLOORS.iter().enumerate().flat_map(|(floor, modules)| modules.iter().map(move |m| (*m, floor))).collect();
    let modules = top_modules(&src);
    let unplaced: Vec<&String> =
        modules.iter().filter(|m| !floor_of.contains_key(m.as_str()) && !ENTRY_POINTS.contains(&m.as_str())).collect();
    assert!(unplaced.is_empty(), "modules on no floor (add them to FLOORS): {unplaced:?}");
    let root_files: Vec<String> = std::fs::read_dir(&src)
        .expect("src/")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".rs") && !["lib.rs", "main.rs", "cli.rs"].contains(&name.as_str()))
        .collect();
    assert!(root_files.is_empty(), "the src root holds entry points only, not {root_files:?}");

    let edges = imports(&src, &modules);
    let mut upward = Vec::new();
    for (from, names) in &edges {
        let Some(from_floor) = floor_of.get(from.as_str()) else { continue };
        for (to, file) in names {
            if floor_of.get(to.as_str()).is_some_and(|to_floor| to_floor > from_floor) {
                upward
                    .push(format!("{file}: {from} (floor {from_floor}) names {to} (floor {})", floor_of[to.as_str()]));
            }
        }
    }
    assert!(upward.is_empty(), "imports that point up a floor:\n{}", upward.join("\n"));

    let graph: BTreeMap<&str, BTreeSet<&str>> =
        edges.iter().map(|(from, names)| (from.as_str(), names.keys().map(String::as_str).collect())).collect();
    let circles = circles(&graph);
    assert!(circles.is_empty(), "modules that name each other in a circle: {circles:?}");
}

#[test]
fn the_floors_see_the_circles_a_made_up_tree_has() {
    let graph: BTreeMap<&str, BTreeSet<&str>> = [
        ("a", BTreeSet::from(["b"])),
        ("b", BTreeSet::from(["c"])),
        ("c", BTreeSet::from(["a"])),
        ("d", BTreeSet::from(["a"])),
    ]
    .into();
    assert_eq!(circles(&graph), [vec!["a", "b", "c"]]);
    let text = "use crate::host::X;\nuse crate::{error, spec::Transport};\n#[cfg(test)]\nmod tests { use crate::cli; }";
    assert_eq!(named(text), BTreeSet::from(["host".to_string(), "error".to_string(), "spec".to_string()]));
}

/// The modules under `src`: every folder and every `.rs` file at its root.
fn top_modules(src: &Path) -> BTreeSet<String> {
    std::fs::read_dir(src)
        .expect("src/")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?.to_string();
            if path.is_dir() {
                Some(name)
            } else {
                name.strip_suffix(".rs").map(str::to_string)
            }
        })
        .collect()
}

/// Per module, the other modules its non-test code names, each with one file that does.
fn imports(src: &Path, modules: &BTreeSet<String>) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).expect("under src");
        let name = relative.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let test_code =
            name == "tests.rs" || name == "testing.rs" || relative.components().any(|c| c.as_os_str() == "tests");
        if test_code {
            continue;
        }
        let first = relative.components().next().expect("a path").as_os_str().to_string_lossy();
        let module = first.strip_suffix(".rs").unwrap_or(&first).to_string();
        let text = std::fs::read_to_string(&file).expect("a source file");
        for to in named(&text).into_iter().filter(|to| *to != module && modules.contains(to)) {
            edges.entry(module.clone()).or_default().entry(to).or_insert_with(|| relative.display().to_string());
        }
    }
    edges
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a source folder").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The top modules `text` names as `crate::X` or in `crate::{X, …}`, before its test module and
/// outside comments.
fn named(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    let code: String = code.lines().map(|line| line.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let mut names = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Each top-level item of the group: the name before its first `::`, `,` or `}`.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.extend(first_word(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            names.extend(first_word(&item));
        } else {
            names.extend(first_word(rest));
        }
    }
    names
}

fn first_word(text: &str) -> Option<String> {
    let word: String = text.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    (!word.is_empty()).then_some(word)
}

/// The strongly connected groups of two or more modules (Tarjan's), each sorted.
fn circles<'a>(graph: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    struct Walk<'a, 'g> {
        graph: &'g BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<&'a str>>,
    }
    impl<'a> Walk<'a, '_> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten().copied() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut group = Vec::new();
                while let Some(w) = self.stack.pop() {
                    group.push(w);
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    self.found.push(group);
                }
            }
        }
    }
    let mut walk = Walk { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for v in graph.keys().copied() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}
