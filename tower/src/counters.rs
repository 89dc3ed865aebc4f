//! How many requests the layer admitted, refused, queued, could not key, and let pass exempt:
//! striped counters, so counting never makes cores fight over one cache line.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Stripes per counter set: enough that threads rarely share one.
const STRIPES: usize = 16;

/// What a layer has done so far, summed over every service and clone it made.
///
/// ```
/// use leakgate::{Limiter, Quota};
/// use leakgate_tower::RateLimitLayer;
/// let layer = RateLimitLayer::global(Limiter::new(Quota::per_second(5)?));
/// assert_eq!(layer.counts().admitted, 0);
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Counts {
    /// Requests passed to the handler (in queue mode, once their time came).
    pub admitted: u64,
    /// Requests answered `429 Too Many Requests`.
    pub refused: u64,
    /// Requests held in the queue mode before going on (included in `admitted` once released).
    pub queued: u64,
    /// Requests whose key could not be found (answered 400 or charged to the shared bucket).
    pub key_errors: u64,
    /// Requests exempt from the limit, passed on uncharged (a route the router does not know,
    /// under [`UnmatchedRoute::Unlimited`](crate::UnmatchedRoute::Unlimited), or a
    /// [`KeyError::exempt`](crate::KeyError::exempt) from a closure).
    pub exempt: u64,
}

/// Which counter to add to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Event {
    Admitted,
    Refused,
    Queued,
    KeyError,
    Exempt,
}

/// One stripe: the five counters of the threads that picked it, alone on their cache lines.
#[derive(Default)]
#[repr(align(128))]
struct Stripe {
    counts: [AtomicU64; 5],
}

/// The counters of one layer, shared by its services.
pub(crate) struct Counters {
    stripes: [Stripe; STRIPES],
}

impl Counters {
    pub(crate) fn new() -> Self {
        Counters { stripes: Default::default() }
    }

    /// Adds one to `event`'s counter, on this thread's stripe.
    #[inline]
    pub(crate) fn add(&self, event: Event) {
        // Relaxed: a statistic; nothing is published through it and readers want only the sum.
        self.stripes[stripe()].counts[event as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The sums over every stripe.
    pub(crate) fn counts(&self) -> Counts {
        let sum = |event: Event| {
            // Relaxed: see `add`; a sum taken while requests run is a view, not an instant.
            self.stripes.iter().map(|s| s.counts[event as usize].load(Ordering::Relaxed)).sum()
        };
        Counts {
            admitted: sum(Event::Admitted),
            refused: sum(Event::Refused),
            queued: sum(Event::Queued),
            key_errors: sum(Event::KeyError),
            exempt: sum(Event::Exempt),
        }
    }
}

/// This thread's stripe, handed out round-robin the first time a thread counts.
fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        // Relaxed: only distinctness matters, and even that only for speed.
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.with(|s| *s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sum_over_threads() {
        let counters = Counters::new();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        counters.add(Event::Admitted);
                    }
                    counters.add(Event::Refused);
                });
            }
        });
        counters.add(Event::Queued);
        counters.add(Event::KeyError);
        counters.add(Event::Exempt);
        counters.add(Event::Exempt);
        let want = Counts { admitted: 4000, refused: 4, queued: 1, key_errors: 1, exempt: 2 };
        assert_eq!(counters.counts(), want);
    }
}
