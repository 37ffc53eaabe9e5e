//! Prometheus metrics in text exposition format: request counts and latency histograms per
//! route and outcome, claims by outcome, pending intents.

use std::{collections::BTreeMap, fmt::Write, sync::Mutex, time::Duration};

/// Upper bounds of the latency buckets, seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// Request metrics of one server.
#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, &'static str), Histogram>>,
}

impl Metrics {
    /// Records one request of `route` that ended with `outcome` (`ok` or an error code).
    pub fn observe(&self, route: &'static str, outcome: &'static str, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        if let Ok(mut map) = self.requests.lock() {
            let h = map.entry((route, outcome)).or_default();
            h.count += 1;
            h.sum += secs;
            for (i, le) in BUCKETS.iter().enumerate() {
                if secs <= *le {
                    h.counts[i] += 1;
                }
            }
        }
    }

    /// The exposition text; `pending` is the number of claim intents not yet persisted.
    pub fn render(&self, pending: Option<i64>) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP coupon_http_requests_total Requests by route and outcome."
        );
        let _ = writeln!(out, "# TYPE coupon_http_requests_total counter");
        let map = match self.requests.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        for ((route, outcome), h) in map.iter() {
            let _ = writeln!(
                out,
                "coupon_http_requests_total{{route=\"{route}\",outcome=\"{outcome}\"}} {}",
                h.count
            );
        }
        let _ = writeln!(out, "# HELP coupon_claims_total Claims by outcome.");
        let _ = writeln!(out, "# TYPE coupon_claims_total counter");
        for ((route, outcome), h) in map.iter().filter(|((r, _), _)| *r == "claim") {
            let _ = route;
            let _ = writeln!(
                out,
                "coupon_claims_total{{outcome=\"{outcome}\"}} {}",
                h.count
            );
        }
        let _ = writeln!(
            out,
            "# HELP coupon_http_request_duration_seconds Request latency by route and outcome."
        );
        let _ = writeln!(out, "# TYPE coupon_http_request_duration_seconds histogram");
        for ((route, outcome), h) in map.iter() {
            let labels = format!("route=\"{route}\",outcome=\"{outcome}\"");
            for (i, le) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "coupon_http_request_duration_seconds_bucket{{{labels},le=\"{le}\"}} {}",
                    h.counts[i]
                );
            }
            let _ = writeln!(
                out,
                "coupon_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "coupon_http_request_duration_seconds_sum{{{labels}}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "coupon_http_request_duration_seconds_count{{{labels}}} {}",
                h.count
            );
        }
        if let Some(p) = pending {
            let _ = writeln!(
                out,
                "# HELP coupon_pending_intents Claim intents not yet persisted."
            );
            let _ = writeln!(out, "# TYPE coupon_pending_intents gauge");
            let _ = writeln!(out, "coupon_pending_intents {p}");
        }
        out
    }
}

/// One counter with its help and type lines.
fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} counter");
    let _ = writeln!(out, "{name} {value}");
}

/// The engine's own series: sync group-commit batch sizes, the sync claims Redis admitted
/// on stale counters and, in async mode, the acknowledged claims Postgres refused (each one
/// a lost acknowledgement).
pub fn render_engine(out: &mut String, engine: &crate::CouponEngine) {
    let h = engine.batch_sizes();
    let _ = writeln!(
        out,
        "# HELP coupon_claim_batch_size Claims decided per group-commit transaction (sync mode)."
    );
    let _ = writeln!(out, "# TYPE coupon_claim_batch_size histogram");
    for (le, n) in crate::service::BATCH_BUCKETS.iter().zip(&h.buckets) {
        let _ = writeln!(out, "coupon_claim_batch_size_bucket{{le=\"{le}\"}} {n}");
    }
    let _ = writeln!(
        out,
        "coupon_claim_batch_size_bucket{{le=\"+Inf\"}} {}",
        h.count
    );
    let _ = writeln!(out, "coupon_claim_batch_size_sum {}", h.sum);
    let _ = writeln!(out, "coupon_claim_batch_size_count {}", h.count);
    counter(
        out,
        "coupon_async_acks_refused_total",
        "Acknowledged async claims that Postgres refused or holds under another coupon (lost acknowledgements).",
        engine.acknowledged_claims_refused(),
    );
    counter(
        out,
        "coupon_settled_claims_missing_total",
        "Retried claims Redis held as granted that Postgres had no row for: acknowledged claims lost (a Postgres failover to a standby that lacked them).",
        engine.settled_claims_missing(),
    );
    counter(
        out,
        "coupon_sold_out_local_refusals_total",
        "Claims of sold-out templates refused by this server without a Redis round trip (the sold-out gate).",
        engine.sold_out_local_refusals(),
    );
    let stale = engine.stale_admissions();
    let _ = writeln!(
        out,
        "# HELP coupon_sync_stale_admissions_total Sync claims Redis admitted and Postgres refused: Redis's counters were behind Postgres (a stale restart, a lagging replica, an evicted key)."
    );
    let _ = writeln!(out, "# TYPE coupon_sync_stale_admissions_total counter");
    for (reason, n) in [
        ("stock_empty", stale.stock_empty),
        ("user_limit", stale.user_limit),
    ] {
        let _ = writeln!(
            out,
            "coupon_sync_stale_admissions_total{{reason=\"{reason}\"}} {n}"
        );
    }
}
