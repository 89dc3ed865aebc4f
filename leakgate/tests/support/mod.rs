//! What the integration tests share: the RFCs' colour meters as plain models (`rfc`), and the
//! rates the meters' property tests draw.

pub(crate) mod rfc;

use leakgate::Quota;
use proptest::prelude::*;
use std::time::Duration;

/// A rate as `(count, period_ns)`: one unit every `t` ns, written as `k` per `k * t` (whole
/// nanosecond intervals), or `3` per `t` (a third of `t`: intervals that are not whole
/// nanoseconds).
pub(crate) fn rate() -> impl Strategy<Value = (u64, u64)> {
    prop_oneof![
        (1u64..4, 1u64..3000).prop_map(|(k, t)| (k, k * t)),
        (1u64..3000).prop_map(|t| (3, t))
    ]
}

/// A byte quota of `rate` with a burst of `burst`.
pub(crate) fn bytes(rate: (u64, u64), burst: u64) -> Quota {
    Quota::bytes(rate.0, Duration::from_nanos(rate.1), burst).unwrap()
}
