//! Where a replaced set of rules handed its levels over, kept for exactly as long as a charge
//! refused on that set may still have to follow them there.
//!
//! # Implementation details
//!
//! An all-or-nothing pass may charge a bucket, then be refused elsewhere and give the charge
//! back (`all_or_nothing.rs`). If a reload sealed the bucket meanwhile, the charge went with the
//! level handed over, and it is given back in the set that replaced this one
//! (`Generation::give_back_handed_over`), and on through later sets if those were replaced too.
//! Each set keeps a strong link to its successor for that. A link kept for ever would keep every
//! later set alive behind one that a thread's cache still holds; so a set drops its link once no
//! charge can follow it any more, which is when all three hold:
//!
//! * the set is closed (replaced; see `Generation::close`): passes that start after that charge
//!   nothing, since every bucket they reach is sealed or starts sealed;
//! * no pass counted on the set is in flight;
//! * no charge from an earlier set can reach it: the set before it dropped its link (or there is
//!   none).
//!
//! Every word involved is one of the set's counts of passes, striped (passes of different
//! threads rarely share a line), and every operation on them is a read-modify-write: a pass
//! enters with `fetch_add` and leaves with `fetch_sub`; closing the set sets a flag in every
//! stripe with `fetch_or`; the set before sets a flag in stripe 0 when it drops its link; and the
//! thread that made a condition true reads every stripe with `fetch_add(0)`. Read-modify-writes
//! of one word are totally ordered and each reads the one before, so with `AcqRel` they chain:
//! a pass that entered before the close was set in its stripe is seen by every read after it,
//! and one that entered after sees the flag in its own `fetch_add` and leaves having charged
//! nothing. Of two threads that each change one stripe and then read the other, the one whose
//! read of the other's stripe comes later in that stripe's order sees the other's change (the
//! store-buffering outcome, where both miss, needs plain loads). So whichever thread makes the
//! last condition true sees all of them, and the link is dropped once (by the thread whose swap
//! finds it), as soon as it may be. Nothing waits: a pass, a close and a reload only read and
//! write these words.

use crate::sync::{self, AtomicU64, Ordering, SwapCell};
use crossbeam_utils::CachePadded;
use std::sync::Arc;

/// Stripes of a set's count of passes.
const STRIPES: usize = if sync::LOOM { 2 } else { 16 };

/// In every stripe: the set was closed.
const CLOSED: u64 = 1 << 63;
/// In stripe 0: no charge from an earlier set can reach this one.
const EARLIER_DONE: u64 = 1 << 62;
/// The passes counted in a stripe.
const COUNT: u64 = EARLIER_DONE - 1;

/// A set of rules that keeps a link to its successor (`Generation`): generic, so that this
/// protocol needs nothing else of the set.
pub(crate) trait Linked: Sized {
    /// The set's link to the set that replaced it.
    fn link(&self) -> &Successor<Self>;
}

/// A set's link to the set that replaced it (`T`), and what decides when the link is dropped.
pub(crate) struct Successor<T> {
    next: SwapCell<T>,
    /// Passes in flight on the set, striped, with the flags above.
    stripes: [CachePadded<AtomicU64>; STRIPES],
}

impl<T: Linked> Successor<T> {
    /// For a set that replaced another (`replacing`), or the first set.
    pub(crate) fn new(replacing: bool) -> Self {
        let flags = |i: usize| if i == 0 && !replacing { EARLIER_DONE } else { 0 };
        Successor {
            next: SwapCell::empty(),
            stripes: std::array::from_fn(|i| CachePadded::new(AtomicU64::new(flags(i)))),
        }
    }

    /// Sets `flag` in every stripe (or stripe 0 only).
    fn flag(&self, flag: u64) {
        let stripes = if flag == CLOSED { &self.stripes[..] } else { &self.stripes[..1] };
        for stripe in stripes {
            // AcqRel: the chain of read-modify-writes (module docs).
            stripe.fetch_or(flag, Ordering::AcqRel);
        }
    }

    /// Whether the link may be dropped: every stripe closed and empty, stripe 0 with the earlier
    /// set done.
    fn may_release(&self) -> bool {
        self.stripes.iter().enumerate().all(|(i, stripe)| {
            // AcqRel read-modify-write, not a load: the chain (module docs).
            let word = stripe.fetch_add(0, Ordering::AcqRel);
            word & CLOSED != 0 && word & COUNT == 0 && (i > 0 || word & EARLIER_DONE != 0)
        })
    }

    /// Counts a pass of the thread with counter index `thread`; `None` if the set was replaced
    /// (then it charges nothing here and decides on the rules in force).
    #[inline]
    pub(crate) fn enter_pass(&self, thread: usize) -> Option<Pass<'_, T>> {
        let stripe = thread % STRIPES;
        // AcqRel: the chain (module docs).
        let word = self.stripes[stripe].fetch_add(1, Ordering::AcqRel);
        let pass = Pass { successor: self, stripe };
        (word & CLOSED == 0).then_some(pass)
    }

    /// Links the set to the set that replaces it; before any of its buckets is sealed.
    pub(crate) fn link(&self, next: Arc<T>) {
        drop(self.next.store(Some(next)));
    }

    /// The set that replaced this one, while a charge may still follow it there.
    pub(crate) fn next(&self) -> Option<Arc<T>> {
        self.next.load_full()
    }

    /// Marks the set replaced for its passes (see `Generation::close`), and drops the link to
    /// the next set if no charge can follow it any more.
    pub(crate) fn close_passes(&self) {
        self.flag(CLOSED);
        self.release();
    }

    /// Drops the link to the next set if no charge can follow it any more, and on down the chain
    /// (module docs).
    fn release(&self) {
        if !self.may_release() {
            return;
        }
        let mut next = self.next.store(None);
        while let Some(set) = next {
            set.link().flag(EARLIER_DONE);
            next = match set.link().may_release() {
                true => set.link().next.store(None),
                false => None,
            };
        }
    }
}

/// An all-or-nothing pass counted in flight on a set; it leaves when dropped.
pub(crate) struct Pass<'a, T: Linked> {
    successor: &'a Successor<T>,
    stripe: usize,
}

impl<T: Linked> Drop for Pass<'_, T> {
    fn drop(&mut self) {
        // AcqRel: the chain (module docs).
        let word = self.successor.stripes[self.stripe].fetch_sub(1, Ordering::AcqRel);
        if word & CLOSED != 0 {
            self.successor.release();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::{ManualClock, RuleLimiter, Rules};

    #[test]
    fn a_replaced_set_keeps_its_link_only_while_a_request_on_it_is_in_flight() {
        let mut rules = Rules::new();
        rules.insert("a", ["1/s".parse().unwrap()]);
        let lim = RuleLimiter::with_clock(rules.clone(), ManualClock::new());
        let first = lim.current.load_full();
        lim.check_all_n(&["a/1", "a/2"], 1).unwrap();
        lim.reload(rules.clone());
        assert!(first.successor.next().is_none(), "nothing in flight: the link went at the close");
        let second = lim.current.load_full();
        let pass = second.successor.enter_pass(3).expect("the rules in force");
        lim.reload(rules.clone());
        assert!(second.successor.next().is_some(), "a request in flight may still follow it");
        assert!(
            second.successor.enter_pass(5).is_none(),
            "a request that starts now decides elsewhere"
        );
        drop(pass);
        assert!(second.successor.next().is_none(), "the last request out drops it");
    }

    #[test]
    fn a_link_goes_only_once_the_set_before_dropped_its_own() {
        let mut rules = Rules::new();
        rules.insert("a", ["1/s".parse().unwrap()]);
        let lim = RuleLimiter::with_clock(rules.clone(), ManualClock::new());
        let first = lim.current.load_full();
        let held = first.successor.enter_pass(0).expect("the rules in force");
        lim.reload(rules.clone());
        let second = lim.current.load_full();
        lim.reload(rules.clone());
        // A charge of a request on the first set may follow through the second to the third.
        assert!(first.successor.next().is_some() && second.successor.next().is_some());
        drop(held);
        assert!(first.successor.next().is_none() && second.successor.next().is_none());
    }
}
