//! `check-history`: checks Jepsen-style histories for linearizability against a model.
//!
//! Usage: `cargo run --release -p coupon-proptests --bin check-history -- --model MODEL
//! FILE…` with MODEL one of etcd, kv, cas-register, multi-register, mutex. Prints, per file,
//! the verdict, the time and the number of operations, and for a violation the longest
//! linearizable prefix and the operation no order explains; `--json` prints one JSON object
//! per file instead (`{"file","verdict","millis","ops"}`, with `"explanation"` for a
//! violation, `"reason"` and `"limit"` — time, memory — for an undecided file;
//! `{"file","error"}` for a file that cannot be read). `--timeout` and `--max-memory` bound
//! each file's search. Exit status: 0
//! every file linearizable, 1 one is not, 2 one is undecided (time limit reached), 3 a file
//! could not be read or parsed, or the command line is wrong; the highest applies.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context;
use clap::Parser;
use coupon_proptests::{
    counterexample_page::{self, Page},
    histories::{ModelName, Options},
    linearizability::{Budget, DEFAULT_MAX_MEMORY, Verdict},
};

#[path = "check-history/run.rs"]
mod run;

/// Check Jepsen-style histories for linearizability.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The model and format: etcd (Jepsen etcd log), kv (Porcupine key-value log),
    /// cas-register, multi-register, mutex (Knossos EDN histories).
    #[arg(long)]
    model: ModelName,
    /// One JSON object per line per file: {"file","verdict","millis","ops"}.
    #[arg(long)]
    json: bool,
    /// Check a kv history as one store instead of key by key (much slower).
    #[arg(long)]
    unpartitioned: bool,
    /// Give up on a file (verdict undecided) after this many seconds (honoured within a
    /// second).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
    /// Give up on a file (verdict undecided, never an out-of-memory kill) once the search
    /// holds this many MiB.
    #[arg(long, value_name = "MIB", default_value_t = DEFAULT_MAX_MEMORY >> 20,
          value_parser = clap::value_parser!(u64).range(16..))]
    max_memory: u64,
    /// Also write an offline page per history that is not linearizable into this directory
    /// (`FILE.html`): the operations near the violation on a timeline per process, the
    /// longest linearizable prefix, the operation that fits nowhere.
    #[arg(long, value_name = "DIR")]
    html: Option<PathBuf>,
    /// The history files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// The exit status for a file that cannot be checked (also used for a wrong command line,
/// whose usual status 2 would read as "undecided").
const CANNOT_CHECK: u8 = 3;

fn main() -> anyhow::Result<ExitCode> {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) => {
            let usage = e.use_stderr();
            e.print().context("printing the usage")?;
            return Ok(ExitCode::from(if usage { CANNOT_CHECK } else { 0 }));
        }
    };
    let options = Options {
        budget: Budget {
            max_memory: args.max_memory << 20,
            ..Budget::time_only(Duration::from_secs(args.timeout))
        },
        partitioned: !args.unpartitioned,
    };
    let mut status = 0;
    for file in &args.files {
        let code = match run::check_file(args.model, file, options) {
            Ok(report) => {
                if let (
                    Some(dir),
                    Verdict::NotLinearizable {
                        explanation,
                        counterexample: Some(c),
                    },
                ) = (&args.html, &report.verdict)
                {
                    let name = file
                        .file_name()
                        .map_or_else(|| "history".into(), |n| n.to_string_lossy().into_owned());
                    let path = dir.join(format!("{name}.html"));
                    let page = Page {
                        title: format!("not linearizable: {}", file.display()),
                        counterexample: c,
                        sections: Vec::new(),
                        explanation,
                    };
                    counterexample_page::write(&path, &page)
                        .with_context(|| format!("writing {}", path.display()))?;
                    eprintln!("{}: counterexample page {}", file.display(), path.display());
                }
                if args.json {
                    println!("{}", report.json().context("encoding the result")?);
                } else {
                    print!("{}", report.text());
                }
                match report.verdict {
                    Verdict::Linearizable => 0,
                    Verdict::NotLinearizable { .. } => 1,
                    Verdict::Undecided { .. } => 2,
                }
            }
            Err(e) => {
                if args.json {
                    println!(
                        "{}",
                        run::error_json(file, &e).context("encoding the error")?
                    );
                }
                eprintln!("{}: {e:#}", file.display());
                CANNOT_CHECK
            }
        };
        status = status.max(code);
    }
    Ok(ExitCode::from(status))
}
