//! The data set's manifests (`*/manifest.tsv`): one row per history, with its model and
//! expected verdict.

use std::{
    fs,
    path::{Path, PathBuf},
};

use super::ModelName;

/// One history of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Path relative to the data directory (`porcupine/jepsen/etcd_000.log`).
    pub file: String,
    /// The model to check it against.
    pub model: ModelName,
    /// The verdict the manifest states.
    pub linearizable: bool,
    /// Client operations invoked, as the manifest counts them.
    pub ops: usize,
}

/// Why a manifest cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// It could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The manifest.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A row or the header is not as described in the data set's README.
    #[error("{path} line {line}: {reason}")]
    Row {
        /// The manifest.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// The manifests the data set holds, relative to its directory.
pub const MANIFESTS: [&str; 2] = ["porcupine/manifest.tsv", "knossos/manifest.tsv"];

/// Every entry of every manifest under `data`, in manifest order.
pub fn load_all(data: &Path) -> Result<Vec<Entry>, ManifestError> {
    let mut entries = Vec::new();
    for manifest in MANIFESTS {
        entries.extend(load(&data.join(manifest))?);
    }
    Ok(entries)
}

/// The entries of one manifest; file paths are made relative to the data directory (the
/// manifest's parent's parent).
pub fn load(path: &Path) -> Result<Vec<Entry>, ManifestError> {
    let text = fs::read_to_string(path).map_err(|source| ManifestError::Io {
        path: path.to_owned(),
        source,
    })?;
    let dir = path
        .parent()
        .and_then(Path::file_name)
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default();
    let row_error = |line: usize, reason: String| ManifestError::Row {
        path: path.to_owned(),
        line,
        reason,
    };
    let mut lines = text.lines().enumerate();
    let header: Vec<&str> = lines
        .next()
        .map(|(_, h)| h.split('\t').collect())
        .unwrap_or_default();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| row_error(1, format!("no column {name:?}")))
    };
    let (file, model, expected, ops) = (
        column("file")?,
        column("model")?,
        column("expected_linearizable")?,
        column("ops")?,
    );
    let mut entries = Vec::new();
    for (n, row) in lines {
        if row.trim().is_empty() {
            continue;
        }
        let cells: Vec<&str> = row.split('\t').collect();
        let cell = |i: usize| cells.get(i).copied().unwrap_or_default();
        let entry = Entry {
            file: format!("{dir}/{}", cell(file)),
            model: model_of(cell(model))
                .ok_or_else(|| row_error(n + 1, format!("model {:?}", cell(model))))?,
            linearizable: match cell(expected) {
                "true" => true,
                "false" => false,
                other => return Err(row_error(n + 1, format!("verdict {other:?}"))),
            },
            ops: cell(ops)
                .parse()
                .map_err(|_| row_error(n + 1, format!("ops {:?}", cell(ops))))?,
        };
        entries.push(entry);
    }
    Ok(entries)
}

/// The manifest's model names (`etcd-cas-register`, `kv-get-put-append (partition by key)`).
fn model_of(name: &str) -> Option<ModelName> {
    match name.split_whitespace().next()? {
        "etcd-cas-register" => Some(ModelName::Etcd),
        "kv-get-put-append" => Some(ModelName::Kv),
        other => other.parse().ok(),
    }
}
