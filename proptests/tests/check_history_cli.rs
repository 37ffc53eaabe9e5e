//! `check-history` as a user runs it on files that cannot be checked: each gets a clear
//! error naming the file and the line, the other files are still checked, and the exit
//! status is 3 (not 2, which means undecided).

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::{path::Path, process::Command};

const GOOD: &str = "[{:process 0 :type :invoke :f :write :value 1}\n\
                    {:process 0 :type :ok :f :write :value 1}\n\
                    {:process 1 :type :invoke :f :read :value nil}\n\
                    {:process 1 :type :ok :f :read :value 1}]\n";

/// Each bad file, with the line its error must name and a word the error must hold.
const BAD: &[(&str, &str, usize, &str)] = &[
    (
        "truncated.edn",
        "[{:process 0 :type :invoke :f :write :value 1}\n{:process 0 :type :ok :f :wr",
        2,
        "",
    ),
    (
        "unknown-f.edn",
        "[{:process 0 :type :invoke :f :write :value 1}\n\
         {:process 0 :type :ok :f :write :value 1}\n\
         {:process 0 :type :invoke :f :frobnicate :value 2}]\n",
        3,
        "frobnicate",
    ),
    (
        "completed-twice.edn",
        "[{:process 0 :type :invoke :f :write :value 1}\n\
         {:process 0 :type :ok :f :write :value 1}\n\
         {:process 0 :type :ok :f :write :value 1}]\n",
        3,
        "process 0",
    ),
];

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn bad_files_are_named_with_their_line_and_the_others_still_checked() {
    let dir = std::env::temp_dir().join(format!("check-history-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = vec![write(&dir, "good-first.edn", GOOD)];
    files.extend(BAD.iter().map(|(name, text, _, _)| write(&dir, name, text)));
    files.push(write(&dir, "good-last.edn", GOOD));
    let out = Command::new(env!("CARGO_BIN_EXE_check-history"))
        .args(["--model", "cas-register", "--json"])
        .args(&files)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert_eq!(lines.len(), files.len(), "one line per file: {stdout}");
    for (line, file) in lines.iter().zip(&files) {
        assert_eq!(line["file"], file.as_str(), "{line}");
    }
    for good in [&lines[0], lines.last().unwrap()] {
        assert_eq!(good["verdict"], "linearizable", "{good}");
        assert_eq!(good["validity"], "valid", "{good}");
    }
    for ((name, _, at, word), line) in BAD.iter().zip(&lines[1..]) {
        let error = line["error"].as_str().unwrap_or_else(|| panic!("{line}"));
        assert!(error.contains(&format!("line {at}")), "{name}: {error}");
        assert!(error.contains(word), "{name}: {error}");
        assert!(
            stderr
                .lines()
                .any(|l| l.contains(name) && l.contains(&format!("line {at}"))),
            "{name} on stderr with its line: {stderr}"
        );
    }
}

#[test]
fn a_wrong_command_line_is_status_3_not_undecided() {
    for args in [
        &["--model", "no-such-model", "x.edn"][..],
        &["--model", "cas-register", "--timeout", "0", "x.edn"],
        &["--model", "cas-register"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_check-history"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?}: says why");
    }
}

#[test]
fn a_missing_file_is_named() {
    let out = Command::new(env!("CARGO_BIN_EXE_check-history"))
        .args(["--model", "etcd", "no/such/history.log"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no/such/history.log"), "{stderr}");
}

#[test]
fn html_writes_an_offline_counterexample_page_per_violation() {
    let dir = std::env::temp_dir().join(format!("check-history-html-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A get that misses an append completed before it (Porcupine's key-value format): the
    // search finds it.
    let bad = write(
        &dir,
        "lost-append.txt",
        "{:process 0, :type :invoke, :f :append, :key \"k\", :value \"a\"}\n\
         {:process 0, :type :ok, :f :append, :key \"k\", :value \"a\"}\n\
         {:process 0, :type :invoke, :f :append, :key \"k\", :value \"b\"}\n\
         {:process 0, :type :ok, :f :append, :key \"k\", :value \"b\"}\n\
         {:process 1, :type :invoke, :f :get, :key \"k\", :value nil}\n\
         {:process 1, :type :ok, :f :get, :key \"k\", :value \"a\"}\n",
    );
    let good = write(
        &dir,
        "good.txt",
        "{:process 0, :type :invoke, :f :append, :key \"k\", :value \"a\"}\n\
         {:process 0, :type :ok, :f :append, :key \"k\", :value \"a\"}\n",
    );
    let pages = dir.join("pages");
    let out = Command::new(env!("CARGO_BIN_EXE_check-history"))
        .args(["--model", "kv", "--html"])
        .arg(&pages)
        .args([&bad, &good])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let page = std::fs::read_to_string(pages.join("lost-append.txt.html")).unwrap();
    let listed: Vec<_> = std::fs::read_dir(&pages).unwrap().collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(listed.len(), 1, "a page for the violation only");
    assert!(page.contains("<svg"), "a timeline");
    assert!(page.contains("1. append"), "the prefix, numbered: {page}");
    assert!(
        page.contains("<title>p1 get &quot;k&quot; → &quot;a&quot; [5..6]: stuck"),
        "the get marked as the operation that must come next: {page}"
    );
    assert!(
        page.contains("get &quot;k&quot; → &quot;a&quot;"),
        "the operation that fits nowhere: {page}"
    );
    assert!(
        !page.contains("<script") && !page.contains("src="),
        "offline"
    );
}
