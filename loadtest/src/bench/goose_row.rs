//! The harness's own ceiling: the real flash-sale scenario (Goose users, the acknowledgement
//! record, retries and duplicates as in a load run) against the bench server's sold-out
//! template, measured from its own record — compared with the minimal client on the same
//! endpoint, it shows what the generator costs.

use std::{path::Path, sync::Arc};

use anyhow::Context;
use coupon_engine::{NewTemplate, RefundPolicy, http::auth::user_token};
use uuid::Uuid;

use super::{bench_server::SECRET, measure::Row};
use crate::{
    acks::{AckLog, RequestKind},
    attack,
    record::ACKS_FILE,
    scenarios::Ctx,
    setup::Customer,
    templates::{Role, TemplateInfo},
};

/// Runs the flash-sale scenario against `template` (sold out) on `base_url`.
pub(crate) async fn flash_sale_sold_out(
    base_url: &str,
    template: Uuid,
    clients: usize,
    seconds: u64,
    scratch: &Path,
) -> anyhow::Result<Row> {
    let args = [
        "coupon-loadtest".to_owned(),
        "flash-sale".to_owned(),
        "--target".to_owned(),
        base_url.to_owned(),
        "--admin-token".to_owned(),
        "unused-by-the-bench".to_owned(),
        "--users".to_owned(),
        clients.to_string(),
        "--duration".to_owned(),
        seconds.to_string(),
        "--goose-quiet".to_owned(),
    ];
    let settings = crate::cli::parse_run(args)?;
    let spec = NewTemplate::simple("bench sold out", 1, 1, RefundPolicy::ReturnToStock);
    let templates = vec![TemplateInfo::new(template, Role::Hot, &spec)];
    let customers: Vec<Customer> = (0..settings.sale.customers)
        .map(|n| {
            let id = format!("bench-goose-{n}");
            Customer {
                token: user_token(SECRET.as_bytes(), &id).into(),
                id: id.into(),
                home: 0,
            }
        })
        .collect();
    let dir = scratch.join("goose");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut ctx = Ctx::new(
        &settings,
        templates,
        customers,
        "bench".into(),
        vec![base_url.to_owned()],
    );
    // As in a load run: every answer streams to the run's acks.jsonl.
    ctx.acks = AckLog::streaming_to(&dir.join(ACKS_FILE))?;
    let ctx = Arc::new(ctx);
    let before = super::cpu::snapshot();
    let result = attack::run(&settings, ctx.clone(), &dir).await?;
    let after = super::cpu::snapshot();
    let recorded = ctx.acks.finish()?;
    let _ = std::fs::remove_dir_all(&dir);
    let tally = &recorded.tally;
    // Goose's run time counts from the end of the ramp-up; the record counts every request.
    let span_us = tally
        .last_end_us
        .saturating_sub(tally.first_start_us.unwrap_or(0));
    let seconds = (span_us as f64 / 1e6).max(f64::MIN_POSITIVE);
    let sold_out: u64 = tally
        .statuses
        .iter()
        .filter(|(k, _)| k.status == Some(409))
        .map(|(_, n)| n)
        .sum();
    let unexpected = tally.requests - sold_out;
    let claims = tally.ops.get(&RequestKind::Claim).map(|c| &c.latencies);
    Ok(Row {
        key: "goose_sold_out".into(),
        what: "coupon-loadtest flash-sale (Goose) on the sold-out path".into(),
        per_sec: Some(sold_out as f64 / seconds),
        p50_ms: claims.map(|l| l.percentile_ms(50.0)),
        p99_ms: claims.map(|l| l.percentile_ms(99.0)),
        note: format!(
            "{clients} Goose users, {:.1} s of load in {:.1} s of Goose, every answer recorded \
             (tally + acks.jsonl){}",
            span_us as f64 / 1e6,
            result.elapsed.as_secs_f64(),
            if unexpected > 0 {
                format!("; {unexpected} unexpected answers (not counted)")
            } else {
                String::new()
            }
        ),
        cpu: before
            .zip(after)
            .and_then(|(b, a)| b.per_op(&a, tally.requests as usize)),
        group_commit: None,
    })
}
