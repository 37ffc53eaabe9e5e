//! Anchors measured on both sides of the engine rows. In one pass an anchor ran a minute or
//! more before the engine row it is compared with, and on a machine whose speed drifts that
//! minute's drift lands in the ratio. Each round measures its anchors again after the engine
//! rows; an anchor's rate is then the geometric mean of its two passes, which is where a
//! steady drift puts the engine rows measured between them.

use super::{cpu::PerOp, measure::Row};

/// One row per anchor of `before`: both passes combined where both measured it, else the
/// pass that did (never a made-up figure).
pub(crate) fn bracket(before: Vec<Row>, after: &[Row]) -> Vec<Row> {
    before
        .into_iter()
        .map(|b| match after.iter().find(|a| a.key == b.key) {
            Some(a) => combine(b, a),
            None => b,
        })
        .collect()
}

fn combine(before: Row, after: &Row) -> Row {
    let (Some(x), Some(y)) = (before.per_sec, after.per_sec) else {
        if before.per_sec.is_none() && after.per_sec.is_none() {
            return before;
        }
        let (kept, which) = if before.per_sec.is_some() {
            (before, "after")
        } else {
            (after.clone(), "before")
        };
        return Row {
            note: format!(
                "{}; not measured {which} the engine rows, this pass only",
                kept.note
            ),
            ..kept
        };
    };
    let mean = |p: Option<f64>, q: Option<f64>| match (p, q) {
        (Some(p), Some(q)) => Some((p + q) / 2.0),
        (p, q) => p.or(q),
    };
    let cpu = match (before.cpu, after.cpu) {
        (Some(p), Some(q)) => Some(PerOp {
            server_us: (p.server_us + q.server_us) / 2.0,
            client_us: (p.client_us + q.client_us) / 2.0,
            postgres_us: (p.postgres_us + q.postgres_us) / 2.0,
            redis_us: (p.redis_us + q.redis_us) / 2.0,
            machine_busy_pct: mean(p.machine_busy_pct, q.machine_busy_pct),
            steal_pct: mean(p.steal_pct, q.steal_pct),
        }),
        (p, q) => p.or(q),
    };
    Row {
        per_sec: Some((x * y).sqrt()),
        p50_ms: mean(before.p50_ms, after.p50_ms),
        p99_ms: mean(before.p99_ms, after.p99_ms),
        note: format!(
            "{}; {x:.0}/s before and {y:.0}/s after the engine rows (their geometric mean; \
             latency and CPU: the mean of the two)",
            before.note
        ),
        cpu,
        ..before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, per_sec: Option<f64>, p99: f64) -> Row {
        Row {
            key: key.into(),
            what: "w".into(),
            per_sec,
            p50_ms: Some(1.0),
            p99_ms: Some(p99),
            note: "16 clients".into(),
            cpu: Some(PerOp {
                server_us: 0.0,
                client_us: 10.0,
                postgres_us: 100.0,
                redis_us: 0.0,
                machine_busy_pct: Some(80.0),
                steal_pct: None,
            }),
            group_commit: None,
        }
    }

    #[test]
    fn an_anchor_is_the_geometric_mean_of_its_two_passes() {
        let mut after = row("pgbench_insert", Some(9000.0), 4.0);
        after.cpu = after.cpu.map(|c| PerOp {
            machine_busy_pct: Some(60.0),
            steal_pct: Some(4.0),
            ..c
        });
        let rows = bracket(vec![row("pgbench_insert", Some(4000.0), 2.0)], &[after]);
        assert_eq!(rows.len(), 1);
        // The machine's load: the mean of the two passes, or the one pass that read it.
        assert_eq!(rows[0].cpu.and_then(|c| c.machine_busy_pct), Some(70.0));
        assert_eq!(rows[0].cpu.and_then(|c| c.steal_pct), Some(4.0));
        assert_eq!(rows[0].per_sec, Some(6000.0));
        assert_eq!(rows[0].p99_ms, Some(3.0));
        assert_eq!(rows[0].cpu.map(|c| c.postgres_us), Some(100.0));
        assert!(rows[0].note.contains("4000/s before and 9000/s after"));
    }

    #[test]
    fn one_pass_not_measured_leaves_the_other_and_says_so() {
        let rows = bracket(
            vec![
                row("a", None, 2.0),
                row("b", Some(10.0), 2.0),
                row("c", Some(5.0), 2.0),
            ],
            &[row("a", Some(7.0), 2.0), row("b", None, 2.0)],
        );
        assert_eq!(rows[0].per_sec, Some(7.0));
        assert!(rows[0].note.contains("not measured before the engine rows"));
        assert_eq!(rows[1].per_sec, Some(10.0));
        assert!(rows[1].note.contains("not measured after the engine rows"));
        // No second pass at all: the first stands as it was.
        assert_eq!(rows[2].per_sec, Some(5.0));
        assert_eq!(rows[2].note, "16 clients");
    }
}
