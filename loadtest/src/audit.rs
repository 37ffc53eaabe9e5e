//! Post-run reads through the API: wait until nothing is in flight (pending claim intents
//! persisted, refund outbox applied; reconcile if it lingers), audit every template
//! (I1–I5), and read back every shopper's coupons for the client-side checks.

use std::{collections::HashMap, time::Duration};

use anyhow::Context;
use coupon_engine::{AuditReport, Coupon};
use tokio::time::Instant;

use crate::{
    acks::Recorded,
    admissions::RunAdmissions,
    api::Api,
    checks::{self, InvariantResult, RunRecord},
    progress::phase,
    setup::Customer,
    templates::TemplateInfo,
};

/// The whole post-run audit: waits for quiet, audits every template (I1–I5), reads every
/// shopper's coupons back and checks the acknowledgements against them (I1, I3–I7).
pub(crate) async fn audit_all(
    api: &Api,
    templates: &[TemplateInfo],
    customers: &[Customer],
    recorded: &Recorded,
    stale_admissions: Option<RunAdmissions>,
) -> anyhow::Result<(Vec<AuditReport>, Vec<InvariantResult>)> {
    phase(
        "audit",
        "waiting for in-flight work, then auditing every template (I1–I5)",
    );
    let audits = settle_and_audit(api, templates).await?;
    phase(
        "audit",
        format!(
            "reading back {} shoppers' coupons; checking acknowledgements (I1, I3–I7)",
            customers.len()
        ),
    );
    let wallets = wallets(api, customers).await?;
    let invariants = checks::evaluate(&RunRecord {
        events: &recorded.kept,
        refusals_not_kept: recorded.refusals_not_kept,
        templates,
        audits: &audits,
        wallets: &wallets,
        stale_admissions,
    });
    Ok((audits, invariants))
}

/// Longest wait for in-flight work to drain.
const SETTLE: Duration = Duration::from_secs(30);
/// When lingering work gets an explicit reconcile.
const RECONCILE_AFTER: Duration = Duration::from_secs(6);
/// Wallet reads at once.
const CONCURRENCY: usize = 16;

/// Audits every template once nothing is in flight (or [`SETTLE`] has passed).
pub(crate) async fn settle_and_audit(
    api: &Api,
    templates: &[TemplateInfo],
) -> anyhow::Result<Vec<AuditReport>> {
    let start = Instant::now();
    let mut reconciled = false;
    loop {
        let mut audits = Vec::with_capacity(templates.len());
        for t in templates {
            audits.push(
                api.audit(t.id)
                    .await
                    .with_context(|| format!("auditing template {}", t.name))?,
            );
        }
        let quiet = audits
            .iter()
            .all(|a| a.pending == 0 && a.outbox_unapplied == 0);
        if quiet || start.elapsed() >= SETTLE {
            if !quiet {
                tracing::warn!("work still in flight after {SETTLE:?}; auditing anyway");
            }
            return Ok(audits);
        }
        if !reconciled && start.elapsed() >= RECONCILE_AFTER {
            api.reconcile()
                .await
                .context("reconciling lingering work")?;
            reconciled = true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Every shopper's coupons, by user id.
pub(crate) async fn wallets(
    api: &Api,
    customers: &[Customer],
) -> anyhow::Result<HashMap<String, Vec<Coupon>>> {
    let mut out = HashMap::with_capacity(customers.len());
    let mut set = tokio::task::JoinSet::new();
    let mut queue = customers.iter();
    loop {
        while set.len() < CONCURRENCY {
            let Some(c) = queue.next() else { break };
            let api = api.clone();
            let c = c.clone();
            set.spawn(async move {
                let coupons = api.wallet(&c.token).await;
                (c.id, coupons)
            });
        }
        let Some(joined) = set.join_next().await else {
            break;
        };
        let (id, coupons) = joined.context("wallet task")?;
        let coupons = coupons.with_context(|| format!("reading the coupons of {id}"))?;
        out.insert(id.to_string(), coupons);
    }
    Ok(out)
}
