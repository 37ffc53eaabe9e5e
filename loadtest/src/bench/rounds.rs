//! `--rounds N`: the whole sequence of rows measured N times in one run, anchors and engine
//! alternating, so a ratio's numerator and denominator are always minutes apart at most
//! (and each round measures its anchors on both sides of its engine rows: `bracket`).
//! On a shared machine whose speed drifts by up to 2× between hours, one pass can land the
//! anchor in a slow phase and the engine in a fast one (or the other way); the median of the
//! rounds' ratios, with its spread beside it, is the figure a reader can rely on.
//!
//! On a virtual machine the hypervisor may also run someone else on our cores for a while
//! (steal): a round it hit lands low on whichever rows it hit, whatever the code did. Each
//! ratio also gets its median over the rounds that neither of its rows lost to steal, next
//! to (never instead of) the median of all rounds.

use serde::{Deserialize, Serialize};

use super::{chain::ChainLoad, cpu::PerOp, measure::Row, median::median, ratios::Ratio};

/// One ratio over the rounds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Spread {
    pub key: String,
    /// The ratio in each round, in order (None: a row of that round was not measured).
    pub per_round: Vec<Option<f64>>,
    pub min: Option<f64>,
    pub median: Option<f64>,
    pub max: Option<f64>,
    pub goal: Option<f64>,
    /// Rounds whose ratio met the goal (with a goal).
    pub rounds_at_goal: Option<usize>,
    /// The median over the quiet rounds only (see [`QUIET_STEAL_PCT`]); None when no round
    /// was quiet for this ratio or the rounds did not read steal.
    #[serde(default)]
    pub quiet_median: Option<f64>,
    /// How many rounds were quiet for this ratio.
    #[serde(default)]
    pub quiet_rounds: usize,
}

/// A round is quiet for a ratio when the hypervisor took at most this share of the cores
/// (steal, from /proc/stat) over each of the ratio's two rows. Above a few percent a row
/// measures the neighbours as much as the code: on 2026-12-04 the three lowest sync rounds
/// had lost 23–34% on the sync row itself. Quiet is not fast, though: rounds with no steal
/// also split into fast and slow ones (docs/speed-log.md).
pub(crate) const QUIET_STEAL_PCT: f64 = 5.0;

/// Whether both rows of `ratio` read their steal in `rows` and stayed within
/// [`QUIET_STEAL_PCT`].
fn quiet(ratio: &Ratio, rows: &[Row]) -> bool {
    [&ratio.numerator, &ratio.denominator].iter().all(|key| {
        rows.iter()
            .find(|r| &r.key == *key)
            .and_then(|r| r.cpu)
            .and_then(|c| c.steal_pct)
            .is_some_and(|steal| steal <= QUIET_STEAL_PCT)
    })
}

/// The most steal any row of each round read (None: the round read none).
pub(crate) fn steal_per_round(rounds: &[Vec<Row>]) -> Vec<Option<f64>> {
    rounds
        .iter()
        .map(|rows| {
            rows.iter()
                .filter_map(|r| r.cpu.and_then(|c| c.steal_pct))
                .reduce(f64::max)
        })
        .collect()
}

/// The spread of every ratio over `rounds` (each round's ratios in `ratios::SPECS` order);
/// `rows` are the same rounds' rows, for their steal.
pub(crate) fn spread(rounds: &[Vec<Ratio>], rows: &[Vec<Row>]) -> Vec<Spread> {
    let Some(first) = rounds.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|r| {
            let per_round: Vec<Option<f64>> = rounds
                .iter()
                .map(|round| round.iter().find(|x| x.key == r.key).and_then(|x| x.value))
                .collect();
            let measured: Vec<f64> = per_round.iter().flatten().copied().collect();
            let quiet_values: Vec<f64> = rounds
                .iter()
                .zip(rows)
                .filter_map(|(round, rows)| {
                    let x = round.iter().find(|x| x.key == r.key)?;
                    if quiet(x, rows) { x.value } else { None }
                })
                .collect();
            Spread {
                quiet_rounds: quiet_values.len(),
                quiet_median: median(quiet_values),
                key: r.key.clone(),
                min: measured.iter().copied().reduce(f64::min),
                max: measured.iter().copied().reduce(f64::max),
                median: median(measured.clone()),
                goal: r.goal,
                rounds_at_goal: r.goal.map(|g| measured.iter().filter(|v| **v >= g).count()),
                per_round,
            }
        })
        .collect()
}

/// The ratios the report leads with: each one's median over the rounds (not the ratio of
/// the median rows: a round's two rows ran minutes apart, two rounds' may not have).
pub(crate) fn median_ratios(first_round: &[Ratio], spread: &[Spread]) -> Vec<Ratio> {
    first_round
        .iter()
        .zip(spread)
        .map(|(r, s)| Ratio {
            value: s.median,
            ..r.clone()
        })
        .collect()
}

/// One row per key, in the first round's order: the median rate, percentiles and CPU of
/// that row over the rounds.
pub(crate) fn median_rows(rounds: &[Vec<Row>]) -> Vec<Row> {
    let Some(first) = rounds.first() else {
        return Vec::new();
    };
    if rounds.len() == 1 {
        return first.clone();
    }
    first
        .iter()
        .map(|r| {
            let same: Vec<&Row> = rounds
                .iter()
                .filter_map(|round| round.iter().find(|x| x.key == r.key))
                .collect();
            let of =
                |f: fn(&Row) -> Option<f64>| median(same.iter().filter_map(|x| f(x)).collect());
            let cpus: Vec<PerOp> = same.iter().filter_map(|x| x.cpu).collect();
            let cpu_of = |f: fn(&PerOp) -> f64| median(cpus.iter().map(f).collect());
            let cpu = match (
                cpu_of(|c| c.server_us),
                cpu_of(|c| c.client_us),
                cpu_of(|c| c.postgres_us),
                cpu_of(|c| c.redis_us),
            ) {
                (Some(server_us), Some(client_us), Some(postgres_us), Some(redis_us)) => {
                    Some(PerOp {
                        server_us,
                        client_us,
                        postgres_us,
                        redis_us,
                        machine_busy_pct: median(
                            cpus.iter().filter_map(|c| c.machine_busy_pct).collect(),
                        ),
                        steal_pct: median(cpus.iter().filter_map(|c| c.steal_pct).collect()),
                    })
                }
                _ => None,
            };
            let rates: Vec<f64> = same.iter().filter_map(|x| x.per_sec).collect();
            let range = match (
                rates.iter().copied().reduce(f64::min),
                rates.iter().copied().reduce(f64::max),
            ) {
                (Some(lo), Some(hi)) => format!(", {lo:.0}–{hi:.0}/s"),
                _ => String::new(),
            };
            Row {
                per_sec: of(|x| x.per_sec),
                p50_ms: of(|x| x.p50_ms),
                p99_ms: of(|x| x.p99_ms),
                note: format!(
                    "{} (round 1); median of {} rounds{range}",
                    r.note,
                    same.len()
                ),
                cpu,
                group_commit: ChainLoad::median_of(
                    &same
                        .iter()
                        .filter_map(|x| x.group_commit)
                        .collect::<Vec<_>>(),
                ),
                ..r.clone()
            }
        })
        .collect()
}

/// The claim path's speed goals (docs/speed.md), which one round must meet together:
/// these ratios at their goals, and the sync row's p99 at most `SYNC_P99_MAX_MS`.
pub(crate) const CLAIM_RATIO_GOALS: [&str; 3] = [
    "http_sync/pgbench_insert",
    "http_sync/hot_row",
    "http_async/redis_granting",
];
/// The row whose p99 the claim goals bound.
pub(crate) const SYNC_P99_ROW: &str = "http_sync_granted";
/// Its bound, ms.
pub(crate) const SYNC_P99_MAX_MS: f64 = 25.0;

/// Which rounds met every claim goal at once.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct ClaimGoals {
    /// One entry per round: all goals met in that round.
    pub per_round: Vec<bool>,
}

impl ClaimGoals {
    pub(crate) fn met(&self) -> usize {
        self.per_round.iter().filter(|m| **m).count()
    }

    /// The goals in words.
    pub(crate) fn words() -> String {
        format!(
            "{}, `{SYNC_P99_ROW}` p99 ≤ {SYNC_P99_MAX_MS} ms",
            CLAIM_RATIO_GOALS
                .iter()
                .map(|k| format!("`{k}` at its goal"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// Checks every round against the claim goals; a ratio or row a round did not measure is a
/// goal it did not meet.
pub(crate) fn claim_goals(rows: &[Vec<Row>], ratios: &[Vec<Ratio>]) -> ClaimGoals {
    let per_round = rows
        .iter()
        .zip(ratios)
        .map(|(rows, ratios)| {
            let ratios_met = CLAIM_RATIO_GOALS.iter().all(|key| {
                ratios.iter().any(|r| {
                    r.key == *key && matches!((r.value, r.goal), (Some(v), Some(g)) if v >= g)
                })
            });
            let p99_met = rows
                .iter()
                .any(|r| r.key == SYNC_P99_ROW && r.p99_ms.is_some_and(|p| p <= SYNC_P99_MAX_MS));
            ratios_met && p99_met
        })
        .collect();
    ClaimGoals { per_round }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ratio(key: &str, value: Option<f64>, goal: Option<f64>) -> Ratio {
        Ratio {
            key: key.into(),
            numerator: String::new(),
            denominator: String::new(),
            value,
            goal,
            baseline: None,
            within_baseline: true,
        }
    }

    fn row(key: &str, per_sec: Option<f64>, p99: f64) -> Row {
        Row {
            key: key.into(),
            what: "w".into(),
            per_sec,
            p50_ms: Some(p99 / 2.0),
            p99_ms: Some(p99),
            note: "n".into(),
            cpu: None,
            group_commit: None,
        }
    }

    #[test]
    fn a_round_meets_the_claim_goals_only_with_all_four() {
        let ratios = |sync: f64, async_: f64| {
            vec![
                ratio("http_sync/pgbench_insert", Some(sync), Some(1.0)),
                ratio("http_sync/hot_row", Some(7.0), Some(6.0)),
                ratio("http_async/redis_granting", Some(async_), Some(0.5)),
            ]
        };
        let rows = |p99: f64| vec![row(SYNC_P99_ROW, Some(1.0), p99)];
        let g = claim_goals(
            &[rows(9.0), rows(9.0), rows(30.0), rows(9.0)],
            &[
                ratios(1.0, 0.5),
                ratios(0.99, 0.6),
                ratios(1.2, 0.6),
                ratios(1.1, 0.7),
            ],
        );
        assert_eq!(g.per_round, vec![true, false, false, true]);
        assert_eq!(g.met(), 2);
        let unmeasured = claim_goals(&[vec![]], &[ratios(1.1, 0.7)]);
        assert_eq!(unmeasured.per_round, vec![false], "no p99 row: not met");
    }

    #[test]
    fn the_claim_goals_name_ratios_that_have_goals() {
        for key in CLAIM_RATIO_GOALS {
            assert!(
                crate::bench::ratios::SPECS
                    .iter()
                    .any(|s| s.key == key && s.goal.is_some()),
                "{key} is no ratio with a goal"
            );
        }
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![f64::NAN, 1.0]), Some(1.0));
    }

    #[test]
    fn spread_counts_rounds_at_goal_and_skips_unmeasured_rounds() {
        let rounds = vec![
            vec![
                ratio("a", Some(0.8), Some(1.0)),
                ratio("b", Some(2.0), None),
            ],
            vec![ratio("a", Some(1.1), Some(1.0)), ratio("b", None, None)],
            vec![
                ratio("a", Some(0.9), Some(1.0)),
                ratio("b", Some(4.0), None),
            ],
        ];
        let s = spread(&rounds, &[]);
        assert_eq!(s[0].per_round, vec![Some(0.8), Some(1.1), Some(0.9)]);
        assert_eq!(
            (s[0].min, s[0].median, s[0].max),
            (Some(0.8), Some(0.9), Some(1.1))
        );
        assert_eq!(s[0].rounds_at_goal, Some(1));
        assert_eq!(s[1].median, Some(3.0));
        assert_eq!(s[1].rounds_at_goal, None);
        let m = median_ratios(&rounds[0], &s);
        assert_eq!(m[0].value, Some(0.9));
        assert_eq!(m[0].goal, Some(1.0));
    }

    #[test]
    fn the_quiet_median_leaves_out_rounds_either_row_lost_to_steal() {
        let with_steal = |key: &str, steal: Option<f64>| Row {
            cpu: Some(PerOp {
                server_us: 1.0,
                client_us: 1.0,
                postgres_us: 1.0,
                redis_us: 1.0,
                machine_busy_pct: Some(80.0),
                steal_pct: steal,
            }),
            ..row(key, Some(1.0), 1.0)
        };
        let r = |v: f64| Ratio {
            numerator: "engine".into(),
            denominator: "anchor".into(),
            ..ratio("e/a", Some(v), Some(1.0))
        };
        let rounds = vec![vec![r(1.2)], vec![r(0.3)], vec![r(0.8)], vec![r(1.1)]];
        let rows = vec![
            vec![
                with_steal("engine", Some(0.0)),
                with_steal("anchor", Some(1.0)),
            ],
            vec![
                with_steal("engine", Some(34.0)),
                with_steal("anchor", Some(1.0)),
            ],
            vec![
                with_steal("engine", Some(2.0)),
                with_steal("anchor", Some(19.0)),
            ],
            vec![with_steal("engine", Some(5.0)), with_steal("anchor", None)],
        ];
        let s = &spread(&rounds, &rows)[0];
        assert!(
            s.median.is_some_and(|m| (m - 0.95).abs() < 1e-9),
            "every round still counts there: {:?}",
            s.median
        );
        assert_eq!(
            s.quiet_rounds, 1,
            "steal on either row, or unread, is not quiet"
        );
        assert_eq!(s.quiet_median, Some(1.2));
        assert_eq!(
            steal_per_round(&rows),
            vec![Some(1.0), Some(34.0), Some(19.0), Some(5.0)]
        );
        let unread = spread(&rounds, &[]);
        assert_eq!((unread[0].quiet_rounds, unread[0].quiet_median), (0, None));
    }

    #[test]
    fn median_rows_keep_the_first_rounds_order_and_name_the_range() {
        let rounds = vec![
            vec![row("x", Some(10.0), 4.0), row("y", None, 1.0)],
            vec![row("x", Some(30.0), 8.0), row("y", None, 1.0)],
            vec![row("x", Some(20.0), 6.0), row("y", None, 1.0)],
        ];
        let rows = median_rows(&rounds);
        assert_eq!(rows[0].key, "x");
        assert_eq!(rows[0].per_sec, Some(20.0));
        assert_eq!(rows[0].p99_ms, Some(6.0));
        assert!(
            rows[0].note.contains("median of 3 rounds, 10–30/s"),
            "{}",
            rows[0].note
        );
        assert_eq!(rows[1].per_sec, None, "never a made-up figure");
        let one = median_rows(&rounds[..1]);
        assert_eq!(one[0].note, "n", "one round is reported as measured");
    }

    #[test]
    fn median_rows_take_the_median_machine_load_of_the_rounds_that_read_it() {
        let with = |busy: Option<f64>| Row {
            cpu: Some(PerOp {
                server_us: 1.0,
                client_us: 1.0,
                postgres_us: 1.0,
                redis_us: 1.0,
                machine_busy_pct: busy,
                steal_pct: busy.map(|_| 1.0),
            }),
            ..row("x", Some(10.0), 1.0)
        };
        let rounds = vec![
            vec![with(Some(90.0))],
            vec![with(None)],
            vec![with(Some(70.0))],
            vec![with(Some(72.0))],
        ];
        let cpu = median_rows(&rounds)[0]
            .cpu
            .expect("every round read the CPU");
        assert_eq!(cpu.machine_busy_pct, Some(72.0));
        assert_eq!(cpu.steal_pct, Some(1.0));
        let unread = median_rows(&[vec![with(None)], vec![with(None)]]);
        assert_eq!(unread[0].cpu.and_then(|c| c.machine_busy_pct), None);
    }

    #[test]
    fn median_rows_take_the_median_group_commit_of_the_rounds_that_had_one() {
        let with = |ms: Option<f64>| Row {
            group_commit: ms.map(|batch_ms| ChainLoad {
                batches: 100,
                claims_per_batch: 18.0,
                batch_ms,
                in_transaction_pct: 90.0,
            }),
            ..row("x", Some(10.0), 1.0)
        };
        let rounds = vec![
            vec![with(Some(1.8))],
            vec![with(None)],
            vec![with(Some(1.2))],
            vec![with(Some(1.5))],
        ];
        let load = median_rows(&rounds)[0]
            .group_commit
            .expect("three rounds had batches");
        assert!((load.batch_ms - 1.5).abs() < 1e-9, "{load:?}");
        assert_eq!(
            median_rows(&[vec![with(None)], vec![with(None)]])[0].group_commit,
            None
        );
    }
}
