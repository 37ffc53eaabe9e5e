//! The docs say what the code does: every list in them is checked here against the code, so
//! that they cannot drift again — the README's routes against the router, its commands and
//! options against `--help`, the scripts against `scripts/`, ARCHITECTURE's services against
//! `engine/src/service/`, and every relative link against the files and headings it names.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Command,
};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(workspace().join(relative))
        .unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The Markdown files whose links are checked.
fn markdown_files() -> Vec<String> {
    let mut files = vec![
        "README.md".to_owned(),
        "loadtest/README.md".to_owned(),
        "reports/README.md".to_owned(),
    ];
    for entry in std::fs::read_dir(workspace().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            files.push(format!("docs/{name}"));
        }
    }
    files
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn headings(text: &str) -> BTreeSet<String> {
    let mut fence = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fence = !fence;
        }
        if !fence && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// `(text)(target)` links outside code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_names_a_file_and_heading_that_exist() {
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = read(&file);
        let dir = Path::new(&file).parent().unwrap_or(Path::new(""));
        for link in links(&text) {
            if link.starts_with("http://") || link.starts_with("https://") {
                continue;
            }
            let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() {
                PathBuf::from(&file)
            } else {
                dir.join(path)
            };
            let full = workspace().join(&target);
            if !full.exists() {
                broken.push(format!("{file}: {link} (no {})", target.display()));
                continue;
            }
            if !anchor.is_empty() && full.is_file() {
                let text = std::fs::read_to_string(&full).unwrap();
                if !headings(&text).contains(anchor) {
                    broken.push(format!("{file}: {link} (no heading #{anchor})"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_is_short() {
    let lines = read("README.md").lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines; the detail belongs in docs/"
    );
}

/// `(METHOD, path)` of every route the server serves, from its router.
fn routes_in_code() -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for file in ["engine/src/http/routes.rs", "engine/src/http/mod.rs"] {
        for line in read(file).lines() {
            let Some(i) = line.find(".route(\"") else {
                continue;
            };
            let rest = &line[i + 8..];
            let path = &rest[..rest.find('"').unwrap()];
            for method in ["get", "post", "put", "patch", "delete"] {
                if rest.contains(&format!("{method}(")) {
                    out.insert((method.to_uppercase(), path.to_owned()));
                }
            }
        }
    }
    out
}

#[test]
fn the_readme_api_table_lists_every_route_and_no_other() {
    let mut listed = BTreeSet::new();
    for line in read("README.md").lines() {
        let Some(cell) = line.strip_prefix("| `") else {
            continue;
        };
        let cell = &cell[..cell.find('`').unwrap()];
        if let Some((method, path)) = cell.split_once(' ')
            && ["GET", "POST", "PUT", "PATCH", "DELETE"].contains(&method)
        {
            listed.insert((method.to_owned(), path.to_owned()));
        }
    }
    let code = routes_in_code();
    assert!(code.len() >= 14, "the router was read: {code:?}");
    assert_eq!(listed, code, "README's API table against the router");
}

#[test]
fn every_script_is_in_the_layout_and_every_script_named_exists() {
    let readme = read("README.md");
    let mut on_disk = BTreeSet::new();
    for entry in std::fs::read_dir(workspace().join("scripts")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".sh") {
            assert!(
                readme.contains(&format!("`{name}`")),
                "scripts/{name} is not in README's layout"
            );
            on_disk.insert(name);
        }
    }
    for file in markdown_files() {
        let text = read(&file);
        for (i, _) in text.match_indices("scripts/") {
            let name: String = text[i + 8..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == '.')
                .collect();
            if name.ends_with(".sh") {
                assert!(on_disk.contains(&name), "{file} names scripts/{name}");
            }
        }
    }
}

#[test]
fn the_architecture_lists_every_service_and_no_other() {
    let mut on_disk = BTreeSet::new();
    for entry in std::fs::read_dir(workspace().join("engine/src/service")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(stem) = name.strip_suffix(".rs")
            && stem != "mod"
        {
            on_disk.insert(stem.to_owned());
        }
    }
    let text = read("docs/ARCHITECTURE.md");
    let line = text
        .lines()
        .find(|l| l.starts_with("| `engine/src/service/`"))
        .expect("ARCHITECTURE's layout has a row for engine/src/service/");
    let listed: BTreeSet<String> = line
        .split('`')
        .skip(3)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    assert_eq!(
        listed, on_disk,
        "ARCHITECTURE's service list against engine/src/service/"
    );
}

#[test]
fn every_loadtest_command_and_option_in_the_readme_exists() {
    let help = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_coupon-loadtest"))
            .args(args)
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "coupon-loadtest {args:?} --help");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let mut checked = 0;
    for line in read("README.md").lines() {
        let Some(cell) = line.strip_prefix("| `coupon-loadtest ") else {
            continue;
        };
        let command = &cell[..cell.find('`').unwrap()];
        let sub = command.split_whitespace().next().unwrap();
        let text = help(&[sub]);
        for word in command.split_whitespace().filter(|w| w.starts_with("--")) {
            assert!(
                text.contains(word),
                "README names `coupon-loadtest {sub} {word}`, which its --help lacks"
            );
        }
        checked += 1;
    }
    assert!(
        checked >= 6,
        "the README's command table was read ({checked} rows)"
    );
}
