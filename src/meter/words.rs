//! What the meters are built from: their rates in ticks, and their buckets' words.

use super::MeterError;
use crate::bucket::Word;
use crate::gcra::Rate;
use crate::quota::{Quota, QuotaError};
use crate::sync::{AtomicU64, Ordering};

/// `quota` compiled in ticks (whole emission intervals: see the module docs) with a burst of
/// `burst`. Every quota compiles (ticks are no finer than the units `Quota` was validated
/// for); the error is there so that nothing on this path can panic.
pub(super) fn ticks(quota: &Quota, burst: u64) -> Result<Rate, MeterError> {
    Rate::in_intervals(quota.count(), quota.period_ns(), burst)
        .ok_or(MeterError::Quota(QuotaError::BurstTooLarge))
}

/// The three rates of an srTCM, all in ticks of CIR (the same units, so one clock reading serves
/// all three): its two words' and the excess bucket's.
#[derive(Clone, Copy, Debug)]
pub(super) struct SrRates {
    /// `C`: CBS.
    pub(super) committed: Rate,
    /// `A`, the total `Tc + Te`: CBS + EBS.
    pub(super) total: Rate,
    /// `E`: EBS, judged on word `A` (see the module docs).
    pub(super) excess: Rate,
}

impl SrRates {
    /// The rates of an srTCM of CIR and CBS `committed` and EBS `ebs`, and the quota of its total
    /// bucket (CIR with a burst of CBS + EBS), which must be a valid quota.
    pub(super) fn new(committed: Quota, ebs: u64) -> Result<(SrRates, Quota), MeterError> {
        let total_burst = committed.burst().checked_add(ebs).ok_or(QuotaError::BurstTooLarge)?;
        let total = committed.with_burst(total_burst)?;
        let rates = SrRates {
            committed: ticks(&committed, committed.burst())?,
            total: ticks(&total, total_burst)?,
            excess: ticks(&committed, ebs)?,
        };
        Ok((rates, total))
    }
}

/// The word of one of a plain meter's buckets (`C` and `A` of an srTCM, `P` and `C` of a trTCM).
///
/// Unlike a limiter's word it takes charges only by CAS, never by an unconditional add, so it
/// never shows more than the packets it admitted: a packet's charge is never left in a bucket by
/// an add that overshot and could not be undone, and the srTCM's `C` never shows more than its
/// greens, which would make `E` look fuller than it is. Its loads are `Acquire`, so that a reader
/// of an srTCM's `C` sees the charges of `A` made before it (see the module docs). Nothing is
/// ever given back to a `C` word; the srTCM's `A` is given back to through `bucket::give_back`.
#[derive(Debug, Default)]
pub(super) struct MeterWord {
    /// `TAT` in ticks of the bucket's rate since the clock's origin (0: a new, full bucket).
    tat: AtomicU64,
}

impl Word for MeterWord {
    type Gone = std::convert::Infallible;
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

    #[test]
    fn the_three_rates_share_one_tick() {
        let committed = Quota::bytes_per_second(1000).unwrap().with_burst(1500).unwrap();
        let (rates, total) = SrRates::new(committed, 3000).unwrap();
        assert_eq!(total.burst(), 4500);
        for ns in [0, 999_999, 1_000_000, 7_777_777_777] {
            let t = rates.committed.units_at(ns);
            assert_eq!(t, ns / 1_000_000, "one tick a millisecond");
            assert_eq!((rates.total.units_at(ns), rates.excess.units_at(ns)), (t, t));
        }
        assert_eq!(rates.committed.scale().tau(), 1500);
        assert_eq!(rates.excess.scale().tau(), 3000);
        // EBS 0: an excess bucket that holds nothing.
        let (rates, _) = SrRates::new(committed, 0).unwrap();
        assert!(rates.excess.admit(0, 5, 1, 0).is_err());
        assert_eq!(
            SrRates::new(committed, u64::MAX).unwrap_err(),
            MeterError::Quota(QuotaError::BurstTooLarge)
        );
    }
}
