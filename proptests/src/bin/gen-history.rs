//! `gen-history`: writes a compare-and-set register history of any size as Knossos EDN (the
//! `cas-register` format of `check-history`): a real register stepped by simulated
//! concurrent clients, values 0–4, a share of operations crashed (`:info`), optionally with a
//! known violation planted two thirds of the way in. Without one the history is
//! linearizable by construction. The same seed makes the same history.
//!
//! Usage: `gen-history --ops 5000 --processes 50 [--plant impossible-read|stale-read]
//! [--crash-rate 0.01] [--seed 1] > history.edn`

use std::io::Write as _;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use coupon_proptests::histories::generate::{Planted, RegisterHistory};

/// Write a cas-register history (Knossos EDN) to standard output.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Client operations to invoke.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    ops: u64,
    /// Clients running at once.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    processes: u64,
    /// Share of operations whose client crashes (:info), 0–1.
    #[arg(long, default_value_t = 0.01, value_parser = crash_rate)]
    crash_rate: f64,
    /// A violation to plant: a read of a value never written, or of one certainly
    /// overwritten.
    #[arg(long, value_enum)]
    plant: Option<Plant>,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Plant {
    ImpossibleRead,
    StaleRead,
}

fn crash_rate(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("not a number: {s}"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is not between 0 and 1"))
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let history = RegisterHistory {
        ops: usize::try_from(args.ops).context("--ops")?,
        processes: usize::try_from(args.processes).context("--processes")?,
        crash_rate: args.crash_rate,
        planted: args.plant.map(|p| match p {
            Plant::ImpossibleRead => Planted::ImpossibleRead,
            Plant::StaleRead => Planted::StaleRead,
        }),
        seed: args.seed,
    };
    std::io::stdout()
        .lock()
        .write_all(history.edn().as_bytes())
        .context("writing the history")
}
