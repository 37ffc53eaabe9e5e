//! A failing property case as a page (beside its minimal history): the case's operations on
//! a timeline per process — or, when the history is not linearizable, the search's
//! counterexample — with the operations the findings name marked, the invariants violated
//! and the faults injected.

use crate::{
    counterexample_page::Page,
    linearizability::{Counterexample, OpView, Verdict},
    run::CaseReport,
};

/// The case's own operations, those the findings name marked.
fn from_history(report: &CaseReport) -> Counterexample {
    let ops = report.history.operations().unwrap_or_default();
    let views: Vec<OpView> = ops
        .iter()
        .map(|o| OpView {
            process: u64::from(o.process),
            op: o.op.to_string(),
            recorded: o.outcome.to_string(),
            call: o.call,
            ret: o.ret,
        })
        .collect();
    let named = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| {
            let text = o.op.to_string();
            let who = format!("p{} {text}", o.process);
            // An order named in a finding names the operations on it.
            let order = text
                .split_once("order ")
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .map(|id| format!("order {id} "));
            report.findings.iter().any(|f| {
                f.detail.contains(&who)
                    || order
                        .as_ref()
                        .is_some_and(|o| format!("{} ", f.detail).contains(o.as_str()))
            })
        })
        .map(|(i, _)| i)
        .collect();
    Counterexample {
        partition: String::new(),
        ops: views,
        prefix: Vec::new(),
        prefix_hidden: 0,
        stuck: None,
        misfits: named,
        state: String::new(),
    }
}

/// The page's counterexample and explanation.
pub fn counterexample(report: &CaseReport) -> (Counterexample, String) {
    let findings = report
        .findings
        .iter()
        .map(|f| format!("{:?}: {}", f.invariant, f.detail))
        .collect::<Vec<_>>()
        .join("\n");
    match &report.verdict {
        Verdict::NotLinearizable {
            explanation,
            counterexample: Some(c),
        } => {
            let others: Vec<String> = report
                .findings
                .iter()
                .filter(|f| f.invariant != crate::Invariant::I8)
                .map(|f| format!("{:?}: {}", f.invariant, f.detail))
                .collect();
            (
                (**c).clone(),
                [explanation.clone()]
                    .into_iter()
                    .chain(others)
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        }
        _ => (from_history(report), findings),
    }
}

/// The page of property `name`'s failing case.
pub fn page<'a>(
    name: &str,
    report: &CaseReport,
    counterexample: &'a Counterexample,
    explanation: &'a str,
) -> Page<'a> {
    Page {
        title: format!(
            "property {name} ({:?}): violated {:?}",
            report.variant,
            report.invariants()
        ),
        counterexample,
        sections: vec![
            (
                "Invariants violated".into(),
                report
                    .findings
                    .iter()
                    .map(|f| format!("{:?}: {}", f.invariant, f.detail))
                    .collect(),
            ),
            ("Faults injected".into(), report.nemesis.clone()),
        ],
        explanation,
    }
}
