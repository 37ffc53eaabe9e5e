//! `checker-benchmark`: times the linearizability checker on every history of the shared
//! data set (and on the kv c10 logs checked unpartitioned, as Porcupine's slow tests do),
//! checks each verdict against the manifest, times large generated register histories (one
//! child process each, for its peak memory), and writes `reports/checker-benchmark.md`.
//!
//! Usage: `cargo run --release -p coupon-proptests --bin checker-benchmark [-- --data DIR]`
//! (default: `COUPON_HISTORIES_DIR`, else `../shared/data` beside the workspace). Exits 1
//! if a verdict is wrong or undecided, or a goal is missed.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context;
use clap::Parser;
use coupon_proptests::histories::manifest;

#[path = "checker-benchmark/generated.rs"]
mod generated;
#[path = "checker-benchmark/table.rs"]
mod table;
#[path = "checker-benchmark/timing.rs"]
mod timing;

/// Time the checker on the published histories and write the report.
#[derive(Debug, Parser)]
struct Args {
    /// The data set (holding porcupine/ and knossos/).
    #[arg(long, env = "COUPON_HISTORIES_DIR")]
    data: Option<PathBuf>,
    /// Runs per history; the fastest counts (the machine may be busy with other work).
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// Give up on a history (verdict undecided) after this many seconds.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Where to write the report.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Skip the large generated histories (about a minute).
    #[arg(long)]
    no_generated: bool,
    /// In a child: make and check one generated history (OPS/PROCESSES/PLANT).
    #[arg(long, hide = true)]
    generated: Option<String>,
}

fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    let timeout = Duration::from_secs(args.timeout);
    if let Some(shape) = &args.generated {
        generated::child(shape, timeout)?;
        return Ok(ExitCode::SUCCESS);
    }
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let data = args
        .data
        .unwrap_or_else(|| workspace.join("../shared/data"));
    let entries = manifest::load_all(&data).context("loading the manifests")?;
    let mut rows = Vec::new();
    for entry in &entries {
        let row = timing::time_entry(&data, entry, true, args.runs, timeout)
            .with_context(|| format!("checking {}", entry.file))?;
        eprintln!("{}", row.summary());
        rows.push(row);
    }
    let mut unpartitioned = Vec::new();
    for entry in entries
        .iter()
        .filter(|e| table::UNPARTITIONED.contains(&e.file.as_str()))
    {
        let row = timing::time_entry(&data, entry, false, 1, timeout)
            .with_context(|| format!("checking {} unpartitioned", entry.file))?;
        eprintln!("{} (unpartitioned)", row.summary());
        unpartitioned.push(row);
    }
    let large = if args.no_generated {
        Vec::new()
    } else {
        generated::time_all(timeout)?
    };
    let report = table::Report::new(rows, unpartitioned, large, args.runs);
    let out = args
        .out
        .unwrap_or_else(|| workspace.join("reports/checker-benchmark.md"));
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).context("creating the report directory")?;
    }
    std::fs::write(&out, report.markdown()).context("writing the report")?;
    eprintln!("wrote {}", out.display());
    let failures = report.failures();
    for failure in &failures {
        eprintln!("FAILED: {failure}");
    }
    Ok(ExitCode::from(u8::from(!failures.is_empty())))
}
