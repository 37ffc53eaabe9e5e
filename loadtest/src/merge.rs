//! `coupon-loadtest audit RUN_DIR…`: one audit and one report over the acknowledgement
//! records of several runs against the same deployment — generators on several machines
//! (Goose has no distributed mode any more), each run with `--no-audit`. The records are put
//! on one timeline by their wall-clock start, every template and every shopper of every run
//! is audited through the admin API, and the report sums throughput while keeping each
//! run's own latency figures (each measured by its own machine's clock).

use std::{collections::BTreeMap, path::PathBuf};

use anyhow::{Context, bail};
use clap::Parser;
use serde_json::json;
use time::OffsetDateTime;

use crate::{
    acks::{Recorded, Reply},
    api::Api,
    audit, counterexample,
    progress::phase,
    record::{self, RunRecord},
    report::{self, Report, RunFigures},
    run_outcome::RunOutcome,
    runner, setup, stats,
    tally::Tally,
    templates::TemplateInfo,
};

/// Audits the merged records of several runs against one deployment.
#[derive(Debug, Parser)]
pub(crate) struct AuditCli {
    /// Run directories (each with record.json and acks.jsonl), e.g. one per generator.
    #[arg(value_name = "RUN_DIR", required = true)]
    pub dirs: Vec<PathBuf>,
    /// The server to audit through [default: the first server the first run drove].
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,
    /// Admin bearer token of that server.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "COUPON_ADMIN_TOKEN",
        hide_env_values = true,
        required = true
    )]
    pub admin_token: String,
    /// Directory the merged report's directory is created in.
    #[arg(long, value_name = "DIR", default_value = "reports")]
    pub report_dir: PathBuf,
}

/// One run's record, read from disk (its answers are streamed from `acks.jsonl`).
struct Run {
    dir: PathBuf,
    record: RunRecord,
}

/// How one run's answers move onto the merged timeline: by its start's distance from the
/// earliest run's, with its Goose users after the earlier runs' and its servers renumbered in
/// the merged list.
struct Shift {
    offset_us: u64,
    users_before: usize,
    servers: Vec<usize>,
}

impl Shift {
    fn apply(&self, e: &mut Reply) {
        e.start_us += self.offset_us;
        e.goose_user += self.users_before;
        e.server = self.servers.get(e.server).copied().unwrap_or(0);
    }
}

/// Each run's shift, and the merged list of servers.
fn shifts(runs: &[Run]) -> (Vec<Shift>, Vec<String>) {
    let zero = runs
        .iter()
        .map(|r| r.record.epoch_unix_us)
        .min()
        .unwrap_or(0);
    let mut servers: Vec<String> = Vec::new();
    let mut users_before = 0;
    let mut out = Vec::new();
    for run in runs {
        let index: Vec<usize> = run
            .record
            .servers
            .iter()
            .map(|url| match servers.iter().position(|s| s == url) {
                Some(i) => i,
                None => {
                    servers.push(url.clone());
                    servers.len() - 1
                }
            })
            .collect();
        out.push(Shift {
            offset_us: run.record.epoch_unix_us - zero,
            users_before,
            servers: index,
        });
        users_before += run.record.users;
    }
    (out, servers)
}

/// Streams every run's answers: each run's own tally (its own clock), and the merged record
/// on one timeline (kept answers in completion order).
fn read_merged(runs: &[Run], shifts: &[Shift]) -> anyhow::Result<(Vec<Tally>, Recorded)> {
    let mut own = Vec::new();
    let mut merged = Recorded::default();
    for (run, shift) in runs.iter().zip(shifts) {
        let mut tally = Tally::default();
        let n = record::for_each_event(&run.dir, &run.record, |mut e| {
            tally.add(&e);
            shift.apply(&mut e);
            merged.add(e);
        })?;
        phase(
            "setup",
            format!(
                "{}: {n} answers from {} shoppers against {}",
                run.dir.display(),
                run.record.customers,
                run.record.servers.join(", ")
            ),
        );
        own.push(tally);
    }
    merged.kept.sort_by_key(Reply::end_us);
    Ok((own, merged))
}

/// Every run's templates, each once.
fn merge_templates(runs: &[Run]) -> Vec<TemplateInfo> {
    let mut by_id: BTreeMap<uuid::Uuid, TemplateInfo> = BTreeMap::new();
    for t in runs.iter().flat_map(|r| r.record.templates.iter()) {
        by_id.entry(t.id).or_insert_with(|| t.clone());
    }
    by_id.into_values().collect()
}

/// Runs the merged audit; the exit code (0 pass, 1 invariant violated).
pub(crate) async fn run(cli: AuditCli) -> anyhow::Result<u8> {
    let started_at = OffsetDateTime::now_utc();
    let mut runs = Vec::new();
    for dir in &cli.dirs {
        runs.push(Run {
            dir: dir.clone(),
            record: record::read(dir)?,
        });
    }
    let mut tags: Vec<&str> = runs.iter().map(|r| r.record.run_tag.as_str()).collect();
    tags.sort_unstable();
    if tags.windows(2).any(|w| w[0] == w[1]) {
        bail!("two of the directories are the same run (same run tag); give each run once");
    }
    let target = match &cli.target {
        Some(t) => t.trim_end_matches('/').to_owned(),
        None => runs
            .first()
            .and_then(|r| r.record.servers.first())
            .cloned()
            .context("the first run names no server; give --target")?,
    };
    let api = Api::new(&target, &cli.admin_token)?;
    api.wait_healthy(std::time::Duration::from_secs(10))
        .await
        .with_context(|| format!("the server {target} is not healthy"))?;
    let templates = merge_templates(&runs);
    let mut customers = Vec::new();
    for run in &runs {
        phase(
            "setup",
            format!(
                "minting the tokens of {}'s {} shoppers",
                run.record.run_id, run.record.customers
            ),
        );
        customers.extend(setup::mint(&api, &run.record.run_tag, run.record.customers, 1).await?);
    }
    let (shifts, servers) = shifts(&runs);
    let (own, merged) = read_merged(&runs, &shifts)?;
    let tally = &merged.tally;
    // After the fact, the servers' stale-admission counts (since they started) no longer
    // tell these runs from other traffic: a merged audit leaves that check out.
    let (audits, invariants) =
        audit::audit_all(&api, &templates, &customers, &merged, None).await?;

    let figures: Vec<RunFigures> = runs
        .iter()
        .zip(&own)
        .map(|(r, t)| RunFigures {
            run_id: r.record.run_id.clone(),
            servers: r.record.servers.clone(),
            throughput: stats::throughput(t),
            endpoints: stats::endpoints(t),
        })
        .collect();
    let verdict = RunOutcome::decide(invariants.iter().all(|i| i.passed), true, true);
    let mut scenarios: Vec<&str> = runs.iter().map(|r| r.record.scenario.as_str()).collect();
    scenarios.dedup();
    let dir = crate::report_dir::create(&cli.report_dir, started_at, "audit")?;
    let heading = report::Heading {
        dir: &dir,
        scenario: scenarios.join("+"),
        started_at,
        target: format!(
            "merged audit of {} run(s) against {} (audited through {target})",
            runs.len(),
            servers.join(", ")
        ),
        config: json!({
            "merged_runs": runs.iter().map(|r| r.dir.display().to_string()).collect::<Vec<_>>(),
            "audited_through": target,
        }),
    };
    let mut report = Report::assemble(heading, verdict, invariants, tally, templates, &servers);
    // The generators ran side by side: their rates add up (each over its own span).
    let t = &mut report.throughput;
    t.requests_per_sec = figures.iter().map(|f| f.throughput.requests_per_sec).sum();
    t.claims_per_sec = figures.iter().map(|f| f.throughput.claims_per_sec).sum();
    t.granted_per_sec = figures.iter().map(|f| f.throughput.granted_per_sec).sum();
    report.audits = audits;
    report.runs = figures;
    report.counterexample =
        counterexample::write(&dir, &counterexample::FailedRun::of(&report, &merged.kept))?;
    phase("report", format!("writing {}", dir.display()));
    report::write_all(&dir, &report)?;
    runner::summarise(&report, &dir);
    Ok(verdict.exit_code())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acks::{RequestKind, tests::ev};

    fn run(epoch: u64, servers: &[&str], users: usize) -> Run {
        Run {
            dir: PathBuf::from("x"),
            record: RunRecord {
                record_version: record::RECORD_VERSION,
                run_id: "r".into(),
                scenario: "flash-sale".into(),
                servers: servers.iter().map(|s| (*s).to_owned()).collect(),
                run_tag: "t".into(),
                customers: 1,
                templates: Vec::new(),
                users,
                epoch_unix_us: epoch,
                audited: false,
            },
        }
    }

    #[test]
    fn runs_share_one_timeline_and_keep_users_and_servers_apart() {
        let runs = [
            run(1_000, &["http://a"], 5),
            run(3_000, &["http://b", "http://a"], 5),
        ];
        let (shifts, servers) = shifts(&runs);
        assert_eq!(servers, ["http://a", "http://b"]);
        let mut late = ev(RequestKind::Claim, "b", Some(201), None);
        late.server = 1;
        shifts[1].apply(&mut late);
        assert_eq!(late.start_us, 2_000, "shifted by the later start");
        assert_eq!(late.goose_user, 5, "users of the second run come after");
        assert_eq!(late.server, 0, "its server 1 is http://a, merged index 0");
        let mut early = ev(RequestKind::Claim, "a", Some(201), None);
        shifts[0].apply(&mut early);
        assert_eq!((early.start_us, early.goose_user, early.server), (0, 0, 0));
    }
}
