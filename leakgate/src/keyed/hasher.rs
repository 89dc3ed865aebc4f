//! A fast hasher seeded at random per table, so that keys chosen by an attacker cannot be aimed at
//! one shard or one probe window (hash flooding) without knowing the seed.

use std::hash::{BuildHasher, Hasher};

/// Folded multiply: the high and low halves of a 128-bit product, xored. Mixes every input bit into
/// every output bit in one multiplication.
#[inline]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// The first 8 bytes of `bytes`, zero-padded, as a little-endian word. Built in registers: a
/// `memcpy` into a stack word read back whole stalls store forwarding (`benches/rules.rs` on the
/// 2-core box: three keyed checks of `String` keys 106-114 ns with the copy, 93 ns without).
#[inline]
pub(crate) fn head(bytes: &[u8]) -> u64 {
    match bytes.first_chunk::<8>() {
        Some(first) => u64::from_le_bytes(*first),
        None => bytes.iter().rev().fold(0, |word, &byte| word << 8 | u64::from(byte)),
    }
}

/// Builds [`SeededHasher`]s sharing two random 64-bit seeds drawn from the OS (through `std`'s
/// `RandomState`) when the table is made.
#[derive(Clone, Debug)]
pub(crate) struct RandomSeed {
    seed: [u64; 2],
}

impl RandomSeed {
    pub(crate) fn new() -> Self {
        RandomSeed { seed: crate::sync::hash_seeds() }
    }
}

impl BuildHasher for RandomSeed {
    type Hasher = SeededHasher;

    #[inline]
    fn build_hasher(&self) -> SeededHasher {
        SeededHasher { state: self.seed[0], seed: self.seed[1] }
    }
}

/// Hashes 8 bytes per multiply; integers take one.
pub(crate) struct SeededHasher {
    state: u64,
    seed: u64,
}

impl Hasher for SeededHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let word = u64::from_le_bytes(chunk.try_into().expect("chunks of 8"));
            self.write_u64(word);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            // The length goes in too, so "ab" and "ab\0" differ.
            self.write_u64(head(rest) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_u64(&mut self, word: u64) {
        self.state = fold_mul(self.state ^ word, self.seed);
    }

    #[inline]
    fn write_u32(&mut self, word: u32) {
        self.write_u64(u64::from(word));
    }

    #[inline]
    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        fold_mul(self.state, self.seed.rotate_left(32) | 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_differ_between_tables_and_hashes_spread() {
        let (a, b) = (RandomSeed::new(), RandomSeed::new());
        assert_ne!(a.hash_one(42u64), b.hash_one(42u64));
        // Consecutive integers land in distinct low bits (the shard index) often enough.
        let shards: std::collections::HashSet<u64> =
            (0..1000u64).map(|k| a.hash_one(k) & 63).collect();
        assert_eq!(shards.len(), 64);
        assert_ne!(a.hash_one("ab"), a.hash_one("ab\0"));
    }

    #[test]
    fn heads_pack_the_first_bytes() {
        assert_eq!(head(b"ab"), u64::from_le_bytes(*b"ab\0\0\0\0\0\0"));
        assert_eq!(head(b"abcdefghij"), u64::from_le_bytes(*b"abcdefgh"));
        assert_eq!(head(b""), 0);
    }
}
