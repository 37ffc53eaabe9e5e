//! Each server's share of a run's requests, when the run drives several (`--target`
//! repeated, `--servers N`): evidence that the load really was spread, and whether one
//! server answered worse than the others.

use serde::{Deserialize, Serialize};

use crate::tally::Tally;

/// What one server answered.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ServerShare {
    /// Its base URL.
    pub url: String,
    /// Requests sent to it (every attempt).
    pub requests: u64,
    /// Its fraction of all requests, 0–1.
    pub share: f64,
    /// 2xx answers.
    pub ok: u64,
    /// Timeouts, transport errors and 5xx.
    pub failed: u64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
}

impl ServerShare {
    /// Header of the servers table.
    pub(crate) const HEADER: [&'static str; 7] = [
        "server",
        "requests",
        "share",
        "2xx",
        "timeout/5xx",
        "p50 ms",
        "p99 ms",
    ];

    /// Its row in the servers table (unescaped text, in [`Self::HEADER`] order).
    pub(crate) fn cells(&self) -> Vec<String> {
        vec![
            self.url.clone(),
            self.requests.to_string(),
            format!("{:.1}%", self.share * 100.0),
            self.ok.to_string(),
            self.failed.to_string(),
            format!("{:.2}", self.p50_ms),
            format!("{:.2}", self.p99_ms),
        ]
    }
}

/// The share of each of `urls` (indexed as `Reply::server`) in the run.
pub(crate) fn shares(tally: &Tally, urls: &[String]) -> Vec<ServerShare> {
    let total = tally.requests.max(1) as f64;
    urls.iter()
        .enumerate()
        .map(|(i, url)| {
            let requests = tally.server_requests(i);
            let mine = tally.servers.get(i);
            ServerShare {
                url: url.clone(),
                requests,
                share: (requests as f64 / total * 1000.0).round() / 1000.0,
                ok: mine.map_or(0, |s| s.ok),
                failed: mine.map_or(0, |s| s.failed),
                p50_ms: mine.map_or(0.0, |s| s.latencies.percentile_ms(50.0)),
                p99_ms: mine.map_or(0.0, |s| s.latencies.percentile_ms(99.0)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acks::{RequestKind, tests::ev};

    #[test]
    fn shares_add_up_per_server() {
        let mut events = vec![ev(RequestKind::Claim, "a", Some(201), None); 3];
        events.push(ev(RequestKind::Claim, "b", Some(503), None));
        events[2].server = 1;
        events[3].server = 1;
        let urls = ["http://x".to_owned(), "http://y".to_owned()];
        let s = shares(&Tally::of(&events), &urls);
        assert_eq!((s[0].requests, s[0].ok, s[0].share), (2, 2, 0.5));
        assert_eq!((s[1].requests, s[1].ok, s[1].failed), (2, 1, 1));
    }
}
