//! A fast, non-cryptographic hasher (the Firefox/rustc "Fx" hash) for the search's tables:
//! their keys are small integers and bit sets the search itself made, so SipHash's defence
//! against chosen keys buys nothing and costs a large share of the run time.

use std::hash::{BuildHasherDefault, Hasher};

/// The hasher: one multiply-rotate per word.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct FxHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Builds [`FxHasher`]s for `HashMap`/`HashSet`.
pub(super) type FxBuild = BuildHasherDefault<FxHasher>;
