//! The service-level objective a capacity search holds each step to: a response-time
//! percentile under a bound (`p99<50ms`), and an error budget (the share of arrivals
//! dropped or answered with a timeout or 5xx).

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::arrivals::Percentiles;

/// Which percentile the bound is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Quantile {
    P50,
    P90,
    P95,
    P99,
    P999,
    Max,
}

impl Quantile {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "p50" => Self::P50,
            "p90" => Self::P90,
            "p95" => Self::P95,
            "p99" => Self::P99,
            "p99.9" | "p999" => Self::P999,
            "max" => Self::Max,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::P50 => "p50",
            Self::P90 => "p90",
            Self::P95 => "p95",
            Self::P99 => "p99",
            Self::P999 => "p99.9",
            Self::Max => "max",
        }
    }

    /// Its value in `p`, ms.
    pub(crate) fn of(self, p: &Percentiles) -> f64 {
        match self {
            Self::P50 => p.p50,
            Self::P90 => p.p90,
            Self::P95 => p.p95,
            Self::P99 => p.p99,
            Self::P999 => p.p999,
            Self::Max => p.max,
        }
    }
}

/// A response-time bound and an error budget.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Slo {
    pub quantile: Quantile,
    /// The bound, ms.
    pub below_ms: f64,
    /// Largest share (0–1) of arrivals dropped or failed.
    pub error_budget: f64,
}

impl Slo {
    /// Parses `--slo` (`p99<50ms`) and `--error-budget` (`1%` or `0.01`).
    pub(crate) fn parse(slo: &str, budget: &str) -> anyhow::Result<Self> {
        let (quantile, bound) = slo
            .split_once('<')
            .with_context(|| format!("--slo {slo:?}: expected PERCENTILE<BOUND, e.g. p99<50ms"))?;
        let quantile = Quantile::parse(quantile.trim()).with_context(|| {
            format!(
                "--slo {slo:?}: unknown percentile {:?} (p50, p90, p95, p99, p99.9 or max)",
                quantile.trim()
            )
        })?;
        let bound = bound.trim();
        let split = bound
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(bound.len());
        let (number, unit) = bound.split_at(split);
        let value: f64 = number
            .parse()
            .map_err(|_| anyhow::anyhow!("--slo {slo:?}: {bound:?} is not a duration"))?;
        let below_ms = match unit {
            "ms" => value,
            "s" => value * 1000.0,
            "us" | "µs" => value / 1000.0,
            _ => bail!("--slo {slo:?}: unknown unit {unit:?} (us, ms or s)"),
        };
        if !(below_ms.is_finite() && below_ms > 0.0) {
            bail!("--slo {slo:?}: the bound must be above 0");
        }
        let budget = budget.trim();
        let error_budget = match budget.strip_suffix('%') {
            Some(pct) => pct.trim().parse::<f64>().map(|p| p / 100.0),
            None => budget.parse::<f64>(),
        }
        .map_err(|_| {
            anyhow::anyhow!("--error-budget {budget:?}: expected a share like 1% or 0.01")
        })?;
        if !(0.0..=1.0).contains(&error_budget) {
            bail!("--error-budget {budget:?}: must be between 0% and 100%");
        }
        Ok(Self {
            quantile,
            below_ms,
            error_budget,
        })
    }

    /// `p99 < 50 ms, errors ≤ 1%`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} < {} ms, dropped or failed ≤ {}%",
            self.quantile.name(),
            self.below_ms,
            self.error_budget * 100.0
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn slos_parse_with_their_units() {
        let s = Slo::parse("p99<50ms", "1%").unwrap();
        assert_eq!(
            (s.quantile, s.below_ms, s.error_budget),
            (Quantile::P99, 50.0, 0.01)
        );
        let s = Slo::parse("p99.9 < 0.2s", "0.05").unwrap();
        assert_eq!(
            (s.quantile, s.below_ms, s.error_budget),
            (Quantile::P999, 200.0, 0.05)
        );
        assert_eq!(Slo::parse("max<500us", "0%").unwrap().below_ms, 0.5);
    }

    #[test]
    fn bad_slos_name_the_option() {
        for (slo, budget, says) in [
            ("p98<50ms", "1%", "unknown percentile"),
            ("p99<50min", "1%", "unknown unit"),
            ("p99", "1%", "PERCENTILE<BOUND"),
            ("p99<0ms", "1%", "above 0"),
            ("p99<fast", "1%", "not a duration"),
            ("p99<50ms", "lots", "--error-budget"),
            ("p99<50ms", "150%", "between 0% and 100%"),
        ] {
            let err = format!("{:#}", Slo::parse(slo, budget).unwrap_err());
            assert!(err.contains(says), "{slo} {budget}: {err}");
            assert!(
                err.contains("--slo") || err.contains("--error-budget"),
                "{err}"
            );
        }
    }
}
