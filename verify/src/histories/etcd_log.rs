//! Format A: Jepsen's log lines from its etcd test, as Porcupine keeps them
//! (`INFO  jepsen.util - 3 :invoke :cas [1 2]`, fields separated by tabs or spaces).
//!
//! `:fail :cas` is read as Porcupine reads it, an observed "compare failed"; a failed read
//! (`:timed-out`) tells nothing and had no effect; `:info` is an unknown outcome whose
//! argument is the invoke's.

use super::{
    ParseError,
    edn::{self, Edn},
    pairing::{Ending, Pairing},
    register::{RegisterOp, RegisterSeen},
};
use crate::linearizability::TimedOp;

/// One line, split into its fields.
struct Line<'a> {
    process: u64,
    kind: &'a str,
    f: &'a str,
    value: Edn,
}

/// The operations of a log, in invocation order.
pub fn parse(text: &str) -> Result<Vec<TimedOp<RegisterOp, RegisterSeen>>, ParseError> {
    let mut pairing = Pairing::default();
    for (n, text) in text.lines().enumerate() {
        let line = n + 1;
        if text.trim().is_empty() {
            continue;
        }
        let fields = split(text, line)?;
        let error = |reason: String| ParseError { line, reason };
        if fields.kind == "invoke" {
            let input = RegisterOp::from_edn(fields.f, &fields.value).map_err(error)?;
            pairing.invoke(line, fields.process, input)?;
            continue;
        }
        let invoked = *pairing.pending(line, fields.process)?;
        if invoked.name() != fields.f {
            return Err(error(format!(
                "a :{} completion for a :{} invoke",
                fields.f,
                invoked.name()
            )));
        }
        let ending = match (fields.kind, invoked) {
            ("info", _) => Ending::Unknown,
            ("ok", RegisterOp::Read) => Ending::Seen(RegisterSeen::Read(
                optional_int(&fields.value)
                    .ok_or_else(|| error("a read of a non-integer".into()))?,
            )),
            ("ok", RegisterOp::Write(_)) => Ending::Seen(RegisterSeen::Written),
            ("ok", RegisterOp::Cas { .. }) => Ending::Seen(RegisterSeen::Cas(true)),
            ("fail", RegisterOp::Cas { .. }) => Ending::Seen(RegisterSeen::Cas(false)),
            ("fail", _) => Ending::Seen(RegisterSeen::Failed),
            (other, _) => return Err(error(format!("unknown event type :{other}"))),
        };
        pairing.complete(line, fields.process, ending)?;
    }
    Ok(pairing.finish())
}

/// `INFO jepsen.util - PROCESS :TYPE :F VALUE`.
fn split(text: &str, line: usize) -> Result<Line<'_>, ParseError> {
    let error = |reason: &str| ParseError {
        line,
        reason: reason.into(),
    };
    let mut words = text.split_whitespace();
    let prefix: Vec<&str> = words.by_ref().take(3).collect();
    if prefix != ["INFO", "jepsen.util", "-"] {
        return Err(error(
            "expected `INFO jepsen.util - PROCESS :TYPE :F VALUE`",
        ));
    }
    let process = words
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| error("expected a process number"))?;
    let mut keyword = |what: &str| {
        words
            .next()
            .and_then(|w| w.strip_prefix(':'))
            .ok_or_else(|| error(what))
    };
    let kind = keyword("expected :invoke, :ok, :fail or :info")?;
    let f = keyword("expected :read, :write or :cas")?;
    let rest: Vec<&str> = words.collect();
    let value = edn::parse_one(&rest.join(" "), line)?;
    Ok(Line {
        process,
        kind,
        f,
        value,
    })
}

/// `nil` or an integer.
fn optional_int(value: &Edn) -> Option<Option<i64>> {
    match value {
        Edn::Nil => Some(None),
        Edn::Int(v) => Some(Some(*v)),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn pairs_events_with_tabs_or_spaces() {
        let log = "INFO  jepsen.util - 0\t:invoke\t:cas\t[1 2]\n\
                   INFO  jepsen.util - 1   :invoke :write  3\n\
                   INFO  jepsen.util - 0\t:fail\t:cas\t[1 2]\n\
                   INFO  jepsen.util - 2\t:invoke\t:read\tnil\n\
                   INFO  jepsen.util - 1   :info   :write  :timed-out\n\
                   INFO  jepsen.util - 2\t:ok\t:read\t3\n";
        let ops = parse(log).unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[0].input, RegisterOp::Cas { from: 1, to: 2 });
        assert_eq!(
            ops[0].completion.as_ref().map(|c| (c.at, c.output)),
            Some((3, RegisterSeen::Cas(false)))
        );
        assert_eq!(
            (ops[1].input, ops[1].completion.clone()),
            (RegisterOp::Write(3), None)
        );
        assert_eq!(
            ops[2].completion.as_ref().map(|c| c.output),
            Some(RegisterSeen::Read(Some(3)))
        );
    }

    #[test]
    fn names_the_bad_line() {
        let err = parse("INFO  jepsen.util - 0 :invoke :read nil\nhello\n").unwrap_err();
        assert_eq!(err.line, 2);
        let err = parse("INFO  jepsen.util - 0 :ok :read nil\n").unwrap_err();
        assert_eq!(err.line, 1);
        let err =
            parse("INFO  jepsen.util - 0 :invoke :read nil\nINFO  jepsen.util - 0 :ok :write 1\n")
                .unwrap_err();
        assert_eq!(err.line, 2);
    }
}
