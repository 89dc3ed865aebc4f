//! Decimal numbers as quota strings write them (`12_500`, `1.5`, `.25`), read exactly and
//! without allocating: for counts, bursts, periods and amounts of bytes.

/// The digits of a number as typed, `_` separators left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Digits {
    /// Their value; `None` past `u128::MAX`.
    pub(crate) value: Option<u128>,
    /// How many there are.
    pub(crate) count: usize,
}

/// The digits of `text`, decimal digits with optional `_` separators; `None` if anything else is
/// in it. An empty `text` (or only `_`) has no digits and the value 0.
pub(crate) fn digits(text: &str) -> Option<Digits> {
    let mut value = Some(0u128);
    let mut count = 0;
    for b in text.bytes() {
        match b {
            b'_' => {}
            b'0'..=b'9' => {
                value = value
                    .and_then(|v| v.checked_mul(10))
                    .and_then(|v| v.checked_add(u128::from(b - b'0')));
                count += 1;
            }
            _ => return None,
        }
    }
    Some(Digits { value, count })
}

/// A decimal number `WHOLE[.FRACTION]`, each part digits with optional `_` separators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decimal {
    /// The whole part (value 0 and no digits if none was written).
    pub(crate) whole: Digits,
    /// The fraction's significant digits: trailing zeros left out (`1.50` has the fraction `5`,
    /// one digit; `2.0` none).
    pub(crate) fraction: Digits,
}

/// Reads `text` as a [`Decimal`]; `None` if it is not one: a character other than a digit, `_`
/// or one `.`, or no digit at all on either side of the point.
pub(crate) fn decimal(text: &str) -> Option<Decimal> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let whole = digits(whole)?;
    // Checked whole, then its significant part: trailing zeros (and `_` between them) removed.
    let all = digits(fraction)?;
    if whole.count == 0 && all.count == 0 {
        return None;
    }
    let fraction = digits(fraction.trim_end_matches(['0', '_']))?;
    Some(Decimal { whole, fraction })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(value: u128, count: usize) -> Digits {
        Digits { value: Some(value), count }
    }

    #[test]
    fn digits_skip_separators_and_refuse_anything_else() {
        assert_eq!(digits("12_500"), Some(d(12_500, 5)));
        assert_eq!(digits(""), Some(d(0, 0)));
        assert_eq!(digits("_"), Some(d(0, 0)));
        assert_eq!(digits("007"), Some(d(7, 3)));
        assert_eq!(digits("1a"), None);
        assert_eq!(digits("-1"), None);
        assert_eq!(digits("+1"), None);
        assert_eq!(digits(" 1"), None);
        assert_eq!(digits("١"), None); // an Arabic-Indic one is not an ASCII digit
    }

    #[test]
    fn digits_past_u128_have_no_value() {
        let max = u128::MAX.to_string();
        assert_eq!(digits(&max), Some(d(u128::MAX, 39)));
        let over = format!("{max}0");
        assert_eq!(digits(&over), Some(Digits { value: None, count: 40 }));
        assert_eq!(digits("340282366920938463463374607431768211456").unwrap().value, None);
    }

    #[test]
    fn decimals_keep_only_significant_fraction_digits() {
        let dec = |w: (u128, usize), f: (u128, usize)| Decimal {
            whole: d(w.0, w.1),
            fraction: d(f.0, f.1),
        };
        assert_eq!(decimal("1.5"), Some(dec((1, 1), (5, 1))));
        assert_eq!(decimal("1.50_0"), Some(dec((1, 1), (5, 1))));
        assert_eq!(decimal(".25"), Some(dec((0, 0), (25, 2))));
        assert_eq!(decimal("2."), Some(dec((2, 1), (0, 0))));
        assert_eq!(decimal("2.000"), Some(dec((2, 1), (0, 0))));
        assert_eq!(decimal("0.0_05"), Some(dec((0, 1), (5, 3))));
        assert_eq!(decimal("1_000"), Some(dec((1000, 4), (0, 0))));
        assert_eq!(decimal("."), None);
        assert_eq!(decimal(""), None);
        assert_eq!(decimal("_._"), None);
        assert_eq!(decimal("1.2.3"), None);
        assert_eq!(decimal("1.5x"), None);
        assert_eq!(decimal("1.0x0"), None);
    }
}
