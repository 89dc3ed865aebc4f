//! Permit tokens: 128 random bits in 32 hex digits, so that a client cannot guess (and release)
//! another's permit.
//!
//! The bits come from the standard library's `RandomState` (SipHash keyed from the operating
//! system's random source once per thread) over a process-wide counter and the time: two keyed
//! hashes of inputs never repeated in a process, under keys no client sees.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// Tokens made so far in this process; only makes each hash's input unique.
static MADE: AtomicU64 = AtomicU64::new(0);

/// A fresh permit token: 128 bits no client can guess, as [`AsyncRedisConcurrency`] hands out
/// (in 32 lowercase hex digits) and `leakgate serve`'s in-memory permits use too.
///
/// [`AsyncRedisConcurrency`]: crate::AsyncRedisConcurrency
///
/// ```
/// let (a, b) = (leakgate_redis::new_permit_token(), leakgate_redis::new_permit_token());
/// assert_ne!(a, b);
/// ```
pub fn new_permit_token() -> u128 {
    // Relaxed: the counter only has to give distinct values; it orders nothing else.
    let n = MADE.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let half = |salt: u64| {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(salt);
        h.write_u64(n);
        h.write_u128(nanos);
        h.finish()
    };
    (u128::from(half(0)) << 64) | u128::from(half(1))
}

/// A fresh token: 32 lowercase hex digits.
pub(crate) fn new_token() -> String {
    format!("{:032x}", new_permit_token())
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_are_32_hex_digits_and_distinct() {
        let a = super::new_token();
        let b = super::new_token();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
