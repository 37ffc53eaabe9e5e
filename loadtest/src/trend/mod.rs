//! `coupon-loadtest trend DIR…`: how throughput, latency, the capacity knee and the bench's
//! ratios moved across commits. Reads every `report.json` (load runs and bench runs) and
//! `capacity.json` under the given paths — CI's artifacts, one run per commit — and writes an
//! offline page with a chart per figure, in the order the runs started, each point labelled
//! with its commit; the baseline each run was gated on is drawn, and a point the gate called
//! a regression is marked.

mod page;

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Parser;
use serde_json::Value;
use time::OffsetDateTime;

use crate::progress::phase;

/// Draw throughput, latency, knees and bench ratios across many runs' reports.
#[derive(Debug, Parser)]
pub(crate) struct TrendCli {
    /// Run directories, directories holding them (searched three levels deep), or
    /// `report.json` / `capacity.json` files.
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<PathBuf>,
    /// Directory the page's directory is created in.
    #[arg(long, value_name = "DIR", default_value = "reports")]
    report_dir: PathBuf,
}

/// One point of a figure.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Point {
    pub started_at: String,
    pub commit: String,
    pub value: f64,
    /// The baseline the run was compared with, if it was.
    pub baseline: Option<f64>,
    /// A goal the figure is held to (bench ratios).
    pub goal: Option<f64>,
    /// The run's own gate called it a regression.
    pub regressed: bool,
}

/// One figure over the runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    /// e.g. `flash-sale · requests_per_sec`.
    pub name: String,
    /// Whether more is better (throughput, ratios, knees) or worse (latency).
    pub higher_is_better: bool,
    pub points: Vec<Point>,
}

/// Runs the command; its exit code (0, or 3 with nothing to draw).
pub(crate) async fn run(cli: TrendCli) -> anyhow::Result<u8> {
    let mut files = Vec::new();
    for path in &cli.paths {
        if !path.exists() {
            bail!("{}: no such file or directory", path.display());
        }
        collect(path, 3, &mut files);
    }
    let mut docs = Vec::new();
    for file in &files {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let doc: Value = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a JSON report", file.display()))?;
        docs.push(doc);
    }
    let series = series_of(&docs);
    if series.is_empty() {
        bail!(
            "no report.json or capacity.json with figures under {}",
            cli.paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let dir = crate::report_dir::create(&cli.report_dir, OffsetDateTime::now_utc(), "trend")?;
    let path = dir.join("index.html");
    std::fs::write(&path, page::html(&series, docs.len()))
        .with_context(|| format!("writing {}", path.display()))?;
    phase(
        "trend",
        format!(
            "{} reports, {} figures: {}",
            docs.len(),
            series.len(),
            path.display()
        ),
    );
    Ok(0)
}

/// The report files under `path`, at most `depth` directories down.
fn collect(path: &Path, depth: u32, out: &mut Vec<PathBuf>) {
    if path.is_file() {
        out.push(path.to_owned());
        return;
    }
    for name in ["report.json", "capacity.json"] {
        let file = path.join(name);
        if file.is_file() {
            out.push(file);
            return;
        }
    }
    if depth == 0 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !p.ends_with("steps"))
        .collect();
    dirs.sort();
    for dir in dirs {
        collect(&dir, depth - 1, out);
    }
}

fn text(doc: &Value, key: &str) -> String {
    doc.get(key)
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_owned()
}

/// Every figure of every report, a series per figure, points in start order.
pub(crate) fn series_of(docs: &[Value]) -> Vec<Series> {
    let mut all: Vec<Series> = Vec::new();
    let mut add =
        |name: String, higher: bool, point: Point| match all.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push(point),
            None => all.push(Series {
                name,
                higher_is_better: higher,
                points: vec![point],
            }),
        };
    for doc in docs {
        let (started_at, commit) = (text(doc, "started_at"), text(doc, "git_commit"));
        let point = |value: f64| Point {
            started_at: started_at.clone(),
            commit: commit.clone(),
            value,
            baseline: None,
            goal: None,
            regressed: false,
        };
        if let Some(ratios) = doc.get("ratios").and_then(Value::as_array) {
            for r in ratios {
                let Some(value) = r.get("value").and_then(Value::as_f64) else {
                    continue;
                };
                add(
                    format!("bench · {}", text(r, "key")),
                    true,
                    Point {
                        baseline: r.get("baseline").and_then(Value::as_f64),
                        goal: r.get("goal").and_then(Value::as_f64),
                        regressed: r.get("within_baseline").and_then(Value::as_bool) == Some(false),
                        ..point(value)
                    },
                );
            }
        } else if doc.get("steps").is_some() {
            let knee = doc.get("knee").and_then(Value::as_f64).unwrap_or(0.0);
            add(
                format!("capacity · {} · knee (arrivals/s)", text(doc, "scenario")),
                true,
                point(knee),
            );
        } else if let Some(throughput) = doc.get("throughput") {
            let scenario = text(doc, "scenario");
            let model = if doc.get("open_model").is_some_and(|o| !o.is_null()) {
                " (open model)"
            } else {
                ""
            };
            let gate = doc.pointer("/baseline/rows").and_then(Value::as_array);
            let gated = |metric: &str, value: f64| {
                let row = gate.and_then(|rows| {
                    rows.iter()
                        .find(|r| r.get("metric").and_then(Value::as_str) == Some(metric))
                });
                Point {
                    baseline: row.and_then(|r| r.get("baseline")).and_then(Value::as_f64),
                    regressed: row
                        .and_then(|r| r.get("regressed"))
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    ..point(value)
                }
            };
            for metric in ["requests_per_sec", "claims_per_sec"] {
                if let Some(v) = throughput.get(metric).and_then(Value::as_f64) {
                    add(
                        format!("{scenario}{model} · {metric}"),
                        true,
                        gated(metric, v),
                    );
                }
            }
            let claim = doc
                .get("endpoints")
                .and_then(Value::as_array)
                .and_then(|e| {
                    e.iter()
                        .find(|e| e.get("name").and_then(Value::as_str) == Some("claim"))
                });
            for metric in ["p50_ms", "p99_ms"] {
                if let Some(v) = claim.and_then(|c| c.get(metric)).and_then(Value::as_f64) {
                    let name = format!("claim {metric}");
                    add(
                        format!("{scenario}{model} · {name}"),
                        false,
                        gated(&name, v),
                    );
                }
            }
        }
    }
    for s in &mut all {
        s.points.sort_by(|a, b| a.started_at.cmp(&b.started_at));
    }
    all.sort_by(|a, b| a.name.cmp(&b.name));
    all
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn load_runs_bench_runs_and_knees_each_make_their_series() {
        let run = |at: &str, commit: &str, rps: f64, regressed: bool| {
            json!({
                "started_at": at, "git_commit": commit, "scenario": "flash-sale",
                "throughput": {"requests_per_sec": rps, "claims_per_sec": rps / 2.0},
                "endpoints": [{"name": "claim", "p50_ms": 1.0, "p99_ms": 9.0}],
                "baseline": {"rows": [{"metric": "requests_per_sec", "baseline": 100.0,
                                       "regressed": regressed}]}
            })
        };
        let docs = vec![
            run("2026-12-03", "ccc", 40.0, true),
            run("2026-12-01", "aaa", 120.0, false),
            json!({"started_at": "2026-12-02", "git_commit": "bbb", "ratios": [
                {"key": "http_sync/hot_row", "value": 8.5, "goal": 6.0, "baseline": 8.0,
                 "within_baseline": true}]}),
            json!({"started_at": "2026-12-02", "git_commit": "bbb", "scenario": "flash-sale",
                   "steps": [], "knee": 26000.0}),
        ];
        let series = series_of(&docs);
        let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "bench · http_sync/hot_row",
                "capacity · flash-sale · knee (arrivals/s)",
                "flash-sale · claim p50_ms",
                "flash-sale · claim p99_ms",
                "flash-sale · claims_per_sec",
                "flash-sale · requests_per_sec",
            ]
        );
        let rps = series.last().unwrap();
        let commits: Vec<&str> = rps.points.iter().map(|p| p.commit.as_str()).collect();
        assert_eq!(commits, ["aaa", "ccc"], "in start order");
        assert_eq!(rps.points[1].baseline, Some(100.0));
        assert!(rps.points[1].regressed && !rps.points[0].regressed);
        assert_eq!(series[0].points[0].goal, Some(6.0));
        let html = page::html(&series, docs.len());
        assert!(html.contains("<svg") && html.contains("ccc"), "{html}");
        assert!(
            !html.contains("<script") && !html.contains("src="),
            "offline"
        );
    }
}
