//! What leakgate is measured against, and the one harness that measures it.
//!
//! Both the criterion benchmarks (`benches/`) and `leakgate bench` use this crate, so that a
//! contender, a scenario or a measuring loop is written once:
//!
//! * contenders: leakgate's `Limiter`, `LeasedLimiter` (shared, and through a `LocalLease` per
//!   thread: [`LocalLeased`]) and `KeyedLimiter`, [`Governor`] (and governor's keyed
//!   limiter), [`MutexTokenBucket`]; for the colour meters, [`MutexSrTcm`] and [`MutexTrTcm`];
//! * [`Scenario`]: quotas under which every contender answers the same way (all allowed, or all
//!   denied by a one-per-hour limiter that has spent its unit), and [`KeyedContenders`]: many
//!   tracked keys, every check allowed;
//! * the harness: [`hammer`] (a fixed number of decisions per thread, for criterion's
//!   `iter_custom`), [`ns_per_decision`] (a fixed time slice, for interleaved rounds) and
//!   [`time_each_check`] (every decision timed into a [`LatencyHistogram`]).
//!
//! A contender is driven through [`Workload::decide`], which says which thread is deciding and
//! how many decisions it made before, so that keyed contenders can pick their key from it.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod governor;
mod harness;
mod keyed;
mod local;
mod mutex_bucket;
mod mutex_meters;
mod scenario;
mod tail;

pub use crate::governor::Governor;
pub use harness::{hammer, median, ns_per_decision};
pub use keyed::{scattered_key, KeyedCheck, KeyedContenders, KeyedWorkload, KEYED_CONTENDERS};
pub use local::LocalLeased;
pub use mutex_bucket::MutexTokenBucket;
pub use mutex_meters::{MutexSrTcm, MutexTrTcm};
pub use scenario::Scenario;
pub use tail::{time_each_check, LatencyHistogram};

/// Anything that answers "may one unit go now?".
///
/// Implemented for leakgate's `Limiter` and `LeasedLimiter`, [`Governor`] and [`MutexTokenBucket`].
///
/// ```
/// use leakgate_baselines::{Gate, MutexTokenBucket};
/// let bucket = MutexTokenBucket::new(10.0, 2);
/// assert!(bucket.allow());
/// ```
pub trait Gate: Sync {
    /// Takes one unit if it conforms now.
    fn allow(&self) -> bool;
}

impl<C: leakgate::Clock> Gate for leakgate::Limiter<C> {
    #[inline]
    fn allow(&self) -> bool {
        self.check().is_ok()
    }
}

impl<C: leakgate::Clock> Gate for leakgate::LeasedLimiter<C> {
    #[inline]
    fn allow(&self) -> bool {
        self.check().is_ok()
    }
}

/// One decision of a benchmark: by the thread numbered `thread`, at its `step`-th decision.
///
/// Every [`Gate`] is a workload that ignores both numbers; a [`KeyedWorkload`] picks its key
/// from them; a [`LocalLeased`] keeps a handle per thread ([`on_thread`](Workload::on_thread)).
///
/// ```
/// use leakgate_baselines::{Scenario, Workload};
/// let lim = Scenario::Allowed.governor();
/// assert!(lim.decide(0, 0));
/// ```
pub trait Workload: Sync {
    /// Makes one decision; `true` if it admitted.
    fn decide(&self, thread: u64, step: u64) -> bool;

    /// The decisions of the thread numbered `thread`: a closure of the step, made once on that
    /// thread before its first decision (and dropped after its last), so that a workload may
    /// keep state of the thread's own in it. Every harness loop calls it (one indirect call a
    /// decision, as through `&dyn Workload`); by default it calls [`decide`](Workload::decide).
    ///
    /// ```
    /// use leakgate_baselines::{Scenario, Workload};
    /// let lim = Scenario::Allowed.governor();
    /// let mut decide = lim.on_thread(0);
    /// assert!(decide(0) && decide(1));
    /// ```
    fn on_thread(&self, thread: u64) -> Box<dyn FnMut(u64) -> bool + '_> {
        Box::new(move |step| self.decide(thread, step))
    }
}

impl<G: Gate + ?Sized> Workload for G {
    #[inline]
    fn decide(&self, _thread: u64, _step: u64) -> bool {
        self.allow()
    }
}
