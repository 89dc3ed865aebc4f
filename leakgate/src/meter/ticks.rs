//! What the meters are built from: their rates in ticks (whole emission intervals), and their
//! buckets' words.

use super::MeterError;
use crate::bucket::Word;
use crate::gcra::Rate;
use crate::quota::{Quota, QuotaError};
use crate::sync::{self, AtomicU64, Ordering};
use core::cell::Cell;

/// `quota` compiled in ticks (whole emission intervals: see the module docs) with a burst of
/// `burst`. Every quota compiles (ticks are no finer than the units `Quota` was validated
/// for); the error is there so that nothing on this path can panic.
pub(super) fn ticks(quota: &Quota, burst: u64) -> Result<Rate, MeterError> {
    Rate::in_intervals(quota.count(), quota.period_ns(), burst)
        .ok_or(MeterError::Quota(QuotaError::BurstTooLarge))
}

/// A clock reading in ticks of a quota's rate, exactly: `floor(ns * count / period)` for every
/// `ns`, so that tick `k` counts from the first nanosecond at or after `k * T`.
///
/// `Rate::units_at` keeps `count / period` to 64 fractional bits, which is within 1 ns of every
/// boundary when a unit is a fraction of a nanosecond (a limiter's); a tick is a whole `T`, and
/// the same rounding would move a tick of a slow rate by up to `ns * T / 2^64` nanoseconds. Here
/// the fraction has 128 bits, rounded up: `ns * count / period + ns * e / 2^128` with `e < 1`,
/// whose second term stays below `1 / period` (as `ns * period < 2^128`), so it never carries
/// past an integer, and a reading that is an exact multiple of `T` converts exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ticks {
    /// Ticks per nanosecond: integer part, then the fraction's high and low 64 bits.
    int: u64,
    high: u64,
    low: u64,
}

impl Ticks {
    /// The ticks of `quota`'s rate (`count` per `period`).
    pub(crate) fn new(quota: &Quota) -> Ticks {
        let (count, period) = (u128::from(quota.count()), u128::from(quota.period_ns()));
        // rem < period < 2^64, so both shifts fit u128, and the rounded-up low word stays below
        // 2^64: r1 <= period - 1 makes (r1 << 64) / period at most 2^64 - 2^64 / period.
        let rem = count % period;
        let (high, r1) = ((rem << 64) / period, (rem << 64) % period);
        let low = (r1 << 64).div_ceil(period);
        Ticks { int: (count / period) as u64, high: high as u64, low: low as u64 }
    }

    /// The ticks fallen by `ns`, saturating at `u64::MAX`.
    #[inline]
    pub(crate) fn at(&self, ns: u64) -> u64 {
        let t = u128::from(ns);
        if self.high == 0 && self.low == 0 {
            return ns.saturating_mul(self.int);
        }
        let fraction = (t * u128::from(self.high)).checked_add((t * u128::from(self.low)) >> 64);
        let ticks = fraction.map(|f| (f >> 64) + t * u128::from(self.int));
        ticks.and_then(|ticks| u64::try_from(ticks).ok()).unwrap_or(u64::MAX)
    }
}

/// The three rates of an srTCM, all in ticks of CIR (the same units, so one clock reading serves
/// all three): its two words' and the excess bucket's.
#[derive(Clone, Copy, Debug)]
pub(super) struct SrRates {
    /// The clock in ticks of CIR.
    pub(super) ticks: Ticks,
    /// `C`: CBS.
    pub(super) committed: Rate,
    /// `A`, the total `Tc + Te`: CBS + EBS.
    pub(super) total: Rate,
    /// `E`: EBS, judged on word `A` (see the module docs).
    pub(super) excess: Rate,
}

impl SrRates {
    /// The rates of an srTCM of CIR `cir` (its burst unused), CBS `cbs` and EBS `ebs`, and the
    /// quota of its total bucket (CIR with a burst of CBS + EBS), which must be a valid quota.
    /// Either burst may be 0, not both (RFC 2697). With CBS 0, word `C`'s burst is 0: it
    /// refuses every packet, so nothing is green, and `A` is `E` alone.
    pub(super) fn new(cir: Quota, cbs: u64, ebs: u64) -> Result<(SrRates, Quota), MeterError> {
        if cbs == 0 && ebs == 0 {
            return Err(MeterError::ZeroBursts);
        }
        let total_burst = cbs.checked_add(ebs).ok_or(QuotaError::BurstTooLarge)?;
        let total = cir.with_burst(total_burst)?;
        let rates = SrRates {
            ticks: Ticks::new(&cir),
            committed: ticks(&cir, cbs)?,
            total: ticks(&total, total_burst)?,
            excess: ticks(&cir, ebs)?,
        };
        Ok((rates, total))
    }

    /// CBS.
    pub(super) fn cbs(&self) -> u64 {
        self.committed.burst()
    }
}

/// The quota an srTCM reports as its committed one: CIR with a burst of CBS, or `cir` as given
/// when CBS is 0 (a burst no quota has). `cir` with a burst of CBS + EBS must be valid.
pub(super) fn committed_quota(cir: Quota, cbs: u64) -> Result<Quota, MeterError> {
    Ok(if cbs == 0 { cir } else { cir.with_burst(cbs)? })
}

/// The word of one of a plain meter's buckets (`C` and `A` of an srTCM, `P` and `C` of a trTCM).
///
/// Unlike a limiter's word it takes charges only by CAS, never by an unconditional add, so it
/// never shows more than the packets it admitted: a packet's charge is never left in a bucket by
/// an add that overshot and could not be undone, and the srTCM's `C` never shows more than its
/// greens, which would make `E` look fuller than it is. Its loads are `Acquire`, so that a reader
/// of an srTCM's `C` sees the charges of `A` made before it (see the module docs). Nothing is
/// ever given back to a `C` word; the srTCM's `A` and (by a lease take) the trTCM's `P` are given
/// back to through `bucket::give_back`.
#[derive(Debug, Default)]
pub(super) struct MeterWord {
    /// `TAT` in ticks of the bucket's rate since the clock's origin (0: a new, full bucket).
    tat: AtomicU64,
}

impl MeterWord {
    /// Runs `f` on the word's state as a plain cell, for an owner that holds the meter
    /// exclusively (`&mut`): no atomic operation, no ordering (see `exclusive.rs`).
    #[inline(always)]
    pub(super) fn with_mut<R>(&mut self, f: impl FnOnce(&Cell<u64>) -> R) -> R {
        sync::with_mut(&mut self.tat, |tat| f(Cell::from_mut(tat)))
    }
}

impl Word for MeterWord {
    type Gone = core::convert::Infallible;
    const ADDS: bool = false;
    const MAX_STATE: u64 = u64::MAX;

    #[inline]
    fn load(&self) -> Result<u64, Self::Gone> {
        // Acquire: pairs with the Release fence every green srTCM packet makes between its
        // charge of `A` and its CAS of `C` (every write of a word is a read-modify-write, so a
        // later value carries that fence's release sequence too).
        Ok(self.tat.load(Ordering::Acquire))
    }

    #[inline]
    fn compare_exchange(&self, current: u64, new: u64) -> Result<(), Result<u64, Self::Gone>> {
        // Relaxed on success: the Release fence before a charge of `C` publishes the charge of
        // `A`. Acquire on failure: the value found is read as `load` reads it.
        self.tat
            .compare_exchange_weak(current, new, Ordering::Relaxed, Ordering::Acquire)
            .map(drop)
            .map_err(Ok)
    }

    #[inline]
    fn raise_to(&self, now: u64) {
        // Relaxed: recording a time publishes nothing; fetch_max keeps the later of racing values.
        self.tat.fetch_max(now, Ordering::Relaxed);
    }

    fn fetch_add(&self, _cost: u64) -> Option<u64> {
        None
    }

    fn lower(&self, from: u64, to: u64) -> Result<(), u64> {
        // Relaxed as for the CAS: a lowering publishes nothing. Strong: a spurious failure would
        // give up a give-back.
        self.tat.compare_exchange(from, to, Ordering::Relaxed, Ordering::Relaxed).map(drop)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use core::time::Duration;

    fn exact(ns: u64, count: u64, period: u64) -> u64 {
        u64::try_from(u128::from(ns) * u128::from(count) / u128::from(period)).unwrap_or(u64::MAX)
    }

    #[test]
    fn ticks_are_exact_where_64_fraction_bits_are_not() {
        // 7 bytes per hour and 13 ns: one tick every 514,285,714,287.57 ns. Rounding the rate to
        // 64 bits would count ticks early far along the clock.
        let quota = Quota::bytes(7, Duration::from_nanos(3_600_000_000_013), 7).unwrap();
        let ticks = Ticks::new(&quota);
        for k in [1u64, 2, 1_000_000, 35_000_000] {
            let boundary = (u128::from(k) * 3_600_000_000_013).div_ceil(7) as u64;
            assert_eq!(ticks.at(boundary - 1), k - 1, "tick {k}");
            assert_eq!(ticks.at(boundary), k, "tick {k}");
        }
        assert_eq!(ticks.at(u64::MAX), exact(u64::MAX, 7, 3_600_000_000_013));
        // Whole ticks per ns, and the saturation past the range.
        let fast = Ticks::new(&Quota::bytes_per_second(50_000_000_000).unwrap());
        assert_eq!((fast.at(3), fast.at(u64::MAX)), (150, u64::MAX));
    }

    proptest::proptest! {
        #[test]
        fn ticks_are_floor_of_ns_times_rate(
            ns in proptest::prelude::any::<u64>(),
            count in 1u64..1_000_000_000_000,
            period in 1u64..u64::MAX,
        ) {
            proptest::prop_assume!(u128::from(count) * 1_000_000_000 <= 100_000_000_000 * u128::from(period));
            let quota = Quota::new(count, Duration::from_nanos(period), 1).unwrap();
            proptest::prop_assert_eq!(Ticks::new(&quota).at(ns), exact(ns, count, period));
        }
    }

    #[test]
    fn the_three_rates_share_one_tick() {
        let committed = Quota::bytes_per_second(1000).unwrap().with_burst(1500).unwrap();
        let (rates, total) = SrRates::new(committed, 1500, 3000).unwrap();
        assert_eq!(total.burst(), 4500);
        for ns in [0, 999_999, 1_000_000, 7_777_777_777] {
            assert_eq!(rates.ticks.at(ns), ns / 1_000_000, "one tick a millisecond");
        }
        assert_eq!(rates.committed.scale().tau(), 1500);
        assert_eq!(rates.excess.scale().tau(), 3000);
        // EBS 0: an excess bucket that holds nothing.
        let (rates, _) = SrRates::new(committed, 1500, 0).unwrap();
        assert!(rates.excess.admit(0, 5, 1, 0).is_err());
        assert_eq!(
            SrRates::new(committed, 1500, u64::MAX).unwrap_err(),
            MeterError::Quota(QuotaError::BurstTooLarge)
        );
        // CBS 0: a committed bucket that holds nothing, the total is the excess bucket.
        let (rates, total) = SrRates::new(committed, 0, 3000).unwrap();
        assert_eq!((rates.cbs(), total.burst()), (0, 3000));
        assert!(rates.committed.admit(0, 5, 1, 0).is_err());
        assert_eq!(rates.committed.admit(0, 5, 0, 0), Ok(0));
        assert_eq!(SrRates::new(committed, 0, 0).unwrap_err(), MeterError::ZeroBursts);
    }
}
