//! [`Permit`] and [`OwnedPermit`]: permits held, given back on drop.

use super::limiter::ConcurrencyLimiter;
use std::sync::Arc;

/// Permits taken from a [`ConcurrencyLimiter`], given back when this is dropped.
///
/// ```
/// use leakgate::ConcurrencyLimiter;
///
/// let pool = ConcurrencyLimiter::new(2)?;
/// let permit = pool.try_acquire_n(2).unwrap();
/// assert_eq!(permit.count(), 2);
/// assert!(pool.try_acquire().is_none());
/// drop(permit);
/// assert_eq!(pool.in_flight(), 0);
/// # Ok::<(), leakgate::ConcurrencyError>(())
/// ```
#[derive(Debug)]
#[must_use = "the permits are given back as soon as this is dropped"]
pub struct Permit<'a> {
    pub(super) limiter: &'a ConcurrencyLimiter,
    pub(super) n: u32,
}

impl Permit<'_> {
    /// How many permits this holds.
    ///
    /// ```
    /// let pool = leakgate::ConcurrencyLimiter::new(5)?;
    /// assert_eq!(pool.try_acquire_n(3).unwrap().count(), 3);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn count(&self) -> u32 {
        self.n
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.limiter.release(self.n);
    }
}

/// Permits taken from a [`ConcurrencyLimiter`] behind an `Arc`, for holding across tasks (a
/// response future, a spawned task); given back when this is dropped.
///
/// ```
/// use leakgate::ConcurrencyLimiter;
/// use std::sync::Arc;
///
/// let pool = Arc::new(ConcurrencyLimiter::new(1)?);
/// let permit = pool.try_acquire_owned().unwrap();
/// std::thread::spawn(move || drop(permit)).join().unwrap();
/// assert_eq!(pool.in_flight(), 0);
/// # Ok::<(), leakgate::ConcurrencyError>(())
/// ```
#[derive(Debug)]
#[must_use = "the permits are given back as soon as this is dropped"]
pub struct OwnedPermit {
    pub(super) limiter: Arc<ConcurrencyLimiter>,
    pub(super) n: u32,
}

impl OwnedPermit {
    /// How many permits this holds.
    ///
    /// ```
    /// let pool = std::sync::Arc::new(leakgate::ConcurrencyLimiter::new(5)?);
    /// assert_eq!(pool.try_acquire_owned().unwrap().count(), 1);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn count(&self) -> u32 {
        self.n
    }

    /// The limiter these permits came from.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let pool = Arc::new(leakgate::ConcurrencyLimiter::new(5)?);
    /// let p = pool.try_acquire_owned().unwrap();
    /// assert!(Arc::ptr_eq(p.limiter(), &pool));
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn limiter(&self) -> &Arc<ConcurrencyLimiter> {
        &self.limiter
    }
}

impl Drop for OwnedPermit {
    fn drop(&mut self) {
        self.limiter.release(self.n);
    }
}
