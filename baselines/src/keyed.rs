//! Keyed contenders: per-key limiters over many tracked `u64` keys, every check allowed,
//! leakgate's `KeyedLimiter` beside governor's keyed limiter (a DashMap of GCRA cells), each on a
//! TSC clock and on a clock refreshed every millisecond.
//!
//! Threads share one limiter and one key set; each thread walks the keys in its own scattered
//! order from its own starting point, so threads meet on a key now and then, as clients spread
//! over a server's workers do.

use crate::Workload;
use governor::clock::{Clock as GovernorClock, DefaultClock, QuantaUpkeepClock};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use leakgate::{Clock, CoarseClock, KeyedLimiter, Quota, TscClock};
use std::num::NonZeroU32;
use std::time::Duration;

/// The names of [`KeyedContenders::all`], in its order.
pub const KEYED_CONTENDERS: [&str; 4] =
    ["leakgate (tsc)", "leakgate (coarse)", "governor", "governor (coarse)"];

/// The key a thread checks at a step: every key of `0..keys` comes up in a scattered order (an
/// odd multiplier is a permutation modulo a power of two), each thread from its own start.
///
/// ```
/// let k = leakgate_baselines::scattered_key(3, 10, 1000);
/// assert!(k < 1000);
/// ```
#[inline]
pub fn scattered_key(thread: u64, step: u64, keys: u64) -> u64 {
    (step.wrapping_add(thread.wrapping_mul(7_919)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16) % keys
}

/// A keyed limiter as the harness sees it: one check of one key.
///
/// ```
/// use leakgate_baselines::KeyedCheck;
/// let keyed = leakgate::KeyedLimiter::<u64>::new(leakgate::Quota::per_second(1)?);
/// assert!(keyed.check_key(&7));
/// assert!(!keyed.check_key(&7));
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
pub trait KeyedCheck: Sync {
    /// Takes one unit from `key`'s bucket if it conforms now.
    fn check_key(&self, key: &u64) -> bool;
}

impl<C: Clock> KeyedCheck for KeyedLimiter<u64, C> {
    #[inline]
    fn check_key(&self, key: &u64) -> bool {
        self.check(key).is_ok()
    }
}

/// governor's keyed limiter (a DashMap of GCRA cells) on clock `C`.
type GovernorKeyed<C> = governor::RateLimiter<
    u64,
    DefaultKeyedStateStore<u64>,
    C,
    NoOpMiddleware<<C as GovernorClock>::Instant>,
>;

impl<C: GovernorClock + Sync> KeyedCheck for GovernorKeyed<C> {
    #[inline]
    fn check_key(&self, key: &u64) -> bool {
        governor::RateLimiter::check_key(self, key).is_ok()
    }
}

/// A keyed limiter and the number of keys its checks draw from, as a [`Workload`].
///
/// ```
/// use leakgate_baselines::{KeyedWorkload, Workload};
/// let keyed = leakgate::KeyedLimiter::<u64>::new(leakgate::Quota::per_second(1_000)?);
/// let work = KeyedWorkload { limiter: keyed, keys: 10 };
/// assert!(work.decide(0, 0));
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
pub struct KeyedWorkload<L> {
    /// The limiter.
    pub limiter: L,
    /// Keys are drawn from `0..keys`.
    pub keys: u64,
}

impl<L: KeyedCheck> Workload for KeyedWorkload<L> {
    #[inline]
    fn decide(&self, thread: u64, step: u64) -> bool {
        self.limiter.check_key(&scattered_key(thread, step, self.keys))
    }
}

/// The four keyed contenders, each already tracking every key of `0..keys`.
///
/// ```
/// use leakgate_baselines::{hammer, KeyedContenders};
/// let keyed = KeyedContenders::new(100);
/// assert!(hammer(&keyed.tsc, 1, 1000) > std::time::Duration::ZERO);
/// ```
pub struct KeyedContenders {
    /// leakgate on its default (TSC) clock.
    pub tsc: KeyedWorkload<KeyedLimiter<u64, TscClock>>,
    /// leakgate on its 1 ms coarse clock.
    pub coarse: KeyedWorkload<KeyedLimiter<u64, CoarseClock>>,
    /// governor on its default clock.
    pub governor: KeyedWorkload<GovernorKeyed<DefaultClock>>,
    /// governor on a clock refreshed every millisecond by a background thread.
    pub governor_coarse: KeyedWorkload<GovernorKeyed<QuantaUpkeepClock>>,
}

impl KeyedContenders {
    /// Builds every contender (a table of twice `keys` slots for leakgate) and inserts every key
    /// into each, checking that leakgate tracks them all, so that the measured checks find
    /// tracked keys.
    pub fn new(keys: u64) -> Self {
        // Every check allowed, and every bucket kept busy (one second of backlog a check, a
        // burst of 10^9 checks): an idle bucket's slot may rightly go to another key, so a
        // quota whose buckets empty at once would let inserting one key displace another.
        let allowed = Quota::new(1, Duration::from_secs(1), 1_000_000_000).expect("valid quota");
        let max = NonZeroU32::new(u32::MAX).expect("not zero");
        let governor_quota = governor::Quota::per_second(max).allow_burst(max);
        let capacity = 2 * keys as usize;
        let upkeep = QuantaUpkeepClock::from_interval(Duration::from_millis(1))
            .expect("a 1 ms upkeep thread");
        let contenders = KeyedContenders {
            tsc: KeyedWorkload {
                limiter: KeyedLimiter::with_capacity_and_clock(allowed, capacity, TscClock::new()),
                keys,
            },
            coarse: KeyedWorkload {
                limiter: KeyedLimiter::with_capacity_and_clock(
                    allowed,
                    capacity,
                    CoarseClock::new(),
                ),
                keys,
            },
            governor: KeyedWorkload { limiter: governor::RateLimiter::keyed(governor_quota), keys },
            governor_coarse: KeyedWorkload {
                limiter: governor::RateLimiter::dashmap_with_clock(governor_quota, upkeep),
                keys,
            },
        };
        for key in 0..keys {
            for contender in contenders.all_keyed() {
                assert!(contender.check_key(&key), "every key is admitted");
            }
        }
        for table in
            [contenders.tsc.limiter.snapshot().len(), contenders.coarse.limiter.snapshot().len()]
        {
            assert_eq!(table as u64, keys, "a key's slot was taken by another");
        }
        contenders
    }

    /// The contenders in the order of [`KEYED_CONTENDERS`].
    pub fn all(&self) -> [&dyn Workload; 4] {
        [&self.tsc, &self.coarse, &self.governor, &self.governor_coarse]
    }

    fn all_keyed(&self) -> [&dyn KeyedCheck; 4] {
        [
            &self.tsc.limiter,
            &self.coarse.limiter,
            &self.governor.limiter,
            &self.governor_coarse.limiter,
        ]
    }
}
