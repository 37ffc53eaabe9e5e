//! The regression gate: compares this run's throughput (requests/s, claims/s) and each
//! endpoint's p50/p95/p99 with a stored report.json, within tolerances.

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::{
    cli::Tolerances,
    stats::{EndpointStats, Throughput},
};

/// The parts of a stored report a comparison reads.
#[derive(Debug, Deserialize)]
struct Stored {
    schema_version: u32,
    scenario: String,
    throughput: Throughput,
    endpoints: Vec<EndpointStats>,
    #[serde(default)]
    config: serde_json::Value,
}

/// One compared figure.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Row {
    /// e.g. `requests_per_sec` or `claim p99_ms`.
    pub metric: String,
    /// The baseline's value.
    pub baseline: f64,
    /// This run's value.
    pub current: f64,
    /// The bound the current value had to respect.
    pub limit: f64,
    /// `min` (throughput: at least the limit) or `max` (latency: at most the limit).
    pub bound: String,
    /// Whether the bound was broken.
    pub regressed: bool,
}

/// The comparison with a baseline.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Comparison {
    /// The baseline file.
    pub file: String,
    /// Tolerances applied.
    pub tolerances: Tolerances,
    /// Every compared figure.
    pub rows: Vec<Row>,
    /// The regressions, in words.
    pub regressions: Vec<String>,
    /// Remarks that are not regressions (e.g. configuration differences).
    pub notes: Vec<String>,
}

impl Comparison {
    /// Whether nothing regressed.
    pub(crate) fn passed(&self) -> bool {
        self.regressions.is_empty()
    }
}

/// Fewest requests of an endpoint (in the baseline and now) for its percentiles to be
/// compared: a p99 over a few dozen samples is noise.
pub(crate) const MIN_SAMPLES: u64 = 200;

/// Supported report schema versions.
const SCHEMA_VERSIONS: [u32; 1] = [1];

/// Configuration keys whose difference makes the comparison less meaningful.
const CONFIG_KEYS: [&str; 7] = [
    "users",
    "stock",
    "per_user_limit",
    "duration_secs",
    "iterations",
    "persistence",
    "variant",
];

/// Reads `file` and compares this run with it.
pub(crate) fn compare(
    file: &Path,
    tol: Tolerances,
    scenario: &str,
    config: &serde_json::Value,
    throughput: &Throughput,
    endpoints: &[EndpointStats],
) -> anyhow::Result<Comparison> {
    let stored = read(file)?;
    let mut c = Comparison {
        file: file.display().to_string(),
        tolerances: tol,
        rows: Vec::new(),
        regressions: Vec::new(),
        notes: Vec::new(),
    };
    if stored.scenario != scenario {
        c.regressions.push(format!(
            "the baseline is of scenario {:?}, this run is {scenario:?}",
            stored.scenario
        ));
    }
    for key in CONFIG_KEYS {
        let (was, now) = (stored.config.get(key), config.get(key));
        if was != now {
            c.notes.push(format!(
                "configuration differs: {key} was {} in the baseline, is {} now",
                was.map_or_else(|| "unset".to_owned(), ToString::to_string),
                now.map_or_else(|| "unset".to_owned(), ToString::to_string),
            ));
        }
    }
    compare_throughput(&mut c, &stored.throughput, throughput);
    compare_latency(&mut c, &stored.endpoints, endpoints);
    Ok(c)
}

fn read(file: &Path) -> anyhow::Result<Stored> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("reading baseline {}", file.display()))?;
    let stored: Stored = serde_json::from_str(&text).with_context(|| {
        format!(
            "baseline {} is not a coupon-loadtest report.json",
            file.display()
        )
    })?;
    if !SCHEMA_VERSIONS.contains(&stored.schema_version) {
        anyhow::bail!(
            "baseline {} has schema_version {}, this build reads {SCHEMA_VERSIONS:?}",
            file.display(),
            stored.schema_version
        );
    }
    Ok(stored)
}

/// Rates may fall to `tolerances.throughput` of the baseline's.
fn compare_throughput(c: &mut Comparison, stored: &Throughput, throughput: &Throughput) {
    let tol = c.tolerances;
    let mut min = |metric: &str, baseline: f64, current: f64| {
        let limit = baseline * tol.throughput;
        let regressed = current < limit;
        if regressed {
            c.regressions.push(format!(
                "{metric}: {current:.1} < {limit:.1} ({:.0}% of the baseline's {baseline:.1})",
                tol.throughput * 100.0
            ));
        }
        c.rows.push(Row {
            metric: metric.to_owned(),
            baseline,
            current,
            limit,
            bound: "min".into(),
            regressed,
        });
    };
    min(
        "requests_per_sec",
        stored.requests_per_sec,
        throughput.requests_per_sec,
    );
    min(
        "claims_per_sec",
        stored.claims_per_sec,
        throughput.claims_per_sec,
    );
}

/// Percentiles may grow to `tolerances.latency` times the baseline's (never below the
/// floor), for endpoints with enough samples on both sides.
fn compare_latency(c: &mut Comparison, stored: &[EndpointStats], endpoints: &[EndpointStats]) {
    let tol = c.tolerances;
    for base in stored {
        let Some(now) = endpoints.iter().find(|e| e.name == base.name) else {
            c.notes.push(format!(
                "endpoint {} is in the baseline but was not exercised",
                base.name
            ));
            continue;
        };
        if base.count.min(now.count) < MIN_SAMPLES {
            c.notes.push(format!(
                "endpoint {}: {} requests now, {} in the baseline; percentiles need {MIN_SAMPLES} in both to be compared",
                base.name, now.count, base.count
            ));
            continue;
        }
        for (label, b, n) in [
            ("p50_ms", base.p50_ms, now.p50_ms),
            ("p95_ms", base.p95_ms, now.p95_ms),
            ("p99_ms", base.p99_ms, now.p99_ms),
        ] {
            let limit = (b * tol.latency).max(tol.latency_floor_ms);
            let regressed = n > limit;
            let metric = format!("{} {label}", base.name);
            if regressed {
                c.regressions.push(format!(
                    "{metric}: {n:.2} ms > {limit:.2} ms ({}× the baseline's {b:.2} ms)",
                    tol.latency
                ));
            }
            c.rows.push(Row {
                metric,
                baseline: b,
                current: n,
                limit,
                bound: "max".into(),
                regressed,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(rps: f64) -> Throughput {
        Throughput {
            duration_secs: 10.0,
            requests: 10,
            requests_per_sec: rps,
            claims: 10,
            claims_per_sec: rps,
            claims_granted: 1,
            granted_per_sec: 0.1,
        }
    }

    fn ep(p99: f64) -> EndpointStats {
        EndpointStats {
            name: "claim".into(),
            count: 1000,
            ok: 1000,
            refused: 0,
            failed: 0,
            p50_ms: 1.0,
            p95_ms: 2.0,
            p99_ms: p99,
            max_ms: p99,
            mean_ms: 1.0,
        }
    }

    #[test]
    fn regressions_beyond_tolerance_only() -> anyhow::Result<()> {
        let dir = std::env::temp_dir().join(format!("lt-baseline-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir)?;
        let file = dir.join("b.json");
        let cfg = serde_json::json!({"users": 10});
        std::fs::write(
            &file,
            serde_json::to_string(&serde_json::json!({
                "schema_version": 1, "scenario": "flash-sale", "config": cfg,
                "throughput": tp(1000.0), "endpoints": [ep(20.0)],
            }))?,
        )?;
        let tol = Tolerances {
            throughput: 0.5,
            latency: 2.0,
            latency_floor_ms: 5.0,
        };
        let ok = compare(&file, tol, "flash-sale", &cfg, &tp(600.0), &[ep(39.0)])?;
        assert!(ok.passed(), "{ok:?}");
        let bad = compare(&file, tol, "flash-sale", &cfg, &tp(400.0), &[ep(41.0)])?;
        assert_eq!(bad.regressions.len(), 3, "{bad:?}");
        let other = compare(
            &file,
            tol,
            "lifecycle",
            &serde_json::json!({"users": 5}),
            &tp(1000.0),
            &[ep(20.0)],
        )?;
        assert!(!other.passed());
        assert_eq!(other.notes.len(), 1);
        std::fs::remove_dir_all(dir)?;
        Ok(())
    }
}
