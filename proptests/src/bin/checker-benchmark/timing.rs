//! Timing one history.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use anyhow::Context;
use coupon_proptests::{
    histories::{ModelName, Options, check_text, manifest::Entry},
    linearizability::{Budget, Verdict},
};

/// One history's figures.
pub struct Row {
    pub file: String,
    pub model: ModelName,
    pub ops: usize,
    pub expected: bool,
    pub verdict: Verdict,
    /// Parse and check, fastest of the runs.
    pub millis: f64,
}

impl Row {
    /// Right verdict (an undecided one is wrong).
    pub fn right(&self) -> bool {
        match self.verdict {
            Verdict::Linearizable => self.expected,
            Verdict::NotLinearizable { .. } => !self.expected,
            Verdict::Undecided { .. } => false,
        }
    }

    pub fn verdict_name(&self) -> &'static str {
        match self.verdict {
            Verdict::Linearizable => "linearizable",
            Verdict::NotLinearizable { .. } => "not linearizable",
            Verdict::Undecided { .. } => "undecided",
        }
    }

    pub fn summary(&self) -> String {
        format!(
            "{}: {} ({} ops, {:.2} ms){}",
            self.file,
            self.verdict_name(),
            self.ops,
            self.millis,
            if self.right() { "" } else { "  WRONG" }
        )
    }
}

/// Reads and checks `entry` `runs` times; the file is read from disk once, outside the
/// timing, so the figures measure parsing and checking, not the disk.
pub fn time_entry(
    data: &Path,
    entry: &Entry,
    partitioned: bool,
    runs: u32,
    timeout: Duration,
) -> anyhow::Result<Row> {
    let text = std::fs::read_to_string(data.join(&entry.file)).context("reading the file")?;
    let options = Options {
        budget: Budget::time_only(timeout),
        partitioned,
    };
    let mut best: Option<Row> = None;
    for _ in 0..runs.max(1) {
        let started = Instant::now();
        let checked = check_text(entry.model, &text, options)?;
        let millis = started.elapsed().as_secs_f64() * 1e3;
        if best.as_ref().is_none_or(|b| millis < b.millis) {
            best = Some(Row {
                file: entry.file.clone(),
                model: entry.model,
                ops: checked.ops,
                expected: entry.linearizable,
                verdict: checked.verdict,
                millis,
            });
        }
    }
    best.context("no run")
}
