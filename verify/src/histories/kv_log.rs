//! Format B: Porcupine's key-value logs, one EDN map per line
//! (`{:process 3, :type :invoke, :f :put, :key "7", :value "x 3 0 y"}`).

use super::{
    ParseError,
    edn::{self, Edn},
    kv::{KvAnswer, KvOp},
    pairing::{Ending, Pairing},
};
use crate::linearizability::TimedOp;

/// The operations of a log, in invocation order.
pub fn parse(text: &str) -> Result<Vec<TimedOp<KvOp, KvAnswer>>, ParseError> {
    let mut pairing = Pairing::default();
    for (n, text) in text.lines().enumerate() {
        let line = n + 1;
        if text.trim().is_empty() {
            continue;
        }
        let event = edn::parse_one(text, line)?;
        let error = |reason: String| ParseError { line, reason };
        let field = |name: &str| event.get(name).unwrap_or(&Edn::Nil);
        let process = match field("process") {
            Edn::Int(p) => u64::try_from(*p).map_err(|_| error(format!("process {p}")))?,
            other => return Err(error(format!(":process {other:?} is not a client"))),
        };
        let f = field("f").keyword().unwrap_or_default();
        let value = field("value");
        match field("type").keyword() {
            Some("invoke") => {
                let Edn::Str(key) = field("key") else {
                    return Err(error("an invoke needs a string :key".into()));
                };
                let key = key.clone();
                let input = match (f, value) {
                    ("get", _) => KvOp::Get(key),
                    ("put", Edn::Str(v)) => KvOp::Put(key, v.clone()),
                    ("append", Edn::Str(v)) => KvOp::Append(key, v.clone()),
                    _ => return Err(error(format!("cannot invoke :{f} with {value:?}"))),
                };
                pairing.invoke(line, process, input)?;
            }
            Some("ok") => {
                let seen = match (pairing.pending(line, process)?, value) {
                    (KvOp::Get(_), Edn::Str(v)) => KvAnswer::Value(v.as_str().into()),
                    (KvOp::Get(_), Edn::Nil) => KvAnswer::Value("".into()),
                    (KvOp::Get(_), _) => return Err(error(format!("a get of {value:?}"))),
                    _ => KvAnswer::Done,
                };
                pairing.complete(line, process, Ending::Seen(seen))?;
            }
            Some("info") => pairing.complete(line, process, Ending::Unknown)?,
            other => return Err(error(format!("unexpected :type {other:?}"))),
        }
    }
    Ok(pairing.finish())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_gets_puts_and_appends() {
        let log = "{:process 0, :type :invoke, :f :put, :key \"1\", :value \"x 0 0 y\"}\n\
                   {:process 1, :type :invoke, :f :get, :key \"1\", :value nil}\n\
                   {:process 0, :type :ok, :f :put, :key \"1\", :value \"x 0 0 y\"}\n\
                   {:process 1, :type :ok, :f :get, :key \"1\", :value \"\"}\n";
        let ops = parse(log).unwrap();
        assert_eq!(ops[0].input, KvOp::Put("1".into(), "x 0 0 y".into()));
        assert_eq!(ops[1].input, KvOp::Get("1".into()));
        let seen: Vec<_> = ops
            .iter()
            .map(|op| op.completion.as_ref().map(|c| (c.at, c.output.clone())))
            .collect();
        assert_eq!(
            seen,
            [
                Some((3, KvAnswer::Done)),
                Some((4, KvAnswer::Value("".into())))
            ]
        );
    }

    #[test]
    fn names_the_bad_line() {
        let log = "{:process 0, :type :invoke, :f :get, :key \"1\", :value nil}\n\
                   {:process 0, :type :ok, :f :get, :key \"1\", :value 5}\n";
        assert_eq!(parse(log).unwrap_err().line, 2);
        assert_eq!(parse("{:process 0, :type :invoke").unwrap_err().line, 1);
    }
}
