//! How much work a check may do, and the meter that enforces it.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// How much work a check may do before it answers [`super::Verdict::Undecided`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Placements the search may try (over all partitions of one check).
    pub max_steps: u64,
    /// Wall-clock limit for the whole check.
    pub deadline: Option<Duration>,
    /// Bytes the search's tables (configurations seen, model states, transitions) may hold.
    pub max_memory: u64,
}

/// The memory budget unless one is given: well under any machine this runs on, and far
/// more than the largest published history needs (a few MB).
pub const DEFAULT_MAX_MEMORY: u64 = 2 << 30;

impl Default for Budget {
    /// Far more than a well-sized history (a few processes × ten ops) needs.
    fn default() -> Self {
        Self {
            max_steps: 2_000_000,
            deadline: Some(Duration::from_secs(10)),
            max_memory: DEFAULT_MAX_MEMORY,
        }
    }
}

impl Budget {
    /// No step limit, only a wall-clock one (and the default memory budget): for histories
    /// of unknown size.
    pub fn time_only(deadline: Duration) -> Self {
        Self {
            max_steps: u64::MAX,
            deadline: Some(deadline),
            max_memory: DEFAULT_MAX_MEMORY,
        }
    }
}

/// Which budget ended a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The step budget.
    Steps,
    /// The wall-clock limit.
    Time,
    /// The memory budget.
    Memory,
    /// Not a budget: the search cannot represent the history (too many model states).
    Size,
}

/// A search stopped by its budget: which one, and why in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Exhausted {
    pub(super) limit: Limit,
    pub(super) reason: String,
}

/// Counts placements tried, watches the clock and the search's memory.
#[derive(Debug)]
pub(super) struct Meter {
    steps: u64,
    budget: Budget,
    deadline: Option<Instant>,
}

/// Placements between two looks at the clock and the memory: reading the clock costs more
/// than a placement, and a thousand placements take well under a millisecond.
const LOOK_EVERY: u64 = 1024;

impl Meter {
    pub(super) fn new(budget: Budget) -> Self {
        Self {
            steps: 0,
            budget,
            // A deadline too far away to represent is no deadline.
            deadline: budget.deadline.and_then(|d| Instant::now().checked_add(d)),
        }
    }

    /// Accounts for one placement tried (or one configuration looked up), with the bytes the
    /// search holds now, or says why no more are allowed.
    pub(super) fn tick(&mut self, bytes: impl FnOnce() -> u64) -> Result<(), Exhausted> {
        if self.steps >= self.budget.max_steps {
            return Err(Exhausted {
                limit: Limit::Steps,
                reason: format!("step budget of {} exhausted", self.budget.max_steps),
            });
        }
        self.steps += 1;
        if !self.steps.is_multiple_of(LOOK_EVERY) {
            return Ok(());
        }
        self.look(bytes())
    }

    /// Checks the clock and the memory now.
    pub(super) fn look(&self, bytes: u64) -> Result<(), Exhausted> {
        if let (Some(at), Some(limit)) = (self.deadline, self.budget.deadline)
            && Instant::now() > at
        {
            return Err(Exhausted {
                limit: Limit::Time,
                reason: format!("time limit of {limit:?} reached after {} steps", self.steps),
            });
        }
        if bytes > self.budget.max_memory {
            return Err(Exhausted {
                limit: Limit::Memory,
                reason: format!(
                    "memory budget of {} MiB reached after {} steps ({} MiB held)",
                    self.budget.max_memory >> 20,
                    self.steps,
                    bytes >> 20
                ),
            });
        }
        Ok(())
    }
}
