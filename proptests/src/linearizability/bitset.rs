//! A fixed-size set of operation indices, hashed as part of a search configuration.

/// A fixed-size set of operation indices.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Bitset(Vec<u64>);

impl Bitset {
    pub(super) fn new(len: usize) -> Self {
        Self(vec![0; len.div_ceil(64)])
    }

    pub(super) fn insert(&mut self, i: usize) {
        if let Some(w) = self.0.get_mut(i / 64) {
            *w |= 1 << (i % 64);
        }
    }

    pub(super) fn remove(&mut self, i: usize) {
        if let Some(w) = self.0.get_mut(i / 64) {
            *w &= !(1 << (i % 64));
        }
    }
}
