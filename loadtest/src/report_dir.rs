//! Where a run's reports go (`<parent>/<UTC time>-<name>/`), the run's id (that
//! directory's name) and the commit the tool was built from: every command's report is
//! stamped so.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use time::{OffsetDateTime, macros::format_description};

/// The run directory's name (its id).
pub(crate) fn run_id(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Creates `<parent>/<UTC YYYYMMDDTHHMMSSZ>-<scenario>` (with `-2`, `-3`… if taken).
pub(crate) fn create(parent: &Path, at: OffsetDateTime, scenario: &str) -> anyhow::Result<PathBuf> {
    let stamp = at
        .format(format_description!(
            "[year][month][day]T[hour][minute][second]Z"
        ))
        .context("formatting the run's timestamp")?;
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    for n in 1..1000 {
        let name = if n == 1 {
            format!("{stamp}-{scenario}")
        } else {
            format!("{stamp}-{scenario}-{n}")
        };
        let dir = parent.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    }
    bail!("no free run directory under {}", parent.display())
}

/// `git rev-parse --short HEAD`, or `unknown`.
pub(crate) fn git_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}
