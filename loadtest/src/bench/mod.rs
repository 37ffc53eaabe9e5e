//! `coupon-loadtest bench`: the engine and the harness side by side with their anchors, in
//! one run (docs/speed.md). Every row runs for the same time at the same
//! concurrency; the point is the ratios between rows, which travel between machines.

mod anchors;
mod bench_server;
mod bracket;
mod chain;
mod cli;
mod cpu;
mod durability;
mod goose_row;
mod load;
mod measure;
mod median;
mod ratios;
mod report;
mod rounds;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use anyhow::Context;
use coupon_engine::{Persistence, service::BatchHistogram};
use coupon_testkit::Backends;
use time::{OffsetDateTime, macros::format_description};

pub(crate) use cli::BenchCli;

use crate::progress::phase;
use anchors::{Endpoints, PgShape};
use chain::ChainLoad;
use load::Expect;
use measure::Row;

/// Exit code when a ratio fell below its baseline bound.
pub(crate) const EXIT_REGRESSION: u8 = 2;

/// Runs every row and writes the report; returns the exit code.
pub(crate) async fn run(cli: BenchCli) -> anyhow::Result<u8> {
    cli.validate()?;
    let started = OffsetDateTime::now_utc();
    let backends = Arc::new(
        Backends::provision_durable()
            .await
            .context("provisioning Redis and Postgres")?,
    );
    let postgres = durability::PostgresDurability::read(&backends).await?;
    phase("bench", postgres.describe());
    phase(
        "bench",
        format!(
            "the engine's {} (--server-threads)",
            report::server_threads(cli.server_threads)
        ),
    );
    if let Some(w) = postgres.warning() {
        eprintln!("coupon-loadtest bench: warning: {w}");
    }
    let dir = report_dir(&cli.report_dir, started)?;
    let mut rounds = Vec::with_capacity(cli.rounds);
    let mut batches: Option<BatchHistogram> = None;
    for round in 1..=cli.rounds {
        if cli.rounds > 1 {
            phase("bench", format!("round {round} of {}", cli.rounds));
        }
        let scratch = dir.join("scratch").join(format!("round-{round}"));
        let anchors_before = anchor_rows(&cli, &backends, &postgres, &scratch).await?;
        let mut measured = Vec::new();
        for persistence in [Persistence::Sync, Persistence::Async] {
            let (engine_rows, h) = engine_rows(&cli, &backends, persistence, &scratch).await?;
            measured.extend(engine_rows);
            batches = add_batches(batches, h);
        }
        phase(
            "bench",
            "the anchors again, after the engine rows (each anchor: the geometric mean of its \
             two passes)",
        );
        let anchors_after = anchor_rows(&cli, &backends, &postgres, &scratch).await?;
        let mut rows = bracket::bracket(anchors_before, &anchors_after);
        rows.extend(measured);
        rounds.push(rows);
    }
    let _ = std::fs::remove_dir_all(dir.join("scratch"));
    finish(&cli, started, &dir, rounds, batches, postgres)
}

/// The group commit's histogram over every round (each round starts a fresh engine).
fn add_batches(
    sum: Option<BatchHistogram>,
    more: Option<BatchHistogram>,
) -> Option<BatchHistogram> {
    match (sum, more) {
        (Some(a), Some(b)) => Some(BatchHistogram {
            buckets: a
                .buckets
                .iter()
                .zip(&b.buckets)
                .map(|(x, y)| x + y)
                .collect(),
            count: a.count + b.count,
            sum: a.sum + b.sum,
            micros: a.micros + b.micros,
            waited_micros: a.waited_micros + b.waited_micros,
        }),
        (a, b) => a.or(b),
    }
}

/// The anchors: `redis-benchmark` on the engine's claim script, then `pgbench`.
async fn anchor_rows(
    cli: &BenchCli,
    backends: &Arc<Backends>,
    postgres: &durability::PostgresDurability,
    scratch: &Path,
) -> anyhow::Result<Vec<Row>> {
    let endpoints = Endpoints::parse(backends.redis_url(), &backends.database_url)?;
    let mut rows: Vec<Row> = Vec::new();
    phase("bench", "anchors: redis-benchmark EVALSHA of claim.lua");
    let mut conn = redis::Client::open(backends.redis_url())?
        .get_connection_manager()
        .await
        .context("connecting to Redis")?;
    for granting in [false, true] {
        let before = cpu::snapshot();
        let row = anchors::redis_claim_script(
            &endpoints,
            &mut conn,
            granting,
            cli.connections,
            cli.seconds,
        )
        .await?;
        rows.push(with_tool_cpu(row, before, cli.seconds));
        print_row(rows.last());
    }

    phase(
        "bench",
        "anchors: pgbench single-row INSERT and hot-row transaction",
    );
    let pg_server = bench_server::BenchServer::start(backends.clone(), Persistence::Sync, 1)?;
    anchors::prepare_pg(pg_server.engine.pool()).await?;
    let pg = endpoints_for_database(&endpoints, pg_server.engine.pool()).await?;
    for shape in [PgShape::Insert, PgShape::HotRow] {
        let e = pg.clone();
        let clients = cli.pg_clients;
        let seconds = cli.seconds;
        let scratch = scratch.to_owned();
        let flush = postgres.settings();
        let before = cpu::snapshot();
        let row = tokio::task::spawn_blocking(move || {
            anchors::pgbench(&e, shape, clients, seconds, &flush, &scratch)
        })
        .await??;
        rows.push(with_tool_cpu(row, before, cli.seconds));
        print_row(rows.last());
    }
    pg_server.stop()?;
    Ok(rows)
}

/// Which templates a row claims from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claims {
    /// The sold-out template: every claim refused.
    SoldOut,
    /// The one granting template.
    Granted,
    /// The same granted claims spread over [`bench_server::SPREAD_TEMPLATES`] live templates.
    Spread,
}

/// The rows one persistence mode is measured in: (key, what, claims, over HTTP).
fn engine_row_plan(persistence: Persistence) -> Vec<(&'static str, &'static str, Claims, bool)> {
    match persistence {
        Persistence::Sync => vec![
            (
                "inproc_sold_out",
                "in-process claim, sold out",
                Claims::SoldOut,
                false,
            ),
            (
                "inproc_sync_granted",
                "in-process claim, sync granted",
                Claims::Granted,
                false,
            ),
            (
                "http_sold_out",
                "HTTP claim, sold out (minimal client)",
                Claims::SoldOut,
                true,
            ),
            (
                "http_sync_granted",
                "HTTP claim, sync granted",
                Claims::Granted,
                true,
            ),
            (
                "http_sync_spread",
                "HTTP claim, sync granted, over 1,000 live templates",
                Claims::Spread,
                true,
            ),
        ],
        Persistence::Async => vec![
            (
                "inproc_async_granted",
                "in-process claim, async granted",
                Claims::Granted,
                false,
            ),
            (
                "http_async_granted",
                "HTTP claim, async granted",
                Claims::Granted,
                true,
            ),
            (
                "http_async_spread",
                "HTTP claim, async granted, over 1,000 live templates",
                Claims::Spread,
                true,
            ),
        ],
    }
}

/// One engine in `persistence` mode, in process then over HTTP; in sync mode also the
/// batch sizes its group commit saw and the Goose row against the same server.
async fn engine_rows(
    cli: &BenchCli,
    backends: &Arc<Backends>,
    persistence: Persistence,
    scratch: &Path,
) -> anyhow::Result<(Vec<Row>, Option<BatchHistogram>)> {
    let mode = match persistence {
        Persistence::Sync => "sync",
        Persistence::Async => "async",
    };
    phase(
        "bench",
        format!("the engine ({mode}): in-process, then over HTTP"),
    );
    let run_for = Duration::from_secs(cli.seconds);
    let t = bench_server::BenchServer::start(backends.clone(), persistence, cli.server_threads)?;
    let c = cli.connections;
    let mut rows = Vec::new();
    for (key, what, claims, http) in engine_row_plan(persistence) {
        let (templates, expect): (Arc<[uuid::Uuid]>, _) = match claims {
            Claims::SoldOut => (Arc::new([t.sold_out]), Expect::SoldOut),
            Claims::Granted => (Arc::new([t.granting]), Expect::Granted),
            Claims::Spread => (t.spread.clone(), Expect::Granted),
        };
        let before = cpu::snapshot();
        let chain_before = t.engine.batch_sizes();
        let samples = if http {
            load::over_http(&t.base_url, &templates, expect, key, c, run_for).await?
        } else {
            load::in_process(&t.engine, templates, expect, key, c, run_for).await
        };
        let calls = samples.len() + samples.errors as usize;
        let note = format!("{c} clients, closed loop, {} calls", samples.len());
        let mut row = samples.into_row(key, what, run_for.as_secs_f64(), note);
        row.cpu = cpu_per_op(before, calls);
        row.group_commit = ChainLoad::between(
            &chain_before,
            &t.engine.batch_sizes(),
            run_for.as_secs_f64(),
        );
        print_row(Some(&row));
        if let Some(load) = &row.group_commit {
            phase("bench", load.describe());
        }
        rows.push(row);
    }
    let mut batches = None;
    if persistence == Persistence::Sync {
        let h = t.engine.batch_sizes();
        phase(
            "bench",
            format!(
                "group commit: {} batches, {:.1} claims, {:.2} ms in the batch transaction \
                 (its WAL flush included) per batch; {:.2} ms per claim from joining a queue \
                 to its verdict",
                h.count,
                h.sum as f64 / h.count.max(1) as f64,
                h.micros as f64 / 1000.0 / h.count.max(1) as f64,
                h.waited_micros as f64 / 1000.0 / h.sum.max(1) as f64
            ),
        );
        batches = Some(h);
        phase(
            "bench",
            "the harness: Goose flash-sale on the sold-out path",
        );
        rows.push(
            goose_row::flash_sale_sold_out(&t.base_url, t.sold_out, c, cli.seconds, scratch)
                .await?,
        );
        print_row(rows.last());
    }
    t.engine.flush().await?;
    tokio::task::spawn_blocking(move || t.stop()).await??;
    Ok((rows, batches))
}

/// Ratios, the baseline gate, the report files and the console table; the exit code.
fn finish(
    cli: &BenchCli,
    started: OffsetDateTime,
    dir: &Path,
    rounds: Vec<Vec<Row>>,
    batches: Option<BatchHistogram>,
    postgres: durability::PostgresDurability,
) -> anyhow::Result<u8> {
    let round_ratios: Vec<_> = rounds.iter().map(|r| ratios::compute(r)).collect();
    let spread = rounds::spread(&round_ratios, &rounds);
    let mut ratios = rounds::median_ratios(round_ratios.first().map_or(&[], |r| r), &spread);
    let rows = rounds::median_rows(&rounds);
    let claim_goals = rounds::claim_goals(&rounds, &round_ratios);
    // One round is its own median: nothing to spread.
    let (spread, round_rows) = if rounds.len() > 1 {
        (spread, rounds)
    } else {
        (Vec::new(), Vec::new())
    };
    let mut exit = 0;
    let mut failures = Vec::new();
    if let Some(path) = &cli.baseline {
        let baseline = ratios::read_baseline(path)?;
        failures = ratios::gate(&mut ratios, &baseline, cli.min_fraction);
        if !failures.is_empty() {
            exit = EXIT_REGRESSION;
        }
    }
    let doc = report::Document {
        git_commit: crate::report_dir::git_commit(),
        started_at: started
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
        seconds: cli.seconds,
        rounds: cli.rounds,
        connections: cli.connections,
        server_threads: Some(cli.server_threads),
        pg_clients: cli.pg_clients,
        machine: report::machine(),
        postgres: Some(postgres),
        rows,
        ratios,
        spread,
        claim_goals: Some(claim_goals),
        round_rows,
        batch_sizes: batches.map(Into::into),
        baseline: cli.baseline.as_ref().map(|p| p.display().to_string()),
        failures,
    };
    report::write(dir, &doc)?;
    if let Some(path) = &cli.write_baseline {
        let b = ratios::to_baseline(
            &doc.ratios,
            format!(
                "coupon-loadtest bench --seconds {} --rounds {} on {} ({})",
                cli.seconds, cli.rounds, doc.machine, doc.started_at
            ),
        );
        std::fs::write(path, serde_json::to_string_pretty(&b)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    print!("{}", report::markdown_table(&doc));
    if let Some(w) = doc.postgres.as_ref().and_then(|p| p.warning()) {
        eprintln!("coupon-loadtest bench: warning: {w}");
    }
    phase(
        "bench",
        format!("report: {}", dir.join("index.html").display()),
    );
    for f in &doc.failures {
        eprintln!("coupon-loadtest bench: ratio below its baseline bound: {f}");
    }
    Ok(exit)
}

/// An anchor row measured by a tool: its operations are its rate over the row's seconds.
fn with_tool_cpu(mut row: Row, before: Option<cpu::Snapshot>, seconds: u64) -> Row {
    let ops = row.per_sec.map_or(0.0, |r| r * seconds as f64).round() as usize;
    row.cpu = cpu_per_op(before, ops);
    row
}

fn cpu_per_op(before: Option<cpu::Snapshot>, calls: usize) -> Option<cpu::PerOp> {
    before?.per_op(&cpu::snapshot()?, calls)
}

fn print_row(row: Option<&Row>) {
    if let Some(r) = row {
        let f = |v: Option<f64>| v.map_or("—".to_owned(), |v| format!("{v:.1}"));
        phase(
            "bench",
            format!(
                "{:<24} {:>10}/s  p50 {} ms  p99 {} ms  {}{}",
                r.key,
                f(r.per_sec),
                f(r.p50_ms),
                f(r.p99_ms),
                r.note,
                r.cpu.map_or(String::new(), |c| format!(
                    "; CPU µs/op: server {:.0}, client {:.0}, postgres {:.0}, redis {:.0}; \
                     machine busy {}, steal {}",
                    c.server_us,
                    c.client_us,
                    c.postgres_us,
                    c.redis_us,
                    report::percent(c.machine_busy_pct),
                    report::percent(c.steal_pct)
                ))
            ),
        );
    }
}

async fn endpoints_for_database(e: &Endpoints, pool: &sqlx::PgPool) -> anyhow::Result<Endpoints> {
    let db: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(pool)
        .await?;
    Ok(Endpoints {
        redis_host: e.redis_host.clone(),
        redis_port: e.redis_port,
        pg_host: e.pg_host.clone(),
        pg_port: e.pg_port,
        pg_user: e.pg_user.clone(),
        pg_database: db,
    })
}

fn report_dir(root: &std::path::Path, at: OffsetDateTime) -> anyhow::Result<PathBuf> {
    let stamp = at
        .format(format_description!(
            "[year][month][day]T[hour][minute][second]Z"
        ))
        .unwrap_or_default();
    let dir = root.join(format!("{stamp}-bench"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
