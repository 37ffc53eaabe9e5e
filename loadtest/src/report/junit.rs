//! `report.junit.xml`: the run as JUnit XML, the format GitLab, Jenkins and GitHub test
//! reporters read. One test suite per kind of check — the invariants, the Goose thresholds,
//! the baseline comparison, the fault steps — and one test case per check; a violated
//! invariant, a failed threshold and a regression are failures with their message and
//! evidence. An invariant not audited (`--no-audit`) is a skipped case, never a pass.

use std::fmt::Write as _;

use super::{Report, esc};

/// One test case: its name, and why it failed or was skipped.
struct Case {
    name: String,
    class: &'static str,
    failure: Option<(String, String)>,
    skipped: Option<String>,
}

impl Case {
    fn passed(name: String, class: &'static str) -> Self {
        Self {
            name,
            class,
            failure: None,
            skipped: None,
        }
    }
}

/// The cases of each suite, in report order.
fn suites(report: &Report) -> Vec<(&'static str, Vec<Case>)> {
    let invariants = report
        .invariants
        .iter()
        .map(|i| {
            let mut case = Case::passed(format!("{} {}", i.id, i.title), "invariants");
            if !report.audited {
                case.skipped = Some("not audited (--no-audit): the merged audit decides".into());
            } else if !i.passed {
                let message = i
                    .details
                    .first()
                    .cloned()
                    .unwrap_or_else(|| "violated".into());
                case.failure = Some((message, i.details.join("\n")));
            }
            case
        })
        .collect();
    let thresholds = report
        .thresholds
        .iter()
        .map(|t| {
            let mut case = Case::passed(t.rule.clone(), "thresholds");
            if !t.passed {
                case.failure = Some((
                    format!("observed {}", t.observed),
                    format!(
                        "{} observed {}{}",
                        t.rule,
                        t.observed,
                        if t.aborted { " (stopped the run)" } else { "" }
                    ),
                ));
            }
            case
        })
        .collect();
    let regressions = report
        .baseline
        .iter()
        .flat_map(|c| {
            c.rows.iter().map(move |r| {
                let mut case = Case::passed(r.metric.clone(), "baseline");
                if r.regressed {
                    let word = if r.bound == "min" {
                        "at least"
                    } else {
                        "at most"
                    };
                    let message = format!(
                        "{} is {:.3}, baseline {:.3}, must be {word} {:.3}",
                        r.metric, r.current, r.baseline, r.limit
                    );
                    case.failure = Some((message.clone(), format!("{message} ({})", c.file)));
                }
                case
            })
        })
        .collect();
    let faults = report
        .nemesis
        .iter()
        .map(|n| {
            let mut case = Case::passed(format!("{:.1} s: {}", n.at_secs, n.what), "nemesis");
            if n.failed {
                let message = format!("could not be carried out: {}", n.what);
                case.failure = Some((message.clone(), message));
            }
            case
        })
        .collect();
    vec![
        ("invariants", invariants),
        ("thresholds", thresholds),
        ("baseline", regressions),
        ("nemesis", faults),
    ]
}

/// The report as JUnit XML.
pub(crate) fn render(report: &Report) -> String {
    let suites = suites(report);
    let count = |pick: fn(&Case) -> bool| -> usize {
        suites
            .iter()
            .map(|(_, cases)| cases.iter().filter(|c| pick(c)).count())
            .sum()
    };
    let (tests, failures) = (count(|_| true), count(|c| c.failure.is_some()));
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites name=\"coupon-loadtest {}\" tests=\"{tests}\" failures=\"{failures}\" \
         errors=\"0\" skipped=\"{}\">",
        esc(&report.run_id),
        count(|c| c.skipped.is_some())
    );
    for (suite, cases) in suites.iter().filter(|(_, cases)| !cases.is_empty()) {
        let failed = cases.iter().filter(|c| c.failure.is_some()).count();
        let skipped = cases.iter().filter(|c| c.skipped.is_some()).count();
        let _ = writeln!(
            xml,
            "  <testsuite name=\"{}.{suite}\" tests=\"{}\" failures=\"{failed}\" errors=\"0\" \
             skipped=\"{skipped}\" timestamp=\"{}\">",
            esc(&report.scenario),
            cases.len(),
            esc(report.started_at.get(..19).unwrap_or_default())
        );
        for case in cases {
            let _ = write!(
                xml,
                "    <testcase classname=\"{}.{}\" name=\"{}\"",
                esc(&report.scenario),
                case.class,
                esc(&case.name)
            );
            match (&case.failure, &case.skipped) {
                (Some((message, detail)), _) => {
                    let _ = writeln!(
                        xml,
                        ">\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>",
                        esc(message),
                        case.class,
                        esc(detail)
                    );
                }
                (None, Some(why)) => {
                    let _ = writeln!(
                        xml,
                        ">\n      <skipped message=\"{}\"/>\n    </testcase>",
                        esc(why)
                    );
                }
                (None, None) => xml.push_str("/>\n"),
            }
        }
        xml.push_str("  </testsuite>\n");
    }
    xml.push_str("</testsuites>\n");
    xml
}
