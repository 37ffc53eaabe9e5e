//! The run's figures folded in one answer at a time, so that their memory does not grow with
//! the run's length: a one-hour soak at flash-sale rates (tens of millions of answers) keeps
//! per-request-name, per-second and per-server latency histograms, status counts and the
//! first acknowledgement of each granted coupon — never the answers themselves (those stream
//! to `acks.jsonl`, see [`crate::acks::AckLog`]).
//!
//! Latencies are HdrHistograms: percentiles to 3 significant digits per request name and per
//! server (the report's tables), 2 per second (the timeline chart), instead of the exact order
//! statistics a sorted list of every latency would give at ~8 bytes a request.

use std::collections::{BTreeMap, HashMap};

use hdrhistogram::Histogram;
use uuid::Uuid;

use crate::reply::{Reply, ReplyClass, RequestKind};

/// Latencies in microseconds.
#[derive(Debug, Clone)]
pub(crate) struct Latencies(Histogram<u64>);

impl Latencies {
    /// An empty histogram keeping `digits` significant digits (auto-resizing to the slowest
    /// answer seen, so a fast run stays small).
    pub(crate) fn new(digits: u8) -> Self {
        // Cannot fail: `digits` is 2 or 3, within HdrHistogram's 0..=5.
        Self(Histogram::new(digits).expect("2 or 3 significant digits are supported"))
    }

    pub(crate) fn record(&mut self, us: u64) {
        // `record` grows the auto-resizing histogram; `saturating_record` alone would clamp
        // to its current (initially tiny) range. Only a value beyond u64's range can fail.
        if self.0.record(us).is_err() {
            self.0.saturating_record(us);
        }
    }

    /// Adds every latency of `other`.
    pub(crate) fn add(&mut self, other: &Self) {
        // Only a value beyond u64's range can fail, as in `record`.
        let _ = self.0.add(&other.0);
    }

    /// Answers recorded.
    pub(crate) fn count(&self) -> u64 {
        self.0.len()
    }

    /// The `p`th percentile (0–100) in milliseconds; 0 when empty.
    pub(crate) fn percentile_ms(&self, p: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.value_at_quantile(p / 100.0) as f64 / 1000.0
    }

    /// The slowest answer, ms.
    pub(crate) fn max_ms(&self) -> f64 {
        self.0.max() as f64 / 1000.0
    }

    /// The mean, ms.
    pub(crate) fn mean_ms(&self) -> f64 {
        self.0.mean() / 1000.0
    }
}

/// What one request name got.
#[derive(Debug, Clone)]
pub(crate) struct OpTally {
    /// 2xx answers.
    pub ok: u64,
    /// Definitive refusals and 429 busy.
    pub refused: u64,
    /// Timeouts, transport errors and 5xx.
    pub failed: u64,
    /// Every attempt's latency.
    pub latencies: Latencies,
}

/// What one server answered.
#[derive(Debug, Clone)]
pub(crate) struct ServerTally {
    /// 2xx answers.
    pub ok: u64,
    /// Timeouts, transport errors and 5xx.
    pub failed: u64,
    /// Every request's latency.
    pub latencies: Latencies,
}

/// One (request name, status, error code) and how often it was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StatusKey {
    /// The request.
    pub op: RequestKind,
    /// HTTP status; `None` for a timeout or transport error.
    pub status: Option<u16>,
    /// Error code of the body, if any.
    pub code: Option<String>,
}

/// The figures of a run (or of several merged runs).
#[derive(Debug, Clone, Default)]
pub(crate) struct Tally {
    /// Requests sent (every attempt of every name).
    pub requests: u64,
    /// Whether any request got an answer other than a timeout or 5xx.
    pub answered: bool,
    /// Earliest start, µs since the load began.
    pub first_start_us: Option<u64>,
    /// Latest answer, µs since the load began.
    pub last_end_us: u64,
    /// Per request name.
    pub ops: BTreeMap<RequestKind, OpTally>,
    /// Status breakdown, in order of first appearance (a handful of distinct keys).
    pub statuses: Vec<(StatusKey, u64)>,
    /// Each coupon an acknowledged claim answered: its template and its earliest
    /// acknowledgement (µs). Bounded by the stock of the run's templates.
    pub grants: HashMap<Uuid, (Uuid, u64)>,
    /// Latencies of the requests that completed in each second (`None`: none did; a
    /// histogram is made only for a second that has answers, so a long gap costs little).
    pub seconds: Vec<Option<Latencies>>,
    /// Per server index (`Reply::server`).
    pub servers: Vec<ServerTally>,
}

impl Tally {
    /// The tally of `events`.
    #[cfg(test)]
    pub(crate) fn of<'a>(events: impl IntoIterator<Item = &'a Reply>) -> Self {
        let mut t = Self::default();
        for e in events {
            t.add(e);
        }
        t
    }

    /// Folds in one answer.
    pub(crate) fn add(&mut self, e: &Reply) {
        let outcome = e.class();
        let end = e.end_us();
        self.requests += 1;
        self.answered |= outcome != ReplyClass::Unknown;
        self.first_start_us = Some(
            self.first_start_us
                .map_or(e.start_us, |s| s.min(e.start_us)),
        );
        self.last_end_us = self.last_end_us.max(end);

        let op = self.ops.entry(e.op).or_insert_with(|| OpTally {
            ok: 0,
            refused: 0,
            failed: 0,
            latencies: Latencies::new(3),
        });
        match outcome {
            ReplyClass::Ok => op.ok += 1,
            ReplyClass::Refused | ReplyClass::Busy => op.refused += 1,
            ReplyClass::Unknown => op.failed += 1,
        }
        op.latencies.record(e.latency_us);

        // Compared field by field: no allocation per answer for a key already seen.
        match self.statuses.iter_mut().find(|(k, _)| {
            k.op == e.op && k.status == e.status && k.code.as_deref() == e.code.as_deref()
        }) {
            Some((_, n)) => *n += 1,
            None => self.statuses.push((
                StatusKey {
                    op: e.op,
                    status: e.status,
                    code: e.code.clone(),
                },
                1,
            )),
        }

        if e.op == RequestKind::Claim
            && outcome == ReplyClass::Ok
            && let (Some(t), Some(c)) = (e.template, e.coupon)
        {
            let first = self.grants.entry(c).or_insert((t, end));
            first.1 = first.1.min(end);
        }

        let sec = (end / 1_000_000) as usize;
        if self.seconds.len() <= sec {
            self.seconds.resize_with(sec + 1, || None);
        }
        self.seconds[sec]
            .get_or_insert_with(|| Latencies::new(2))
            .record(e.latency_us);

        if self.servers.len() <= e.server {
            self.servers.resize_with(e.server + 1, || ServerTally {
                ok: 0,
                failed: 0,
                latencies: Latencies::new(3),
            });
        }
        let server = &mut self.servers[e.server];
        match outcome {
            ReplyClass::Ok => server.ok += 1,
            ReplyClass::Unknown => server.failed += 1,
            ReplyClass::Refused | ReplyClass::Busy => {}
        }
        server.latencies.record(e.latency_us);
    }

    /// Requests sent to server `i`.
    pub(crate) fn server_requests(&self, i: usize) -> u64 {
        self.servers.get(i).map_or(0, |s| s.latencies.count())
    }

    /// Granted coupons first acknowledged in each second, up to the run's last second.
    pub(crate) fn grants_per_second(&self, template: Option<Uuid>) -> Vec<u64> {
        let mut per_sec = vec![0u64; (self.last_end_us / 1_000_000) as usize + 1];
        for (t, end) in self.grants.values() {
            if template.is_none_or(|want| want == *t) {
                per_sec[(end / 1_000_000) as usize] += 1;
            }
        }
        per_sec
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acks::tests::ev;

    #[test]
    fn percentiles_keep_three_digits() {
        let mut l = Latencies::new(3);
        for us in 1..=100_000 {
            l.record(us);
        }
        for (p, exact) in [(50.0, 50.0), (99.0, 99.0), (100.0, 100.0)] {
            let got = l.percentile_ms(p);
            assert!(
                (got - exact).abs() / exact < 0.001,
                "p{p}: {got} vs {exact}"
            );
        }
        assert_eq!(l.count(), 100_000);
        assert_eq!(Latencies::new(3).percentile_ms(50.0), 0.0);
    }

    #[test]
    fn statuses_and_grants_are_counted_once_per_key() {
        let t = Uuid::new_v4();
        let c = Uuid::new_v4();
        let mut granted = ev(RequestKind::Claim, "u", Some(201), None);
        (granted.template, granted.coupon, granted.start_us) = (Some(t), Some(c), 3_000_000);
        let mut retry = granted.clone();
        retry.start_us = 1_000_000;
        let refused = ev(RequestKind::Claim, "v", Some(409), Some("stock_empty"));
        let tally = Tally::of([&granted, &retry, &refused, &refused]);
        assert_eq!(tally.requests, 4);
        assert_eq!(tally.statuses.len(), 2);
        assert_eq!(tally.statuses[1].1, 2);
        // The earliest acknowledgement of the coupon, whatever the order they came in.
        assert_eq!(tally.grants[&c], (t, 1_001_000));
        assert_eq!(tally.grants_per_second(Some(t)), vec![0, 1, 0, 0]);
        assert_eq!(tally.ops[&RequestKind::Claim].refused, 2);
    }
}
