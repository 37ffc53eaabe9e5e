//! What a run keeps on disk so that it can be audited later, alone or merged with runs from
//! other machines (`coupon-loadtest audit RUN_DIR…`): `record.json` (the servers, the
//! templates, how the shoppers are named, when the load began) and `acks.jsonl` (every
//! answer a shopper saw, one JSON object a line).

use std::{io::BufRead, path::Path};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::{acks::Reply, templates::TemplateInfo};

/// Version of `record.json` and `acks.jsonl`.
pub(crate) const RECORD_VERSION: u32 = 1;

/// `record.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RunRecord {
    /// Version of this document.
    pub record_version: u32,
    /// The run directory's name.
    pub run_id: String,
    /// Scenario name.
    pub scenario: String,
    /// Base URL of every server the run drove, in `Reply::server` order.
    pub servers: Vec<String>,
    /// The run's tag: its shoppers are `lt<tag>-c0` … (see `setup::customer_id`).
    pub run_tag: String,
    /// How many shoppers.
    pub customers: usize,
    /// The templates the run drove.
    pub templates: Vec<TemplateInfo>,
    /// Goose users of the run.
    pub users: usize,
    /// When the load began (the zero of every event's `start_us`), Unix microseconds.
    pub epoch_unix_us: u64,
    /// Whether the run audited itself (a record-only run did not).
    pub audited: bool,
}

/// The answers' file in a run directory (streamed during the run by
/// [`crate::acks::AckLog::streaming_to`]).
pub(crate) const ACKS_FILE: &str = "acks.jsonl";

/// Writes `record.json` into `dir`.
pub(crate) fn write(dir: &Path, record: &RunRecord) -> anyhow::Result<()> {
    let path = dir.join("record.json");
    let text = serde_json::to_string_pretty(record)?;
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}

/// Reads the record of the run in `dir`.
pub(crate) fn read(dir: &Path) -> anyhow::Result<RunRecord> {
    let path = dir.join("record.json");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {} (is {} a coupon-loadtest run directory?)",
            path.display(),
            dir.display()
        )
    })?;
    let record: RunRecord =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    anyhow::ensure!(
        record.record_version == RECORD_VERSION,
        "{}: record version {} (this coupon-loadtest reads {RECORD_VERSION})",
        path.display(),
        record.record_version
    );
    Ok(record)
}

/// Hands every answer of the run in `dir` to `each`, one line at a time (a soak's record
/// need not fit in memory); how many there were.
pub(crate) fn for_each_event(
    dir: &Path,
    record: &RunRecord,
    mut each: impl FnMut(Reply),
) -> anyhow::Result<u64> {
    let path = dir.join(ACKS_FILE);
    let file = std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
    let mut n = 0;
    for (line_no, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let event: Reply = serde_json::from_str(&line)
            .with_context(|| format!("{} line {}: not an event", path.display(), line_no + 1))?;
        anyhow::ensure!(
            event.server < record.servers.len().max(1),
            "{} line {}: server {} is not one of the run's {}",
            path.display(),
            line_no + 1,
            event.server,
            record.servers.len()
        );
        each(event);
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acks::{AckLog, RequestKind, tests::ev};

    #[test]
    fn a_record_reads_back_and_bad_lines_are_named() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let record = RunRecord {
            record_version: RECORD_VERSION,
            run_id: "r".into(),
            scenario: "flash-sale".into(),
            servers: vec!["http://a".into()],
            run_tag: "abcd1234".into(),
            customers: 2,
            templates: Vec::new(),
            users: 1,
            epoch_unix_us: 7,
            audited: false,
        };
        write(dir.path(), &record)?;
        let log = AckLog::streaming_to(&dir.path().join(ACKS_FILE))?;
        log.record(ev(RequestKind::Claim, "u", Some(201), None));
        log.record(ev(RequestKind::Claim, "v", Some(409), Some("stock_empty")));
        assert_eq!(log.finish()?.kept.len(), 1);
        let back = read(dir.path())?;
        let mut got = Vec::new();
        for_each_event(dir.path(), &back, |e| got.push(e))?;
        assert_eq!((back.run_tag.as_str(), got.len()), ("abcd1234", 2));
        assert_eq!((got[0].status, got[1].status), (Some(201), Some(409)));
        std::fs::write(dir.path().join(ACKS_FILE), "{\"op\":\"claim\"}\n")?;
        let err = format!(
            "{:#}",
            for_each_event(dir.path(), &back, |_| {})
                .err()
                .context("accepted a bad line")?
        );
        assert!(err.contains("line 1"), "{err}");
        Ok(())
    }
}
