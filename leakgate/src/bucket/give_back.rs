//! [`give_back`]: taking back a charge whose request was refused after all.
//!
//! # Why any lowering `give_back` makes is safe
//!
//! A request checked against several buckets at once (all or nothing) is charged to each in turn;
//! when one refuses, the charges already made must go. Until then each such charge sits in its
//! word like any admission: call it a *phantom*. Phantoms were admitted by the same protocol as
//! everything else, so the invariant of the module docs holds with them counted: `w >= F`, where
//! `F` is the exact state reached from the admitted requests *and* the phantoms still in the word,
//! each with what is left of its cost.
//!
//! The exact GCRA state after a sequence of requests (request `k` of cost `c_k` taken at `t_k`,
//! starting from `v0`) is the largest of `v0 + (all costs)` and, for every `k`, `t_k + (the costs
//! from k on)`. Take a phantom with `r` units left, charged at `t_p`, and lower its cost by `x`.
//! The terms that start at or before it lose `x`; those that start after it are unchanged, and
//! each of them is at most `now + (the costs after the phantom)` when `now` is no earlier than
//! every `t_k` of the word's requests. The phantom's own term is `t_p + r + (the costs after it)`.
//! So while `x <= r - (now - t_p)`, the largest term still comes from at or before the phantom
//! and `F` drops by exactly `x`: lowering `w` by `x` keeps `w >= F`. That bound is
//!
//! * independent of the value the word holds and of where the charge stands among others: a
//!   lowering from the top of the word, under admissions that landed on top of the charge, or
//!   after other phantoms below it were given back in any order, is as safe as an exact undo;
//! * the whole charge on a clock that stood still (`now = t_p`), so there refused requests keep
//!   nothing, however their charges are stacked and whichever is given back first;
//! * otherwise short of the charge by the time since it was made (a check of several buckets:
//!   nanoseconds), which stays as an over-charge until the bucket drains, and 0 once the charge
//!   would have drained by itself.
//!
//! `now` is read after the value to be lowered was seen, so every request the word held then had
//! read its clock before. A request written after that reading makes the CAS fail, unless other
//! give-backs lowered the word back to exactly the value seen in the few instructions between
//! the reading and the CAS; the bound may then be short by that interval.
//!
//! The lowered state is never below a key's first state either (`F` never is), which is what
//! `Found::note_lowering` (`keyed/slot.rs`) asks of a lowering of a keyed slot. A word that gives
//! back never takes reservations: a cancel's exactness relies on the word going back only to the
//! start of the request it undoes (`crate::reserve`), which a partial lowering does not keep.

use super::Word;

/// What [`give_back`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Back {
    /// Gave back this many units (0 once the charge had drained by itself).
    Given(u64),
    /// The word is sealed ([`seal_moved`](super::seal_moved)): its state, the charge with it, was
    /// handed over to another bucket, and the word is never lowered. The charge is to be given
    /// back where the state went.
    Sealed,
}

/// Gives back, from `word`, a charge of `cost` units that left the word at `after`, made at
/// `charged_at` (the clock in units when it was taken), for a request refused after all; `now`
/// reads the clock in the same units. Gives back the whole `cost` on a clock that has not moved
/// since the charge, otherwise `cost` less the time since (see the module docs); nothing from a
/// sealed word. `Err` when the word no longer holds the bucket (a keyed slot given to another
/// key, or a handle made stale by a change of its group), having given nothing back: the caller
/// may find the bucket again and call once more.
///
/// One CAS from the value the charge left, then from the value found: lock-free, since a lost
/// CAS means another request wrote the word. Keyed slots lower through [`Word::lower`], which
/// runs their lowering hook first.
pub(crate) fn give_back<W: Word>(
    word: &W,
    after: u64,
    cost: u64,
    charged_at: u64,
    now: impl Fn() -> u64,
) -> Result<Back, W::Gone> {
    let mut seen = after;
    loop {
        // A seal is never lowered: lowering it would reopen a bucket whose state now lives
        // elsewhere, a bucket full for centuries to a check still on it. (A charge that left the
        // word at the highest state, at the end of the clock's range, stays too.)
        if seen == W::MAX_STATE {
            return Ok(Back::Sealed);
        }
        // Read after `seen` was: the charge's own write, then each value a lost CAS found.
        let elapsed = now().saturating_sub(charged_at);
        let back = cost.saturating_sub(elapsed).min(seen);
        if back == 0 {
            return Ok(Back::Given(0));
        }
        if word.lower(seen, seen - back).is_ok() {
            return Ok(Back::Given(back));
        }
        // Loaded again (not the value the CAS found), so that a keyed slot checks that it still
        // holds the key before a value is lowered.
        seen = word.load()?;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::{AtomicU64, Ordering};

    fn value(word: &AtomicU64) -> u64 {
        AtomicU64::load(word, Ordering::Relaxed)
    }

    #[test]
    fn alone_on_a_still_clock_the_whole_charge_goes_back() {
        // A charge of 40 at time 400 from an idle word: 400..440.
        let word = AtomicU64::new(440);
        assert_eq!(give_back(&word, 440, 40, 400, || 400), Ok(Back::Given(40)));
        assert_eq!(value(&word), 400);
    }

    #[test]
    fn stacked_charges_go_back_whole_in_either_order_on_a_still_clock() {
        // Two refused charges stacked 400..440..480, the lower given back first: it takes its 40
        // from the top, and the upper, finding the word below its own end, takes its 40 too.
        let word = AtomicU64::new(480);
        assert_eq!(give_back(&word, 440, 40, 400, || 400), Ok(Back::Given(40)));
        assert_eq!(give_back(&word, 480, 40, 400, || 400), Ok(Back::Given(40)));
        assert_eq!(value(&word), 400);
    }

    #[test]
    fn under_an_admission_the_charge_still_goes_back_on_a_still_clock() {
        // A charge 400..440, then an admission on top (440..480) at the same time.
        let word = AtomicU64::new(480);
        assert_eq!(give_back(&word, 440, 40, 400, || 400), Ok(Back::Given(40)));
        assert_eq!(value(&word), 440, "the admission keeps its 40, starting at its time");
    }

    #[test]
    fn the_time_since_the_charge_stays_and_a_drained_charge_gives_nothing() {
        // Charged at 400 (400..440); 10 units of time later only 30 may go back.
        let word = AtomicU64::new(440);
        assert_eq!(give_back(&word, 440, 40, 400, || 410), Ok(Back::Given(30)));
        assert_eq!(value(&word), 410);
        // Charged on a backlog (500..540 at time 400), 10 later: the same bound.
        let word = AtomicU64::new(540);
        assert_eq!(give_back(&word, 540, 40, 400, || 410), Ok(Back::Given(30)));
        // Past the charge's own time: it drained; nothing moves.
        let word = AtomicU64::new(600);
        assert_eq!(give_back(&word, 440, 40, 400, || 450), Ok(Back::Given(0)));
        assert_eq!(value(&word), 600);
    }

    #[test]
    fn regression_a_charge_drained_under_another_give_back_never_lowers_a_later_admission() {
        // Two charges at time 0: 0..10 (cost 10), then 10..12 (cost 2). The first goes back
        // whole (the word drops to 2: the second's units, shifted down). The clock reaches 3:
        // those 2 units have drained; a request at 3 starts at 3 and leaves the word at 4, the
        // exact state. Taking the second charge back "from what is still in the word above the
        // clock" (4 - 3 = 1) would leave 3, moving that admission below its own time.
        let word = AtomicU64::new(12);
        assert_eq!(give_back(&word, 10, 10, 0, || 0), Ok(Back::Given(10)));
        assert_eq!(value(&word), 2);
        word.store(4, Ordering::Relaxed); // the admission at 3: max(2, 3) + 1
        assert_eq!(give_back(&word, 12, 2, 0, || 3), Ok(Back::Given(0)));
        assert_eq!(value(&word), 4);
    }

    #[test]
    fn regression_a_sealed_word_is_never_lowered() {
        // A charge 400..440, then the bucket handed over (sealed) before the charge is refused:
        // the seal stays, and the caller learns the charge went with the state.
        let word = AtomicU64::new(440);
        assert_eq!(super::super::seal_moved(&word), Ok(Some(440)));
        assert_eq!(give_back(&word, 440, 40, 400, || 400), Ok(Back::Sealed));
        assert_eq!(value(&word), u64::MAX);
    }

    #[test]
    fn a_word_below_the_charge_is_never_lowered_past_zero() {
        let word = AtomicU64::new(10);
        assert_eq!(give_back(&word, 440, 40, 0, || 0), Ok(Back::Given(10)));
        assert_eq!(value(&word), 0);
    }

    /// What a history does to the word, step by step.
    #[derive(Clone, Debug)]
    enum Step {
        /// The clock moves on by this many units.
        Wait(u64),
        /// A request of this cost is checked (and kept if admitted).
        Check(u64),
        /// A request of this cost is charged, to be refused later.
        Charge(u64),
        /// The charge of this index (among those outstanding) is given back.
        GiveBack(usize),
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            (0u64..120).prop_map(Step::Wait),
            (1u64..4).prop_map(Step::Check),
            (1u64..4).prop_map(Step::Charge),
            any::<usize>().prop_map(Step::GiveBack),
        ]
    }

    /// The exact state from requests `(time, cost)` in the order they were written, from 0.
    fn exact(requests: &[(u64, u64)]) -> u64 {
        requests.iter().fold(0, |state, &(at, cost)| state.max(at) + cost)
    }

    proptest::proptest! {
        /// Whatever the order of charges, admissions, give-backs and clock moves, the word never
        /// shows a bucket emptier than the exact model of what it still holds (admissions, and
        /// charges less what was given back), so it never admits more; and on a clock that never
        /// moves every charge goes back whole.
        #[test]
        fn given_back_charges_never_empty_the_word_below_the_exact_state(
            steps in proptest::collection::vec(step(), 1..60),
        ) {
            let rate = crate::gcra::Rate::new(1, 10, 8).unwrap(); // S = 40 units, tau = 320
            let word = AtomicU64::new(0);
            let mut now = 0;
            let mut moved = false;
            // Every request written, in order: (time, cost left), and where the charges are.
            let mut written: Vec<(u64, u64)> = Vec::new();
            let mut charges: Vec<(usize, u64)> = Vec::new(); // (index in `written`, after)
            for step in steps {
                match step {
                    Step::Wait(units) => {
                        now += units;
                        moved |= units > 0;
                    }
                    Step::Check(n) | Step::Charge(n) => {
                        if let Ok(Ok(after)) = super::super::take(&word, &rate, now, n, 0) {
                            written.push((now, rate.cost(n)));
                            if matches!(step, Step::Charge(_)) {
                                charges.push((written.len() - 1, after));
                            }
                        }
                    }
                    Step::GiveBack(i) if !charges.is_empty() => {
                        let (index, after) = charges.swap_remove(i % charges.len());
                        let (at, cost) = written[index];
                        let Back::Given(back) = give_back(&word, after, cost, at, || now).unwrap()
                        else {
                            unreachable!("nothing seals this word")
                        };
                        proptest::prop_assert!(back <= cost);
                        proptest::prop_assert!(moved || back == cost, "a still clock: all of it");
                        written[index].1 = cost - back;
                    }
                    Step::GiveBack(_) => {}
                }
                proptest::prop_assert!(value(&word) >= exact(&written), "{} < {:?}", value(&word), written);
            }
        }
    }
}
