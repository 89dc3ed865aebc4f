//! Quotas as text: `100/s`, `5/min`, `3/1500ms`, `100/s burst 20`. [`Display`](std::fmt::Display)
//! prints the canonical form and [`FromStr`] reads it back to an equal [`Quota`].
//!
//! Grammar (case-insensitive, spaces around tokens allowed):
//! `COUNT "/" [NUMBER] UNIT [ "burst" BURST ]`, where the numbers are decimal `u64` (with optional
//! `_` separators) and `UNIT` is one of `ns`, `us` (`µs`), `ms`, `s` (`sec`), `min` (`m`), `h`
//! (`hr`), `d`. A missing `NUMBER` means 1; a missing burst means `burst = COUNT`.

use crate::quota::{Quota, QuotaError};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The units a period may be written in, longest first, with their length in nanoseconds.
const UNITS: [(&str, u64); 7] = [
    ("d", 86_400_000_000_000),
    ("h", 3_600_000_000_000),
    ("min", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
];

fn unit_ns(unit: &str) -> Option<u64> {
    let canonical = match unit.to_ascii_lowercase().as_str() {
        "ns" => "ns",
        "us" | "µs" => "us",
        "ms" => "ms",
        "s" | "sec" => "s",
        "m" | "min" => "min",
        "h" | "hr" => "h",
        "d" => "d",
        _ => return None,
    };
    UNITS.iter().find(|(name, _)| *name == canonical).map(|&(_, ns)| ns)
}

fn parse_err(msg: String) -> QuotaError {
    QuotaError::Parse(msg)
}

/// A decimal `u64` with optional `_` separators; `what` names it in the error.
fn number(token: &str, what: &str, input: &str) -> Result<u64, QuotaError> {
    let digits: String = token.chars().filter(|&c| c != '_').collect();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(parse_err(format!(
            "{token:?} is not a {what} (expected a whole number) in {input:?}"
        )));
    }
    digits.parse().map_err(|_| parse_err(format!("{what} {token:?} is too large in {input:?}")))
}

impl FromStr for Quota {
    type Err = QuotaError;

    /// Parses `COUNT/[NUMBER]UNIT [burst B]`.
    ///
    /// ```
    /// use leakgate::Quota;
    /// use std::time::Duration;
    /// let q: Quota = "3/1500ms burst 1".parse()?;
    /// assert_eq!(q, Quota::new(3, Duration::from_millis(1500), 1)?);
    /// assert!("10/fortnight".parse::<Quota>().is_err());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let text = input.trim();
        if text.is_empty() {
            return Err(parse_err("the quota is empty (expected e.g. \"100/s\")".into()));
        }
        let Some((count, rest)) = text.split_once('/') else {
            return Err(parse_err(format!("missing \"/\" in {input:?} (expected e.g. \"100/s\")")));
        };
        let count = number(count.trim(), "count", input)?;
        let rest = rest.trim_start();
        let period_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (period, tail) = rest.split_at(period_end);
        let period = parse_period(period, input)?;
        let mut words = tail.split_whitespace();
        let burst = match (words.next(), words.next(), words.next()) {
            (None, _, _) => count,
            (Some(kw), Some(b), None) if kw.eq_ignore_ascii_case("burst") => {
                number(b, "burst", input)?
            }
            (Some(kw), None, _) if kw.eq_ignore_ascii_case("burst") => {
                return Err(parse_err(format!("missing the number after \"burst\" in {input:?}")))
            }
            (Some(word), _, _) => {
                let extra = tail.trim();
                let found = if word.eq_ignore_ascii_case("burst") { extra } else { word };
                return Err(parse_err(format!(
                    "expected \"burst N\" after the period but found {found:?} in {input:?}"
                )));
            }
        };
        Quota::new(count, period, burst)
    }
}

/// `[NUMBER]UNIT`, e.g. `s`, `1500ms`, `2h`.
fn parse_period(token: &str, input: &str) -> Result<Duration, QuotaError> {
    let split = token.find(|c: char| !c.is_ascii_digit() && c != '_').unwrap_or(token.len());
    let (amount, unit) = token.split_at(split);
    let amount = if amount.is_empty() { 1 } else { number(amount, "period length", input)? };
    let Some(unit_ns) = unit_ns(unit) else {
        let what = if unit.is_empty() { "nothing".to_string() } else { format!("{unit:?}") };
        return Err(parse_err(format!(
            "expected a unit (ns, us, ms, s, min, h, d) after {amount:?} but found {what} in {input:?}"
        )));
    };
    let ns = amount.checked_mul(unit_ns).ok_or(QuotaError::PeriodTooLong)?;
    Ok(Duration::from_nanos(ns))
}

impl fmt::Display for Quota {
    /// The canonical form: the largest unit that divides the period exactly, and the burst only
    /// when it differs from the count.
    ///
    /// ```
    /// use leakgate::Quota;
    /// use std::time::Duration;
    /// assert_eq!(Quota::per_second(100)?.to_string(), "100/s");
    /// assert_eq!(Quota::new(3, Duration::from_millis(1500), 3)?.to_string(), "3/1500ms");
    /// assert_eq!(Quota::per_second(100)?.with_burst(20)?.to_string(), "100/s burst 20");
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let period = self.period_ns();
        let (unit, unit_ns) =
            UNITS.iter().copied().find(|&(_, ns)| period.is_multiple_of(ns)).unwrap_or(("ns", 1));
        match period / unit_ns {
            1 => write!(f, "{}/{unit}", self.count())?,
            n => write!(f, "{}/{n}{unit}", self.count())?,
        }
        if self.burst() != self.count() {
            write!(f, " burst {}", self.burst())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Quota, QuotaError> {
        s.parse()
    }

    #[test]
    fn examples_parse() {
        let q = |c, ns, b| Quota::new(c, Duration::from_nanos(ns), b).unwrap();
        assert_eq!(parse("100/s"), Ok(q(100, 1_000_000_000, 100)));
        assert_eq!(parse("5/min"), Ok(q(5, 60_000_000_000, 5)));
        assert_eq!(parse("10/ms"), Ok(q(10, 1_000_000, 10)));
        assert_eq!(parse("1/h"), Ok(q(1, 3_600_000_000_000, 1)));
        assert_eq!(parse("3/1500ms"), Ok(q(3, 1_500_000_000, 3)));
        assert_eq!(parse(" 100 / s  BURST 20 "), Ok(q(100, 1_000_000_000, 20)));
        assert_eq!(parse("1_000/2s"), Ok(q(1000, 2_000_000_000, 1000)));
        assert_eq!(parse("7/250us"), Ok(q(7, 250_000, 7)));
        assert_eq!(parse("7/250µs"), Ok(q(7, 250_000, 7)));
        assert_eq!(parse("1/d"), Ok(q(1, 86_400_000_000_000, 1)));
    }

    #[test]
    fn errors_name_the_bad_part() {
        let msg = |s: &str| parse(s).unwrap_err().to_string();
        assert!(msg("10/fortnight").contains("\"fortnight\""));
        assert!(msg("abc/s").contains("\"abc\" is not a count"));
        assert!(msg("100").contains("missing \"/\""));
        assert!(msg("100/s extra").contains("\"extra\""));
        assert!(msg("100/s burst").contains("after \"burst\""));
        assert!(msg("100/s burst x").contains("\"x\" is not a burst"));
        assert!(msg("").contains("empty"));
        assert!(msg("1/99999999999999999999s").contains("too large"));
    }

    #[test]
    fn validation_errors_come_from_quota_new() {
        assert_eq!(parse("0/s"), Err(QuotaError::ZeroCount));
        assert_eq!(parse("1/0s"), Err(QuotaError::ZeroPeriod));
        assert_eq!(parse("5/s burst 0"), Err(QuotaError::ZeroBurst));
        assert_eq!(parse("1/9999999999d"), Err(QuotaError::PeriodTooLong));
        assert_eq!(parse("1000000000000/s"), Err(QuotaError::RateTooHigh));
    }

    #[test]
    fn display_round_trips() {
        for s in ["100/s", "5/min", "3/1500ms", "100/s burst 20", "1/h", "2/3d", "9/7ns burst 1"] {
            assert_eq!(parse(s).unwrap().to_string(), s);
        }
    }
}
