//! Large generated register histories (issue 52's shapes), each checked in a child process
//! of its own so that its peak memory is its own: the child is this binary again, with the
//! hidden `--generated` argument, and reports one JSON line.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use anyhow::Context;
use coupon_proptests::{
    histories::{
        ModelName, Options, check_text,
        generate::{Planted, RegisterHistory},
    },
    linearizability::{Budget, Verdict},
};
use serde::{Deserialize, Serialize};

/// The seed every shape is made with (a fixed seed: the report can be made again).
const SEED: u64 = 3;

/// One history's shape: operations, processes and the violation planted in it, if any.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub ops: usize,
    pub processes: usize,
    pub planted: Option<Planted>,
}

/// The shapes timed, smallest first; the goals name the 5,000- and 20,000-operation ones.
pub const SHAPES: [Shape; 9] = {
    const fn shape(ops: usize, processes: usize, planted: Option<Planted>) -> Shape {
        Shape {
            ops,
            processes,
            planted,
        }
    }
    [
        shape(1_000, 10, None),
        shape(1_000, 10, Some(Planted::ImpossibleRead)),
        shape(1_000, 10, Some(Planted::StaleRead)),
        shape(5_000, 50, None),
        shape(5_000, 50, Some(Planted::ImpossibleRead)),
        shape(5_000, 50, Some(Planted::StaleRead)),
        shape(20_000, 50, None),
        shape(20_000, 50, Some(Planted::ImpossibleRead)),
        shape(20_000, 50, Some(Planted::StaleRead)),
    ]
};

impl Shape {
    fn plant_name(&self) -> &'static str {
        match self.planted {
            None => "none",
            Some(Planted::ImpossibleRead) => "impossible-read",
            Some(Planted::StaleRead) => "stale-read",
        }
    }

    fn parse_plant(name: &str) -> anyhow::Result<Option<Planted>> {
        Ok(match name {
            "none" => None,
            "impossible-read" => Some(Planted::ImpossibleRead),
            "stale-read" => Some(Planted::StaleRead),
            other => anyhow::bail!("unknown plant {other}"),
        })
    }

    /// The hidden argument that makes a child check this shape.
    pub fn argument(&self) -> String {
        format!("{}/{}/{}", self.ops, self.processes, self.plant_name())
    }

    pub fn parse(argument: &str) -> anyhow::Result<Self> {
        let mut parts = argument.split('/');
        let mut next = || parts.next().context("expected OPS/PROCESSES/PLANT");
        Ok(Self {
            ops: next()?.parse().context("OPS")?,
            processes: next()?.parse().context("PROCESSES")?,
            planted: Self::parse_plant(next()?)?,
        })
    }

    /// `5,000 ops, 50 processes, stale read`.
    pub fn label(&self) -> String {
        let thousands = |n: usize| {
            if n >= 1_000 {
                format!("{},{:03}", n / 1_000, n % 1_000)
            } else {
                n.to_string()
            }
        };
        let mut label = format!("{} ops, {} processes", thousands(self.ops), self.processes);
        if self.planted.is_some() {
            label.push_str(", ");
            label.push_str(&self.plant_name().replace('-', " "));
        }
        label
    }
}

/// What a child reports.
#[derive(Debug, Serialize, Deserialize)]
pub struct Figures {
    pub verdict: String,
    /// Check only (the history is made before the clock starts).
    pub millis: f64,
    /// The child's peak resident memory (`VmHWM`), generation included.
    pub peak_mib: f64,
}

/// A shape and what its child reported.
pub struct GeneratedRow {
    pub shape: Shape,
    pub figures: Figures,
}

impl GeneratedRow {
    /// The verdict the shape must get: linearizable by construction unless planted.
    pub fn right(&self) -> bool {
        let expected = if self.shape.planted.is_some() {
            "not linearizable"
        } else {
            "linearizable"
        };
        self.figures.verdict == expected
    }

    pub fn summary(&self) -> String {
        format!(
            "{}: {} ({:.2} s, {:.0} MiB){}",
            self.shape.label(),
            self.figures.verdict,
            self.figures.millis / 1e3,
            self.figures.peak_mib,
            if self.right() { "" } else { "  WRONG" }
        )
    }
}

/// In the child: makes the history, checks it and prints [`Figures`] as JSON.
pub fn child(argument: &str, timeout: Duration) -> anyhow::Result<()> {
    let shape = Shape::parse(argument)?;
    let text = RegisterHistory {
        ops: shape.ops,
        processes: shape.processes,
        crash_rate: 0.01,
        planted: shape.planted,
        seed: SEED,
    }
    .edn();
    let options = Options {
        budget: Budget::time_only(timeout),
        partitioned: true,
    };
    let started = Instant::now();
    let checked = check_text(ModelName::CasRegister, &text, options)?;
    let millis = started.elapsed().as_secs_f64() * 1e3;
    let verdict = match checked.verdict {
        Verdict::Linearizable => "linearizable",
        Verdict::NotLinearizable { .. } => "not linearizable",
        Verdict::Undecided { .. } => "undecided",
    };
    let figures = Figures {
        verdict: verdict.into(),
        millis,
        peak_mib: peak_kib().unwrap_or(0) as f64 / 1024.0,
    };
    println!("{}", serde_json::to_string(&figures)?);
    Ok(())
}

/// In the parent: each shape in a child of its own.
pub fn time_all(timeout: Duration) -> anyhow::Result<Vec<GeneratedRow>> {
    let exe = std::env::current_exe().context("finding this binary")?;
    let mut rows = Vec::new();
    for shape in SHAPES {
        let out = Command::new(&exe)
            .args(["--generated", &shape.argument()])
            .args(["--timeout", &timeout.as_secs().to_string()])
            .output()
            .with_context(|| format!("running the child for {}", shape.label()))?;
        anyhow::ensure!(
            out.status.success(),
            "the child for {} failed: {}",
            shape.label(),
            String::from_utf8_lossy(&out.stderr)
        );
        let figures: Figures =
            serde_json::from_slice(&out.stdout).context("reading the child's figures")?;
        let row = GeneratedRow { shape, figures };
        eprintln!("{}", row.summary());
        rows.push(row);
    }
    Ok(rows)
}

/// This process's peak resident memory in KiB, from `/proc/self/status` (Linux).
fn peak_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The goals: operations, processes, seconds, MiB.
const GOALS: [(usize, usize, f64, f64); 2] = [(5_000, 50, 5.0, 1024.0), (20_000, 50, 30.0, 2048.0)];

/// Each goal's rows and whether every one of them met it.
fn goals(rows: &[GeneratedRow]) -> Vec<(String, bool)> {
    GOALS
        .iter()
        .map(|&(ops, processes, secs, mib)| {
            let of: Vec<&GeneratedRow> = rows
                .iter()
                .filter(|r| r.shape.ops == ops && r.shape.processes == processes)
                .collect();
            let met = !of.is_empty()
                && of.iter().all(|r| {
                    r.right() && r.figures.millis < secs * 1e3 && r.figures.peak_mib < mib
                });
            let label = of.first().map_or_else(String::new, |r| {
                let mut shape = r.shape;
                shape.planted = None;
                shape.label()
            });
            (
                format!("{label}: each decided in < {secs} s and < {mib:.0} MiB"),
                met,
            )
        })
        .collect()
}

/// Wrong verdicts and missed goals.
pub fn failures(rows: &[GeneratedRow]) -> Vec<String> {
    rows.iter()
        .filter(|r| !r.right())
        .map(GeneratedRow::summary)
        .chain(
            goals(rows)
                .into_iter()
                .filter(|(_, met)| !met)
                .map(|(goal, _)| format!("missed: {goal}")),
        )
        .collect()
}

/// The report's section on the generated histories.
pub fn markdown(rows: &[GeneratedRow], md: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        md,
        "## Large generated histories\n\n\
         One compare-and-set register, values 0–4, reads / writes / CAS from concurrent \
         clients, 1% of operations crashed (`:info`), made by the generator behind \
         `gen-history` with seed {SEED} (a real register stepped by simulated clients, so the \
         unplanted ones are linearizable by construction; a planted violation sits two thirds \
         of the way in). Each is made and checked in a child process of its own, once: the \
         time is the check's, the memory the child's peak resident set (`VmHWM`).\n\n\
         | goal | met |\n|---|---|"
    );
    for (goal, met) in goals(rows) {
        let _ = writeln!(md, "| {goal} | {} |", if met { "yes" } else { "**no**" });
    }
    let _ = writeln!(
        md,
        "\n| history | verdict | time | peak memory |\n|---|---|---:|---:|"
    );
    for r in rows {
        let _ = writeln!(
            md,
            "| {} | {} | {:.2} s | {:.0} MiB |",
            r.shape.label(),
            r.figures.verdict,
            r.figures.millis / 1e3,
            r.figures.peak_mib
        );
    }
    md.push('\n');
}
