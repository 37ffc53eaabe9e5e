//! No two modules of a crate import each other, directly or around a circle: a newcomer can
//! read the modules in an order where each depends only on those already read. A module may
//! use its ancestors and descendants (a child of `nemesis` uses `nemesis`'s types); between
//! any others, the paths of `use` trees and the `crate::`, `super::` and `self::` paths
//! outside comments and unit tests are the edges, lifted to the siblings that hold them.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

type Module = Vec<String>;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a source file defines (`a/b.rs` and `a/b/mod.rs` are `a::b`).
fn module_of(src: &Path, file: &Path) -> Module {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Module = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of a file without comments and without its unit-test module.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A path as written: its segments, `crate`, `super` and `self` included.
type Written = Vec<String>;

/// The segments of a path written from `at` on, up to the first character no path holds.
fn path_at(text: &str) -> Written {
    let mut segments = Vec::new();
    for seg in text.split("::") {
        let word: String = seg
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let whole = word.len() == seg.len();
        if word.is_empty() {
            break;
        }
        segments.push(word);
        if !whole {
            break;
        }
    }
    segments
}

/// The paths a `use` tree names (`a::{b, c::{d, e as f}}` is `a::b`, `a::c::d`, `a::c::e`).
fn use_tree(prefix: &[String], tree: &str, out: &mut Vec<Written>) {
    let mut depth = 0;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&tree[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tree[start..]);
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        if let Some(open) = part.find("::{").filter(|_| part.ends_with('}')) {
            let mut deeper = prefix.to_vec();
            deeper.extend(part[..open].split("::").map(str::to_owned));
            use_tree(&deeper, &part[open + 3..part.len() - 1], out);
        } else {
            let mut path = prefix.to_vec();
            path.extend(path_at(part));
            out.push(path);
        }
    }
}

/// The paths `code` names: every `use` tree expanded, and every `crate::`, `super::` and
/// `self::` path written inline.
fn paths(code: &str) -> Vec<Written> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("use ") {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(end) = code[i..].find(';') else {
            continue;
        };
        // One space at most, and none beside the tree's punctuation (`e as f` keeps its).
        let tree = code[i + 4..i + end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace(" {", "{")
            .replace("{ ", "{")
            .replace(" }", "}")
            .replace(", ", ",")
            .replace(" ,", ",")
            .replace(":: ", "::");
        use_tree(&[], &tree, &mut out);
    }
    for root in ["crate::", "super::", "self::"] {
        for (i, _) in code.match_indices(root) {
            let before = code[..i].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            // A bare root (`crate::{…}`) is a `use` tree, expanded above.
            let path = path_at(&code[i..]);
            if path.len() > 1 {
                out.push(path);
            }
        }
    }
    out
}

/// The module a path written in module `me` names, as far as it names one of `modules`;
/// `None` for paths outside the crate.
fn resolve(me: &Module, path: &Written, modules: &BTreeSet<Module>) -> Option<Module> {
    let (first, rest) = path.split_first()?;
    let mut wanted: Module = match first.as_str() {
        "crate" => Vec::new(),
        "self" => me.clone(),
        "super" => {
            let up = 1 + rest.iter().take_while(|s| *s == "super").count();
            me[..me.len().saturating_sub(up)].to_vec()
        }
        child if modules.contains(&[me.as_slice(), &[child.to_owned()]].concat()) => {
            let mut m = me.clone();
            m.push(child.to_owned());
            m
        }
        _ => return None,
    };
    wanted.extend(rest.iter().filter(|s| *s != "super").cloned());
    (0..=wanted.len())
        .rev()
        .map(|n| wanted[..n].to_vec())
        .find(|m| modules.contains(m))
}

/// Edges between the modules of the crate whose sources are in `src`. A module may use its
/// ancestors and its descendants; a use of any other is an edge between the two siblings
/// that hold them under their nearest common ancestor (`a::x` using `b::y` is `a → b`), so
/// a circle through children is a circle of their parents.
fn edges(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Module> = files
        .iter()
        .map(|f| module_of(src, f))
        // Binaries are crates of their own; unit-test modules may use anything.
        .filter(|m| m.first().is_none_or(|f| f != "bin") && m.last().is_none_or(|l| l != "tests"))
        .collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for file in &files {
        let me = module_of(src, file);
        if !modules.contains(&me) {
            continue;
        }
        let text = code(&std::fs::read_to_string(file).unwrap());
        for path in paths(&text) {
            let Some(target) = resolve(&me, &path, &modules) else {
                continue;
            };
            if me.starts_with(&target) || target.starts_with(&me) {
                continue;
            }
            let common = me.iter().zip(&target).take_while(|(a, b)| a == b).count();
            edges
                .entry(me[..=common].to_vec())
                .or_default()
                .insert(target[..=common].to_vec());
        }
    }
    edges
}

/// The circles of `edges`: strongly connected sets of more than one module (Tarjan).
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        let edges = s.edges;
        for w in edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut set = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                set.push(w.join("::"));
                if w == v {
                    break;
                }
            }
            if set.len() > 1 {
                set.sort();
                s.found.push(set);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.found
}

#[test]
fn no_crate_of_the_workspace_has_an_import_circle() {
    let mut found = Vec::new();
    for krate in ["engine", "loadtest", "proptests", "testkit", "verify"] {
        for set in circles(&edges(&workspace().join(krate).join("src"))) {
            found.push(format!("{krate}: {}", set.join(" <-> ")));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn a_circle_is_found() {
    let m = |s: &str| s.split("::").map(str::to_owned).collect::<Module>();
    let edges = BTreeMap::from([
        (m("a"), BTreeSet::from([m("b")])),
        (m("b"), BTreeSet::from([m("c")])),
        (m("c"), BTreeSet::from([m("a")])),
        (m("d"), BTreeSet::from([m("a")])),
    ]);
    assert_eq!(circles(&edges), [["a", "b", "c"]]);
    let code = "use crate::{acks::{Event, Op as O}, tally};\nfn f() { super::tally::Tally::new() }";
    let words = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Written>();
    assert_eq!(
        paths(code),
        [
            words(&["crate", "acks", "Event"]),
            words(&["crate", "acks", "Op"]),
            words(&["crate", "tally"]),
            words(&["super", "tally", "Tally", "new"]),
        ]
    );
    // A child's use of a cousin is its parent's edge to the cousin's parent.
    let modules = BTreeSet::from([m("service"), m("service::rebuild"), m("mutants")]);
    assert_eq!(
        resolve(
            &m("service::rebuild"),
            &words(&["super", "super", "mutants", "f"]),
            &modules
        ),
        Some(m("mutants"))
    );
    assert_eq!(
        resolve(&m("service"), &words(&["rebuild", "Rebuilt"]), &modules),
        Some(m("service::rebuild"))
    );
}
