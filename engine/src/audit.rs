//! The auditor: checks invariants I1–I5 and I12–I14 (docs/ARCHITECTURE.md, "Invariants") of
//! one template against the live Redis and Postgres state and returns a typed report. A
//! product feature, also used by the tests, the property tests and the load runner.
//!
//! In-flight work is accounted for rather than reported: pending intents not yet in Postgres
//! and outbox rows not yet applied are part of the conservation equation, so an audit taken
//! while the system is quiet but not drained still balances.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use uuid::Uuid;

use crate::{
    CouponEngine,
    domain::{ids::TemplateId, template::Template},
    error::EngineResult,
    invariant::{Finding, Invariant},
    service::pending_per_user,
    store::{
        postgres,
        redis::{PendingIntent, RedisSnapshot},
    },
};

/// The auditor's verdict on one template.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuditReport {
    /// The template audited.
    pub template_id: TemplateId,
    /// Its total stock.
    pub total_stock: i64,
    /// Redis stock (None: keys absent, e.g. after a Redis restart; rebuilt on next claim).
    pub redis_stock: Option<i64>,
    /// Coupons counting against stock in Postgres (issued, used, expired).
    pub counted: i64,
    /// Claim intents granted in Redis and not yet in Postgres.
    pub pending: i64,
    /// Refunds to stock committed and not yet applied to Redis.
    pub outbox_unapplied: i64,
    /// Everything wrong; empty means the template is sound.
    pub violations: Vec<Finding>,
}

impl AuditReport {
    /// True when no invariant is violated.
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }

    /// The distinct invariants violated, in order.
    pub fn violated(&self) -> Vec<Invariant> {
        let mut v: Vec<Invariant> = self.violations.iter().map(|v| v.invariant).collect();
        v.sort();
        v.dedup();
        v
    }

    fn flag(&mut self, invariant: Invariant, detail: String) {
        self.violations.push(Finding { invariant, detail });
    }
}

/// Rows of each kind of I4/I5/I12/I13 problem listed at most.
const LIST_LIMIT: i64 = 20;

/// How long past the sweep interval a lapsed lock may still wait for its sweep (a sweep
/// pass takes time, and the interval counts from the end of the previous one).
const LOCK_SWEEP_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);

impl CouponEngine {
    /// Audits one template against I1–I5, I12, I13 and I14.
    pub async fn audit(&self, template_id: TemplateId) -> EngineResult<AuditReport> {
        let template = self.template(template_id).await?;
        let pg = self.pool();
        let snap = self.redis().snapshot(template_id).await?;
        let per_user = postgres::audit_counted_per_user(pg, template_id).await?;
        let outbox = postgres::audit_unapplied_per_user(pg, template_id).await?;
        let pending_ids: Vec<Uuid> = snap.pending.iter().map(|p| p.coupon_id).collect();
        let persisted = postgres::persisted_coupon_ids(pg, &pending_ids).await?;
        let in_flight: Vec<_> = snap
            .pending
            .iter()
            .filter(|p| !persisted.contains(&p.coupon_id))
            .collect();

        let counted: i64 = per_user.iter().map(|(_, n)| n).sum();
        let outbox_unapplied: i64 = outbox.iter().map(|(_, n)| n).sum();
        let mut report = AuditReport {
            template_id,
            total_stock: template.spec.total_stock,
            redis_stock: snap.stock,
            counted,
            pending: in_flight.len() as i64,
            outbox_unapplied,
            violations: Vec::new(),
        };
        report.check_oversell();
        let counter = postgres::audit_counter_and_rows(pg, template_id).await?;
        report.check_conservation(counter);
        report.check_quotas(&template, &snap, &per_user, &outbox, &in_flight);
        report.check_use_log(pg).await?;
        report.check_statuses(pg).await?;
        let grace = self.config().lock_sweep_every + LOCK_SWEEP_MARGIN;
        report.check_checkout(pg, grace).await?;
        report.check_rebuilds(pg).await?;
        Ok(report)
    }
}

impl AuditReport {
    /// I1.
    fn check_oversell(&mut self) {
        let (counted, total) = (self.counted, self.total_stock);
        if counted > total {
            self.flag(
                Invariant::I1,
                format!(
                    "{counted} coupons count against a stock of {total}: oversold by {}",
                    counted - total
                ),
            );
        }
        if let Some(s) = self.redis_stock.filter(|s| *s < 0) {
            self.flag(Invariant::I1, format!("redis stock is negative: {s}"));
        }
    }

    /// I2, given Postgres's stock counter and the count of rows it stands for.
    fn check_conservation(&mut self, (counter, rows): (Option<i64>, i64)) {
        // In Postgres: the counter the claim batches decide by must be the rows' count.
        if counter != Some(rows) {
            self.flag(
                Invariant::I2,
                format!(
                    "the stock counter says {} coupons count against stock, the rows say {rows}",
                    counter.map_or("nothing (no counter row)".into(), |c| c.to_string())
                ),
            );
        }
        // Across the stores.
        if let Some(stock) = self.redis_stock {
            let (counted, pending, unapplied) = (self.counted, self.pending, self.outbox_unapplied);
            let (sum, total) = (stock + counted + pending + unapplied, self.total_stock);
            if sum != total {
                self.flag(
                    Invariant::I2,
                    format!(
                        "redis stock {stock} + counted {counted} + pending {pending} + unapplied refunds \
                         {unapplied} = {sum}, expected total {total}"
                    ),
                );
            }
        }
    }

    /// I3: per-user limits in Postgres, and Redis's quota counts against what Postgres implies.
    fn check_quotas(
        &mut self,
        template: &Template,
        snap: &RedisSnapshot,
        per_user: &[(String, i64)],
        outbox: &[(String, i64)],
        in_flight: &[&PendingIntent],
    ) {
        let limit = i64::from(template.spec.per_user_limit);
        let pending_users = pending_per_user(in_flight);
        let outbox_users: HashMap<&str, i64> =
            outbox.iter().map(|(u, n)| (u.as_str(), *n)).collect();
        let pg_users: HashMap<&str, i64> = per_user.iter().map(|(u, n)| (u.as_str(), *n)).collect();
        for (user, n) in per_user {
            if *n > limit {
                self.flag(
                    Invariant::I3,
                    format!("user {user} holds {n} coupons, limit {limit}"),
                );
            }
        }
        if snap.stock.is_none() {
            return;
        }
        let mut users: Vec<&str> = pg_users.keys().copied().collect();
        users.extend(snap.claimed.keys().map(String::as_str));
        users.extend(pending_users.keys().map(String::as_str));
        users.sort_unstable();
        users.dedup();
        for user in users {
            let expected = pg_users.get(user).copied().unwrap_or(0)
                + pending_users.get(user).copied().unwrap_or(0)
                + outbox_users.get(user).copied().unwrap_or(0);
            let redis = snap.claimed.get(user).copied().unwrap_or(0);
            if redis != expected {
                self.flag(
                    Invariant::I3,
                    format!(
                        "user {user}: redis claimed count {redis}, postgres implies {expected}"
                    ),
                );
            }
        }
    }

    /// I4.
    async fn check_use_log(&mut self, pg: &PgPool) -> EngineResult<()> {
        for r in postgres::audit_use_log_mismatches(pg, self.template_id, LIST_LIMIT).await? {
            self.flag(
                Invariant::I4,
                format!(
                    "coupon {} is {} (order {:?}) with {} live use-log rows ({})",
                    r.id,
                    r.status,
                    r.order_id,
                    r.live,
                    r.live_orders.unwrap_or_default()
                ),
            );
        }
        Ok(())
    }

    /// I5.
    async fn check_statuses(&mut self, pg: &PgPool) -> EngineResult<()> {
        let template_id = self.template_id;
        for r in postgres::audit_illegal_statuses(pg, template_id, LIST_LIMIT).await? {
            self.flag(
                Invariant::I5,
                format!(
                    "coupon {} is {} (policy {}, refunded {}): no legal path leads here",
                    r.id, r.status, r.refund_policy, r.refunded
                ),
            );
        }
        for (id, status) in postgres::audit_stray_returns(pg, template_id, LIST_LIMIT).await? {
            self.flag(
                Invariant::I5,
                format!("coupon {id} returned its stock but is {status}: refunded to the user and to stock"),
            );
        }
        for id in postgres::audit_undone_before_use(pg, template_id, LIST_LIMIT).await? {
            self.flag(
                Invariant::I5,
                format!("coupon {id} was refunded before it was used"),
            );
        }
        Ok(())
    }

    /// I12 (locks end within their TTL plus `grace`) and I13 (no discount below zero or
    /// above its order).
    async fn check_checkout(
        &mut self,
        pg: &PgPool,
        grace: std::time::Duration,
    ) -> EngineResult<()> {
        let template_id = self.template_id;
        let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
        for (id, order, overdue_ms) in
            postgres::audit_overdue_locks(pg, template_id, grace_ms, LIST_LIMIT).await?
        {
            self.flag(
                Invariant::I12,
                format!(
                    "coupon {id} is still locked by order {order} {overdue_ms} ms after its \
                     lock lapsed (allowed: {grace_ms} ms for the sweep)"
                ),
            );
        }
        for r in postgres::audit_uncapped_discounts(pg, template_id, LIST_LIMIT).await? {
            self.flag(
                Invariant::I13,
                format!(
                    "coupon {} took {} off order {} of {}: {} to pay",
                    r.coupon_id,
                    r.discount,
                    r.order_id,
                    r.order_amount,
                    r.order_amount - r.discount
                ),
            );
        }
        Ok(())
    }

    /// I14: each change of store identity rebuilt this template at most once.
    async fn check_rebuilds(&mut self, pg: &PgPool) -> EngineResult<()> {
        for (identities, count) in
            postgres::repeated_identity_rebuilds(pg, self.template_id).await?
        {
            self.flag(
                Invariant::I14,
                format!(
                    "rebuilt {count} times for one change of store identity ({identities}): \
                     every extra rebuild bumped the epoch and fenced the claims in flight"
                ),
            );
        }
        Ok(())
    }
}
