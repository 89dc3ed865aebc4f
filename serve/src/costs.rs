//! Several costs in one all-or-nothing check.
//!
//! `RuleLimiter::check_all_n` charges one cost `n` to every key it names, and a key named twice
//! is charged twice. A request whose parts have different costs (Envoy's descriptor-level
//! `hits_addend`) is therefore checked as one call: with `g` the greatest common divisor of the
//! costs, each key is named `cost / g` times and charged `g` per naming. A charge of `k * g`
//! made as `k` namings conforms exactly when the single charge of `k * g` would (each naming is
//! judged on the state the earlier ones left, and the last is the strictest). Costs so uneven
//! that the namings would exceed [`MAX_NAMINGS`] are refused as a request error.

/// The most namings one check may take.
pub(crate) const MAX_NAMINGS: usize = 256;

/// Costs too uneven to check in one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TooUneven {
    pub(crate) namings: u128,
}

impl std::fmt::Display for TooUneven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the costs of this request are too uneven to judge all or nothing: they would take {} \
             namings of their common divisor, at most {MAX_NAMINGS}",
            self.namings
        )
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Fills `out` with the keys to name and returns the cost of each naming: every key of
/// `charges` with a nonzero cost, named `cost / g` times. Returns 0 (and `out` empty) when no
/// charge has a cost.
pub(crate) fn namings<'a>(
    charges: impl Iterator<Item = (&'a str, u64)> + Clone,
    out: &mut Vec<&'a str>,
) -> Result<u64, TooUneven> {
    out.clear();
    let g = charges.clone().fold(0, |g, (_, cost)| gcd(g, cost));
    if g == 0 {
        return Ok(0);
    }
    let total: u128 = charges.clone().map(|(_, cost)| u128::from(cost / g)).sum();
    if total > MAX_NAMINGS as u128 {
        return Err(TooUneven { namings: total });
    }
    for (key, cost) in charges {
        for _ in 0..cost / g {
            out.push(key);
        }
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_costs_name_each_key_once() {
        let mut out = Vec::new();
        let g = namings([("a", 5), ("b", 5)].into_iter(), &mut out).unwrap();
        assert_eq!((g, out), (5, vec!["a", "b"]));
    }

    #[test]
    fn uneven_costs_name_keys_by_their_multiple() {
        let mut out = Vec::new();
        let g = namings([("a", 4), ("b", 0), ("c", 6)].into_iter(), &mut out).unwrap();
        assert_eq!((g, out), (2, vec!["a", "a", "c", "c", "c"]));
    }

    #[test]
    fn peeks_only_charge_nothing() {
        let mut out = vec!["stale"];
        assert_eq!(namings([("a", 0)].into_iter(), &mut out), Ok(0));
        assert!(out.is_empty());
    }

    #[test]
    fn too_uneven_is_an_error_not_an_allocation() {
        let mut out = Vec::new();
        let e = namings([("a", 1), ("b", u64::MAX)].into_iter(), &mut out).unwrap_err();
        assert_eq!(e.namings, u128::from(u64::MAX) + 1);
        assert!(out.is_empty());
    }
}
