//! The ratios the benchmark exists for, and the baseline gate on them: ratios of rows
//! measured in one run travel between machines far better than absolute figures.

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::measure::Row;

/// A ratio: `numerator` row's throughput over `denominator`'s.
pub(crate) struct Spec {
    pub key: &'static str,
    pub numerator: &'static str,
    pub denominator: &'static str,
    /// The project's goal for it on the reference machine (2 cores), if it has one.
    pub goal: Option<f64>,
}

/// Every ratio reported.
pub(crate) const SPECS: [Spec; 9] = [
    Spec {
        key: "http_sold_out/redis",
        numerator: "http_sold_out",
        denominator: "redis_evalsha_sold_out",
        goal: Some(0.5),
    },
    Spec {
        key: "in_process_sold_out/redis",
        numerator: "inproc_sold_out",
        denominator: "redis_evalsha_sold_out",
        goal: None,
    },
    Spec {
        key: "http_sync/pgbench_insert",
        numerator: "http_sync_granted",
        denominator: "pgbench_insert",
        goal: Some(1.0),
    },
    Spec {
        key: "http_sync/hot_row",
        numerator: "http_sync_granted",
        denominator: "pgbench_hot_row",
        goal: Some(6.0),
    },
    Spec {
        key: "in_process_sync/pgbench_insert",
        numerator: "inproc_sync_granted",
        denominator: "pgbench_insert",
        goal: None,
    },
    Spec {
        key: "http_async/redis_granting",
        numerator: "http_async_granted",
        denominator: "redis_evalsha_granting",
        goal: Some(0.5),
    },
    Spec {
        key: "sync_1000_templates/one",
        numerator: "http_sync_spread",
        denominator: "http_sync_granted",
        goal: Some(0.8),
    },
    Spec {
        key: "async_1000_templates/one",
        numerator: "http_async_spread",
        denominator: "http_async_granted",
        goal: Some(0.8),
    },
    Spec {
        key: "goose/minimal_client",
        numerator: "goose_sold_out",
        denominator: "http_sold_out",
        goal: Some(0.8),
    },
];

/// A ratio of this run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Ratio {
    pub key: String,
    pub numerator: String,
    pub denominator: String,
    /// None when either row was not measured.
    pub value: Option<f64>,
    pub goal: Option<f64>,
    /// The committed baseline's value, with `--baseline`.
    pub baseline: Option<f64>,
    /// False when the value fell below the allowed fraction of the baseline.
    pub within_baseline: bool,
}

fn per_sec(rows: &[Row], key: &str) -> Option<f64> {
    rows.iter().find(|r| r.key == key).and_then(|r| r.per_sec)
}

/// The ratios of `rows`.
pub(crate) fn compute(rows: &[Row]) -> Vec<Ratio> {
    SPECS
        .iter()
        .map(|s| Ratio {
            key: s.key.into(),
            numerator: s.numerator.into(),
            denominator: s.denominator.into(),
            value: match (per_sec(rows, s.numerator), per_sec(rows, s.denominator)) {
                (Some(n), Some(d)) if d > 0.0 => Some(n / d),
                _ => None,
            },
            goal: s.goal,
            baseline: None,
            within_baseline: true,
        })
        .collect()
}

/// A committed set of ratios.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Baseline {
    /// How it was made.
    pub note: String,
    /// Ratio key → value.
    pub ratios: std::collections::BTreeMap<String, f64>,
}

/// Marks each ratio against `baseline`; returns the keys that fell below `min_fraction`.
pub(crate) fn gate(ratios: &mut [Ratio], baseline: &Baseline, min_fraction: f64) -> Vec<String> {
    let mut fell = Vec::new();
    for r in ratios.iter_mut() {
        r.baseline = baseline.ratios.get(&r.key).copied();
        if let (Some(v), Some(b)) = (r.value, r.baseline)
            && v < b * min_fraction
        {
            r.within_baseline = false;
            fell.push(format!(
                "{}: {v:.2} < {min_fraction} × baseline {b:.2}",
                r.key
            ));
        }
    }
    fell
}

/// Reads a baseline file.
pub(crate) fn read_baseline(path: &Path) -> anyhow::Result<Baseline> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The baseline file of this run's ratios.
pub(crate) fn to_baseline(ratios: &[Ratio], note: String) -> Baseline {
    Baseline {
        note,
        ratios: ratios
            .iter()
            .filter_map(|r| {
                r.value
                    .map(|v| (r.key.clone(), (v * 1000.0).round() / 1000.0))
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, per_sec: Option<f64>) -> Row {
        Row {
            key: key.into(),
            what: String::new(),
            per_sec,
            p50_ms: None,
            p99_ms: None,
            note: String::new(),
            cpu: None,
            group_commit: None,
        }
    }

    #[test]
    fn ratios_gate_on_half_the_baseline_and_skip_unmeasured_rows() {
        let rows = [
            row("http_sold_out", Some(20.0)),
            row("redis_evalsha_sold_out", Some(40.0)),
            row("http_sync_granted", Some(1.0)),
            row("pgbench_insert", None),
        ];
        let mut ratios = compute(&rows);
        assert_eq!(ratios[0].value, Some(0.5));
        assert_eq!(ratios[2].value, None);
        let baseline = Baseline {
            note: String::new(),
            ratios: [("http_sold_out/redis".to_owned(), 1.2)].into(),
        };
        let fell = gate(&mut ratios, &baseline, 0.5);
        assert_eq!(fell.len(), 1, "0.5 < 0.6: {fell:?}");
        assert!(!ratios[0].within_baseline);
        let baseline = Baseline {
            note: String::new(),
            ratios: [("http_sold_out/redis".to_owned(), 0.9)].into(),
        };
        assert!(gate(&mut ratios, &baseline, 0.5).is_empty());
    }
}
