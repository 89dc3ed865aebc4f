//! [`LocalLeased`]: a `LeasedLimiter` decided through one `LocalLease` handle per thread, the
//! way a worker loop that keeps its handle uses it.

use crate::Workload;
use leakgate::{Clock, LeasedLimiter};

/// A [`LeasedLimiter`] whose every benchmark thread takes its own
/// [`LocalLease`](leakgate::LocalLease) before its first decision and decides through it
/// ([`Workload::on_thread`]); the handle is dropped (its units given back) after the thread's
/// last decision. [`Workload::decide`] alone, outside a thread's closure, has no handle to
/// keep: it checks the limiter as [`LeasedLimiter::check`] does.
///
/// ```
/// use leakgate_baselines::{Scenario, Workload};
/// let lim = Scenario::Allowed.local_leased(leakgate::TscClock::new());
/// let mut decide = lim.on_thread(0);
/// assert!((0..1000).all(|step| decide(step)));
/// ```
pub struct LocalLeased<C: Clock>(pub LeasedLimiter<C>);

impl<C: Clock> Workload for LocalLeased<C>
where
    LeasedLimiter<C>: Sync,
{
    #[inline]
    fn decide(&self, _thread: u64, _step: u64) -> bool {
        self.0.check().is_ok()
    }

    fn on_thread(&self, _thread: u64) -> Box<dyn FnMut(u64) -> bool + '_> {
        let mut local = self.0.local();
        Box::new(move |_step| local.check().is_ok())
    }
}
