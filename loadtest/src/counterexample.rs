//! A failed run's counterexample page (`counterexample.html` beside the report): the answers
//! the failed invariants name, and those in flight beside them, on a timeline per Goose user,
//! with the faults on a row of their own — drawn by the verification core's page
//! ([`coupon_verify::page`]), the same page a failing property case and `check-history`
//! write.
//!
//! A run holds thousands of answers; a page shows the few that explain the failure:
//! - those whose coupon, request id or user a failed invariant's evidence names;
//! - for an oversell (I1), the grants acknowledged after the template's whole stock already
//!   was, in completion order: each is a coupon that cannot exist;
//! - the answers in flight while those were, up to [`MOST_SHOWN`] in all.

use std::{
    collections::{HashMap, HashSet},
    path::Path,
};

use anyhow::Context;

use coupon_verify::{
    linearizability::{Counterexample, OpView},
    page::{self, NEMESIS, Page},
};
use uuid::Uuid;

use crate::{
    acks::{Reply, ReplyClass, RequestKind},
    checks::InvariantResult,
    nemesis::{Mark, NemesisEvent},
    report::Report,
    templates::TemplateInfo,
};

/// Operations drawn at most (a page stays readable).
const MOST_SHOWN: usize = 120;
/// Of those, the named ones at most (the rest is what ran beside them).
const MOST_NAMED: usize = 80;

/// What the page is drawn from.
pub(crate) struct FailedRun<'a> {
    /// The run's id (the report directory's name).
    pub run_id: &'a str,
    /// The invariants, passed and failed.
    pub invariants: &'a [InvariantResult],
    /// The answers kept for the checks, in completion order.
    pub events: &'a [Reply],
    /// The run's templates.
    pub templates: &'a [TemplateInfo],
    /// The faults injected.
    pub nemesis: &'a [NemesisEvent],
}

impl<'a> FailedRun<'a> {
    /// The run a report describes, with the answers kept for its checks.
    pub(crate) fn of(report: &'a Report, kept: &'a [Reply]) -> Self {
        Self {
            run_id: &report.run_id,
            invariants: &report.invariants,
            events: kept,
            templates: &report.templates,
            nemesis: &report.nemesis,
        }
    }
}

/// The page's file name in the report directory.
const FILE: &str = "counterexample.html";

/// Writes the page into `dir` when an invariant failed; its file name, for the report's link.
pub(crate) fn write(dir: &Path, run: &FailedRun<'_>) -> anyhow::Result<Option<String>> {
    let Some(text) = html(run) else {
        return Ok(None);
    };
    let path = dir.join(FILE);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(Some(FILE.to_owned()))
}

/// The page's HTML, or `None` when no invariant failed.
pub(crate) fn html(run: &FailedRun<'_>) -> Option<String> {
    let failed: Vec<&InvariantResult> = run.invariants.iter().filter(|i| !i.passed).collect();
    if failed.is_empty() {
        return None;
    }
    let named = named(run, &failed);
    let shown = shown(run.events, &named);
    let mut ops: Vec<OpView> = shown.iter().map(|&i| view(run, &run.events[i])).collect();
    let misfits = shown
        .iter()
        .enumerate()
        .filter(|(_, i)| named.contains(i))
        .map(|(k, _)| k)
        .collect();
    ops.extend(faults(run.nemesis));
    let counterexample = Counterexample {
        partition: String::new(),
        ops,
        prefix: Vec::new(),
        prefix_hidden: 0,
        stuck: None,
        misfits,
        state: String::new(),
    };
    let ids: Vec<&str> = failed.iter().map(|i| i.id.as_str()).collect();
    let explanation = format!(
        "{} of the run's {} kept answers are named by the failed invariants' evidence \
         (orange); {} shown in all, the others ran beside them (grey). Times are microseconds \
         since the load began. A dashed bar's outcome is unknown (timeout or 5xx).\n\n{}",
        named.len(),
        run.events.len(),
        shown.len(),
        failed
            .iter()
            .map(|i| format!("{}: {}", i.id, i.title))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let page = Page {
        title: format!("load run {}: violated {}", run.run_id, ids.join(", ")),
        counterexample: &counterexample,
        sections: vec![
            (
                "Invariants violated".into(),
                failed
                    .iter()
                    .flat_map(|i| i.details.iter().map(move |d| format!("{}: {d}", i.id)))
                    .collect(),
            ),
            (
                "Faults injected".into(),
                run.nemesis
                    .iter()
                    .map(|e| format!("{:.2} s: {}", e.at_secs, e.what))
                    .collect(),
            ),
        ],
        explanation: &explanation,
    };
    Some(page::html(&page))
}

/// Indices of the answers the failed invariants name.
fn named(run: &FailedRun<'_>, failed: &[&InvariantResult]) -> HashSet<usize> {
    // Ids are matched as whole words, so user "u1" does not name "u10".
    let words: HashSet<&str> = failed
        .iter()
        .flat_map(|i| i.details.iter())
        .flat_map(|d| d.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_')))
        .filter(|w| !w.is_empty())
        .collect();
    let mut named: HashSet<usize> = HashSet::new();
    for (i, e) in run.events.iter().enumerate() {
        let coupon = e.coupon.map(|c| c.to_string());
        let ids = [
            coupon.as_deref(),
            e.request_id.as_deref(),
            e.order_id.as_deref(),
        ];
        if ids.into_iter().flatten().any(|id| words.contains(id)) {
            named.insert(i);
        }
    }
    if failed.iter().any(|i| i.id == "I1") {
        named.extend(granted_past_the_stock(run));
    }
    named
}

/// The grants of each template acknowledged after its whole stock already was: with no
/// refund in the run, each names a coupon past the stock.
fn granted_past_the_stock(run: &FailedRun<'_>) -> Vec<usize> {
    let stock: HashMap<Uuid, i64> = run
        .templates
        .iter()
        .map(|t| (t.id, t.total_stock))
        .collect();
    if run.events.iter().any(|e| e.op == RequestKind::Refund) {
        return Vec::new();
    }
    let mut grants: Vec<(u64, usize, Uuid, Uuid)> = run
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.op == RequestKind::Claim && e.class() == ReplyClass::Ok)
        .filter_map(|(i, e)| Some((e.end_us(), i, e.template?, e.coupon?)))
        .collect();
    grants.sort_unstable();
    let mut seen: HashSet<Uuid> = HashSet::new();
    let mut count: HashMap<Uuid, i64> = HashMap::new();
    let mut past = Vec::new();
    for (_, i, template, coupon) in grants {
        // A retry's answer names a coupon already counted.
        if !seen.insert(coupon) {
            continue;
        }
        let n = count.entry(template).or_default();
        *n += 1;
        if stock.get(&template).is_some_and(|s| *n > *s) {
            past.push(i);
        }
    }
    past
}

/// The answers drawn: the first named ones by start, then those in flight while they were,
/// nearest first; in start order.
fn shown(events: &[Reply], named: &HashSet<usize>) -> Vec<usize> {
    let mut picked: Vec<usize> = named.iter().copied().collect();
    picked.sort_unstable_by_key(|&i| (events[i].start_us, i));
    picked.truncate(MOST_NAMED);
    // The span of the named answers; with none named (the auditor's finding names no
    // answer), the whole run, of which the last answers are drawn.
    let window = picked.first().map(|&first| {
        let last = picked.iter().map(|&i| events[i].end_us()).max();
        (events[first].start_us, last.unwrap_or(u64::MAX))
    });
    let chosen: HashSet<usize> = picked.iter().copied().collect();
    let mut beside: Vec<usize> = (0..events.len())
        .filter(|i| !chosen.contains(i))
        .filter(|&i| {
            window.is_none_or(|(from, to)| events[i].start_us <= to && events[i].end_us() >= from)
        })
        .collect();
    beside.sort_unstable_by_key(|&i| std::cmp::Reverse(events[i].end_us()));
    beside.truncate(MOST_SHOWN - picked.len());
    picked.extend(beside);
    picked.sort_unstable_by_key(|&i| (events[i].start_us, i));
    picked
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// One answer as the page draws it: short, as the row already names the Goose user (the
/// shopper is in the operation's tooltip).
fn view(run: &FailedRun<'_>, e: &Reply) -> OpView {
    let coupon = e.coupon.map(|c| c.to_string());
    let template = match (run.templates.len(), e.template) {
        (2.., Some(t)) => run
            .templates
            .iter()
            .find(|x| x.id == t)
            .map_or_else(String::new, |t| format!(" {}", t.name)),
        _ => String::new(),
    };
    let op = match e.op {
        RequestKind::Claim => format!(
            "claim{template} req {}",
            e.request_id.as_deref().unwrap_or("?")
        ),
        RequestKind::MyCoupons => "my coupons".to_owned(),
        other => format!(
            "{} {} order {}",
            other.name(),
            coupon.as_deref().map_or("?", short),
            e.order_id.as_deref().unwrap_or("-")
        ),
    };
    let status = e
        .status
        .map_or_else(|| "timeout".to_owned(), |s| s.to_string());
    let recorded = match (e.class(), &e.code, &coupon) {
        (ReplyClass::Ok, _, Some(c)) if e.op == RequestKind::Claim => {
            format!("{status} coupon {}", short(c))
        }
        (_, Some(code), _) => format!("{status} {code}"),
        _ => status,
    };
    let retry = if e.attempt > 0 {
        format!(" (retry {})", e.attempt)
    } else {
        String::new()
    };
    OpView {
        process: e.goose_user as u64,
        op: format!("{op}{retry}"),
        recorded,
        call: e.start_us,
        ret: (e.class() != ReplyClass::Unknown).then(|| e.end_us()),
    }
}

/// The faults as operations of the nemesis: a fault from its start to its heal, any other
/// step as an instant.
fn faults(nemesis: &[NemesisEvent]) -> Vec<OpView> {
    let us = |secs: f64| (secs.max(0.0) * 1e6) as u64;
    let mut out = Vec::new();
    let mut open: Option<&NemesisEvent> = None;
    for e in nemesis {
        match (e.marks, open) {
            (Some(Mark::Fault), _) => open = Some(e),
            (Some(Mark::Heal), Some(began)) => {
                out.push(OpView {
                    process: NEMESIS,
                    op: began.what.clone(),
                    recorded: e.what.clone(),
                    call: us(began.at_secs),
                    ret: Some(us(e.at_secs).max(us(began.at_secs) + 1)),
                });
                open = None;
            }
            _ => out.push(OpView {
                process: NEMESIS,
                op: e.what.clone(),
                recorded: if e.failed { "failed" } else { "done" }.to_owned(),
                call: us(e.at_secs),
                ret: Some(us(e.at_secs) + 1),
            }),
        }
    }
    // A fault never healed runs to the page's edge.
    if let Some(began) = open {
        out.push(OpView {
            process: NEMESIS,
            op: began.what.clone(),
            recorded: "not healed".to_owned(),
            call: us(began.at_secs),
            ret: None,
        });
    }
    out
}

// A panic is how a test reports a wrong answer.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
