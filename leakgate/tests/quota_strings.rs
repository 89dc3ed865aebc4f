//! Quota strings: every valid quota round-trips through Display and FromStr, and no string panics.

use leakgate::Quota;
use proptest::prelude::*;
use std::time::Duration;

proptest! {
    #[test]
    fn display_then_parse_is_the_same_quota(
        count in 1u64..1_000_000,
        amount in 1u64..100_000,
        unit in prop::sample::select(vec![1u64, 1_000, 1_000_000, 1_000_000_000, 60_000_000_000]),
        burst in 1u64..1_000_000,
    ) {
        if let Ok(q) = Quota::new(count, Duration::from_nanos(amount * unit), burst) {
            let text = q.to_string();
            prop_assert_eq!(text.parse::<Quota>(), Ok(q), "{}", text);
        }
    }

    #[test]
    fn any_string_parses_or_errs_without_panicking(s in ".{0,40}") {
        let _ = s.parse::<Quota>();
    }

    #[test]
    fn quota_like_strings_never_panic(
        s in "[0-9_]{0,25}/[0-9_]{0,25}(ns|us|ms|s|min|h|d|x)?( burst [0-9]{0,25})?"
    ) {
        let _ = s.parse::<Quota>();
    }
}
