//! Durations on the command line, in the grammar of a quota's period.
//!
//! `--max-wait 1.5s`, `--max-wait 2min`, `--max-wait 1m`, `--max-wait 250µs`: whatever may stand
//! after the `/` of a rate may stand here, because it is read by the same parser (leakgate's
//! `Quota` parser, on `1/DURATION`). `0` with or without a unit is zero.

use leakgate::{Quota, QuotaError};
use std::time::Duration;

/// Reads a duration such as `30s`, `1.5s`, `250ms`, `2min`, `1h`, `3 days`; for clap.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let typed = text.trim();
    let bad =
        |why: &str| format!("{text:?} is not a duration ({why}; e.g. 30s, 1.5s, 250ms, 2min, 1h)");
    if typed.contains('/') || typed.to_ascii_lowercase().contains("burst") {
        return Err(bad("a duration has no \"/\" and no burst"));
    }
    // A bare zero needs no unit: zero seconds is zero minutes.
    if !typed.is_empty() && typed.chars().all(|c| matches!(c, '0' | '.' | '_')) && typed != "." {
        return Ok(Duration::ZERO);
    }
    match period(&format!("1/{typed}")) {
        // "1/D" has a bucket as long as D, which a quota refuses past about 480 years: the same
        // period with a bucket a thousandth as long (1000/D burst 1) is a quota again.
        Err(QuotaError::BurstTooLarge) => period(&format!("1000/{typed} burst 1")),
        other => other,
    }
    .or_else(|e| match e {
        QuotaError::ZeroPeriod => Ok(Duration::ZERO),
        QuotaError::PeriodTooLong => Err(bad("longer than about 584 years")),
        QuotaError::Parse(why) => Err(bad(&describe(&why))),
        other => Err(bad(&other.to_string())),
    })
}

/// The period of the quota `text`.
fn period(text: &str) -> Result<Duration, QuotaError> {
    text.parse::<Quota>().map(|quota| quota.period())
}

/// The quota parser's message about the period, without the `in "1/..."` it appends.
fn describe(why: &str) -> String {
    let why = why.split(" in \"1/").next().unwrap_or(why);
    why.replace("after \"/\" ", "").replace("period length", "number")
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn the_period_grammar() {
        let ok = |text: &str| parse_duration(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(ok("30s"), Duration::from_secs(30));
        assert_eq!(ok("1.5s"), Duration::from_millis(1500));
        assert_eq!(ok(".25ms"), Duration::from_micros(250));
        assert_eq!(ok("2min"), Duration::from_secs(120));
        assert_eq!(ok("1m"), Duration::from_secs(60));
        assert_eq!(ok("7us"), Duration::from_micros(7));
        assert_eq!(ok("7\u{b5}s"), Duration::from_micros(7));
        assert_eq!(ok("7\u{3bc}s"), Duration::from_micros(7));
        assert_eq!(ok("1 hour"), Duration::from_secs(3600));
        assert_eq!(ok("3days"), Duration::from_secs(3 * 86_400));
        assert_eq!(ok("s"), Duration::from_secs(1));
        // Up to u64::MAX ns (about 584.5 years), beyond what a "1/D" quota's bucket may hold.
        assert_eq!(ok("177000d"), Duration::from_secs(177_000 * 86_400));
        assert_eq!(ok("213503d"), Duration::from_secs(213_503 * 86_400));
        assert_eq!(ok("18446744073709551615ns"), Duration::from_nanos(u64::MAX));
        for zero in ["0", "0s", "0.0ms", "0 seconds"] {
            assert_eq!(ok(zero), Duration::ZERO, "{zero}");
        }
    }

    #[test]
    fn bad_durations_say_why() {
        for (text, says) in [
            ("", "expected a unit"),
            ("10", "expected a unit"),
            ("soon", "\"soon\""),
            ("1.2.3s", "\"1.2.3\" is not a number"),
            ("-1s", "not a duration"),
            ("1/s", "no \"/\""),
            ("1s burst 2", "no burst"),
            ("99999999999999999999h", "584 years"),
            ("1.5ns", "whole number of nanoseconds"),
            ("0x", "found \"x\""),
        ] {
            let msg = parse_duration(text).unwrap_err();
            assert!(msg.contains(says), "{text:?}: {msg}");
            assert!(!msg.contains("in \"1/"), "the quota trick shows through: {msg}");
        }
    }
}
