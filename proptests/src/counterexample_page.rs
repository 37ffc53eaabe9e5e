//! The core's counterexample page ([`coupon_verify::page`]), written to a file.

use std::path::Path;

pub use coupon_verify::page::{Page, html};

/// Writes `page` to `path`, creating its directory.
pub fn write(path: &Path, page: &Page<'_>) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, html(page))
}
