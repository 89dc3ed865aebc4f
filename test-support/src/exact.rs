//! Exact rational nanoseconds, for the plain reference models that property tests hold the
//! limiters to (redis-cell's `CL.THROTTLE` in `leakgate-serve`, `AsyncRedisCell` in
//! `leakgate-redis`): an emission interval of `period / count` is kept exactly, never rounded.
//!
//! ```
//! use leakgate_test_support::exact::Ns;
//! let t = Ns::new(1_000_000_000, 3); // a third of a second
//! assert_eq!(t.times(3), Ns::whole(1_000_000_000));
//! ```

use std::cmp::Ordering;
use std::time::Duration;

/// Greatest common divisor (1 for `gcd(0, 0)`, so that it always divides).
///
/// ```
/// assert_eq!(leakgate_test_support::exact::gcd(12, 18), 6);
/// ```
pub fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

/// A non-negative rational number of nanoseconds, `num / den`, kept reduced. The models keep
/// their operands small enough (counts up to thousands, periods up to seconds) that `u128`
/// products do not overflow; an overflow panics in a test build.
///
/// ```
/// use leakgate_test_support::exact::Ns;
/// assert!(Ns::new(1, 3) < Ns::new(1, 2));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Ns {
    num: u128,
    den: u128,
}

impl Ns {
    /// `num / den` nanoseconds (`den` > 0).
    ///
    /// ```
    /// let half = leakgate_test_support::exact::Ns::new(2, 4);
    /// assert_eq!((half.num(), half.den()), (1, 2));
    /// ```
    pub fn new(num: u128, den: u128) -> Ns {
        let g = gcd(num, den);
        Ns { num: num / g, den: den / g }
    }

    /// A whole number of nanoseconds.
    ///
    /// ```
    /// assert_eq!(leakgate_test_support::exact::Ns::whole(5).num(), 5);
    /// ```
    pub fn whole(ns: u64) -> Ns {
        Ns::new(u128::from(ns), 1)
    }

    /// The numerator, reduced.
    ///
    /// ```
    /// assert_eq!(leakgate_test_support::exact::Ns::new(6, 4).num(), 3);
    /// ```
    pub fn num(self) -> u128 {
        self.num
    }

    /// The denominator, reduced.
    ///
    /// ```
    /// assert_eq!(leakgate_test_support::exact::Ns::new(6, 4).den(), 2);
    /// ```
    pub fn den(self) -> u128 {
        self.den
    }

    /// `self + o`.
    ///
    /// ```
    /// use leakgate_test_support::exact::Ns;
    /// assert_eq!(Ns::new(1, 2).add(Ns::new(1, 3)), Ns::new(5, 6));
    /// ```
    #[allow(clippy::should_implement_trait)] // the models read as plain calls
    pub fn add(self, o: Ns) -> Ns {
        let (a, b, l) = self.common(o);
        Ns::new(a + b, l)
    }

    /// `self - o`, or zero when `o` is larger.
    ///
    /// ```
    /// use leakgate_test_support::exact::Ns;
    /// assert_eq!(Ns::whole(1).sub(Ns::whole(2)), Ns::whole(0));
    /// ```
    #[allow(clippy::should_implement_trait)] // saturating, unlike `Sub`
    pub fn sub(self, o: Ns) -> Ns {
        let (a, b, l) = self.common(o);
        Ns::new(a.saturating_sub(b), l)
    }

    /// `self * n`.
    ///
    /// ```
    /// use leakgate_test_support::exact::Ns;
    /// assert_eq!(Ns::new(1, 3).times(6), Ns::whole(2));
    /// ```
    pub fn times(self, n: u64) -> Ns {
        Ns::new(self.num * u128::from(n), self.den)
    }

    /// Whole nanoseconds, rounded up.
    ///
    /// ```
    /// use leakgate_test_support::exact::Ns;
    /// assert_eq!(Ns::new(1, 3).ceil_ns(), std::time::Duration::from_nanos(1));
    /// ```
    pub fn ceil_ns(self) -> Duration {
        Duration::from_nanos(u64::try_from(self.num.div_ceil(self.den)).unwrap_or(u64::MAX))
    }

    /// Whole seconds, rounded up.
    ///
    /// ```
    /// use leakgate_test_support::exact::Ns;
    /// assert_eq!(Ns::whole(1_000_000_001).ceil_s(), 2);
    /// ```
    pub fn ceil_s(self) -> i64 {
        i64::try_from(self.num.div_ceil(self.den * 1_000_000_000)).unwrap_or(i64::MAX)
    }

    /// How many whole `t` fit in `self` (`t` > 0).
    ///
    /// ```
    /// use leakgate_test_support::exact::Ns;
    /// assert_eq!(Ns::whole(10).div_floor(Ns::new(10, 3)), 3);
    /// ```
    pub fn div_floor(self, t: Ns) -> u128 {
        (self.num * t.den) / (self.den * t.num)
    }

    /// Both over their least common denominator: `(self's numerator, o's, the denominator)`.
    fn common(self, o: Ns) -> (u128, u128, u128) {
        let l = self.den / gcd(self.den, o.den) * o.den;
        (self.num * (l / self.den), o.num * (l / o.den), l)
    }
}

impl PartialEq for Ns {
    fn eq(&self, o: &Ns) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}

impl Eq for Ns {}

impl PartialOrd for Ns {
    fn partial_cmp(&self, o: &Ns) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Ns {
    fn cmp(&self, o: &Ns) -> Ordering {
        (self.num * o.den).cmp(&(o.num * self.den))
    }
}
