//! Quotas as text: `100/s`, `5/minute`, `100/0.5s`, `3/1500ms`, `100/s burst 20`.
//! [`Display`](std::fmt::Display) prints the canonical form and [`FromStr`] reads it back to an
//! equal [`Quota`].
//!
//! The grammar is documented on [`Quota`]'s `FromStr` impl, where users see it.
//!
//! Error messages quote what was typed and never show a number the input did not contain.

use crate::quota::{Quota, QuotaError};
use crate::quota_bytes::{is_amount, parse_amount, write_bytes};
use crate::quota_decimal::{decimal, digits, Decimal};
use core::fmt;
use core::str::FromStr;
use core::time::Duration;

/// The units [`Display`](fmt::Display) may print, longest first, with their length in
/// nanoseconds.
const CANONICAL_UNITS: [(&str, u64); 7] = [
    ("d", 86_400_000_000_000),
    ("h", 3_600_000_000_000),
    ("min", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
];

/// What the error messages list as accepted units.
const UNIT_LIST: &str = "ns, us (µs), ms, s, min (m), h, d, or a name such as second or hours";

/// The length in nanoseconds of a unit as typed, or `None` if it is not a unit.
fn unit_ns(unit: &str) -> Option<u64> {
    // In lower case, in a buffer on the stack: the longest unit, "microseconds", has 12 bytes.
    let mut buffer = [0u8; 16];
    let mut len = 0;
    for c in unit.chars().flat_map(char::to_lowercase) {
        let end = len + c.len_utf8();
        c.encode_utf8(buffer.get_mut(len..end)?);
        len = end;
    }
    let lower = core::str::from_utf8(&buffer[..len]).ok()?;
    // Long names may take a plural "s"; the short forms may not ("ms" is not "m" twice).
    let singular = match lower.strip_suffix('s') {
        Some(stem) if stem.len() >= 3 => stem,
        _ => lower,
    };
    let ns = match singular {
        "ns" | "nsec" | "nanosecond" => 1,
        // U+00B5 MICRO SIGN and U+03BC GREEK SMALL LETTER MU: keyboards produce either.
        "us" | "\u{b5}s" | "\u{3bc}s" | "usec" | "microsecond" => 1_000,
        "ms" | "msec" | "millisecond" => 1_000_000,
        "s" | "sec" | "second" => 1_000_000_000,
        "m" | "min" | "minute" => 60_000_000_000,
        "h" | "hr" | "hrs" | "hour" => 3_600_000_000_000,
        "d" | "day" => 86_400_000_000_000,
        _ => return None,
    };
    Some(ns)
}

/// A whole decimal `u64` with optional `_` separators; `what` names it in the error.
fn whole_number(token: &str, what: &str, input: &str) -> Result<u64, QuotaError> {
    match digits(token) {
        Some(d) if d.count > 0 => d.value.and_then(|v| u64::try_from(v).ok()).ok_or_else(|| {
            QuotaError::parse(format_args!("the {what} {token:?} is too large in {input:?}"))
        }),
        _ => Err(QuotaError::parse(format_args!(
            "{token:?} is not a {what} (expected a whole number) in {input:?}"
        ))),
    }
}

/// A token quoted as `{:?}` does, or `instead` when it is empty.
struct QuotedOr<'t>(&'t str, &'static str);

impl fmt::Display for QuotedOr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            "" => f.write_str(self.1),
            token => write!(f, "{token:?}"),
        }
    }
}

impl FromStr for Quota {
    type Err = QuotaError;

    /// Parses a quota such as `100/s`, `5/minute`, `100/0.5s`, `10/s burst 1`, or a byte quota
    /// such as `10 MB/s burst 64 KiB` or `1 Gbit/s`.
    ///
    /// Grammar (spaces around tokens allowed; unit names are case-insensitive):
    /// `COUNT "/" [AMOUNT] UNIT [ "burst" BURST ]`.
    ///
    /// * `COUNT` and `BURST` are whole decimal `u64`s, with optional `_` separators.
    /// * `AMOUNT` is a decimal number, whole or with a fraction (`1.5`, `0.25`, `.5`); a missing
    ///   amount means one unit. The period must come to a whole number of nanoseconds, and is
    ///   computed exactly (no floating point): `1/1.5s` is one unit every 1,500,000,000 ns.
    /// * `UNIT` is `ns` (`nsec`, `nanosecond`), `us` (`µs` with the micro sign, `μs` with the
    ///   Greek mu, `usec`, `microsecond`), `ms` (`msec`, `millisecond`), `s` (`sec`, `second`),
    ///   `m` (`min`, `minute`), `h` (`hr`, `hour`) or `d` (`day`); every long name may also take a
    ///   plural `s`.
    /// * **A missing burst means `burst = COUNT`**, as for [`Quota::per_second`]: `"10/s"` may
    ///   admit 10 units at once after a pause. Write `burst 1` for evenly spaced admissions.
    ///   (`leakgate pace` reads its rate by this same rule.)
    ///
    /// **Byte quotas.** A `COUNT` written as an amount of bytes or bits makes a byte quota
    /// ([`Quota::bytes`]): a number (whole or with a fraction, `_` separators allowed) and a unit,
    /// `B` (`byte`, `bytes`) or `bit` (`bits`), with an optional prefix: `k`, `M`, `G`, `T`, `P`,
    /// `E` (powers of 1000) or `Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei` (powers of 1024). `K` and a
    /// bare `b` are refused as ambiguous. The amount must be a whole number of its unit (`1.5
    /// kB` is 1500 bytes; `1.5 B` is an error). A rate in bits is exact: `12 bit/s` is 3 bytes
    /// every 2 seconds. The burst of a byte quota is an amount too (in bits, a whole number of
    /// bytes), or a bare number of bytes; a missing burst is `COUNT` in bytes, rounded up.
    /// A byte quota prints in bytes with the largest prefix that divides exactly.
    ///
    /// ```
    /// use leakgate::Quota;
    /// use std::time::Duration;
    /// let q: Quota = "3/1500ms burst 1".parse()?;
    /// assert_eq!(q, Quota::new(3, Duration::from_millis(1500), 1)?);
    /// assert_eq!("100/0.5s".parse::<Quota>()?, Quota::new(100, Duration::from_millis(500), 100)?);
    /// assert_eq!("5/minute".parse::<Quota>()?, Quota::per_minute(5)?);
    /// assert_eq!("10/s".parse::<Quota>()?.burst(), 10); // no burst given: burst = count
    /// assert!("10/fortnight".parse::<Quota>().is_err());
    /// let q: Quota = "10 MB/s burst 64 KiB".parse()?;
    /// assert_eq!(q, Quota::bytes(10_000_000, Duration::from_secs(1), 65_536)?);
    /// assert_eq!("400 Gbit/s".parse::<Quota>()?, Quota::bytes_per_second(50_000_000_000)?);
    /// assert_eq!("1 bit/s".parse::<Quota>()?, Quota::bytes(1, Duration::from_secs(8), 1)?);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let text = input.trim();
        if text.is_empty() {
            return Err(QuotaError::parse(format_args!(
                "the quota is empty (expected e.g. \"100/s\")"
            )));
        }
        let Some((count, rest)) = text.split_once('/') else {
            return Err(QuotaError::parse(format_args!(
                "missing \"/\" in {input:?} (expected e.g. \"100/s\")"
            )));
        };
        let count = count.trim();
        let amount =
            if is_amount(count) { Some(parse_amount(count, "count", input)?) } else { None };
        let (period, tail) = split_period(rest.trim_start());
        let period = parse_period(period, input)?;
        let burst = burst_token(tail, input)?;
        let Some(amount) = amount else {
            let count = whole_number(count, "count", input)?;
            let burst = match burst {
                None => count,
                Some(b) if is_amount(b) => {
                    return Err(QuotaError::parse(format_args!(
                        "the burst {b:?} is in bytes but the count is not (write the count in \
                         bytes too, e.g. \"10 MB/s\") in {input:?}"
                    )))
                }
                Some(b) => whole_number(b, "burst", input)?,
            };
            return Quota::new(count, period, burst);
        };
        let burst = match burst {
            None => amount.value.div_ceil(if amount.bits { 8 } else { 1 }),
            Some(b) if is_amount(b) => match parse_amount(b, "burst", input)? {
                a if !a.bits => a.value,
                a if a.value.is_multiple_of(8) => a.value / 8,
                _ => {
                    return Err(QuotaError::parse(format_args!(
                        "the burst {b:?} is not a whole number of bytes in {input:?}"
                    )))
                }
            },
            Some(b) => whole_number(b, "burst", input)?,
        };
        let period_ns = u64::try_from(period.as_nanos()).map_err(|_| QuotaError::PeriodTooLong)?;
        if amount.bits {
            Quota::bits(amount.value, period_ns, burst)
        } else {
            Quota::bytes(amount.value, period, burst)
        }
    }
}

/// The burst written after the period (`burst 20`, `burst 64 KiB`), if any.
fn burst_token<'t>(tail: &'t str, input: &str) -> Result<Option<&'t str>, QuotaError> {
    let tail = tail.trim();
    let Some(word) = tail.split_whitespace().next() else {
        return Ok(None);
    };
    if !word.eq_ignore_ascii_case("burst") {
        return Err(QuotaError::parse(format_args!(
            "expected \"burst N\" after the period but found {word:?} in {input:?}"
        )));
    }
    match tail[word.len()..].trim() {
        "" => {
            Err(QuotaError::parse(format_args!("missing the number after \"burst\" in {input:?}")))
        }
        burst => Ok(Some(burst)),
    }
}

/// Splits `[AMOUNT][spaces]UNIT rest` after the amount and the unit word, so that `2 s` and `2s`
/// are both one period.
fn split_period(rest: &str) -> (&str, &str) {
    let amount_end =
        rest.find(|c: char| !(c.is_ascii_digit() || c == '_' || c == '.')).unwrap_or(rest.len());
    let after_amount = &rest[amount_end..];
    let unit_start = amount_end + (after_amount.len() - after_amount.trim_start().len());
    // A unit word, if the amount is followed by one: letters (µ and μ included).
    let unit_len = rest[unit_start..]
        .find(|c: char| c.is_whitespace() || c.is_ascii_digit())
        .unwrap_or(rest.len() - unit_start);
    let end = if unit_len == 0 { amount_end } else { unit_start + unit_len };
    rest.split_at(end)
}

/// `[AMOUNT]UNIT`, e.g. `s`, `1500ms`, `1.5 s`, `2hours`, exactly in nanoseconds.
fn parse_period(token: &str, input: &str) -> Result<Duration, QuotaError> {
    let split =
        token.find(|c: char| !(c.is_ascii_digit() || c == '_' || c == '.')).unwrap_or(token.len());
    let (amount, unit) = token.split_at(split);
    let unit = unit.trim_start();
    let Some(unit_ns) = unit_ns(unit) else {
        let (after, found) = (QuotedOr(amount, "\"/\""), QuotedOr(unit, "nothing"));
        return Err(QuotaError::parse(format_args!(
            "expected a unit ({UNIT_LIST}) after {after} but found {found} in {input:?}"
        )));
    };
    if amount.is_empty() {
        return Ok(Duration::from_nanos(unit_ns));
    }
    let ns = decimal_times(amount, unit_ns, input)?;
    Ok(Duration::from_nanos(ns))
}

/// `amount * unit_ns` for a decimal `amount` such as `1.5`, exactly, as whole nanoseconds.
fn decimal_times(amount: &str, unit_ns: u64, input: &str) -> Result<u64, QuotaError> {
    let not_a_number = || {
        QuotaError::parse(format_args!(
            "{amount:?} is not a period length (expected a number such as 2 or 1.5) in {input:?}"
        ))
    };
    let Some(Decimal { whole, fraction }) = decimal(amount) else {
        return Err(not_a_number());
    };
    let too_long = || QuotaError::PeriodTooLong;
    // Whole part: any number of digits; past u64 it is too long anyway.
    let whole = whole.value.ok_or_else(too_long)?;
    // Fraction: exact only if `fraction * unit_ns` divides by 10^digits. A unit is at most
    // 8.64e13 ns, so more than 14 significant fraction digits can never give whole nanoseconds.
    let scale = u32::try_from(fraction.count)
        .ok()
        .filter(|&d| d <= 14)
        .map(|d| 10u128.pow(d))
        .ok_or_else(|| sub_nanosecond(amount, input))?;
    let fraction = fraction.value.ok_or_else(not_a_number)?;
    let fraction_ns = fraction * u128::from(unit_ns);
    if !fraction_ns.is_multiple_of(scale) {
        return Err(sub_nanosecond(amount, input));
    }
    let ns = whole
        .checked_mul(u128::from(unit_ns))
        .and_then(|w| w.checked_add(fraction_ns / scale))
        .ok_or_else(too_long)?;
    u64::try_from(ns).map_err(|_| too_long())
}

fn sub_nanosecond(amount: &str, input: &str) -> QuotaError {
    QuotaError::parse(format_args!(
        "the period {amount:?} is not a whole number of nanoseconds in {input:?} \
         (write the count and period larger, e.g. 2/3ns for 1/1.5ns)"
    ))
}

impl fmt::Display for Quota {
    /// The canonical form: the largest unit that divides the period exactly, and the burst only
    /// when it differs from the count (a missing burst reads back as `burst = count`). A byte
    /// quota prints its count and burst in bytes with the largest prefix that divides each
    /// exactly (`10 MB/s burst 64 KiB`; `1 Gbit/s` prints as `125 MB/s`).
    ///
    /// ```
    /// use leakgate::Quota;
    /// use std::time::Duration;
    /// assert_eq!(Quota::per_second(100)?.to_string(), "100/s");
    /// assert_eq!(Quota::new(3, Duration::from_millis(1500), 3)?.to_string(), "3/1500ms");
    /// assert_eq!(Quota::per_second(100)?.with_burst(20)?.to_string(), "100/s burst 20");
    /// assert_eq!(Quota::bits_per_second(1)?.to_string(), "1 B/8s");
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let period = self.period_ns();
        let (unit, unit_ns) = CANONICAL_UNITS
            .iter()
            .copied()
            .find(|&(_, ns)| period.is_multiple_of(ns))
            .unwrap_or(("ns", 1));
        let amount = |f: &mut fmt::Formatter<'_>, n: u64| match self.is_bytes() {
            true => write_bytes(f, n),
            false => write!(f, "{n}"),
        };
        amount(f, self.count())?;
        match period / unit_ns {
            1 => write!(f, "/{unit}")?,
            n => write!(f, "/{n}{unit}")?,
        }
        if self.burst() != self.count() {
            f.write_str(" burst ")?;
            amount(f, self.burst())?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "quota_parse_tests.rs"]
mod tests;
