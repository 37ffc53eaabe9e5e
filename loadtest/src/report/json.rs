//! `report.json`: the report document, pretty-printed (schema in loadtest/README.md).

use super::Report;

/// The JSON text of `report`.
pub(crate) fn render(report: &Report) -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(report)?;
    text.push('\n');
    Ok(text)
}
