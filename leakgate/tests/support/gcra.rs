//! The exact limiter as the contract states it, as a plain model for the leased limiters'
//! tests: GCRA in `u128` (no rounding, no overflow). A test file takes it with
//! `#[path = "support/gcra.rs"] mod gcra;`.

use leakgate::Quota;

/// Plain GCRA in `u128` with time scaled by `count`, so `T = period` is an integer: the exact
/// limiter as the contract states it.
pub(crate) struct Model {
    count: u128,
    t: u128,
    tau: u128,
    tat: u128,
}

impl Model {
    pub(crate) fn new(q: &Quota) -> Model {
        let (count, t) = (u128::from(q.count()), q.period().as_nanos());
        Model { count, t, tau: u128::from(q.burst()) * t, tat: 0 }
    }

    pub(crate) fn check(&mut self, now_ns: u64, n: u64) -> bool {
        let now = u128::from(now_ns) * self.count;
        let start = self.tat.max(now);
        let new = start + u128::from(n) * self.t;
        let ok = n == 0 || new - now <= self.tau;
        if ok {
            self.tat = new;
        }
        ok
    }
}
