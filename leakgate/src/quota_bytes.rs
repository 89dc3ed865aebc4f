//! Amounts of bytes and bits in quota strings (`10 MB`, `64 KiB`, `1 Gbit`, `1.5 kB`), read
//! exactly, and how a byte quota prints them.
//!
//! The grammar is documented on [`Quota`](crate::Quota)'s `FromStr` impl, where users see it.

use crate::quota::QuotaError;
use crate::quota_decimal::{decimal, Decimal};
use core::fmt;

/// An amount as typed: a whole number of bytes, or of bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Amount {
    pub(crate) value: u64,
    pub(crate) bits: bool,
}

/// The prefixes, largest first (so that [`write_bytes`] finds the largest that divides), with
/// their multipliers: IEC binary ones (`Ki` = 1024) and SI decimal ones (`k` = 1000).
const PREFIXES: [(&str, u64); 12] = [
    ("Ei", 1 << 60),
    ("E", 1_000_000_000_000_000_000),
    ("Pi", 1 << 50),
    ("P", 1_000_000_000_000_000),
    ("Ti", 1 << 40),
    ("T", 1_000_000_000_000),
    ("Gi", 1 << 30),
    ("G", 1_000_000_000),
    ("Mi", 1 << 20),
    ("M", 1_000_000),
    ("Ki", 1 << 10),
    ("k", 1_000),
];

/// What the error messages list as accepted units.
const AMOUNT_UNITS: &str = "B (byte) or bit, with a prefix k, M, G, T, P, E (powers of 1000) \
     or Ki, Mi, Gi, Ti, Pi, Ei (powers of 1024)";

/// Whether `token` is written as an amount of bytes or bits: a number followed by letters
/// (`10 MB`, `1Gbit`), rather than a bare count.
pub(crate) fn is_amount(token: &str) -> bool {
    let number_end =
        token.find(|c: char| !(c.is_ascii_digit() || c == '_' || c == '.')).unwrap_or(token.len());
    number_end > 0 && token[number_end..].trim_start().starts_with(|c: char| c.is_alphabetic())
}

/// The multiplier of a unit word such as `MB`, `KiB`, `Gbit`, `bytes`, and whether it counts
/// bits; an error naming the word (in `input`) if it is not one.
fn unit_word(word: &str, input: &str) -> Result<(u64, bool), QuotaError> {
    let ends_with = |suffix: &str| {
        word.len() >= suffix.len()
            && word.as_bytes()[word.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
    };
    // The base unit: the long names in any case, `B` only in capitals (`b` is ambiguous).
    let base = ["bits", "bit", "bytes", "byte"].into_iter().find(|&name| ends_with(name));
    let (prefix, bits) = match base {
        Some(name) => (&word[..word.len() - name.len()], name.starts_with("bit")),
        None => match word.strip_suffix('B') {
            Some(prefix) => (prefix, false),
            None if word.ends_with('b') => {
                return Err(QuotaError::parse(format_args!(
                    "{word:?} is ambiguous: write B for bytes or bit for bits (e.g. MB or Mbit) \
                     in {input:?}"
                )))
            }
            None => {
                return Err(QuotaError::parse(format_args!(
                    "{word:?} is not a unit ({AMOUNT_UNITS}) in {input:?}"
                )))
            }
        },
    };
    if prefix.is_empty() {
        return Ok((1, bits));
    }
    if prefix == "K" {
        return Err(QuotaError::parse(format_args!(
            "{word:?} is ambiguous: write k for 1000 (kB, kbit) or Ki for 1024 (KiB, Kibit) in \
             {input:?}"
        )));
    }
    match PREFIXES.iter().find(|&&(p, _)| p == prefix) {
        Some(&(_, multiplier)) => Ok((multiplier, bits)),
        None => Err(QuotaError::parse(format_args!(
            "{prefix:?} in {word:?} is not a prefix ({AMOUNT_UNITS}) in {input:?}"
        ))),
    }
}

/// Reads an amount such as `10 MB`, `1.5 kB` or `1 Gbit` exactly; `what` names it in errors
/// ("count", "burst"). The number may have `_` separators and a fraction, but the amount must
/// come to a whole number of its unit (bytes or bits), at most `u64::MAX`.
pub(crate) fn parse_amount(token: &str, what: &str, input: &str) -> Result<Amount, QuotaError> {
    let number_end =
        token.find(|c: char| !(c.is_ascii_digit() || c == '_' || c == '.')).unwrap_or(token.len());
    let (number, word) = (&token[..number_end], token[number_end..].trim_start());
    let (multiplier, bits) = unit_word(word, input)?;
    let base = if bits { "bits" } else { "bytes" };
    let not_a_number = || {
        QuotaError::parse(format_args!(
            "{number:?} is not a {what} (expected a number such as 10 or 1.5) in {input:?}"
        ))
    };
    let Some(Decimal { whole, fraction }) = decimal(number) else {
        return Err(not_a_number());
    };
    let too_large = || {
        QuotaError::parse(format_args!(
            "the {what} {token:?} is too large (at most {} {base}) in {input:?}",
            u64::MAX
        ))
    };
    // 18 decimals at most: below 10^18 < 2^60, so a fraction times a multiplier (at most 2^60)
    // stays below 2^120. An amount with more decimals is not a whole number of its unit anyway,
    // unless it is a fraction of an exbibyte that no one types.
    if fraction.count > 18 {
        return Err(QuotaError::parse(format_args!(
            "the {what} {token:?} has too many decimals in {input:?}"
        )));
    }
    let whole = whole.value.ok_or_else(too_large)?;
    let scale = 10u128.pow(fraction.count as u32);
    let fraction = fraction.value.ok_or_else(not_a_number)?;
    let fraction_units = fraction * u128::from(multiplier);
    if !fraction_units.is_multiple_of(scale) {
        return Err(QuotaError::parse(format_args!(
            "the {what} {token:?} is not a whole number of {base} in {input:?}"
        )));
    }
    let value = whole
        .checked_mul(u128::from(multiplier))
        .and_then(|w| w.checked_add(fraction_units / scale))
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(too_large)?;
    Ok(Amount { value, bits })
}

/// Writes `bytes` with the largest prefix that divides it exactly (`64 KiB`, `10 MB`,
/// `1500 B`), which [`parse_amount`] reads back to the same number.
pub(crate) fn write_bytes(f: &mut fmt::Formatter<'_>, bytes: u64) -> fmt::Result {
    match PREFIXES.iter().find(|&&(_, m)| bytes >= m && bytes.is_multiple_of(m)) {
        Some(&(prefix, multiplier)) => write!(f, "{} {prefix}B", bytes / multiplier),
        None => write!(f, "{bytes} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amount(token: &str) -> Result<Amount, QuotaError> {
        parse_amount(token, "count", token)
    }

    #[test]
    fn prefixes_and_units() {
        let bytes = |value| Ok(Amount { value, bits: false });
        let bits = |value| Ok(Amount { value, bits: true });
        assert_eq!(amount("10 MB"), bytes(10_000_000));
        assert_eq!(amount("64 KiB"), bytes(65_536));
        assert_eq!(amount("64KiB"), bytes(65_536));
        assert_eq!(amount("1500 B"), bytes(1500));
        assert_eq!(amount("3 bytes"), bytes(3));
        assert_eq!(amount("1 Byte"), bytes(1));
        assert_eq!(amount("2 kB"), bytes(2000));
        assert_eq!(amount("1 Gbit"), bits(1_000_000_000));
        assert_eq!(amount("1 Gibit"), bits(1 << 30));
        assert_eq!(amount("400 Gbit"), bits(400_000_000_000));
        assert_eq!(amount("5 bits"), bits(5));
        assert_eq!(amount("1.5 kB"), bytes(1500));
        assert_eq!(amount(".5 KiB"), bytes(512));
        assert_eq!(amount("1_000 MB"), bytes(1_000_000_000));
        assert_eq!(amount("15 EiB"), bytes(15 << 60));
        assert_eq!(amount("18 EB"), bytes(18_000_000_000_000_000_000));
    }

    #[test]
    fn errors_are_clear() {
        let msg = |t: &str| amount(t).unwrap_err().to_string();
        assert!(msg("10 Mb").contains("ambiguous"), "{}", msg("10 Mb"));
        assert!(msg("10 KB").contains("ambiguous"));
        assert!(msg("10 mB").contains("not a prefix"));
        assert!(msg("10 MX").contains("not a unit"));
        assert!(msg("1.5 B").contains("not a whole number of bytes"));
        assert!(msg("0.1 bit").contains("not a whole number of bits"));
        assert!(msg("16 EiB").contains("too large"));
        assert!(msg("1.2.3 MB").contains("not a count"));
        assert!(msg(". MB").contains("not a count"));
        assert!(msg("1.0000000000000000001 EB").contains("too many decimals"));
    }

    #[test]
    fn printed_amounts_read_back() {
        struct Bytes(u64);
        impl fmt::Display for Bytes {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write_bytes(f, self.0)
            }
        }
        for (n, shown) in [(65_536, "64 KiB"), (10_000_000, "10 MB"), (1500, "1500 B"), (1, "1 B")]
        {
            assert_eq!(Bytes(n).to_string(), shown);
        }
        for n in [1, 999, 1000, 1024, 1_024_000, 3 << 40, u64::MAX, 1 << 63, 5_000_000_000_000] {
            let shown = Bytes(n).to_string();
            assert_eq!(amount(&shown), Ok(Amount { value: n, bits: false }), "{shown}");
        }
    }
}
