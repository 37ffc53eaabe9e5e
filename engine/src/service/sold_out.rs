//! The sold-out gate (docs/ARCHITECTURE.md, "The sold-out gate"): once a template is sold
//! out, nearly all of its traffic is refusals, and each one reaching Redis makes the Redis
//! thread the ceiling of the whole sale. A server that saw Redis refuse for want of stock
//! reads from Postgres, in one snapshot, the template's [`StockVersion`] and the request ids
//! of every claim it ever granted (bounded by the stock). Then, until the version may have
//! changed, it refuses in process any claim whose request id is not one of them — exactly
//! what Redis would answer, since Redis checks the stock before anything but a request's
//! recorded outcome, and nothing can be granted while the version stands. Retries of the
//! granted claims go the normal way and get their coupons.
//!
//! Stock that comes back (a `return_to_stock` refund, a rebuild) reopens this server's gate
//! at once when it does it; every other server notices within [`EngineConfig::sold_out_recheck`]:
//! a gate older than that is checked against Postgres's version before it refuses again.
//!
//! [`StockVersion`]: crate::store::postgres::StockVersion
//! [`EngineConfig::sold_out_recheck`]: crate::EngineConfig::sold_out_recheck

use std::{
    collections::HashMap,
    hash::{DefaultHasher, Hash, Hasher},
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use super::CouponEngine;
use crate::{
    domain::ids::{RequestId, TemplateId},
    store::postgres::{self, StockVersion},
};

/// Most coupons a template may have for its gate to close: the set of granted request ids
/// is held as 8-byte fingerprints, so 8 MB at most per sold-out template.
const MOST_GRANTS: i64 = 1_000_000;

/// What the gate says about one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GateSays {
    /// Sold out and this request id was never granted: refuse without Redis.
    Refuse,
    /// Go the normal way (open, or a request id that may have been granted).
    Pass,
    /// The gate is older than the recheck bound: this caller checks it against Postgres.
    Recheck,
}

/// One template's gate.
#[derive(Debug)]
enum Gate {
    /// Not known to be sold out; `tried` is when a close was last attempted.
    Open { tried: Option<Instant> },
    /// A close is under way since then; others pass meanwhile.
    Busy(Instant),
    /// Sold out as of `version`, checked at `checked` (a recheck under way if `rechecking`).
    Closed {
        version: StockVersion,
        granted: Vec<u64>,
        checked: Instant,
        rechecking: bool,
    },
}

/// Every template's gate in this server.
#[derive(Debug, Default)]
pub(crate) struct SoldOutGates {
    gates: Mutex<HashMap<TemplateId, Gate>>,
    refused: AtomicU64,
    /// Gates opened so far: a close whose Postgres read began before stock came back must
    /// not close the gate after it (its snapshot predates the return).
    opened: AtomicU64,
    /// Whether any template has a gate entry: a claim on a server with none (no sale sold
    /// out) passes without taking the lock.
    any: std::sync::atomic::AtomicBool,
}

/// How long a close or a recheck may take before another caller takes it over.
fn stalled(recheck: Duration) -> Duration {
    recheck.max(Duration::from_secs(1))
}

/// A request id's fingerprint: two ids that share one only send the second the normal way.
fn fingerprint(request: &str) -> u64 {
    let mut h = DefaultHasher::new();
    request.hash(&mut h);
    h.finish()
}

impl SoldOutGates {
    fn with<R>(&self, f: impl FnOnce(&mut HashMap<TemplateId, Gate>) -> R) -> R {
        let mut gates = self.gates.lock().unwrap_or_else(PoisonError::into_inner);
        let r = f(&mut gates);
        self.any.store(!gates.is_empty(), Ordering::Release);
        r
    }

    /// What the gate says about `request` on `template`, `recheck` being the bound.
    pub(crate) fn says(
        &self,
        template: TemplateId,
        request: &RequestId,
        recheck: Duration,
    ) -> GateSays {
        if !self.any.load(Ordering::Acquire) {
            return GateSays::Pass;
        }
        self.with(|gates| match gates.get_mut(&template) {
            Some(Gate::Closed {
                granted,
                checked,
                rechecking,
                ..
            }) => {
                let age = checked.elapsed();
                if age >= recheck {
                    // One caller rechecks; the others go the normal way meanwhile (and take
                    // it over should that caller have been cancelled at its deadline).
                    let taken = std::mem::replace(rechecking, true);
                    return if taken && age < recheck + stalled(recheck) {
                        GateSays::Pass
                    } else {
                        GateSays::Recheck
                    };
                }
                if granted
                    .binary_search(&fingerprint(request.as_str()))
                    .is_ok()
                {
                    GateSays::Pass
                } else {
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    GateSays::Refuse
                }
            }
            _ => GateSays::Pass,
        })
    }

    /// Whether the gate is closed, however old, and `request` (if given) is not one it
    /// knows as granted: what mutants refuse on.
    #[cfg_attr(not(feature = "mutants"), allow(dead_code))]
    pub(crate) fn holds(&self, template: TemplateId, request: Option<&RequestId>) -> bool {
        self.with(|gates| match gates.get(&template) {
            Some(Gate::Closed { granted, .. }) => {
                request.is_none_or(|r| granted.binary_search(&fingerprint(r.as_str())).is_err())
            }
            _ => false,
        })
    }

    /// Takes the right to close the gate after a refusal (None when it is closed, being
    /// closed, or was tried less than `recheck` ago: Postgres not yet sold out, as in async
    /// mode while the persister catches up). The ticket is handed back to [`Self::close`].
    fn begin_close(&self, template: TemplateId, recheck: Duration) -> Option<u64> {
        self.with(|gates| {
            let may = match gates.get(&template) {
                None => true,
                Some(Gate::Open { tried }) => tried.is_none_or(|t| t.elapsed() >= recheck),
                // A close whose caller was cancelled (its deadline) is taken over.
                Some(Gate::Busy(since)) => since.elapsed() >= stalled(recheck),
                Some(Gate::Closed { .. }) => false,
            };
            may.then(|| {
                gates.insert(template, Gate::Busy(Instant::now()));
                self.opened.load(Ordering::Acquire)
            })
        })
    }

    fn close(&self, template: TemplateId, ticket: u64, version: StockVersion, requests: &[String]) {
        let mut granted: Vec<u64> = requests.iter().map(|r| fingerprint(r)).collect();
        granted.sort_unstable();
        granted.dedup();
        self.with(|gates| {
            if self.opened.load(Ordering::Acquire) != ticket {
                gates.remove(&template);
                return;
            }
            gates.insert(
                template,
                Gate::Closed {
                    version,
                    granted,
                    checked: Instant::now(),
                    rechecking: false,
                },
            );
        });
    }

    fn tried(&self, template: TemplateId) {
        self.with(|gates| {
            gates.insert(
                template,
                Gate::Open {
                    tried: Some(Instant::now()),
                },
            )
        });
    }

    /// Ends a recheck: the gate stands (checked now) if the version is unchanged and still
    /// sold out, else it opens.
    fn rechecked(&self, template: TemplateId, now: Option<StockVersion>) {
        self.with(|gates| {
            let stands = matches!(
                (gates.get(&template), now),
                (Some(Gate::Closed { version, .. }), Some(now)) if *version == now && now.sold_out()
            );
            match gates.get_mut(&template) {
                Some(Gate::Closed {
                    checked,
                    rechecking,
                    ..
                }) if stands => {
                    *checked = Instant::now();
                    *rechecking = false;
                }
                _ => {
                    gates.remove(&template);
                }
            }
        });
    }

    /// Opens the gate: this server gave stock back or rebuilt the template.
    pub(crate) fn open(&self, template: TemplateId) {
        self.with(|gates| {
            self.opened.fetch_add(1, Ordering::AcqRel);
            gates.remove(&template)
        });
    }

    /// Claims refused in process since start.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

impl CouponEngine {
    /// What the sold-out gate says about this claim (no I/O: every claim asks).
    pub(super) fn sold_out_says(&self, template: TemplateId, request: &RequestId) -> GateSays {
        let recheck = self.inner.config.sold_out_recheck;
        if recheck.is_zero() {
            return GateSays::Pass;
        }
        let says = self.inner.sold_out.says(template, request, recheck);
        #[cfg(feature = "mutants")]
        let says = crate::service::mutants::sold_out_says(self, template, request, says);
        says
    }

    /// Checks a gate older than the bound against Postgres's version (it stands, or opens),
    /// then answers whether it refuses this claim.
    pub(super) async fn recheck_sold_out(&self, template: TemplateId, request: &RequestId) -> bool {
        let now = postgres::stock_version(&self.inner.pg, template).await;
        self.inner.sold_out.rechecked(template, now.ok().flatten());
        self.sold_out_says(template, request) == GateSays::Refuse
    }

    /// After Redis refused a claim for want of stock: closes the gate if Postgres agrees the
    /// template is sold out (once per bound; a failure leaves it open).
    pub(super) async fn close_sold_out_gate(&self, template: TemplateId) {
        let recheck = self.inner.config.sold_out_recheck;
        if recheck.is_zero() {
            return;
        }
        let Some(ticket) = self.inner.sold_out.begin_close(template, recheck) else {
            return;
        };
        match postgres::sold_out_grants(&self.inner.pg, template, MOST_GRANTS).await {
            Ok(Some((version, requests))) => {
                tracing::debug!(%template, granted = requests.len(), "sold out: refusals answered in process");
                self.inner
                    .sold_out
                    .close(template, ticket, version, &requests);
            }
            Ok(None) => self.inner.sold_out.tried(template),
            Err(e) => {
                tracing::debug!(error = %e, %template, "sold-out gate not closed");
                self.inner.sold_out.tried(template);
            }
        }
    }

    /// This server gave stock back to `template` or rebuilt it: its gate opens now.
    pub(super) fn stock_came_back(&self, template: TemplateId) {
        #[cfg(feature = "mutants")]
        if crate::service::mutants::keeps_gate_closed(self) {
            return;
        }
        self.inner.sold_out.open(template);
    }

    /// Claims this server refused in process, without Redis, since it started.
    pub fn sold_out_local_refusals(&self) -> u64 {
        self.inner.sold_out.refused()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const BOUND: Duration = Duration::from_secs(3600);

    fn version(counted: i64, returns: i64) -> StockVersion {
        StockVersion {
            total_stock: 2,
            counted,
            stock_returns: returns,
            epoch: 1,
        }
    }

    fn rid(s: &str) -> RequestId {
        RequestId::parse(s).unwrap()
    }

    fn closed_on(gates: &SoldOutGates, t: TemplateId) {
        let ticket = gates.begin_close(t, BOUND).unwrap();
        gates.close(t, ticket, version(2, 0), &["a".into(), "b".into()]);
    }

    #[test]
    fn a_closed_gate_refuses_strangers_and_lets_granted_requests_through() {
        let gates = SoldOutGates::default();
        let t = TemplateId::new_v7();
        assert_eq!(gates.says(t, &rid("x"), BOUND), GateSays::Pass);
        closed_on(&gates, t);
        assert_eq!(gates.says(t, &rid("x"), BOUND), GateSays::Refuse);
        assert_eq!(gates.says(t, &rid("a"), BOUND), GateSays::Pass);
        assert_eq!(gates.refused(), 1);
        // Closed already: nobody else reads Postgres for it.
        assert!(gates.begin_close(t, BOUND).is_none());
        gates.open(t);
        assert_eq!(gates.says(t, &rid("x"), BOUND), GateSays::Pass);
    }

    #[test]
    fn a_close_read_before_stock_came_back_does_not_close_the_gate() {
        let gates = SoldOutGates::default();
        let t = TemplateId::new_v7();
        let ticket = gates.begin_close(t, BOUND).unwrap();
        gates.open(t);
        gates.close(t, ticket, version(2, 0), &[]);
        assert_eq!(gates.says(t, &rid("x"), BOUND), GateSays::Pass);
    }

    #[test]
    fn an_old_gate_is_rechecked_by_one_caller_and_stands_only_if_nothing_changed() {
        let gates = SoldOutGates::default();
        let t = TemplateId::new_v7();
        closed_on(&gates, t);
        let now = Duration::ZERO;
        assert_eq!(gates.says(t, &rid("x"), now), GateSays::Recheck);
        assert_eq!(gates.says(t, &rid("y"), now), GateSays::Pass);
        gates.rechecked(t, Some(version(2, 0)));
        assert_eq!(gates.says(t, &rid("x"), BOUND), GateSays::Refuse);
        assert_eq!(gates.says(t, &rid("x"), now), GateSays::Recheck);
        // A place came back and was taken again: `counted` is where it was, the version not.
        gates.rechecked(t, Some(version(2, 1)));
        assert_eq!(gates.says(t, &rid("x"), BOUND), GateSays::Pass);
        closed_on(&gates, t);
        assert_eq!(gates.says(t, &rid("x"), now), GateSays::Recheck);
        gates.rechecked(t, None);
        assert_eq!(gates.says(t, &rid("x"), BOUND), GateSays::Pass);
    }
}
