//! The run, phase by phase: setup → run (Goose) → audit (I1–I7) → report.

use std::{path::Path, sync::Arc};

use anyhow::{Context, bail};
use coupon_engine::AuditReport;
use serde_json::json;
use time::OffsetDateTime;

use crate::{
    acks::AckLog,
    admissions::AdmissionsProbe,
    arrivals, attack, audit, baseline,
    checks::InvariantResult,
    cli::Settings,
    counterexample, nemesis,
    progress::phase,
    record::{self, RunRecord},
    recovery,
    report::{self, Report},
    run_outcome::RunOutcome,
    scenarios::{self, Ctx},
    setup, stats,
    tally::Tally,
};

/// Starts `--nemesis` against the run's own Redis (under its in-process server or its
/// `coupon-server` processes) and the hot template.
fn start_nemesis(
    s: &Settings,
    fixture: &setup::Fixture,
    epoch_unix_us: u64,
) -> anyhow::Result<Option<tokio::task::JoinHandle<Vec<nemesis::NemesisEvent>>>> {
    let Some(kind) = s.serving.nemesis else {
        return Ok(None);
    };
    let server = fixture
        .server
        .as_ref()
        .context("--nemesis needs servers the run starts itself")?;
    let redis = server
        .own_redis
        .clone()
        .context("the run's servers have no Redis of their own")?;
    let hot = fixture.templates.first().context("no template seeded")?;
    let run_for = std::time::Duration::from_secs(s.load.duration.unwrap_or(10));
    phase(
        "run",
        format!("nemesis {kind:?} armed against the run's own Redis"),
    );
    Ok(Some(nemesis::spawn(
        kind,
        nemesis::Target {
            grey: server.grey.clone(),
            fleet: server.fleet(),
            epoch_unix_us,
            engine: server.engine().clone(),
            redis,
            template: hot.id.into(),
            total_stock: hot.total_stock,
        },
        run_for,
    )))
}

/// Runs everything; `Err` is a setup or infrastructure error (exit 3).
pub(crate) async fn run(s: Settings) -> anyhow::Result<RunOutcome> {
    Ok(run_to_report(s).await?.0)
}

/// Runs everything and returns the verdict with the report (as written into its directory).
pub(crate) async fn run_to_report(s: Settings) -> anyhow::Result<(RunOutcome, Report)> {
    let started_at = OffsetDateTime::now_utc();
    let mut fixture = setup::prepare(&s).await?;
    let dir = crate::report_dir::create(&s.report.report_dir, started_at, s.scenario.name())?;

    announce(&s, &fixture);
    let mut ctx = Ctx::new(
        &s,
        fixture.templates.clone(),
        fixture.customers.clone(),
        fixture.run_tag.clone(),
        fixture.bases.clone(),
    );
    ctx.service_token = fixture.service_token.as_deref().map(Arc::from);
    ctx.acks = AckLog::streaming_to(&dir.join(record::ACKS_FILE))?;
    let ctx = Arc::new(ctx);
    let probe = AdmissionsProbe::start(&fixture.bases).await;
    let nemesis = start_nemesis(&s, &fixture, ctx.epoch_unix_us)?;
    let (attack, open_model) = match &s.load.open {
        Some(open) => {
            let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let (mut attack, mut figures) = arrivals::run(
                ctx.clone(),
                &open.profile,
                &open.text,
                open.max_in_flight,
                next.clone(),
            )
            .await?;
            // After the arrivals, so that they meet the sale as it opens, as shoppers do.
            if let Some(users) = open.compare_closed {
                let started = std::time::Instant::now();
                let length = open.profile.length();
                figures.closed =
                    Some(arrivals::closed_loop(ctx.clone(), users, length, next).await?);
                attack.elapsed += started.elapsed();
            }
            (attack, Some(figures))
        }
        None => (attack::run(&s, ctx.clone(), &dir).await?, None),
    };
    let nemesis = match nemesis {
        Some(task) => task.await.context("the nemesis task")?,
        None => Vec::new(),
    };
    let recorded = ctx.acks.finish()?;
    let tally = &recorded.tally;
    phase(
        "run",
        format!(
            "finished in {:.1} s: {} requests recorded, {} kept in memory for the checks",
            attack.elapsed.as_secs_f64(),
            tally.requests,
            recorded.kept.len()
        ),
    );
    if !tally.answered {
        bail!(
            "the target never answered ({} requests, all timeouts or 5xx)",
            tally.requests
        );
    }

    write_record(&s, &fixture, &dir, ctx.epoch_unix_us)?;
    let (recoveries, window_check) =
        recovery::analyse(&dir, &nemesis).context("reading the run's answers back")?;
    let (audits, mut invariants) = if s.gate.no_audit {
        phase(
            "audit",
            "skipped (--no-audit): merge this run's record with `coupon-loadtest audit`",
        );
        (Vec::new(), Vec::new())
    } else {
        audit::audit_all(
            &fixture.api,
            &fixture.templates,
            &fixture.customers,
            &recorded,
            probe.during_run().await,
        )
        .await?
    };
    invariants.extend(window_check);
    // After the audit: its refunds change the final state, and must neither hide an oversell
    // of the sale's nor count in its figures. Its answers still go to acks.jsonl.
    let mut restock = Vec::new();
    if let Some(within) = s.gate.restock_within.filter(|_| !s.gate.no_audit) {
        if let Some((seen, check)) = scenarios::probe_restock(&ctx, &fixture.api, within)
            .await
            .context("the restock probe")?
        {
            invariants.push(check);
            restock = seen;
        }
        ctx.acks.finish()?;
    }
    let mut servers_peak_rss_mib = Vec::new();
    if let Some(server) = fixture.server.take() {
        servers_peak_rss_mib = server.servers_peak_rss_mib().await;
        server
            .stop()
            .await
            .context("stopping the run's server(s)")?;
    }

    phase("report", format!("writing {}", dir.display()));
    let heading = report::Heading {
        dir: &dir,
        scenario: s.scenario.name().to_owned(),
        started_at,
        target: fixture.target_description.clone(),
        config: config_json(&s),
    };
    let findings = (audits, invariants);
    let mut report = build_report(&s, heading, &fixture, attack, nemesis, tally, findings)?;
    report.recoveries = recoveries;
    report.restock = restock;
    report.servers_peak_rss_mib = servers_peak_rss_mib;
    report.open_model = open_model;
    report.counterexample = counterexample::write(
        &dir,
        &counterexample::FailedRun::of(&report, &recorded.kept),
    )?;
    let verdict = report.outcome;
    report::write_all(&dir, &report)?;
    summarise(&report, &dir);
    Ok((verdict, report))
}

/// The run's report: the verdict on its invariants, Goose's thresholds and the baseline.
fn build_report(
    s: &Settings,
    heading: report::Heading<'_>,
    fixture: &setup::Fixture,
    attack: attack::AttackResult,
    nemesis: Vec<nemesis::NemesisEvent>,
    tally: &Tally,
    findings: (Vec<AuditReport>, Vec<InvariantResult>),
) -> anyhow::Result<Report> {
    let comparison = match &s.gate.baseline {
        Some(file) => Some(baseline::compare(
            file,
            s.gate.tolerances,
            s.scenario.name(),
            &heading.config,
            &stats::throughput(tally),
            &stats::endpoints(tally),
        )?),
        None => None,
    };
    let (audits, invariants) = findings;
    let invariants_ok = invariants.iter().all(|i| i.passed);
    let thresholds_ok = attack.thresholds.iter().all(|t| t.passed);
    let no_regression = comparison.as_ref().is_none_or(baseline::Comparison::passed);
    let faults_injected = nemesis.iter().all(|e| !e.failed);
    let verdict = RunOutcome::decide(invariants_ok, thresholds_ok, no_regression)
        .given_faults(faults_injected);
    let mut report = Report::assemble(
        heading,
        verdict,
        invariants,
        tally,
        fixture.templates.clone(),
        &fixture.bases,
    );
    for e in nemesis.iter().filter(|e| e.failed) {
        report.failures.push(format!(
            "the fault did not happen as planned ({:.1} s): {}",
            e.at_secs, e.what
        ));
    }
    for t in attack.thresholds.iter().filter(|t| !t.passed) {
        report.failures.push(format!(
            "threshold `{}` failed: observed {}",
            t.rule, t.observed
        ));
    }
    if let Some(c) = &comparison {
        report
            .failures
            .extend(c.regressions.iter().map(|r| format!("regression: {r}")));
    }
    report.audits = audits;
    report.thresholds = attack.thresholds;
    report.baseline = comparison;
    report.goose_reports = attack.goose_reports;
    report.peak_rss_mib = report::peak_rss_mib();
    report.audited = !s.gate.no_audit;
    report.nemesis = nemesis;
    Ok(report)
}

/// Says what is about to run.
fn announce(s: &Settings, fixture: &setup::Fixture) {
    let how_long = match (s.load.duration, s.load.iterations) {
        (Some(d), _) => format!("{d} s after ramp-up"),
        (None, Some(n)) => format!("{n} iterations per user"),
        (None, None) => "until stopped".to_owned(),
    };
    let load = match &s.load.open {
        Some(open) => format!("open model, arrivals {}", open.text),
        None => format!(
            "{} Goose users (+{}/s), {how_long}",
            s.load.users, s.load.increase_rate
        ),
    };
    phase(
        "run",
        format!(
            "{}: {load}, {} shoppers, against {}{}",
            s.scenario.name(),
            s.sale.customers,
            fixture.bases.join(", "),
            if fixture.bases.len() > 1 {
                format!(" (spread: {})", spread_name(s))
            } else {
                String::new()
            }
        ),
    );
}

/// The run's record beside its answers, so that `coupon-loadtest audit` can merge it.
fn write_record(
    s: &Settings,
    fixture: &setup::Fixture,
    dir: &Path,
    epoch_unix_us: u64,
) -> anyhow::Result<()> {
    record::write(
        dir,
        &RunRecord {
            record_version: record::RECORD_VERSION,
            run_id: crate::report_dir::run_id(dir),
            scenario: s.scenario.name().to_owned(),
            servers: fixture.bases.clone(),
            run_tag: fixture.run_tag.clone(),
            customers: fixture.customers.len(),
            templates: fixture.templates.clone(),
            users: s.load.users,
            epoch_unix_us,
            audited: !s.gate.no_audit,
        },
    )
}

/// The configuration as the report records it (and baselines compare).
fn config_json(s: &Settings) -> serde_json::Value {
    let own = s.serving.targets.is_empty();
    json!({
        "scenario": s.scenario.name(),
        "load_model": if s.load.open.is_some() { "open" } else { "closed" },
        "arrivals": s.load.open.as_ref().map(|o| o.text.clone()),
        "max_in_flight": s.load.open.as_ref().map(|o| o.max_in_flight),
        "users": s.load.users,
        "increase_rate": s.load.increase_rate,
        "duration_secs": s.load.duration,
        "iterations": s.load.iterations,
        "stock": s.sale.stock,
        "per_user_limit": s.sale.per_user_limit,
        "customers": s.sale.customers,
        "variant": own.then(|| s.serving.variant.name()),
        "persistence": own.then(|| serde_json::to_value(s.serving.persistence).unwrap_or_default()),
        "redis_cluster": own
            .then_some(s.serving.redis_cluster || s.serving.nemesis.is_some_and(|n| n.needs_cluster())),
        "target": match (s.serving.targets.as_slice(), s.serving.servers) {
            ([], None) => "in-process".to_owned(),
            ([], Some(n)) => format!("{n} coupon-server process(es)"),
            (targets, _) => targets.join(", "),
        },
        "servers": if own { s.serving.servers.unwrap_or(1) } else { s.serving.targets.len() },
        "spread": spread_name(s),
        "request_timeout_secs": s.load.request_timeout.as_secs(),
        "max_retries": s.load.max_retries,
        "duplicate_rate": s.load.duplicate_rate,
        "seed": s.load.seed,
        "thresholds": s.gate.thresholds,
        "baseline": s.gate.baseline.as_ref().map(|p| p.display().to_string()),
    })
}

/// `sticky` or `request`.
fn spread_name(s: &Settings) -> String {
    serde_json::to_value(s.serving.spread)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The closing lines on stderr.
pub(crate) fn summarise(r: &Report, dir: &Path) {
    let t = &r.throughput;
    phase(
        "report",
        format!(
            "{:.1} requests/s, {:.1} claims/s, {} coupons granted, {} requests in {:.1} s",
            t.requests_per_sec, t.claims_per_sec, t.claims_granted, t.requests, t.duration_secs
        ),
    );
    for e in &r.endpoints {
        phase(
            "report",
            format!(
                "{:<18} n={:<7} p50 {:>8.2} ms  p95 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms",
                e.name, e.count, e.p50_ms, e.p95_ms, e.p99_ms, e.max_ms
            ),
        );
    }
    if let Some(peaks) = report::servers_peak_memory(r) {
        phase("report", format!("servers' peak memory: {peaks}"));
    }
    for f in &r.failures {
        phase("report", format!("FAIL: {f}"));
    }
    phase(
        "report",
        format!(
            "verdict {} (exit {}): {}",
            r.verdict,
            r.exit_code,
            dir.join("index.html").display()
        ),
    );
}
