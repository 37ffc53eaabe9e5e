//! The open model's figures as the report shows them: a line of counts and a latency table
//! (the same cells in `report.md` and `index.html`).

use super::{OpenFigures, Percentiles};

impl OpenFigures {
    /// The latency table's header.
    pub(crate) const HEADER: [&'static str; 5] = ["ms", "p50", "p90", "p99", "max"];

    /// Asked and achieved rates, arrivals and drops, in one sentence.
    pub(crate) fn summary(&self) -> String {
        let mut line = format!(
            "Arrivals `{}`: asked {:.0}/s on average (peak {:.0}/s), started {:.0}/s; {} \
             scheduled, {} started, **{} dropped** (no free virtual user; at most {} in \
             flight, {} at the peak).",
            self.profile,
            self.asked_per_sec,
            self.peak_per_sec,
            self.achieved_per_sec,
            self.scheduled,
            self.started,
            self.dropped,
            self.max_in_flight,
            self.peak_in_flight
        );
        if self.generator_limited {
            line.push_str(&format!(
                " The generator itself fell behind the schedule (its dispatch lag p99 {:.1} \
                 ms): the asked rate is beyond what it makes on this machine, so these \
                 figures do not measure the server alone.",
                self.dispatch_lag_ms.p99
            ));
        }
        line
    }

    /// Response time, service time and the dispatcher's lag.
    pub(crate) fn rows(&self) -> Vec<Vec<String>> {
        let row = |name: &str, p: &Percentiles| {
            vec![
                name.to_owned(),
                format!("{:.2}", p.p50),
                format!("{:.2}", p.p90),
                format!("{:.2}", p.p99),
                format!("{:.2}", p.max),
            ]
        };
        vec![
            row(
                "response time (from the intended start: what shoppers wait)",
                &self.response_ms,
            ),
            row(
                "service time (from the actual start: what a closed loop reports)",
                &self.service_ms,
            ),
            row(
                "the generator's lag behind the schedule",
                &self.dispatch_lag_ms,
            ),
        ]
        .into_iter()
        .chain(self.closed.iter().map(|c| {
            row(
                &format!(
                    "closed model, run after on the same sale: {} users in a loop, {:.0} visits/s",
                    c.users, c.per_sec
                ),
                &c.visit_ms,
            )
        }))
        .collect()
    }
}
