//! The report's figures from the run's [`Tally`]: latency percentiles per request name,
//! status-code breakdown, throughput, and granted claims over time per template.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{
    acks::RequestKind,
    tally::{StatusKey, Tally},
    templates::TemplateInfo,
};

/// Latency and outcome counts of one request name.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EndpointStats {
    /// Request name (`claim`, `redeem`, ...).
    pub name: String,
    /// Requests sent (every attempt).
    pub count: u64,
    /// 2xx answers.
    pub ok: u64,
    /// Definitive refusals (4xx).
    pub refused: u64,
    /// Timeouts, transport errors and 5xx.
    pub failed: u64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 95th percentile, ms.
    pub p95_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Slowest, ms.
    pub max_ms: f64,
    /// Mean, ms.
    pub mean_ms: f64,
}

/// How often one request name got one status (and error code).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StatusCount {
    /// Request name.
    pub name: String,
    /// HTTP status, or `timeout/transport`.
    pub status: String,
    /// Error code of the body, if any.
    pub code: Option<String>,
    /// Answers.
    pub count: u64,
}

/// Request rates over the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Throughput {
    /// From the first request's start to the last answer, seconds.
    pub duration_secs: f64,
    /// Requests sent (every attempt of every name).
    pub requests: u64,
    /// `requests / duration_secs`.
    pub requests_per_sec: f64,
    /// Claim requests sent.
    pub claims: u64,
    /// `claims / duration_secs`.
    pub claims_per_sec: f64,
    /// Distinct coupons granted by acknowledged claims.
    pub claims_granted: u64,
    /// `claims_granted / duration_secs`.
    pub granted_per_sec: f64,
}

/// Cumulative distinct granted coupons of one template, per second.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ClaimSeries {
    /// The template.
    pub template_id: Uuid,
    /// Its name.
    pub name: String,
    /// Its total stock.
    pub stock: i64,
    /// `(second, cumulative granted coupons at the end of that second)`.
    pub points: Vec<(u64, u64)>,
}

/// Per-name latency statistics, in a stable order.
pub(crate) fn endpoints(tally: &Tally) -> Vec<EndpointStats> {
    tally
        .ops
        .iter()
        .map(|(op, t)| EndpointStats {
            name: op.name().to_owned(),
            count: t.latencies.count(),
            ok: t.ok,
            refused: t.refused,
            failed: t.failed,
            p50_ms: t.latencies.percentile_ms(50.0),
            p95_ms: t.latencies.percentile_ms(95.0),
            p99_ms: t.latencies.percentile_ms(99.0),
            max_ms: t.latencies.max_ms(),
            mean_ms: (t.latencies.mean_ms() * 1000.0).round() / 1000.0,
        })
        .collect()
}

/// Status-code breakdown per request name.
pub(crate) fn status_codes(tally: &Tally) -> Vec<StatusCount> {
    let mut keys: Vec<&(StatusKey, u64)> = tally.statuses.iter().collect();
    // In request order (as the endpoints table), then by status and code.
    keys.sort_by_key(|(k, _)| (k.op, status_text(k.status), k.code.clone()));
    keys.into_iter()
        .map(|(k, count)| StatusCount {
            name: k.op.name().to_owned(),
            status: status_text(k.status),
            code: k.code.clone(),
            count: *count,
        })
        .collect()
}

/// An answer's status as the reports show it.
fn status_text(status: Option<u16>) -> String {
    status.map_or_else(|| "timeout/transport".to_owned(), |s| s.to_string())
}

/// Throughput over the run.
pub(crate) fn throughput(tally: &Tally) -> Throughput {
    let first = tally.first_start_us.unwrap_or(0);
    let duration_secs = (tally.last_end_us.saturating_sub(first)) as f64 / 1e6;
    let rate = |n: u64| {
        if duration_secs > 0.0 {
            ((n as f64 / duration_secs) * 100.0).round() / 100.0
        } else {
            0.0
        }
    };
    let claims = tally
        .ops
        .get(&RequestKind::Claim)
        .map_or(0, |t| t.latencies.count());
    let claims_granted = tally.grants.len() as u64;
    Throughput {
        duration_secs: (duration_secs * 1000.0).round() / 1000.0,
        requests: tally.requests,
        requests_per_sec: rate(tally.requests),
        claims,
        claims_per_sec: rate(claims),
        claims_granted,
        granted_per_sec: rate(claims_granted),
    }
}

/// Granted coupons over time, one series per template.
pub(crate) fn claims_over_time(tally: &Tally, templates: &[TemplateInfo]) -> Vec<ClaimSeries> {
    templates
        .iter()
        .map(|t| {
            let mut total = 0;
            let points = tally
                .grants_per_second(Some(t.id))
                .into_iter()
                .enumerate()
                .map(|(sec, n)| {
                    total += n;
                    (sec as u64 + 1, total)
                })
                .collect::<Vec<_>>();
            ClaimSeries {
                template_id: t.id,
                name: t.name.clone(),
                stock: t.total_stock,
                points,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acks::tests::ev;

    #[test]
    fn grants_count_distinct_coupons() {
        let c = Uuid::new_v4();
        let t = Uuid::new_v4();
        let mut a = ev(RequestKind::Claim, "u", Some(201), None);
        a.template = Some(t);
        a.coupon = Some(c);
        let dup = a.clone();
        let mut refused = ev(RequestKind::Claim, "v", Some(409), Some("stock_empty"));
        refused.latency_us = 2_000_000;
        let tp = throughput(&Tally::of([&a, &dup, &refused]));
        assert_eq!((tp.requests, tp.claims, tp.claims_granted), (3, 3, 1));
        assert!((tp.duration_secs - 2.0).abs() < 1e-9);
    }

    #[test]
    fn endpoints_and_statuses_per_name() {
        let ok = ev(RequestKind::Claim, "u", Some(201), None);
        let refused = ev(RequestKind::Claim, "v", Some(409), Some("stock_empty"));
        let lost = ev(RequestKind::Redeem, "u", None, None);
        let tally = Tally::of([&ok, &refused, &refused, &lost]);
        let e = endpoints(&tally);
        assert_eq!(e[0].name, "claim");
        assert_eq!(
            (e[0].count, e[0].ok, e[0].refused, e[0].failed),
            (3, 1, 2, 0)
        );
        assert_eq!((e[1].name.as_str(), e[1].failed), ("redeem", 1));
        assert!((e[0].p50_ms - 1.0).abs() < 0.01);
        let s = status_codes(&tally);
        let counts: Vec<(&str, &str, u64)> = s
            .iter()
            .map(|c| (c.name.as_str(), c.status.as_str(), c.count))
            .collect();
        assert_eq!(
            counts,
            [
                ("claim", "201", 1),
                ("claim", "409", 2),
                ("redeem", "timeout/transport", 1)
            ]
        );
    }
}
