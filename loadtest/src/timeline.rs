//! The run second by second — requests/s, claims granted/s, p50/p99 latency — the chart
//! users of k6, Gatling and Goose look at first, computed from the run's [`Tally`].

use serde::{Deserialize, Serialize};

use crate::tally::{Latencies, Tally};

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

/// The run's timeline.
pub(crate) fn timeline(tally: &Tally) -> Vec<Second> {
    let granted = tally.grants_per_second(None);
    tally
        .seconds
        .iter()
        .zip(granted)
        .enumerate()
        .map(|(sec, (lat, granted))| Second {
            second: sec as u64,
            requests: lat.as_ref().map_or(0, Latencies::count),
            granted,
            p50_ms: lat.as_ref().map_or(0.0, |l| l.percentile_ms(50.0)),
            p99_ms: lat.as_ref().map_or(0.0, |l| l.percentile_ms(99.0)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acks::{RequestKind, tests::ev};

    #[test]
    fn seconds_count_requests_grants_and_latency() {
        let mut a = ev(RequestKind::Claim, "u", Some(201), None);
        a.start_us = 100;
        a.latency_us = 2_000;
        a.coupon = Some(uuid::Uuid::new_v4());
        a.template = Some(uuid::Uuid::new_v4());
        // A retry answered with the same coupon, in the same second: not a second grant.
        let mut again = a.clone();
        again.start_us = 200;
        let mut b = ev(RequestKind::Claim, "v", Some(409), Some("stock_empty"));
        b.start_us = 1_500_000;
        b.latency_us = 4_000;
        let t = timeline(&Tally::of([&a, &again, &b]));
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].requests, t[0].granted), (2, 1));
        assert_eq!((t[1].requests, t[1].granted), (1, 0));
        // Two significant digits per second: within 1%, never below the true value.
        let near = |got: f64, want: f64| got >= want && got <= want * 1.01;
        assert!(near(t[0].p50_ms, 2.0), "{}", t[0].p50_ms);
        assert!(near(t[1].p99_ms, 4.0), "{}", t[1].p99_ms);
    }
}
