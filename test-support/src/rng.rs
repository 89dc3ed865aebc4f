//! A small deterministic generator (xorshift64*), so that a failing test repeats with its seed.
//!
//! ```
//! let mut a = leakgate_test_support::Rng::new(7);
//! let mut b = leakgate_test_support::Rng::new(7);
//! assert_eq!(a.next(), b.next());
//! ```

/// xorshift64* (Vigna): fast, full period over non-zero states, good enough to draw test cases.
///
/// ```
/// let mut rng = leakgate_test_support::Rng::new(1);
/// assert!(rng.below(10) < 10);
/// ```
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (zero, the one state xorshift never leaves, is taken as one).
    ///
    /// ```
    /// let _ = leakgate_test_support::Rng::new(0);
    /// ```
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// The next 64 random bits.
    ///
    /// ```
    /// let mut rng = leakgate_test_support::Rng::new(3);
    /// assert_ne!(rng.next(), rng.next());
    /// ```
    #[allow(clippy::should_implement_trait)] // an `Iterator` would never end; `next` reads best
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform enough in `0..n` (`n` > 0; the modulo's bias is below 2^-32 for `n` < 2^32).
    ///
    /// ```
    /// let mut rng = leakgate_test_support::Rng::new(5);
    /// assert!((0..100).all(|_| rng.below(6) < 6));
    /// ```
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
