//! A [`Limiter`](crate::Limiter)'s state word, checked against its rate's epoch, and the change
//! of quota that converts it (`Limiter::set_quota`).
//!
//! # Implementation details
//!
//! The state is counted in the units of the rate in force ([`RateCell`]). A change of quota
//! converts it in four steps, writers serialised by the limiter:
//!
//! 1. **Keep adders out.** The add path's `fetch_add` lands whatever the word holds, so it must
//!    not run while the word is sealed. An adder enters a gate first (`fetch_add` on the gate
//!    word, which reads the `CHANGING` flag in the same operation) and leaves it after its add;
//!    the writer sets `CHANGING` (`fetch_or`) and waits for the gate's count to reach 0. Each is a
//!    read-modify-write of the gate word, so either the adder sees the flag and takes the CAS path
//!    instead, or the writer sees the adder and waits for its add (a few instructions).
//! 2. **Seal.** A CAS raises the word from its state `S` to [`SEALED`], which no check admits on;
//!    a check that meets it waits for step 4 (a few instructions: no allocation, no lock, no user
//!    code), as a keyed check waits for a slot that is changing key.
//! 3. **Publish the new rate**, with an origin chosen so that every state of the new quota lies
//!    above every state the word held under the old one (`S`, and the highest value a lowering
//!    ever moved it from): a check still holding an old state can never CAS it into a new one.
//!    The origin is the least that does it (usually 0 or a few units: the level carried over puts
//!    the state ahead of the clock as it was ahead before), so changes do not eat the clock's
//!    range.
//! 4. **Reopen** at the level that keeps the units the bucket could admit (`Rate::level_in`, as
//!    a reload hands a bucket over), in the new units, on top of the new clock reading.
//!
//! A check reads the rate and its epoch, then the word (`Acquire`), an `Acquire` fence and the
//! epoch again: the state is of that rate only if the epoch has not moved (the writer publishes
//! the epoch before reopening, with `Release`), which also validates the rate's words (see
//! `rate_cell.rs`). A CAS from a validated state succeeds only while the word still holds it,
//! that is before the seal, in the old quota, where the seal counts it. On x86 this costs two
//! plain loads and a compare per decision.

use super::Word;
use crate::quota::Quota;
use crate::rate_cell::RateCell;
use crate::sync::{self, fence, AtomicU64, Ordering};

/// The state of a word sealed for a change of quota.
pub(crate) const SEALED: u64 = u64::MAX;

/// In the gate word: a change of quota is in progress; below it, the adders inside.
const CHANGING: u64 = 1 << 63;

/// A limiter's state, on its own cache line.
pub(crate) struct LimiterState {
    /// `TAT`: the theoretical arrival time in the units of the rate in force since the clock's
    /// origin, or [`SEALED`] while the quota changes. Read and written only through this module.
    tat: AtomicU64,
    /// Adders inside the gate, and [`CHANGING`] (step 1).
    gate: AtomicU64,
    /// The highest state a lowering (an undo) ever moved the word down from: with the state, a
    /// bound on every value the word held (step 3). Only grows.
    lowered: AtomicU64,
}

impl LimiterState {
    pub(crate) fn new() -> Self {
        LimiterState { tat: AtomicU64::new(0), gate: AtomicU64::new(0), lowered: AtomicU64::new(0) }
    }

    /// Converts the state to `new` (a rate without origin) as of `now_ns`, and puts the new rate
    /// in force in `rates` (steps 1 to 4). The caller serialises changes.
    pub(crate) fn change(&self, rates: &RateCell, quota: Quota, now_ns: u64) {
        let new = quota.rate();
        // AcqRel: the gate's handshake (module docs).
        self.gate.fetch_or(CHANGING, Ordering::AcqRel);
        // Acquire: the adds of adders that left are before the seal.
        while self.gate.load(Ordering::Acquire) & !CHANGING != 0 {
            sync::spin_loop();
        }
        // Acquire: a lowering's high-water, noted before its Release fence, is seen below.
        let mut held = self.tat.load(Ordering::Relaxed);
        while let Err(found) =
            self.tat.compare_exchange_weak(held, SEALED, Ordering::Acquire, Ordering::Relaxed)
        {
            held = found;
        }
        let (_, old) = rates.read();
        let level = old.level_in(held, &new, now_ns);
        // Relaxed: ordered after the seal's Acquire (module docs).
        let floor = held.max(self.lowered.load(Ordering::Relaxed)).saturating_add(1);
        // The least origin that puts the reopened state at or above `floor`: the new quota's
        // clock moves up only by what it takes (often nothing), so changes spend no clock range.
        let natural = new.units_at(now_ns).saturating_add(level);
        let new = new.with_origin(floor.saturating_sub(natural));
        rates.publish(new, quota);
        let reopen = new.units_at(now_ns).saturating_add(level).min(SEALED - 1);
        // Release: a check that reads the new state sees the new epoch (and rate).
        self.tat.store(reopen, Ordering::Release);
        // Release: nothing to publish; the adders that see the flag gone find the new state.
        self.gate.fetch_and(!CHANGING, Ordering::Release);
    }

    /// The state now, and the epoch of the rate it is counted in: a check decides on that rate
    /// (or finds [`SEALED`], a change in progress). One `Acquire` load and the epoch after it.
    #[inline(always)]
    pub(crate) fn read(&self, rates: &RateCell) -> (u64, u64) {
        // Acquire: see `LimiterWord::of_epoch` and the module docs.
        let tat = self.tat.load(Ordering::Acquire);
        (tat, rates.epoch())
    }

    /// The word as a check at `epoch` works on it.
    #[inline(always)]
    pub(crate) fn word<'a>(&'a self, rates: &'a RateCell, epoch: u64) -> LimiterWord<'a> {
        LimiterWord { state: self, rates, epoch }
    }
}

/// A limiter's word as seen by a check that read the rate of `epoch`.
pub(crate) struct LimiterWord<'a> {
    state: &'a LimiterState,
    rates: &'a RateCell,
    epoch: u64,
}

/// The quota changed (or is changing) since the check read its rate: read it again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Changed;

impl LimiterWord<'_> {
    /// `value`, read from the word with `Acquire`, if it is a state of this check's rate.
    #[inline(always)]
    fn of_epoch(&self, value: u64) -> Result<u64, Changed> {
        if value == SEALED || self.rates.epoch() != self.epoch {
            return Err(Changed);
        }
        Ok(value)
    }
}

impl Word for LimiterWord<'_> {
    type Gone = Changed;
    const ADDS: bool = true;
    const MAX_STATE: u64 = SEALED - 1;

    #[inline(always)]
    fn load(&self) -> Result<u64, Changed> {
        // Acquire: see `of_epoch` and the module docs.
        self.of_epoch(self.state.tat.load(Ordering::Acquire))
    }

    #[inline(always)]
    fn compare_exchange(&self, current: u64, new: u64) -> Result<(), Result<u64, Changed>> {
        // Relaxed on success: the word is the whole state (a state validated at its epoch
        // is replaced only before the seal, module docs). Acquire on failure: as for a load.
        self.state
            .tat
            .compare_exchange_weak(current, new, Ordering::Relaxed, Ordering::Acquire)
            .map(drop)
            .map_err(|found| self.of_epoch(found))
    }

    /// Through a CAS from a validated state (a blind `fetch_max` could raise a new quota's state
    /// to an old quota's clock reading).
    fn raise_to(&self, now: u64) {
        let mut seen = self.load();
        while let Ok(tat) = seen {
            if tat >= now {
                return;
            }
            match self.compare_exchange(tat, now) {
                Ok(()) => return,
                Err(found) => seen = found,
            }
        }
    }

    fn fetch_add(&self, cost: u64) -> Option<u64> {
        let gate = &self.state.gate;
        // Acquire/Release: the gate's handshake (module docs).
        if gate.fetch_add(1, Ordering::Acquire) & CHANGING != 0 {
            gate.fetch_sub(1, Ordering::Release);
            return None;
        }
        // Acquire: the epoch check below sees a change whose new state this add landed on.
        let old = self.state.tat.fetch_add(cost, Ordering::Acquire);
        let valid = self.of_epoch(old).is_ok();
        if !valid {
            // A whole change ran between this check's reading of the rate and its add: the
            // charge landed on a new quota's state. Take it back if nothing stands on it (else it
            // stays, a refusal's worth of over-charge until the bucket drains).
            let end = old.saturating_add(cost);
            let _ = self.state.tat.compare_exchange(end, old, Ordering::Relaxed, Ordering::Relaxed);
        }
        gate.fetch_sub(1, Ordering::Release);
        valid.then_some(old)
    }

    fn lower(&self, from: u64, to: u64) -> Result<(), u64> {
        // Relaxed, then a Release fence: a change whose seal (Acquire) reads the lowered value,
        // or a later one, sees this high-water (step 3).
        self.state.lowered.fetch_max(from, Ordering::Relaxed);
        fence(Ordering::Release);
        // Relaxed: as for the CAS. Strong: a spurious failure would give up an exact undo.
        self.state.tat.compare_exchange(from, to, Ordering::Relaxed, Ordering::Relaxed).map(drop)
    }
}
