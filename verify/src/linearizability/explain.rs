//! A violation in words: the longest linearizable prefix the search found, the state it
//! leaves, and the operations none of whose orders fit after it.

use std::fmt::Write as _;

use super::{
    model::{Model, OpOf},
    search::{Search, StateId},
};

/// What the client saw, or `unknown`.
fn recorded<M: Model>(op: &OpOf<M>) -> String {
    op.completion
        .as_ref()
        .map_or_else(|| "unknown".into(), |c| c.output.to_string())
}

impl<M: Model> Search<'_, M> {
    /// The model's answer to operation `i` in state `state`.
    fn answer(&self, state: StateId, i: usize) -> String {
        self.states
            .get(state as usize)
            .map_or_else(String::new, |s| {
                self.model.step(s, &self.ops[i].input).0.to_string()
            })
    }

    /// Human-readable account of the deepest dead end.
    pub(super) fn explain(&self) -> String {
        let Some(end) = &self.deepest else {
            return "no linearization exists".into();
        };
        let completed = |i: usize| self.ops[i].completion.is_some();
        let total = (0..self.ops.len()).filter(|&i| completed(i)).count();
        let placed = end.prefix.iter().filter(|p| completed(p.op)).count();
        let mut out = format!(
            "{placed} of {total} completed operations linearized; longest linearizable prefix:\n"
        );
        for (n, p) in end.prefix.iter().enumerate() {
            let (op, answer) = (self.ops[p.op], self.answer(p.before, p.op));
            let _ = writeln!(out, "  {}. {op} -> {answer}", n + 1);
        }
        if let Some(state) = self.states.get(end.state as usize) {
            let described = self.model.describe(state);
            let _ = write!(out, "model state after it:\n  {described}");
            if !described.ends_with('\n') {
                out.push('\n');
            }
        }
        if let Some(b) = end.blocker {
            let op = self.ops[b];
            let _ = writeln!(
                out,
                "stuck before {op}, recorded {}: it or an operation concurrent with it must \
                 come next, and none fits",
                recorded::<M>(op)
            );
        }
        for &i in &end.misfits {
            let (op, answer) = (self.ops[i], self.answer(end.state, i));
            let _ = writeln!(
                out,
                "  tried {op}: recorded {}, model answers {answer}",
                recorded::<M>(op)
            );
        }
        out
    }
}
