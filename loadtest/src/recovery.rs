//! What the shoppers saw of a fault (docs/ARCHITECTURE.md, "Deadlines"), read back from
//! the run's answers (`acks.jsonl`): per fault, the time from the fault to the first claim
//! refused as unavailable (or unanswered), and from the heal to the first claim granted
//! again — the time to recover. And, for a sale with a claim window, whether any claim was
//! granted outside it by this machine's clock (the one all servers share here, whatever
//! libfaketime tells some of them).

use std::path::Path;

use coupon_verify::window::WindowCheck;
use serde::{Deserialize, Serialize};

use crate::{
    acks::{Reply, RequestKind},
    checks::InvariantResult,
    nemesis::{Mark, NemesisEvent},
    record,
};

/// One fault, as the shoppers lived it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Recovery {
    /// When the fault began, seconds after the load began.
    pub fault_at_secs: f64,
    /// When it was healed.
    pub heal_at_secs: f64,
    /// From the fault to the first claim answered 503 or not answered; None: none was.
    pub first_refusal_after_secs: Option<f64>,
    /// From the heal to the first claim granted that was sent after it; None: none was.
    pub recovered_after_secs: Option<f64>,
    /// Claims granted while the fault lasted (sent after it began, answered before the
    /// heal): none when the fault stops every server, the others' sales when it cuts off one.
    #[serde(default)]
    pub granted_during: u64,
    /// Claims sent while the fault lasted (sent after it began, before the heal).
    #[serde(default)]
    pub sent_during: u64,
    /// Of those, the ones answered 503 or not at all: the fault's unavailability share.
    #[serde(default)]
    pub unavailable_during: u64,
}

impl Recovery {
    /// The share of claims sent during the fault that were answered 503 or not at all
    /// (None: none was sent).
    pub(crate) fn unavailable_share(&self) -> Option<f64> {
        (self.sent_during > 0).then(|| self.unavailable_during as f64 / self.sent_during as f64)
    }
}

/// The faults' recoveries and, for a windowed sale, the window check, from the run in `dir`.
pub(crate) fn analyse(
    dir: &Path,
    nemesis: &[NemesisEvent],
) -> anyhow::Result<(Vec<Recovery>, Option<InvariantResult>)> {
    let record = record::read(dir)?;
    let mut recoveries = pairs(nemesis);
    let window = record
        .templates
        .first()
        .and_then(|t| t.claim_window_unix_us.map(|w| (t.id, w)));
    let mut check = window.map(|(_, (opens, closes))| WindowCheck::new(opens, closes));
    record::for_each_event(dir, &record, |e| {
        if e.op != RequestKind::Claim || e.duplicate {
            return;
        }
        for r in &mut recoveries {
            observe(r, &e);
        }
        if let (Some((template, _)), Some(check)) = (window, check.as_mut())
            && e.template == Some(template)
            && e.status == Some(201)
        {
            let sent = record.epoch_unix_us as i64 + e.start_us as i64;
            let who = format!("{} (server {})", e.user, e.server + 1);
            check.granted(&who, sent, sent + e.latency_us as i64, e.attempt == 0);
        }
    })?;
    Ok((recoveries, check.as_ref().map(window_result)))
}

/// Each fault with the heal that follows it.
fn pairs(nemesis: &[NemesisEvent]) -> Vec<Recovery> {
    let mut out = Vec::new();
    let mut open = None;
    for e in nemesis {
        match e.marks {
            Some(Mark::Fault) => open = Some(e.at_secs),
            Some(Mark::Heal) => {
                if let Some(fault) = open.take() {
                    out.push(Recovery {
                        fault_at_secs: fault,
                        heal_at_secs: e.at_secs,
                        first_refusal_after_secs: None,
                        recovered_after_secs: None,
                        granted_during: 0,
                        sent_during: 0,
                        unavailable_during: 0,
                    });
                }
            }
            None => {}
        }
    }
    out
}

fn observe(r: &mut Recovery, e: &Reply) {
    let sent = e.start_us as f64 / 1e6;
    let answered = (e.start_us + e.latency_us) as f64 / 1e6;
    let refused = matches!(e.status, None | Some(503));
    if refused && answered >= r.fault_at_secs && answered <= r.heal_at_secs + 60.0 {
        let after = answered - r.fault_at_secs;
        if r.first_refusal_after_secs.is_none_or(|t| after < t) {
            r.first_refusal_after_secs = Some(after);
        }
    }
    if e.status == Some(201) && sent >= r.fault_at_secs && answered < r.heal_at_secs {
        r.granted_during += 1;
    }
    if sent >= r.fault_at_secs && sent < r.heal_at_secs {
        r.sent_during += 1;
        r.unavailable_during += u64::from(refused);
    }
    if e.status == Some(201) && sent >= r.heal_at_secs {
        let after = answered - r.heal_at_secs;
        if r.recovered_after_secs.is_none_or(|t| after < t) {
            r.recovered_after_secs = Some(after);
        }
    }
}

/// The core's window check as the report's result.
fn window_result(check: &WindowCheck) -> InvariantResult {
    let (inside, outside) = check.counts();
    let details: Vec<String> = check.findings().into_iter().map(|f| f.detail).collect();
    InvariantResult {
        id: "I10".into(),
        title: "no coupon is granted outside the claim window (by the true clock)".into(),
        passed: details.is_empty(),
        sources: "every claim answer, timed by this machine's clock".into(),
        checked: vec![format!(
            "{inside} claims granted inside the window, {outside} outside"
        )],
        details,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(at: f64, what: &str, marks: Option<Mark>) -> NemesisEvent {
        NemesisEvent {
            at_secs: at,
            what: what.into(),
            failed: false,
            marks,
        }
    }

    #[test]
    fn faults_pair_with_the_heal_that_follows() {
        let p = pairs(&[
            event(1.0, "note", None),
            event(2.0, "fault", Some(Mark::Fault)),
            event(7.0, "heal", Some(Mark::Heal)),
            event(8.0, "heal without a fault", Some(Mark::Heal)),
        ]);
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].fault_at_secs, p[0].heal_at_secs), (2.0, 7.0));
    }

    #[test]
    fn a_window_check_with_no_sale_inside_fails() {
        let mut check = WindowCheck::new(10, 20);
        assert!(!window_result(&check).passed);
        check.granted("a", 12, 13, true);
        assert!(window_result(&check).passed);
        check.granted("b", 21, 22, true);
        let r = window_result(&check);
        assert!(!r.passed);
        assert_eq!(r.checked, ["1 claims granted inside the window, 1 outside"]);
    }
}
