//! The anchors, run from the machine's own tools: `redis-benchmark` EVALSHA of the engine's
//! claim script (the ceiling of any Redis-fronted claim path) and `pgbench` single-row
//! INSERT and hot-row transactions (the naive Postgres designs the Redis front must beat).
//! A tool that is missing gives a "not measured" row, never a figure.

use std::{path::Path, process::Command};

use anyhow::{Context, bail};
use coupon_engine::store::{keys::TemplateKeys, redis::CLAIM_SCRIPT};
use redis::AsyncCommands;
use uuid::Uuid;

use super::measure::{Row, Samples};

/// Where the backends are, split for the command-line tools.
#[derive(Debug, Clone)]
pub(crate) struct Endpoints {
    pub redis_host: String,
    pub redis_port: u16,
    pub pg_host: String,
    pub pg_port: u16,
    pub pg_user: String,
    pub pg_database: String,
}

impl Endpoints {
    pub(crate) fn parse(redis_url: &str, database_url: &str) -> anyhow::Result<Self> {
        let r = reqwest::Url::parse(redis_url).with_context(|| format!("redis url {redis_url}"))?;
        let p = reqwest::Url::parse(database_url).context("database url")?;
        Ok(Self {
            redis_host: r.host_str().unwrap_or("127.0.0.1").to_owned(),
            redis_port: r.port().unwrap_or(6379),
            pg_host: p.host_str().unwrap_or("127.0.0.1").to_owned(),
            pg_port: p.port().unwrap_or(5432),
            pg_user: match p.username() {
                "" => "postgres".to_owned(),
                u => u.to_owned(),
            },
            pg_database: p.path().trim_start_matches('/').to_owned(),
        })
    }
}

fn found(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `redis-benchmark` of `claim.lua` on a sold-out key (`granting` false) or on a key with
/// stock to spare and a fresh request id per call (`granting` true).
pub(crate) async fn redis_claim_script(
    e: &Endpoints,
    conn: &mut redis::aio::ConnectionManager,
    granting: bool,
    clients: usize,
    seconds: u64,
) -> anyhow::Result<Row> {
    let (key, what) = if granting {
        (
            "redis_evalsha_granting",
            "redis-benchmark EVALSHA claim.lua, granting key",
        )
    } else {
        (
            "redis_evalsha_sold_out",
            "redis-benchmark EVALSHA claim.lua, sold-out key",
        )
    };
    if !found("redis-benchmark") {
        return Ok(Row::not_measured(key, what, "redis-benchmark not found"));
    }
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(CLAIM_SCRIPT)
        .query_async(conn)
        .await?;
    let ns = format!("bench{}", &Uuid::new_v4().simple().to_string()[..8]);
    let k = TemplateKeys::new(&ns, Uuid::new_v4().into());
    let stock: i64 = if granting { 1_000_000_000_000 } else { 0 };
    let () = conn.set(&k.stock, stock).await?;
    let () = conn.set(&k.epoch, 1).await?;
    // The empty field marks `claimed` as built, as a rebuild leaves it; without it every
    // call would measure the script's `not_initialised` exit instead of the claim.
    let () = conn.hset(&k.claimed, "", 0).await?;
    let rid = if granting { "__rand_int__" } else { "sold-out" };
    let expected = if granting { "ok" } else { "stock_empty" };
    let answer = script_answer(conn, &sha, &k, granting).await?;
    anyhow::ensure!(
        answer == expected,
        "the claim script answered {answer:?} where {key} must measure {expected:?}"
    );
    let args = |n: u64| -> Vec<String> {
        let mut a: Vec<String> = vec![
            "-h".into(),
            e.redis_host.clone(),
            "-p".into(),
            e.redis_port.to_string(),
            "-c".into(),
            clients.to_string(),
            "-n".into(),
            n.to_string(),
            "-r".into(),
            "1000000000".into(),
            "--csv".into(),
            "EVALSHA".into(),
            sha.clone(),
            "5".into(),
        ];
        a.extend([
            k.stock.clone(),
            k.claimed.clone(),
            k.outcomes.clone(),
            k.pending.clone(),
            k.epoch.clone(),
        ]);
        a.extend([
            rid.to_owned(),
            format!("u{rid}"),
            "1000000000".into(),
            Uuid::nil().to_string(),
            "1767225600000".into(),
            "3600".into(),
        ]);
        a
    };
    // A short calibration run sizes the real one to about `seconds`.
    let (calibration, _, _) = run_redis_benchmark(&args(5_000))?;
    let n = ((calibration * seconds as f64) as u64).max(5_000);
    let (rps, p50, p99) = run_redis_benchmark(&args(n))?;
    let pattern = format!("{ns}:*");
    coupon_engine::store::redis_conn::delete_matching_on(conn, &pattern).await?;
    Ok(Row {
        key: key.into(),
        what: what.into(),
        per_sec: Some(rps),
        p50_ms: Some(p50),
        p99_ms: Some(p99),
        note: format!("{clients} clients, {n} calls, no pipelining"),
        cpu: None,
        group_commit: None,
    })
}

/// The first element of the claim script's answer to one call on the anchor's keys (a
/// request id of its own), so a row measures the path it names.
async fn script_answer(
    conn: &mut redis::aio::ConnectionManager,
    sha: &str,
    k: &TemplateKeys,
    granting: bool,
) -> anyhow::Result<String> {
    let rid = if granting { "anchor-probe" } else { "sold-out" };
    let reply: Vec<redis::Value> = redis::cmd("EVALSHA")
        .arg(sha)
        .arg(5)
        .arg(&k.stock)
        .arg(&k.claimed)
        .arg(&k.outcomes)
        .arg(&k.pending)
        .arg(&k.epoch)
        .arg(rid)
        .arg(format!("u{rid}"))
        .arg(1_000_000_000)
        .arg(Uuid::nil().to_string())
        .arg(1_767_225_600_000_i64)
        .arg(3600)
        .query_async(conn)
        .await
        .context("one call of the claim script")?;
    match reply.first() {
        Some(v) => Ok(redis::from_redis_value_ref::<String>(v)?),
        None => bail!("the claim script answered nothing"),
    }
}

/// Runs redis-benchmark with `--csv`; returns (requests/s, p50 ms, p99 ms).
fn run_redis_benchmark(args: &[String]) -> anyhow::Result<(f64, f64, f64)> {
    let out = Command::new("redis-benchmark")
        .args(args)
        .output()
        .context("running redis-benchmark")?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with("\"EVALSHA"))
        .with_context(|| {
            format!(
                "redis-benchmark printed no result: {} {}",
                text.trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })?;
    let cols: Vec<f64> = line
        .split("\",\"")
        .skip(1)
        .map(|c| c.trim_matches('"').parse().unwrap_or(f64::NAN))
        .collect();
    match cols[..] {
        [rps, _avg, _min, p50, _p95, p99, ..] if rps.is_finite() => Ok((rps, p50, p99)),
        _ => bail!("unexpected redis-benchmark line: {line}"),
    }
}

/// The pgbench transaction shapes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum PgShape {
    /// One INSERT into a table shaped like `user_coupon` (autocommit).
    Insert,
    /// The naive design: `UPDATE … stock = stock - 1 WHERE stock > 0` + INSERT in one tx.
    HotRow,
}

const INSERT: &str = "INSERT INTO bench_coupon (id, template_id, user_id, claim_request_id, \
    claimed_at, valid_from, valid_until) VALUES (gen_random_uuid(), \
    '00000000-0000-0000-0000-000000000001', 'u' || :uid, gen_random_uuid()::text, now(), now(), \
    now() + interval '7 days');";

/// Creates the pgbench tables in `pool`'s database (a fresh one per run).
pub(crate) async fn prepare_pg(pool: &sqlx::PgPool) -> anyhow::Result<()> {
    for sql in [
        "CREATE TABLE bench_coupon (LIKE user_coupon INCLUDING ALL)",
        "CREATE TABLE bench_stock (id int PRIMARY KEY, stock bigint NOT NULL)",
        "INSERT INTO bench_stock VALUES (1, 1000000000000)",
    ] {
        sqlx::query(sql).execute(pool).await.context(sql)?;
    }
    Ok(())
}

/// Runs pgbench for `seconds` with `clients`, one log line per transaction for exact
/// percentiles.
pub(crate) fn pgbench(
    e: &Endpoints,
    shape: PgShape,
    clients: usize,
    seconds: u64,
    flush: &str,
    scratch: &Path,
) -> anyhow::Result<Row> {
    let (key, what, body) = match shape {
        PgShape::Insert => (
            "pgbench_insert",
            "pgbench single-row INSERT (user_coupon-shaped table)",
            format!("\\set uid random(1, 1000000000)\n{INSERT}\n"),
        ),
        PgShape::HotRow => (
            "pgbench_hot_row",
            "pgbench hot-row UPDATE … stock-1 WHERE stock>0 + INSERT, one tx",
            format!(
                "\\set uid random(1, 1000000000)\nBEGIN;\n\
                 UPDATE bench_stock SET stock = stock - 1 WHERE id = 1 AND stock > 0;\n\
                 {INSERT}\nCOMMIT;\n"
            ),
        ),
    };
    if !found("pgbench") {
        return Ok(Row::not_measured(key, what, "pgbench not found"));
    }
    // pgbench runs inside this directory, so the paths it is given must not be relative to
    // ours: with the default `--report-dir reports` it could not open its own script.
    let dir = std::path::absolute(scratch.join(key))
        .context("resolving the pgbench scratch directory")?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let script = dir.join("script.sql");
    std::fs::write(&script, body).context("writing the pgbench script")?;
    // The engine's Postgres client is built without TLS (sqlx `tls-none`); libpq's default
    // (`prefer`) would put pgbench on TLS wherever the server offers it (Debian's does),
    // which cost it ~20% of its throughput here: the anchor would be slowed by a cost the
    // engine never pays. Both talk plain TCP on loopback.
    let out = Command::new("pgbench")
        .env("PGSSLMODE", "disable")
        .args(["-n", "-M", "prepared", "-l", "--log-prefix"])
        .arg(dir.join("log"))
        .args(["-c", &clients.to_string(), "-j", "2"])
        .args(["-T", &seconds.to_string(), "-f"])
        .arg(&script)
        .args(["-h", &e.pg_host, "-p", &e.pg_port.to_string()])
        .args(["-U", &e.pg_user, &e.pg_database])
        .current_dir(&dir)
        .output()
        .context("running pgbench")?;
    if !out.status.success() {
        bail!(
            "pgbench failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let mut samples = Samples::default();
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if !path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("log"))
        {
            continue;
        }
        // client_id transaction_no time(µs) script_no epoch epoch_us
        for line in std::fs::read_to_string(&path)?.lines() {
            if let Some(us) = line.split(' ').nth(2).and_then(|t| t.parse::<u64>().ok()) {
                samples.push(std::time::Duration::from_micros(us));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(samples.into_row(
        key,
        what,
        seconds as f64,
        format!("{clients} clients, prepared statements, no TLS (as the engine), {flush}"),
    ))
}
