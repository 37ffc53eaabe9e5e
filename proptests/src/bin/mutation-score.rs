//! `mutation-score`: runs the property tests against the correct engine and every defect
//! mutant, prints the mutation table and writes `reports/mutation-score.md` and `.json`.
//!
//! Usage: `cargo build --release --workspace --bins && target/release/mutation-score [CASES]`
//! (default 60 cases per variant; needs COUPON_REDIS_URL / COUPON_DATABASE_URL or another
//! provisioning way). Built with the workspace, as CI builds it: a build of this package
//! alone unifies other features and rebuilds half the dependencies. Exits 1 if a mutant
//! survives or the correct engine fails.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use coupon_proptests::mutation::{
    MutantScore, defect, markdown, score, score_failover, selected_variants,
};

/// Cases of the failover runs: each is a case on a Redis Cluster of its own, so fewer.
const FAILOVER_CASES: u32 = 30;

/// Run the property tests against the correct engine and every defect mutant, print the
/// mutation table and write reports/mutation-score.md and .json. Exits 1 if a mutant
/// survives or the correct engine fails. COUPON_VARIANTS=correct,d5 limits the variants.
#[derive(Debug, Parser)]
struct Args {
    /// Most cases per variant (a mutant's row says at which case it was killed).
    #[arg(default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..))]
    cases: u32,
}

fn main() -> anyhow::Result<()> {
    let cases = Args::parse().cases;
    let mut rows = Vec::new();
    for v in selected_variants() {
        eprintln!("== {} ({} cases at most)", v.name(), cases);
        let row = score(v, cases, 64);
        eprintln!(
            "   {} after {:?} cases, {:?}, {:.1}s",
            if row.killed { "killed" } else { "survived" },
            row.cases_to_kill,
            row.invariants,
            row.seconds
        );
        rows.push(row);
    }
    // The correct engine and D8 again, through a Redis Cluster failover to a lagging replica.
    for v in selected_variants() {
        if !matches!(v.name().as_str(), "correct" | "d8") {
            continue;
        }
        eprintln!(
            "== {} through a lagging promotion ({FAILOVER_CASES} cases at most)",
            v.name()
        );
        let o = score_failover(v, FAILOVER_CASES, 3);
        let row =
            MutantScore::from_outcome(format!("{} (cluster failover)", v.name()), defect(v), o);
        eprintln!("   killed={} {:?}", row.killed, row.invariants);
        rows.push(row);
    }
    let md = markdown(&rows, cases);
    println!("{md}");
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../reports");
    std::fs::create_dir_all(&dir).context("creating reports/")?;
    std::fs::write(dir.join("mutation-score.md"), &md).context("writing mutation-score.md")?;
    let json = serde_json::to_string_pretty(&rows).context("encoding the table")?;
    std::fs::write(dir.join("mutation-score.json"), json).context("writing mutation-score.json")?;
    eprintln!("wrote reports/mutation-score.md and reports/mutation-score.json");
    let bad = rows
        .iter()
        .any(|r| r.error.is_some() || r.is_correct() == r.killed);
    std::process::exit(i32::from(bad));
}
