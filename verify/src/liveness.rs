//! I9, liveness, from what clients saw: every operation is answered within a bound, faults or
//! not; where no store went away, every operation gets a definite answer; and stock given
//! back after a sale sold out sells again on every server within a bound (a sold-out marker
//! must reopen).

use std::time::Duration;

use crate::{
    history::{EventKind, History},
    invariant::{Finding, Invariant},
};

/// Late operations listed in a finding at most.
const LISTED: usize = 5;

/// I9 findings of `history`: operations answered later than `bound` after they were sent;
/// and, when `definite` (no store went away), operations that ended unknown, with the
/// errors behind them.
pub fn check_liveness(
    history: &History,
    bound: Duration,
    definite: bool,
    errors: &[String],
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut invoked = std::collections::HashMap::new();
    let mut late = Vec::new();
    for e in &history.events {
        if e.kind == EventKind::Invoke {
            invoked.insert(e.process, e.at_nanos);
        } else if let Some(at) = invoked.remove(&e.process) {
            let took = Duration::from_nanos(e.at_nanos.saturating_sub(at));
            if took > bound {
                late.push(format!("p{} {} answered after {took:.1?}", e.process, e.op));
            }
        }
    }
    if !late.is_empty() {
        findings.push(Finding::new(
            Invariant::I9,
            format!(
                "{} operations answered later than the {bound:?} bound: {}",
                late.len(),
                late.iter()
                    .take(LISTED)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ));
    }
    let unknown = history
        .events
        .iter()
        .filter(|e| e.kind == EventKind::Unknown)
        .count();
    if definite && unknown > 0 {
        findings.push(Finding::new(
            Invariant::I9,
            format!("{unknown} operations failed with no store down: {errors:?}"),
        ));
    }
    findings
}

/// What one server did with stock given back after the sale sold out: how many claims it
/// was sent, and how long after the stock came back it granted one (`None`: never).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resale {
    /// The server's index.
    pub server: usize,
    /// Claims sent to it after the stock came back.
    pub claims: u64,
    /// When it granted one, after the stock came back.
    pub granted_after: Option<Duration>,
}

/// I9 findings of a restock probe: each server that never sold the stock given back within
/// `within`.
pub fn check_resales(servers: &[Resale], within: Duration) -> Vec<Finding> {
    servers
        .iter()
        .filter(|s| s.granted_after.is_none())
        .map(|s| {
            Finding::new(
                Invariant::I9,
                format!(
                    "stock was given back, yet server {} refused all {} claims for {within:?} \
                     (a sold-out marker that does not reopen?)",
                    s.server, s.claims
                ),
            )
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{history::Event, op::fixtures::claim};

    fn event(index: usize, kind: EventKind, at_nanos: u64) -> Event {
        Event {
            index,
            process: 0,
            kind,
            op: claim("a", "r1"),
            result: None,
            at_nanos,
        }
    }

    #[test]
    fn a_late_answer_is_refuted_and_an_unknown_one_only_where_none_may_be() {
        let second = 1_000_000_000;
        let late = History {
            events: vec![
                event(0, EventKind::Invoke, 0),
                event(1, EventKind::Unknown, 3 * second),
            ],
        };
        let bound = Duration::from_secs(2);
        assert_eq!(check_liveness(&late, bound, false, &[]).len(), 1);
        assert_eq!(check_liveness(&late, bound, true, &[]).len(), 2);
        assert!(check_liveness(&late, Duration::from_secs(4), false, &[]).is_empty());
    }

    #[test]
    fn a_server_that_never_sells_the_stock_again_is_refuted() {
        let within = Duration::from_secs(1);
        let seen = [
            Resale {
                server: 0,
                claims: 1,
                granted_after: Some(Duration::from_millis(10)),
            },
            Resale {
                server: 1,
                claims: 40,
                granted_after: None,
            },
        ];
        let found = check_resales(&seen, within);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].detail.contains("server 1"));
        assert!(check_resales(&seen[..1], within).is_empty());
    }
}
