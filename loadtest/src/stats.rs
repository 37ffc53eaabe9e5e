//! Figures computed from the acknowledgement record: exact latency percentiles per request
//! name, status-code breakdown, throughput, and granted claims over time per template.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{
    acks::{Event, Op, Outcome},
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

/// The nearest-rank percentile `p` (0–100) of sorted `values`.
pub(crate) fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Microseconds as milliseconds.
fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// Per-name latency statistics, in a stable order.
pub(crate) fn endpoints(events: &[Event]) -> Vec<EndpointStats> {
    let mut by: BTreeMap<Op, Vec<&Event>> = BTreeMap::new();
    for e in events {
        by.entry(e.op).or_default().push(e);
    }
    by.into_iter()
        .map(|(op, es)| {
            let mut lat: Vec<u64> = es.iter().map(|e| e.latency_us).collect();
            lat.sort_unstable();
            let count = es.len() as u64;
            let sum: u128 = lat.iter().map(|&x| u128::from(x)).sum();
            let tally = |o: Outcome| es.iter().filter(|e| e.outcome() == o).count() as u64;
            EndpointStats {
                name: op.name().to_owned(),
                count,
                ok: tally(Outcome::Ok),
                refused: tally(Outcome::Refused) + tally(Outcome::Busy),
                failed: tally(Outcome::Unknown),
                p50_ms: ms(percentile(&lat, 50.0)),
                p95_ms: ms(percentile(&lat, 95.0)),
                p99_ms: ms(percentile(&lat, 99.0)),
                max_ms: ms(lat.last().copied().unwrap_or(0)),
                mean_ms: if count == 0 {
                    0.0
                } else {
                    ms((sum / u128::from(count)) as u64)
                },
            }
        })
        .collect()
}

/// Status-code breakdown per request name.
pub(crate) fn status_codes(events: &[Event]) -> Vec<StatusCount> {
    let mut by: BTreeMap<(Op, String, Option<String>), u64> = BTreeMap::new();
    for e in events {
        let status = e
            .status
            .map_or_else(|| "timeout/transport".to_owned(), |s| s.to_string());
        *by.entry((e.op, status, e.code.clone())).or_default() += 1;
    }
    by.into_iter()
        .map(|((op, status, code), count)| StatusCount {
            name: op.name().to_owned(),
            status,
            code,
            count,
        })
        .collect()
}

/// The first acknowledgement of each granted coupon: (template, coupon, end µs).
fn grants(events: &[Event]) -> Vec<(Uuid, Uuid, u64)> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for e in events {
        if e.op == Op::Claim
            && e.outcome() == Outcome::Ok
            && let (Some(t), Some(c)) = (e.template, e.coupon)
            && seen.insert(c)
        {
            out.push((t, c, e.end_us()));
        }
    }
    out
}

/// Throughput over the run.
pub(crate) fn throughput(events: &[Event]) -> Throughput {
    let first = events.iter().map(|e| e.start_us).min().unwrap_or(0);
    let last = events.iter().map(Event::end_us).max().unwrap_or(0);
    let duration_secs = (last.saturating_sub(first)) as f64 / 1e6;
    let rate = |n: u64| {
        if duration_secs > 0.0 {
            ((n as f64 / duration_secs) * 100.0).round() / 100.0
        } else {
            0.0
        }
    };
    let requests = events.len() as u64;
    let claims = events.iter().filter(|e| e.op == Op::Claim).count() as u64;
    let claims_granted = grants(events).len() as u64;
    Throughput {
        duration_secs: (duration_secs * 1000.0).round() / 1000.0,
        requests,
        requests_per_sec: rate(requests),
        claims,
        claims_per_sec: rate(claims),
        claims_granted,
        granted_per_sec: rate(claims_granted),
    }
}

/// Granted coupons over time, one series per template.
pub(crate) fn claims_over_time(events: &[Event], templates: &[TemplateInfo]) -> Vec<ClaimSeries> {
    let grants = grants(events);
    let last_sec = events.iter().map(Event::end_us).max().unwrap_or(0) / 1_000_000 + 1;
    templates
        .iter()
        .map(|t| {
            let mut per_sec = vec![0u64; last_sec as usize + 1];
            for (tpl, _, end) in &grants {
                if *tpl == t.id {
                    per_sec[(end / 1_000_000) as usize] += 1;
                }
            }
            let mut total = 0;
            let points = per_sec
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
    fn nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
    }

    #[test]
    fn grants_count_distinct_coupons() {
        let c = Uuid::new_v4();
        let t = Uuid::new_v4();
        let mut a = ev(Op::Claim, "u", Some(201), None);
        a.template = Some(t);
        a.coupon = Some(c);
        let dup = a.clone();
        let mut refused = ev(Op::Claim, "v", Some(409), Some("stock_empty"));
        refused.latency_us = 2_000_000;
        let tp = throughput(&[a, dup, refused]);
        assert_eq!((tp.requests, tp.claims, tp.claims_granted), (3, 3, 1));
        assert!((tp.duration_secs - 2.0).abs() < 1e-9);
    }
}
