//! `coupon-server`: the coupon API over HTTP (docs/ARCHITECTURE.md, "HTTP API"). Always the
//! correct engine: the defect mutants are served only by `coupon-server-mutants` (see
//! `server/mod.rs` for why).

mod server;

use clap::Parser;
use coupon_engine::Variant;

/// Coupon engine HTTP server.
#[derive(Debug, Parser)]
#[command(name = "coupon-server", version, about)]
struct Cli {
    #[command(flatten)]
    server: server::ServerArgs,
    /// Not in this binary: refused with a pointer to `coupon-server-mutants`. Parsed (hidden)
    /// so the refusal names the right binary instead of clap's "unexpected argument".
    #[arg(long, value_name = "NAME", hide = true)]
    mutant: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(name) = cli.mutant {
        anyhow::bail!(
            "--mutant {name}: coupon-server serves only the correct engine; defect mutants are \
             served by coupon-server-mutants, built with the engine's `mutants` feature \
             (cargo build -p coupon-engine --features mutants --bin coupon-server-mutants)"
        );
    }
    server::init_tracing();
    server::runtime(&cli.server)?.block_on(server::run(cli.server, Variant::Correct))
}
