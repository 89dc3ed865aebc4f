//! [`RateCell`]: a limiter's rate, read on every decision without a lock and replaced whole by
//! `set_quota`.
//!
//! # Implementation details
//!
//! A bucket's state is counted in its rate's units, so a decision needs the rate and the state of
//! one quota: the cell pairs a rate with an *epoch*, and the bucket's word is checked against the
//! epoch (`limiter.rs`, `keyed/`). The cell keeps two rates, in two slots of words: the one in
//! force (slot `epoch % 2`) and the one before it. A change writes the new rate into the other
//! slot, then publishes it by bumping the epoch. A reader loads the epoch (`Acquire`), the slot's
//! words (`Relaxed`), an `Acquire` fence and the epoch again: if it has not moved, no writer
//! touched that slot meanwhile (a writer rewrites it only two changes on, and fences with
//! `Release` between bumping the epoch and rewriting it, so a reader that saw any rewritten word
//! sees the bump), and the words are the rate of that epoch. On x86 every one of these is a plain
//! load. Writers are serialised by their caller.
//!
//! The first rate (epoch 0) is kept apart, in plain fields that never change: a limiter whose
//! quota never changed reads only the fields a decision uses, where eight atomic loads (which a
//! compiler may not drop) made a denial 15% slower (`leakgate bench`, one limiter, 2-core Xeon).

use crate::gcra::Rate;
use crate::quota::Quota;
use crate::sync::{fence, AtomicU64, Ordering};

/// A rate readable without a lock, replaceable by one writer at a time.
pub(crate) struct RateCell {
    /// Changes so far; slot `epoch % 2` holds the rate in force once it is 1 or more.
    epoch: AtomicU64,
    /// The rate of epoch 0, and its quota.
    first: Rate,
    first_quota: Quota,
    /// A rate's words, then whether its quota is in bytes (for [`RateCell::quota`]).
    slots: [[AtomicU64; WORDS]; 2],
}

/// Words of a slot: a rate's eight, and its quota's unit.
const WORDS: usize = 9;

impl RateCell {
    pub(crate) fn new(quota: Quota) -> Self {
        RateCell::with_rate(quota, quota.rate())
    }

    /// A cell whose first rate is `rate`, compiled from `quota` (in other units, perhaps).
    pub(crate) fn with_rate(quota: Quota, rate: Rate) -> Self {
        RateCell {
            epoch: AtomicU64::new(0),
            first: rate,
            first_quota: quota,
            slots: core::array::from_fn(|_| core::array::from_fn(|_| AtomicU64::new(0))),
        }
    }

    /// The rate in force and its epoch.
    #[inline(always)]
    pub(crate) fn read(&self) -> (u64, Rate) {
        let (epoch, words) = self.read_words();
        match words {
            None => (epoch, self.first),
            Some(words) => (epoch, Rate::from_words(rate_words(&words))),
        }
    }

    /// The quota in force.
    pub(crate) fn quota(&self) -> Quota {
        match self.read_words().1 {
            None => self.first_quota,
            Some(words) => Quota::of_rate(&Rate::from_words(rate_words(&words)), words[8] == 1),
        }
    }

    /// The epoch in force and its slot's words (`None` for epoch 0).
    #[inline(always)]
    fn read_words(&self) -> (u64, Option<[u64; WORDS]>) {
        loop {
            // Acquire: pairs with the writer's Release bump, so the slot it published is seen.
            let epoch = self.epoch.load(Ordering::Acquire);
            if epoch == 0 {
                return (0, None);
            }
            let slot = &self.slots[(epoch & 1) as usize];
            // Relaxed: validated below.
            let words = core::array::from_fn(|i| slot[i].load(Ordering::Relaxed));
            // Acquire fence, then the epoch again: see the module docs.
            fence(Ordering::Acquire);
            if self.epoch.load(Ordering::Relaxed) == epoch {
                return (epoch, Some(words));
            }
        }
    }

    /// The epoch now, read after the caller's `Acquire` load of a state: a state written after a
    /// change's publication (with `Release`) makes this read see that change's epoch.
    #[inline(always)]
    pub(crate) fn epoch(&self) -> u64 {
        // Relaxed: ordered after the caller's Acquire load (see above).
        self.epoch.load(Ordering::Relaxed)
    }

    /// The epoch now, for a reader about to read states of its rate (a keyed check, before
    /// finding its key, whose group's own epoch it then compares).
    #[inline(always)]
    pub(crate) fn epoch_first(&self) -> u64 {
        // Acquire: pairs with the writer's Release bump, so what it published is seen.
        self.epoch.load(Ordering::Acquire)
    }

    /// The rate of epoch 0, the first.
    #[inline(always)]
    pub(crate) fn first(&self) -> &Rate {
        &self.first
    }

    /// The rate of `epoch`, an epoch just read with [`RateCell::epoch`]; `None` if a change
    /// moved it meanwhile.
    pub(crate) fn rate_at(&self, epoch: u64) -> Option<Rate> {
        let (now, rate) = self.read();
        (now == epoch).then_some(rate)
    }

    /// The rate of the epoch before `epoch` (the one in force), for a conversion that holds off
    /// the next change (a shard lock): its slot is not rewritten meanwhile. `None` for epoch 0.
    pub(crate) fn previous(&self, epoch: u64) -> Option<Rate> {
        let before = epoch.checked_sub(1)?;
        if before == 0 {
            return Some(self.first);
        }
        let slot = &self.slots[(before & 1) as usize];
        // Relaxed: published before `epoch`, which the caller read with Acquire.
        Some(Rate::from_words(core::array::from_fn(|i| slot[i].load(Ordering::Relaxed))))
    }

    /// Puts `rate`, compiled from `quota`, in force; returns its epoch. One writer at a time
    /// (the caller's lock).
    pub(crate) fn publish(&self, rate: Rate, quota: Quota) -> u64 {
        // Relaxed: only writers change the epoch, and they are serialised.
        let next = self.epoch.load(Ordering::Relaxed).wrapping_add(1);
        // Release: a reader that sees one of the words below also sees the bump before (the
        // slot's previous epoch is out of date for it).
        fence(Ordering::Release);
        let slot = &self.slots[(next & 1) as usize];
        let words = rate.to_words().into_iter().chain([u64::from(quota.is_bytes())]);
        for (word, value) in slot.iter().zip(words) {
            // Relaxed: published by the Release bump below.
            word.store(value, Ordering::Relaxed);
        }
        // Release: a reader that sees the new epoch sees the words above.
        self.epoch.store(next, Ordering::Release);
        next
    }
}

/// The rate's eight words of a slot's.
fn rate_words(words: &[u64; WORDS]) -> [u64; 8] {
    core::array::from_fn(|i| words[i])
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_published_rate_is_read_back_with_its_epoch() {
        let (q1, q2): (Quota, Quota) = ("10/s burst 5".parse().unwrap(), "3 kB/s".parse().unwrap());
        let (first, second) = (q1.rate(), q2.rate().with_origin(77));
        let cell = RateCell::new(q1);
        assert_eq!((cell.read(), cell.quota()), ((0, first), q1));
        assert_eq!(cell.publish(second, q2), 1);
        assert_eq!((cell.read(), cell.quota()), ((1, second), q2));
        assert_eq!(cell.publish(first, q1), 2);
        assert_eq!((cell.read(), cell.quota()), ((2, first), q1));
    }
}
