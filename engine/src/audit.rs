//! The auditor: checks invariants I1–I5 (docs/ARCHITECTURE.md, "Invariants") of one template
//! against the live Redis and Postgres state and returns a typed report. A product feature,
//! also used by the tests, the property tests and the load runner.
//!
//! In-flight work is accounted for rather than reported: pending intents not yet in Postgres
//! and outbox rows not yet applied are part of the conservation equation, so an audit taken
//! while the system is quiet but not drained still balances.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use sqlx::Row;
use uuid::Uuid;

use crate::{
    CouponEngine,
    error::EngineResult,
    invariant::{Finding, Invariant},
    service::pending_per_user,
};

/// The auditor's verdict on one template.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuditReport {
    /// The template audited.
    pub template_id: Uuid,
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

/// Rows of each kind of I4/I5 problem listed at most.
const LIST_LIMIT: i64 = 20;

impl CouponEngine {
    /// Audits one template against I1–I5.
    pub async fn audit(&self, template_id: Uuid) -> EngineResult<AuditReport> {
        let template = self.template(template_id).await?;
        let pg = self.pool();
        let snap = self.redis().snapshot(template_id).await?;
        let per_user: Vec<(String, i64)> = sqlx::query_as(
            "SELECT user_id, count(*) FROM user_coupon \
             WHERE template_id = $1 AND status <> 'revoked' GROUP BY user_id",
        )
        .bind(template_id)
        .fetch_all(pg)
        .await?;
        let outbox: Vec<(String, i64)> = sqlx::query_as(
            "SELECT user_id, count(*) FROM stock_outbox \
             WHERE template_id = $1 AND applied_at IS NULL GROUP BY user_id",
        )
        .bind(template_id)
        .fetch_all(pg)
        .await?;
        let pending_ids: Vec<Uuid> = snap.pending.iter().map(|p| p.coupon_id).collect();
        let persisted: Vec<Uuid> =
            sqlx::query_scalar("SELECT id FROM user_coupon WHERE id = ANY($1)")
                .bind(&pending_ids)
                .fetch_all(pg)
                .await?;
        let in_flight: Vec<_> = snap
            .pending
            .iter()
            .filter(|p| !persisted.contains(&p.coupon_id))
            .collect();

        let counted: i64 = per_user.iter().map(|(_, n)| n).sum();
        let outbox_unapplied: i64 = outbox.iter().map(|(_, n)| n).sum();
        let total = template.spec.total_stock;
        let limit = i64::from(template.spec.per_user_limit);
        let mut report = AuditReport {
            template_id,
            total_stock: total,
            redis_stock: snap.stock,
            counted,
            pending: in_flight.len() as i64,
            outbox_unapplied,
            violations: Vec::new(),
        };

        // I1
        if counted > total {
            report.flag(
                Invariant::I1,
                format!(
                    "{counted} coupons count against a stock of {total}: oversold by {}",
                    counted - total
                ),
            );
        }
        if let Some(s) = snap.stock.filter(|s| *s < 0) {
            report.flag(Invariant::I1, format!("redis stock is negative: {s}"));
        }
        // I2, in Postgres: the counter the claim batches decide by must be the rows' count
        // (one statement, so one snapshot, however busy the template is).
        let (counter, rows): (Option<i64>, i64) = sqlx::query_as(
            "SELECT (SELECT counted FROM template_stock WHERE template_id = $1), \
                    (SELECT count(*) FROM user_coupon WHERE template_id = $1 AND status <> 'revoked')",
        )
        .bind(template_id)
        .fetch_one(pg)
        .await?;
        if counter != Some(rows) {
            report.flag(
                Invariant::I2,
                format!(
                    "the stock counter says {} coupons count against stock, the rows say {rows}",
                    counter.map_or("nothing (no counter row)".into(), |c| c.to_string())
                ),
            );
        }
        // I2, across the stores
        if let Some(stock) = snap.stock {
            let sum = stock + counted + report.pending + outbox_unapplied;
            if sum != total {
                report.flag(
                    Invariant::I2,
                    format!(
                        "redis stock {stock} + counted {counted} + pending {} + unapplied refunds \
                         {outbox_unapplied} = {sum}, expected total {total}",
                        report.pending
                    ),
                );
            }
        }
        // I3
        let pending_users = pending_per_user(&in_flight);
        let outbox_users: HashMap<&str, i64> =
            outbox.iter().map(|(u, n)| (u.as_str(), *n)).collect();
        let pg_users: HashMap<&str, i64> = per_user.iter().map(|(u, n)| (u.as_str(), *n)).collect();
        for (user, n) in &per_user {
            if *n > limit {
                report.flag(
                    Invariant::I3,
                    format!("user {user} holds {n} coupons, limit {limit}"),
                );
            }
        }
        if snap.stock.is_some() {
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
                    report.flag(
                        Invariant::I3,
                        format!(
                            "user {user}: redis claimed count {redis}, postgres implies {expected}"
                        ),
                    );
                }
            }
        }
        // I4
        let rows = sqlx::query(
            "SELECT c.id, c.status, c.order_id, count(l.id) AS live, \
                    string_agg(l.order_id, ',') AS live_orders \
             FROM user_coupon c LEFT JOIN coupon_use_log l ON l.coupon_id = c.id AND NOT l.undone \
             WHERE c.template_id = $1 GROUP BY c.id \
             HAVING (c.status = 'used' AND (count(l.id) <> 1 \
                        OR max(l.order_id) IS DISTINCT FROM c.order_id)) \
                 OR (c.status <> 'used' AND count(l.id) > 0) \
             LIMIT $2",
        )
        .bind(template_id)
        .bind(LIST_LIMIT)
        .fetch_all(pg)
        .await?;
        for r in rows {
            let id: Uuid = r.try_get("id")?;
            let status: String = r.try_get("status")?;
            let order: Option<String> = r.try_get("order_id")?;
            let live: i64 = r.try_get("live")?;
            let orders: Option<String> = r.try_get("live_orders")?;
            report.flag(
                Invariant::I4,
                format!(
                    "coupon {id} is {status} (order {order:?}) with {live} live use-log rows ({})",
                    orders.unwrap_or_default()
                ),
            );
        }
        // I5
        let illegal = sqlx::query(
            "SELECT c.id, c.status, t.refund_policy, \
                    EXISTS (SELECT 1 FROM coupon_use_log l WHERE l.coupon_id = c.id AND l.undone) AS refunded, \
                    c.valid_until > now() AS still_valid \
             FROM user_coupon c JOIN coupon_template t ON t.id = c.template_id \
             WHERE c.template_id = $1 AND ( \
                 (c.status = 'revoked' AND (t.refund_policy <> 'return_to_stock' OR NOT EXISTS \
                     (SELECT 1 FROM coupon_use_log l WHERE l.coupon_id = c.id AND l.undone))) \
              OR (c.status = 'expired' AND c.valid_until > now())) \
             LIMIT $2",
        )
        .bind(template_id)
        .bind(LIST_LIMIT)
        .fetch_all(pg)
        .await?;
        for r in illegal {
            let id: Uuid = r.try_get("id")?;
            let status: String = r.try_get("status")?;
            let policy: String = r.try_get("refund_policy")?;
            let refunded: bool = r.try_get("refunded")?;
            report.flag(
                Invariant::I5,
                format!("coupon {id} is {status} (policy {policy}, refunded {refunded}): no legal path leads here"),
            );
        }
        let stray: Vec<(Uuid, String)> = sqlx::query_as(
            "SELECT o.coupon_id, c.status FROM stock_outbox o JOIN user_coupon c ON c.id = o.coupon_id \
             WHERE o.template_id = $1 AND c.status <> 'revoked' LIMIT $2",
        )
        .bind(template_id)
        .bind(LIST_LIMIT)
        .fetch_all(pg)
        .await?;
        for (id, status) in stray {
            report.flag(
                Invariant::I5,
                format!("coupon {id} returned its stock but is {status}: refunded to the user and to stock"),
            );
        }
        let undone_early: Vec<Uuid> = sqlx::query_scalar(
            "SELECT l.coupon_id FROM coupon_use_log l JOIN user_coupon c ON c.id = l.coupon_id \
             WHERE c.template_id = $1 AND l.undone AND l.undone_at < l.used_at LIMIT $2",
        )
        .bind(template_id)
        .bind(LIST_LIMIT)
        .fetch_all(pg)
        .await?;
        for id in undone_early {
            report.flag(
                Invariant::I5,
                format!("coupon {id} was refunded before it was used"),
            );
        }
        Ok(report)
    }
}
