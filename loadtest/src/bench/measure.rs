//! One measured row: throughput and latency percentiles, or why it was not measured.

use serde::{Deserialize, Serialize};

use super::{chain::ChainLoad, cpu};

/// A row of the benchmark table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Row {
    /// Stable key (used by ratios and baselines).
    pub key: String,
    /// What was measured, in words.
    pub what: String,
    /// Operations per second (None: not measured).
    pub per_sec: Option<f64>,
    /// Median latency, ms.
    pub p50_ms: Option<f64>,
    /// 99th percentile latency, ms.
    pub p99_ms: Option<f64>,
    /// How it was measured, or why it was not.
    pub note: String,
    /// CPU per operation of each part, where the row measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<cpu::PerOp>,
    /// The group commit over the row (sync rows that granted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_commit: Option<ChainLoad>,
}

impl Row {
    /// A row that could not be measured on this machine: never a made-up figure.
    pub(crate) fn not_measured(key: &str, what: &str, why: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            what: what.into(),
            per_sec: None,
            p50_ms: None,
            p99_ms: None,
            note: format!("not measured: {}", why.into()),
            cpu: None,
            group_commit: None,
        }
    }
}

/// Latencies of one run, in microseconds.
#[derive(Debug, Default)]
pub(crate) struct Samples {
    micros: Vec<u32>,
    /// Operations that ended in an unexpected answer (counted, excluded from latency).
    pub errors: u64,
}

impl Samples {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self {
            micros: Vec::with_capacity(n),
            errors: 0,
        }
    }

    pub(crate) fn push(&mut self, elapsed: std::time::Duration) {
        self.micros
            .push(u32::try_from(elapsed.as_micros()).unwrap_or(u32::MAX));
    }

    pub(crate) fn merge(&mut self, other: Samples) {
        self.micros.extend(other.micros);
        self.errors += other.errors;
    }

    pub(crate) fn len(&self) -> usize {
        self.micros.len()
    }

    /// The row for these samples collected over `seconds`.
    pub(crate) fn into_row(mut self, key: &str, what: &str, seconds: f64, note: String) -> Row {
        self.micros.sort_unstable();
        let pct = |p: f64| -> Option<f64> {
            if self.micros.is_empty() {
                return None;
            }
            let i = ((self.micros.len() as f64 * p).ceil() as usize).clamp(1, self.micros.len());
            Some(f64::from(self.micros[i - 1]) / 1000.0)
        };
        let errors = if self.errors > 0 {
            format!("; {} unexpected answers (excluded)", self.errors)
        } else {
            String::new()
        };
        Row {
            key: key.into(),
            what: what.into(),
            per_sec: Some(self.micros.len() as f64 / seconds),
            p50_ms: pct(0.50),
            p99_ms: pct(0.99),
            note: format!("{note}{errors}"),
            cpu: None,
            group_commit: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn percentiles_are_exact_order_statistics() {
        let mut s = Samples::default();
        for ms in 1..=100 {
            s.push(Duration::from_millis(ms));
        }
        let row = s.into_row("k", "w", 2.0, String::new());
        assert_eq!(row.per_sec, Some(50.0));
        assert_eq!(row.p50_ms, Some(50.0));
        assert_eq!(row.p99_ms, Some(99.0));
    }
}
