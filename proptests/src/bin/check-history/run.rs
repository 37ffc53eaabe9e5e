//! Checking one file and reporting on it, as text or JSON.

use std::{path::Path, time::Instant};

use anyhow::Context;
use coupon_proptests::{
    histories::{ModelName, Options, check_text},
    linearizability::{Limit, Verdict},
};
use serde::Serialize;

/// One file's result.
pub struct Report {
    pub file: String,
    pub verdict: Verdict,
    pub millis: f64,
    pub ops: usize,
}

/// Reads and checks `file`; the time counts both.
pub fn check_file(model: ModelName, file: &Path, options: Options) -> anyhow::Result<Report> {
    let started = Instant::now();
    let text = std::fs::read_to_string(file).context("reading the file")?;
    let checked =
        check_text(model, &text, options).with_context(|| format!("not a {model} history"))?;
    Ok(Report {
        file: file.display().to_string(),
        verdict: checked.verdict,
        millis: started.elapsed().as_secs_f64() * 1e3,
        ops: checked.ops,
    })
}

impl Report {
    fn verdict_name(&self) -> &'static str {
        match self.verdict {
            Verdict::Linearizable => "linearizable",
            Verdict::NotLinearizable { .. } => "not_linearizable",
            Verdict::Undecided { .. } => "undecided",
        }
    }

    /// `{"file","verdict","millis","ops","validity"}` on one line, in that order, then the
    /// violation's `explanation`, or why it is undecided (`reason`) and which budget ended
    /// the search (`limit`: `time`, `memory`, `steps`, `size`). `validity` is the verdict as
    /// every report of the workspace says it (`valid`, `invalid`, `unknown`).
    pub fn json(&self) -> serde_json::Result<String> {
        #[derive(Serialize)]
        struct Line<'a> {
            file: &'a str,
            verdict: &'a str,
            millis: f64,
            ops: usize,
            validity: coupon_proptests::validity::Validity,
            #[serde(skip_serializing_if = "Option::is_none")]
            explanation: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            reason: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            limit: Option<Limit>,
        }
        let (explanation, reason, limit) = match &self.verdict {
            Verdict::Linearizable => (None, None, None),
            Verdict::NotLinearizable { explanation, .. } => {
                (Some(explanation.as_str()), None, None)
            }
            Verdict::Undecided { reason, limit } => (None, Some(reason.as_str()), *limit),
        };
        serde_json::to_string(&Line {
            file: &self.file,
            verdict: self.verdict_name(),
            millis: (self.millis * 1e3).round() / 1e3,
            ops: self.ops,
            validity: self.verdict.validity(),
            explanation,
            reason,
            limit,
        })
    }

    /// A headline, then for a violation why, indented.
    pub fn text(&self) -> String {
        let mut out = format!(
            "{}: {} ({} ops, {:.1} ms)\n",
            self.file,
            self.verdict_name().replace('_', " "),
            self.ops,
            self.millis
        );
        let detail = match &self.verdict {
            Verdict::Linearizable => return out,
            Verdict::NotLinearizable { explanation, .. } => explanation,
            Verdict::Undecided { reason, .. } => reason,
        };
        for line in detail.lines() {
            out.push_str("    ");
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}

/// `{"file","error"}` for a file that could not be checked.
pub fn error_json(file: &Path, error: &anyhow::Error) -> serde_json::Result<String> {
    #[derive(Serialize)]
    struct Line {
        file: String,
        error: String,
    }
    serde_json::to_string(&Line {
        file: file.display().to_string(),
        error: format!("{error:#}"),
    })
}
