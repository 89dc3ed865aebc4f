//! Unit tests of the quota grammar: every spelling, the errors, and the round trip.

use super::*;

fn parse(s: &str) -> Result<Quota, QuotaError> {
    s.parse()
}

fn q(count: u64, period_ns: u64, burst: u64) -> Quota {
    Quota::new(count, Duration::from_nanos(period_ns), burst).unwrap()
}

const S: u64 = 1_000_000_000;

#[test]
fn examples_parse() {
    assert_eq!(parse("100/s"), Ok(q(100, S, 100)));
    assert_eq!(parse("5/min"), Ok(q(5, 60 * S, 5)));
    assert_eq!(parse("10/ms"), Ok(q(10, 1_000_000, 10)));
    assert_eq!(parse("1/h"), Ok(q(1, 3600 * S, 1)));
    assert_eq!(parse("3/1500ms"), Ok(q(3, 1_500_000_000, 3)));
    assert_eq!(parse(" 100 / s  BURST 20 "), Ok(q(100, S, 20)));
    assert_eq!(parse("1_000/2s"), Ok(q(1000, 2 * S, 1000)));
    assert_eq!(parse("7/250us"), Ok(q(7, 250_000, 7)));
    assert_eq!(parse("1/d"), Ok(q(1, 86_400 * S, 1)));
}

#[test]
fn every_unit_spelling() {
    let cases: [(&[&str], u64); 7] = [
        (&["ns", "nsec", "nsecs", "nanosecond", "nanoseconds", "NS"], 1),
        (
            &["us", "\u{b5}s", "\u{3bc}s", "usec", "usecs", "microsecond", "microseconds", "US"],
            1_000,
        ),
        (&["ms", "msec", "msecs", "millisecond", "milliseconds", "MS"], 1_000_000),
        (&["s", "sec", "secs", "second", "seconds", "S", "Seconds"], S),
        (&["m", "min", "mins", "minute", "minutes", "MIN"], 60 * S),
        (&["h", "hr", "hrs", "hour", "hours", "H"], 3_600 * S),
        (&["d", "day", "days", "D"], 86_400 * S),
    ];
    for (spellings, ns) in cases {
        for unit in spellings {
            assert_eq!(parse(&format!("7/{unit}")), Ok(q(7, ns, 7)), "7/{unit}");
            assert_eq!(parse(&format!("7/2{unit}")), Ok(q(7, 2 * ns, 7)), "7/2{unit}");
            assert_eq!(parse(&format!("7 / 2 {unit} burst 3")), Ok(q(7, 2 * ns, 3)), "{unit}");
        }
    }
}

#[test]
fn plural_s_only_on_names() {
    for bad in ["1/mss", "1/hs", "1/ds", "1/nss", "1/sec_", "1/secondss"] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn fractional_periods_are_exact() {
    assert_eq!(parse("100/0.5s"), Ok(q(100, S / 2, 100)));
    assert_eq!(parse("1/1.5s"), Ok(q(1, 1_500_000_000, 1)));
    assert_eq!(parse("1/.25ms"), Ok(q(1, 250_000, 1)));
    assert_eq!(parse("1/2.s"), Ok(q(1, 2 * S, 1)));
    assert_eq!(parse("1/1.500000s"), Ok(q(1, 1_500_000_000, 1)));
    assert_eq!(parse("1/0.001us"), Ok(q(1, 1, 1)));
    assert_eq!(parse("3/1.5 minutes burst 1"), Ok(q(3, 90 * S, 1)));
    assert_eq!(parse("1/1_000.5ms"), Ok(q(1, 1_000_500_000, 1)));
}

#[test]
fn sub_nanosecond_periods_are_refused_with_a_hint() {
    for text in ["1/1.5ns", "1/0.0001us", "1/1.0000000000000000001s"] {
        let msg = parse(text).unwrap_err().to_string();
        assert!(msg.contains("not a whole number of nanoseconds"), "{text}: {msg}");
    }
}

#[test]
fn errors_name_the_bad_part() {
    let msg = |s: &str| parse(s).unwrap_err().to_string();
    assert!(msg("10/fortnight").contains("\"fortnight\""));
    assert!(msg("abc/s").contains("\"abc\" is not a count"));
    assert!(msg("1.5/s").contains("\"1.5\" is not a count"));
    assert!(msg("100").contains("missing \"/\""));
    assert!(msg("100/s extra").contains("\"extra\""));
    assert!(msg("100/s burst").contains("after \"burst\""));
    assert!(msg("100/s burst x").contains("\"x\" is not a burst"));
    assert!(msg("100/s burst 1.5").contains("\"1.5\" is not a burst"));
    assert!(msg("").contains("empty"));
    assert!(msg("99999999999999999999/s").contains("too large"));
    assert!(msg("1/1.2.3s").contains("\"1.2.3\" is not a period length"));
    assert!(msg("1/.s").contains("\".\" is not a period length"));
    assert!(msg("10/5").contains("found nothing"));
    assert!(msg("10/5 burst 2").contains("found \"burst\""));
}

#[test]
fn errors_never_show_an_amount_that_was_not_typed() {
    // No amount typed: the message speaks of the "/" and never of an implied 1.
    let msg = parse("10/fortnight").unwrap_err().to_string();
    assert!(msg.contains("after \"/\" but found \"fortnight\""), "{msg}");
    assert!(!msg.contains("after 1") && !msg.contains("\"1\""), "{msg}");
    let msg = parse("10/").unwrap_err().to_string();
    assert!(msg.contains("after \"/\" but found nothing"), "{msg}");
    let msg = parse("10/2x").unwrap_err().to_string();
    assert!(msg.contains("after \"2\" but found \"x\""), "{msg}");
}

#[test]
fn validation_errors_come_from_quota_new() {
    assert_eq!(parse("0/s"), Err(QuotaError::ZeroCount));
    assert_eq!(parse("1/0s"), Err(QuotaError::ZeroPeriod));
    assert_eq!(parse("1/0.0s"), Err(QuotaError::ZeroPeriod));
    assert_eq!(parse("5/s burst 0"), Err(QuotaError::ZeroBurst));
    assert_eq!(parse("1/9999999999d"), Err(QuotaError::PeriodTooLong));
    assert_eq!(parse("1/99999999999999999999s"), Err(QuotaError::PeriodTooLong));
    assert_eq!(
        parse("1/999999999999999999999999999999999999999999s"),
        Err(QuotaError::PeriodTooLong)
    );
    assert_eq!(parse("1000000000000/s"), Err(QuotaError::RateTooHigh));
}

#[test]
fn display_round_trips() {
    for s in ["100/s", "5/min", "3/1500ms", "100/s burst 20", "1/h", "2/3d", "9/7ns burst 1"] {
        assert_eq!(parse(s).unwrap().to_string(), s);
    }
    // Other spellings print in the canonical form, which reads back to the same quota.
    for (typed, shown) in [
        ("100/0.5s", "100/500ms"),
        ("1/1.5s", "1/1500ms"),
        ("5/minutes", "5/min"),
        ("2/\u{3bc}s burst 1", "2/us burst 1"),
        ("1/90 seconds", "1/90s"),
    ] {
        let quota = parse(typed).unwrap();
        assert_eq!(quota.to_string(), shown, "{typed}");
        assert_eq!(parse(shown), Ok(quota), "{typed}");
    }
}

fn bytes(count: u64, period_ns: u64, burst: u64) -> Quota {
    Quota::bytes(count, Duration::from_nanos(period_ns), burst).unwrap()
}

#[test]
fn byte_quotas_parse() {
    assert_eq!(parse("10 MB/s burst 64 KiB"), Ok(bytes(10_000_000, S, 65_536)));
    assert_eq!(parse("1 Gbit/s burst 1 MB"), Ok(bytes(125_000_000, S, 1_000_000)));
    assert_eq!(parse("400 Gbit/s"), Ok(bytes(50_000_000_000, S, 50_000_000_000)));
    assert_eq!(parse("1 bit/s"), Ok(bytes(1, 8 * S, 1)));
    assert_eq!(parse("12 bit/s"), Ok(bytes(3, 2 * S, 2)));
    assert_eq!(parse("1.5 kB/s burst 1500"), Ok(bytes(1500, S, 1500)));
    assert_eq!(parse("8 kbit / 2 ms burst 16 bit"), Ok(bytes(1000, 2_000_000, 2)));
    assert_eq!(parse("1GiB/h"), Ok(bytes(1 << 30, 3600 * S, 1 << 30)));
    assert_eq!(parse("3 bytes/s BURST 1 byte"), Ok(bytes(3, S, 1)));
    // A byte quota is not the count quota of the same numbers.
    assert_ne!(parse("100 B/s"), parse("100/s"));
}

#[test]
fn byte_quota_errors_are_clear() {
    let msg = |s: &str| parse(s).unwrap_err().to_string();
    assert_eq!(parse("401 Gbit/s"), Err(QuotaError::ByteRateTooHigh));
    assert_eq!(parse("50_000_000_001 B/s"), Err(QuotaError::ByteRateTooHigh));
    assert_eq!(
        parse("50 GB/s burst 2 EB"),
        Ok(bytes(50_000_000_000, S, 2_000_000_000_000_000_000))
    );
    assert_eq!(parse("50 GB/s burst 3 EB"), Err(QuotaError::BurstTooLarge));
    assert_eq!(parse("0 MB/s"), Err(QuotaError::ZeroCount));
    assert!(msg("100/s burst 1 MB").contains("in bytes but the count is not"));
    assert!(msg("1 Gbit/s burst 7 bit").contains("not a whole number of bytes"));
    assert!(msg("10 Mb/s").contains("ambiguous"));
    assert!(msg("10 KB/s").contains("ambiguous"));
    assert!(msg("10 MX/s").contains("not a unit"));
    assert!(msg("0.5 B/s").contains("not a whole number of bytes"));
    assert!(msg("10 MB/s burst").contains("after \"burst\""));
    assert!(msg("10 MB/s burst 1 MX").contains("not a unit"));
    assert!(msg("10 MB/s burst x").contains("\"x\" is not a burst"));
    assert!(msg("10 MB/fortnight").contains("\"fortnight\""));
}

#[test]
fn bits_are_exact() {
    // count / period == bits / (8 s), cross-multiplied.
    for bits in [1, 2, 3, 4, 7, 8, 12, 1_000, 999_999_999, 1_000_000_000, 400_000_000_000] {
        let q = parse(&format!("{bits} bit/s")).unwrap();
        let (count, period) = (u128::from(q.count()), q.period().as_nanos());
        assert_eq!(count * 8 * u128::from(S), u128::from(bits) * period, "{bits} bit/s");
        assert_eq!(q, Quota::bits_per_second(bits).unwrap());
        assert_eq!(q.burst(), bits.div_ceil(8));
    }
}

#[test]
fn byte_quotas_print_in_bytes_and_read_back() {
    for (typed, shown) in [
        ("10 MB/s burst 64 KiB", "10 MB/s burst 64 KiB"),
        ("1 Gbit/s burst 1 MB", "125 MB/s burst 1 MB"),
        ("400 Gbit/s", "50 GB/s"),
        ("1 bit/s", "1 B/8s"),
        ("12 bit/s", "3 B/2s burst 2 B"),
        ("1500 B/ms burst 9000", "1500 B/ms burst 9 kB"),
    ] {
        let quota = parse(typed).unwrap();
        assert_eq!(quota.to_string(), shown, "{typed}");
        assert_eq!(parse(shown), Ok(quota), "{typed}");
    }
}

proptest::proptest! {
    /// Whatever the text, parsing answers (never panics), and whatever parses prints as text that
    /// reads back to the same quota.
    #[test]
    fn any_text_parses_or_errs_and_round_trips(
        text in proptest::prop_oneof![
            proptest::prelude::any::<String>(),
            "[0-9 ._]{0,6}[kKMGTPEi]{0,2}(B|b|bit|bits|byte)?/[0-9. ]{0,4}(s|ms|ns|h|x)( burst [0-9.]{0,4} ?[kMGi]{0,2}(B|bit)?)?",
        ],
    ) {
        if let Ok(quota) = parse(&text) {
            proptest::prop_assert_eq!(parse(&quota.to_string()), Ok(quota), "{:?}", text);
        }
    }

    /// An amount with a prefix reads as exactly its number of bytes (or bits / 8).
    #[test]
    fn amounts_are_exact(
        mantissa in 1u64..5000,
        prefix in 0usize..7,
        bits in proptest::prelude::any::<bool>(),
        period_ms in 1u64..5000,
    ) {
        let (name, multiplier) =
            [("", 1), ("k", 1000), ("Ki", 1024), ("M", 1_000_000), ("Mi", 1 << 20), ("G", 1_000_000_000), ("Gi", 1 << 30)][prefix];
        let unit = if bits { "bit" } else { "B" };
        let text = format!("{mantissa} {name}{unit}/{period_ms}ms burst 1");
        let (value, period) = (u128::from(mantissa * multiplier), u128::from(period_ms) * 1_000_000);
        let per_byte = if bits { 8 } else { 1 };
        if value * u128::from(S) > 50_000_000_000 * per_byte * period {
            proptest::prop_assert_eq!(parse(&text), Err(QuotaError::ByteRateTooHigh));
            return Ok(());
        }
        let q = parse(&text).unwrap();
        let (count, q_period) = (u128::from(q.count()), q.period().as_nanos());
        proptest::prop_assert_eq!(count * per_byte * period, value * q_period, "{}", text);
        proptest::prop_assert_eq!(q.burst(), 1);
    }
}
