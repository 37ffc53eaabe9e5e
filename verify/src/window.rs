//! I10, one clock: no coupon is granted outside its template's claim window by the true
//! clock. Judged one granted claim at a time, so a generator can stream its answers through
//! it without holding them.
//!
//! Sound with the client's view of time: a grant answered before the window opened, or sent
//! after it closed, was decided outside it; any other may have been decided inside.

use crate::invariant::{Finding, Invariant};

/// Grants outside the window listed at most; the rest are counted.
const LISTED: usize = 20;

/// A claim window and what was granted against it (times in µs since the Unix epoch, by the
/// true clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowCheck {
    opens: i64,
    closes: i64,
    inside: u64,
    outside: Vec<String>,
    outside_count: usize,
}

impl WindowCheck {
    /// A check of the window `[opens, closes)`.
    pub fn new(opens: i64, closes: i64) -> Self {
        Self {
            opens,
            closes,
            inside: 0,
            outside: Vec::new(),
            outside_count: 0,
        }
    }

    /// One granted claim, sent and answered at these times; `who` names it in a finding.
    /// A retry (`first_try` false) may be answered as a replay of a grant its first try
    /// got inside the window, so only its answer before the opening says anything.
    pub fn granted(&mut self, who: &str, sent: i64, answered: i64, first_try: bool) {
        let why = if answered < self.opens {
            format!(
                "{who} granted {:.3} s before the window opened",
                (self.opens - answered) as f64 / 1e6
            )
        } else if first_try && sent >= self.closes {
            format!(
                "{who} granted a claim sent {:.3} s after the window closed",
                (sent - self.closes) as f64 / 1e6
            )
        } else {
            self.inside += 1;
            return;
        };
        self.outside_count += 1;
        if self.outside.len() < LISTED {
            self.outside.push(why);
        }
    }

    /// Grants that may have been decided inside the window, and grants outside it.
    pub fn counts(&self) -> (u64, usize) {
        (self.inside, self.outside_count)
    }

    /// I10 findings: every grant outside the window; and none inside it at all, which means
    /// the check saw no sale and proves nothing.
    pub fn findings(&self) -> Vec<Finding> {
        let mut found: Vec<Finding> = self
            .outside
            .iter()
            .map(|why| Finding::new(Invariant::I10, why.clone()))
            .collect();
        if self.outside_count > self.outside.len() {
            found.push(Finding::new(
                Invariant::I10,
                format!("… and {} more", self.outside_count - self.outside.len()),
            ));
        }
        if self.inside == 0 {
            found.push(Finding::new(
                Invariant::I10,
                "no claim was granted inside the window: the check saw no sale",
            ));
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_before_the_opening_or_sent_after_the_closing_are_refuted() {
        let mut w = WindowCheck::new(1_000_000, 2_000_000);
        w.granted("a", 900_000, 1_100_000, true);
        assert!(w.findings().is_empty(), "answered after it opened");
        w.granted("late retry", 2_000_000, 2_100_000, false);
        assert!(w.findings().is_empty(), "a replay of a grant made inside");
        w.granted("b", 500_000, 900_000, true);
        w.granted("c", 2_000_000, 2_100_000, true);
        let found = w.findings();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].detail.starts_with("b granted 0.100 s before"));
        assert_eq!(w.counts(), (2, 2));
    }

    #[test]
    fn a_window_nothing_was_granted_in_proves_nothing() {
        let found = WindowCheck::new(0, 1).findings();
        assert_eq!(found.len(), 1);
        assert!(found[0].detail.contains("saw no sale"));
    }
}
