//! The acknowledgement record: every answer a simulated user saw, with its timing, kept in
//! one shared log so the post-run checks (I1, I3, I4, I5, I6, I7) can compare what clients
//! were told with what the API holds afterwards.

use std::{
    fs::File,
    io::{BufWriter, Write},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use anyhow::Context;

pub(crate) use crate::reply::{Reply, ReplyClass, RequestKind};
use crate::tally::Tally;

/// The shared log every Goose user appends to. Each answer is folded into the run's
/// [`Tally`], written to `acks.jsonl` when the log streams to a file, and kept in memory
/// only when the post-run checks need it ([`Reply::needed_by_checks`]): memory stays
/// bounded by what the checks must compare, not by the run's length.
#[derive(Debug, Clone, Default)]
pub(crate) struct AckLog(Arc<Mutex<Recorder>>);

/// What [`AckLog`] holds.
#[derive(Debug, Default)]
struct Recorder {
    recorded: Recorded,
    sink: Option<(PathBuf, BufWriter<File>)>,
    sink_error: Option<std::io::Error>,
}

/// Everything a run recorded.
#[derive(Debug, Clone, Default)]
pub(crate) struct Recorded {
    /// The run's figures, over every answer.
    pub tally: Tally,
    /// The answers the checks need, in completion order.
    pub kept: Vec<Reply>,
    /// Refused first attempts of claims: counted, not kept (no other answer shares their
    /// request id, so no check compares them with anything).
    pub refusals_not_kept: u64,
}

impl Recorded {
    /// Folds in one answer.
    pub(crate) fn add(&mut self, event: Reply) {
        self.tally.add(&event);
        if event.needed_by_checks() {
            self.kept.push(event);
        } else {
            self.refusals_not_kept += 1;
        }
    }
}

impl AckLog {
    /// A log that also writes every answer to `path` (JSON lines) as it comes.
    pub(crate) fn streaming_to(path: &Path) -> anyhow::Result<Self> {
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let recorder = Recorder {
            sink: Some((path.to_owned(), BufWriter::with_capacity(1 << 16, file))),
            ..Recorder::default()
        };
        Ok(Self(Arc::new(Mutex::new(recorder))))
    }

    /// Appends one answer (in completion order).
    pub(crate) fn record(&self, event: Reply) {
        let mut guard = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let r = &mut *guard;
        if let Some((_, out)) = &mut r.sink
            && r.sink_error.is_none()
        {
            let written = serde_json::to_writer(&mut *out, &event)
                .map_err(std::io::Error::from)
                .and_then(|()| out.write_all(b"\n"));
            r.sink_error = written.err();
        }
        r.recorded.add(event);
    }

    /// Takes what was recorded so far, flushing the file; an error if writing it failed.
    pub(crate) fn finish(&self) -> anyhow::Result<Recorded> {
        let mut guard = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let r = &mut *guard;
        if let Some((path, out)) = &mut r.sink {
            if let Some(e) = r.sink_error.take() {
                return Err(e).with_context(|| format!("writing {}", path.display()));
            }
            out.flush()
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(std::mem::take(&mut r.recorded))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A test event with the given op, user, status and code.
    pub(crate) fn ev(
        op: RequestKind,
        user: &str,
        status: Option<u16>,
        code: Option<&str>,
    ) -> Reply {
        Reply {
            op,
            goose_user: 0,
            user: user.into(),
            template: None,
            coupon: None,
            request_id: None,
            order_id: None,
            attempt: 0,
            duplicate: false,
            start_us: 0,
            latency_us: 1000,
            status,
            code: code.map(str::to_owned),
            refund_status: None,
            error: None,
            server: 0,
        }
    }

    #[test]
    fn outcomes() {
        assert_eq!(
            ev(RequestKind::Claim, "u", Some(201), None).class(),
            ReplyClass::Ok
        );
        assert_eq!(
            ev(RequestKind::Claim, "u", Some(409), Some("stock_empty")).class(),
            ReplyClass::Refused
        );
        assert_eq!(
            ev(RequestKind::Claim, "u", Some(503), None).class(),
            ReplyClass::Unknown
        );
        assert_eq!(
            ev(RequestKind::Claim, "u", None, None).class(),
            ReplyClass::Unknown
        );
        assert_eq!(
            ev(RequestKind::Redeem, "u", Some(429), None).class(),
            ReplyClass::Busy
        );
    }
}
