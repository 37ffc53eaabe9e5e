//! `coupon-server-mutants`: `coupon-server` serving a deliberately broken engine
//! (docs/ARCHITECTURE.md, "Mutants"), so a harness pointed at it with `--target` can be shown
//! to fail. Built only with the engine's `mutants` feature; never deploy it.

mod server;

use clap::Parser;
use coupon_engine::Variant;

/// Coupon engine HTTP server with a defect mutant, for testing test harnesses.
#[derive(Debug, Parser)]
#[command(name = "coupon-server-mutants", version, about)]
struct Cli {
    #[command(flatten)]
    server: server::ServerArgs,
    /// The engine to serve: correct, or a defect mutant (d1 … d10,
    /// with d5b and d6b; see docs/ARCHITECTURE.md, "Mutants").
    #[arg(long, value_name = "NAME", env = "COUPON_MUTANT")]
    mutant: Variant,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    server::init_tracing();
    if cli.mutant != Variant::Correct {
        tracing::warn!(
            mutant = %cli.mutant.name(),
            "SERVING A DELIBERATELY BROKEN ENGINE: for testing harnesses only"
        );
    }
    server::runtime(&cli.server)?.block_on(server::run(cli.server, cli.mutant))
}
