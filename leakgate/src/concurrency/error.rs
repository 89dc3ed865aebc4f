//! [`ConcurrencyError`]: a limit that cannot be built.

use super::state::MAX_PERMITS;
use std::fmt;

/// Why a concurrency limit could not be built.
///
/// ```
/// use leakgate::{ConcurrencyError, ConcurrencyLimiter};
///
/// assert_eq!(ConcurrencyLimiter::new(0).unwrap_err(), ConcurrencyError::Zero);
/// assert!(matches!(ConcurrencyLimiter::new(u32::MAX), Err(ConcurrencyError::TooLarge(_))));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConcurrencyError {
    /// A limit (or an adaptive limit's minimum) of zero would admit nothing, ever.
    Zero,
    /// A limit above [`MAX_PERMITS`](crate::MAX_PERMITS); the value given.
    TooLarge(u64),
    /// An adaptive limit's bounds out of order: `min <= initial <= max` must hold.
    Order {
        /// The minimum given.
        min: u32,
        /// The initial limit given.
        initial: u32,
        /// The maximum given.
        max: u32,
    },
}

impl fmt::Display for ConcurrencyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConcurrencyError::Zero => f.write_str("a concurrency limit must be at least 1"),
            ConcurrencyError::TooLarge(n) => {
                write!(
                    f,
                    "a concurrency limit of {n} is above the most there can be ({MAX_PERMITS})"
                )
            }
            ConcurrencyError::Order { min, initial, max } => write!(
                f,
                "adaptive limit bounds out of order: need min <= initial <= max, got {min}, \
                 {initial}, {max}"
            ),
        }
    }
}

impl std::error::Error for ConcurrencyError {}

/// Checks a limit given by the caller.
pub(crate) fn checked(max: u64) -> Result<u32, ConcurrencyError> {
    match max {
        0 => Err(ConcurrencyError::Zero),
        m if m > u64::from(MAX_PERMITS) => Err(ConcurrencyError::TooLarge(m)),
        m => Ok(m as u32),
    }
}
