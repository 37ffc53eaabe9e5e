//! No two modules of a crate import each other, directly or around a circle: a newcomer can
//! read the modules in an order where each depends only on those already read. A module may
//! use its ancestors (a child of `nemesis` uses `nemesis`'s types); between any others, the
//! `crate::` and `super::` paths outside comments and unit tests are the edges.

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

/// The `crate::a::b` and `super::a` paths in `code`, each as its segments.
fn paths(code: &str) -> Vec<(bool, Vec<String>)> {
    let mut out = Vec::new();
    for (root, is_crate) in [("crate::", true), ("super::", false)] {
        for (i, _) in code.match_indices(root) {
            let before = code[..i].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let rest = &code[i + root.len()..];
            let mut segments = Vec::new();
            for seg in rest.split("::") {
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
            out.push((is_crate, segments));
        }
    }
    out
}

/// Edges between the modules of the crate whose sources are in `src`.
fn edges(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Module> = files.iter().map(|f| module_of(src, f)).collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for file in &files {
        let me = module_of(src, file);
        let text = code(&std::fs::read_to_string(file).unwrap());
        for (is_crate, segments) in paths(&text) {
            let mut wanted = if is_crate {
                Vec::new()
            } else {
                me[..me.len().saturating_sub(1)].to_vec()
            };
            wanted.extend(segments);
            let target = (0..=wanted.len())
                .rev()
                .map(|n| wanted[..n].to_vec())
                .find(|m| modules.contains(m));
            if let Some(target) = target
                && target != me
                && !me.starts_with(&target)
            {
                edges.entry(me.clone()).or_default().insert(target);
            }
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
    for krate in ["engine", "loadtest", "proptests", "testkit"] {
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
    let code = "use crate::acks::{Event, Op};\nfn f() { super::tally::Tally::new() }";
    assert_eq!(
        paths(code),
        [
            (true, vec!["acks".to_owned()]),
            (
                false,
                vec!["tally".to_owned(), "Tally".to_owned(), "new".to_owned()]
            ),
        ]
    );
}
