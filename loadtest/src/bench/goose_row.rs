//! The harness's own ceiling: the real flash-sale scenario (Goose users, the acknowledgement
//! record, retries and duplicates as in a load run) against the bench server's sold-out
//! template, measured from its own record — compared with the minimal client on the same
//! endpoint, it shows what the generator costs.

use std::{path::Path, sync::Arc, time::Duration};

use anyhow::Context;
use clap::Parser;
use coupon_engine::{NewTemplate, RefundPolicy, http::auth::user_token};
use uuid::Uuid;

use super::{
    measure::{Row, Samples},
    target::SECRET,
};
use crate::{
    attack,
    cli::Cli,
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
    let settings = Cli::try_parse_from(args)?.settings()?;
    let spec = NewTemplate::simple("bench sold out", 1, 1, RefundPolicy::ReturnToStock);
    let templates = vec![TemplateInfo::new(template, Role::Hot, &spec)];
    let customers: Vec<Customer> = (0..settings.customers)
        .map(|n| {
            let id = format!("bench-goose-{n}");
            Customer {
                token: user_token(SECRET.as_bytes(), &id).into(),
                id: id.into(),
                home: 0,
            }
        })
        .collect();
    let ctx = Arc::new(Ctx::new(
        &settings,
        templates,
        customers,
        "bench".into(),
        vec![base_url.to_owned()],
    ));
    let dir = scratch.join("goose");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let before = super::cpu::snapshot();
    let result = attack::run(&settings, ctx.clone(), &dir).await?;
    let after = super::cpu::snapshot();
    let _ = std::fs::remove_dir_all(&dir);
    let events = ctx.acks.snapshot();
    // Goose's run time counts from the end of the ramp-up; the record counts every request.
    let span_us = events
        .iter()
        .map(|e| e.start_us + e.latency_us)
        .max()
        .unwrap_or(0)
        .saturating_sub(events.iter().map(|e| e.start_us).min().unwrap_or(0));
    let mut samples = Samples::with_capacity(events.len());
    for e in &events {
        if e.status == Some(409) {
            samples.push(Duration::from_micros(e.latency_us));
        } else {
            samples.errors += 1;
        }
    }
    let calls = events.len();
    let mut row = samples.into_row(
        "goose_sold_out",
        "coupon-loadtest flash-sale (Goose) on the sold-out path",
        (span_us as f64 / 1e6).max(f64::MIN_POSITIVE),
        format!(
            "{clients} Goose users, {:.1} s of load in {:.1} s of Goose, every answer recorded",
            span_us as f64 / 1e6,
            result.elapsed.as_secs_f64()
        ),
    );
    row.cpu = before.zip(after).and_then(|(b, a)| b.per_op(&a, calls));
    Ok(row)
}
