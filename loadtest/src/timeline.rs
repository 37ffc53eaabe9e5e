//! The run second by second — requests/s, claims granted/s, p50/p99 latency — the chart
//! users of k6, Gatling and Goose look at first, computed from the run's own record.

use serde::{Deserialize, Serialize};

use crate::{
    acks::{Event, Op, Outcome},
    stats::percentile,
};

/// One second of the load (by completion time).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Second {
    /// Seconds since the load began (this second ends at `second + 1`).
    pub second: u64,
    /// Requests that completed in it.
    pub requests: u64,
    /// Coupons first acknowledged in it (a retry answered with the same coupon is not
    /// counted again).
    pub granted: u64,
    /// Median latency of its requests, ms.
    pub p50_ms: f64,
    /// 99th percentile latency of its requests, ms.
    pub p99_ms: f64,
}

/// The timeline of `events`.
pub(crate) fn timeline(events: &[Event]) -> Vec<Second> {
    let last = events.iter().map(Event::end_us).max().unwrap_or(0) / 1_000_000;
    let mut latencies: Vec<Vec<u64>> = vec![Vec::new(); last as usize + 1];
    let mut granted = vec![0u64; last as usize + 1];
    let mut seen = std::collections::HashSet::new();
    for e in events {
        let sec = (e.end_us() / 1_000_000) as usize;
        latencies[sec].push(e.latency_us);
        if e.op == Op::Claim
            && e.outcome() == Outcome::Ok
            && e.coupon.is_some_and(|c| seen.insert(c))
        {
            granted[sec] += 1;
        }
    }
    latencies
        .into_iter()
        .zip(granted)
        .enumerate()
        .map(|(sec, (mut lat, granted))| {
            lat.sort_unstable();
            let ms = |p: f64| {
                if lat.is_empty() {
                    0.0
                } else {
                    percentile(&lat, p) as f64 / 1000.0
                }
            };
            Second {
                second: sec as u64,
                requests: lat.len() as u64,
                granted,
                p50_ms: ms(50.0),
                p99_ms: ms(99.0),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acks::tests::ev;

    #[test]
    fn seconds_count_requests_grants_and_latency() {
        let mut a = ev(Op::Claim, "u", Some(201), None);
        a.start_us = 100;
        a.latency_us = 2_000;
        a.coupon = Some(uuid::Uuid::new_v4());
        // A retry answered with the same coupon, in the same second: not a second grant.
        let mut again = a.clone();
        again.start_us = 200;
        let mut b = ev(Op::Claim, "v", Some(409), Some("stock_empty"));
        b.start_us = 1_500_000;
        b.latency_us = 4_000;
        let t = timeline(&[a, again, b]);
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].requests, t[0].granted, t[0].p50_ms), (2, 1, 2.0));
        assert_eq!((t[1].requests, t[1].granted, t[1].p99_ms), (1, 0, 4.0));
    }
}
