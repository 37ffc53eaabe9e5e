//! Which server a request goes to when a run drives several (`--target` repeated or
//! `--servers N`): the shopper's own (`--spread sticky`) or the next in turn (`request`).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::cli::Spread;

/// The servers of a run and how requests are shared among them.
#[derive(Debug)]
pub(crate) struct Servers {
    bases: Vec<String>,
    spread: Spread,
    next: AtomicUsize,
}

impl Servers {
    /// `bases` (at least one) shared out by `spread`.
    pub(crate) fn new(bases: Vec<String>, spread: Spread) -> Self {
        Self {
            bases,
            spread,
            next: AtomicUsize::new(0),
        }
    }

    /// The index and base URL of the server for a request of a shopper whose home is `home`.
    pub(crate) fn pick(&self, home: usize) -> (usize, &str) {
        let n = self.bases.len().max(1);
        let i = match self.spread {
            Spread::Sticky => home % n,
            Spread::Request => self.next.fetch_add(1, Ordering::Relaxed) % n,
        };
        (i, self.bases.get(i).map_or("", String::as_str))
    }

    /// Every base URL, in order.
    pub(crate) fn bases(&self) -> &[String] {
        &self.bases
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sticky_keeps_the_home_and_request_rotates() {
        let bases = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let sticky = Servers::new(bases.clone(), Spread::Sticky);
        assert_eq!(sticky.pick(4), (1, "b"));
        assert_eq!(sticky.pick(4), (1, "b"));
        let rotating = Servers::new(bases, Spread::Request);
        let picked: Vec<usize> = (0..4).map(|_| rotating.pick(4).0).collect();
        assert_eq!(picked, [0, 1, 2, 0]);
    }
}
