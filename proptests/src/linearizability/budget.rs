//! How much work a check may do, and the meter that enforces it.

use std::time::{Duration, Instant};

/// How much work a check may do before it answers [`super::Verdict::Undecided`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Placements the search may try (over all partitions of one check).
    pub max_steps: u64,
    /// Wall-clock limit for the whole check.
    pub deadline: Option<Duration>,
}

impl Default for Budget {
    /// Far more than a well-sized history (a few processes × ten ops) needs.
    fn default() -> Self {
        Self {
            max_steps: 2_000_000,
            deadline: Some(Duration::from_secs(10)),
        }
    }
}

impl Budget {
    /// No step limit, only a wall-clock one: for histories of unknown size.
    pub fn time_only(deadline: Duration) -> Self {
        Self {
            max_steps: u64::MAX,
            deadline: Some(deadline),
        }
    }
}

/// Counts placements tried and watches the clock.
#[derive(Debug)]
pub(super) struct Meter {
    steps: u64,
    budget: Budget,
    deadline: Option<Instant>,
}

impl Meter {
    pub(super) fn new(budget: Budget) -> Self {
        Self {
            steps: 0,
            budget,
            // A deadline too far away to represent is no deadline.
            deadline: budget.deadline.and_then(|d| Instant::now().checked_add(d)),
        }
    }

    /// Accounts for one placement tried, or says why no more are allowed.
    pub(super) fn tick(&mut self) -> Result<(), String> {
        if self.steps >= self.budget.max_steps {
            return Err(format!(
                "step budget of {} exhausted",
                self.budget.max_steps
            ));
        }
        self.steps += 1;
        // Reading the clock costs more than a placement; every 256th is often enough.
        if !self.steps.is_multiple_of(256) {
            return Ok(());
        }
        match (self.deadline, self.budget.deadline) {
            (Some(at), Some(limit)) if Instant::now() > at => Err(format!(
                "deadline of {limit:?} passed after {} steps",
                self.steps
            )),
            _ => Ok(()),
        }
    }
}
