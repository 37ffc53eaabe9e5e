//! Phase lines on stderr (setup / run / audit / report), so a long run says where it is.

use std::fmt::Display;

/// Prints one phase line on stderr.
pub(crate) fn phase(name: &str, message: impl Display) {
    eprintln!("==> [{name}] {message}");
}
