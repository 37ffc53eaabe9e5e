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

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::tally::Tally;

/// What a request was for; its `name` is the stable request name in Goose and the reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Op {
    /// `POST /v1/templates/{id}/claims`.
    Claim,
    /// `POST /v1/coupons/{id}/redeem` by the owner.
    Redeem,
    /// `POST /v1/coupons/{id}/refund` by the owner.
    Refund,
    /// `GET /v1/users/me/coupons`.
    MyCoupons,
    /// A redeem of another user's coupon (must be refused with 403).
    RedeemCrossUser,
    /// A refund of another user's coupon (must be refused with 403).
    RefundCrossUser,
    /// `POST /v1/coupons/{id}/lock`: an order placed with the coupon.
    Lock,
    /// `POST /v1/coupons/{id}/release`: the order cancelled.
    Release,
    /// A lock of another user's coupon (must be refused with 403).
    LockCrossUser,
}

impl Op {
    /// The request name in Goose metrics and in the reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Claim => "claim",
            Self::Redeem => "redeem",
            Self::Refund => "refund",
            Self::MyCoupons => "my_coupons",
            Self::RedeemCrossUser => "redeem_cross_user",
            Self::RefundCrossUser => "refund_cross_user",
            Self::Lock => "lock",
            Self::Release => "release",
            Self::LockCrossUser => "lock_cross_user",
        }
    }

    /// Whether the request acts on a coupon its sender does not own.
    pub(crate) fn cross_user(self) -> bool {
        matches!(
            self,
            Self::RedeemCrossUser | Self::RefundCrossUser | Self::LockCrossUser
        )
    }
}

/// How a request ended, as the client can know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// 2xx: the effect happened (acknowledged).
    Ok,
    /// A definitive refusal (4xx other than 408/429): no effect.
    Refused,
    /// 429 busy: refused before doing anything, worth retrying.
    Busy,
    /// Timeout, transport error or 5xx: the effect may or may not have happened.
    Unknown,
}

/// One answer a user saw (a line of `acks.jsonl`, where absent fields are `None`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Event {
    /// The request.
    pub op: Op,
    /// Index of the Goose user that sent it.
    pub goose_user: usize,
    /// The shopper (user id) whose token was used.
    pub user: Arc<str>,
    /// The template involved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<Uuid>,
    /// The coupon involved (for claims: the coupon answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coupon: Option<Uuid>,
    /// Claim idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<Arc<str>>,
    /// Order of a redeem or refund.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_id: Option<Arc<str>>,
    /// 0 for the first try, then retries with the same ids.
    pub attempt: u32,
    /// A deliberate repeat of an acknowledged request (same ids).
    pub duplicate: bool,
    /// Start, microseconds since the load began.
    pub start_us: u64,
    /// Latency including the body, microseconds.
    pub latency_us: u64,
    /// HTTP status; `None` for a timeout or transport error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Error code of a refusal (`stock_empty`, `not_owner`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Coupon status a refund answered (`issued` or `revoked`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refund_status: Option<String>,
    /// Transport error text, for timeouts and the like.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Index of the server the request went to (0 with one server).
    #[serde(default)]
    pub server: usize,
}

impl Event {
    /// How the request ended.
    pub(crate) fn outcome(&self) -> Outcome {
        match self.status {
            None => Outcome::Unknown,
            Some(s) if (200..300).contains(&s) => Outcome::Ok,
            Some(429) => Outcome::Busy,
            Some(408) => Outcome::Unknown,
            Some(s) if s >= 500 => Outcome::Unknown,
            Some(_) => Outcome::Refused,
        }
    }

    /// End, microseconds since the load began.
    pub(crate) fn end_us(&self) -> u64 {
        self.start_us + self.latency_us
    }

    /// Whether a post-run check compares this answer with anything. A claim's refused first
    /// attempt does not: a definitive refusal is never retried and only acknowledged
    /// requests are deliberately repeated, so no other answer shares its request id. It is
    /// also most of a flash sale (the flood after the stock is gone).
    pub(crate) fn needed_by_checks(&self) -> bool {
        !(self.op == Op::Claim
            && self.attempt == 0
            && !self.duplicate
            && self.outcome() == Outcome::Refused)
    }
}

/// The shared log every Goose user appends to. Each answer is folded into the run's
/// [`Tally`], written to `acks.jsonl` when the log streams to a file, and kept in memory
/// only when the post-run checks need it ([`Event::needed_by_checks`]): memory stays
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
    pub kept: Vec<Event>,
    /// Refused first attempts of claims: counted, not kept (no other answer shares their
    /// request id, so no check compares them with anything).
    pub refusals_not_kept: u64,
}

impl Recorded {
    /// Folds in one answer.
    pub(crate) fn add(&mut self, event: Event) {
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
    pub(crate) fn record(&self, event: Event) {
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
    pub(crate) fn ev(op: Op, user: &str, status: Option<u16>, code: Option<&str>) -> Event {
        Event {
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
        assert_eq!(ev(Op::Claim, "u", Some(201), None).outcome(), Outcome::Ok);
        assert_eq!(
            ev(Op::Claim, "u", Some(409), Some("stock_empty")).outcome(),
            Outcome::Refused
        );
        assert_eq!(
            ev(Op::Claim, "u", Some(503), None).outcome(),
            Outcome::Unknown
        );
        assert_eq!(ev(Op::Claim, "u", None, None).outcome(), Outcome::Unknown);
        assert_eq!(
            ev(Op::Redeem, "u", Some(429), None).outcome(),
            Outcome::Busy
        );
    }
}
