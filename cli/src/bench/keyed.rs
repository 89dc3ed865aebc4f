//! The keyed part of `leakgate bench`: per-key limiters over many tracked keys, every check
//! allowed, leakgate's `KeyedLimiter` beside governor's keyed limiter, each on a TSC clock and on
//! a clock refreshed every millisecond.
//!
//! Threads share one limiter and one key set; each thread walks the keys in its own scattered
//! order from its own starting point, so threads meet on a key now and then, as clients spread
//! over a server's workers do.

use governor::clock::QuantaUpkeepClock;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use leakgate::{Clock, CoarseClock, KeyedLimiter, Quota, TscClock};
use leakgate_baselines::Gate;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The table sizes measured: one that fits in a core's caches and one that does not.
pub(super) const KEY_COUNTS: [u64; 2] = [1_000, 1_000_000];

pub(super) const CONTENDERS: [&str; 4] =
    ["leakgate (tsc)", "leakgate (coarse)", "governor", "governor (coarse)"];

/// Index of the contender the others are compared with.
pub(super) const GOVERNOR: usize = 2;

/// governor's keyed limiter (a DashMap of GCRA cells) on clock `C`.
type GovernorKeyed<C> = governor::RateLimiter<
    u64,
    DefaultKeyedStateStore<u64>,
    C,
    NoOpMiddleware<<C as governor::clock::Clock>::Instant>,
>;

/// The four contenders, each tracking `keys` keys.
pub(super) struct KeyedGates {
    tsc: KeyedGate<KeyedLimiter<u64, TscClock>>,
    coarse: KeyedGate<KeyedLimiter<u64, CoarseClock>>,
    governor: KeyedGate<GovernorKeyed<governor::clock::DefaultClock>>,
    governor_coarse: KeyedGate<GovernorKeyed<QuantaUpkeepClock>>,
}

/// A keyed limiter and the size of the key set its checks draw from.
struct KeyedGate<L> {
    limiter: L,
    keys: u64,
}

impl KeyedGates {
    /// Builds every contender and inserts `keys` keys into each (a table of twice as many slots
    /// for leakgate), so that the measured checks find tracked keys.
    pub(super) fn new(keys: u64) -> Self {
        let allowed = Quota::new(100_000_000_000, Duration::from_secs(1), 1_000_000_000_000)
            .expect("valid quota");
        let max = std::num::NonZeroU32::new(u32::MAX).expect("not zero");
        let governor_quota = governor::Quota::per_second(max).allow_burst(max);
        let capacity = 2 * keys as usize;
        let upkeep = QuantaUpkeepClock::from_interval(Duration::from_millis(1))
            .expect("a 1 ms upkeep thread");
        let gates = KeyedGates {
            tsc: KeyedGate {
                limiter: KeyedLimiter::with_capacity_and_clock(allowed, capacity, TscClock::new()),
                keys,
            },
            coarse: KeyedGate {
                limiter: KeyedLimiter::with_capacity_and_clock(
                    allowed,
                    capacity,
                    CoarseClock::new(),
                ),
                keys,
            },
            governor: KeyedGate { limiter: governor::RateLimiter::keyed(governor_quota), keys },
            governor_coarse: KeyedGate {
                limiter: governor::RateLimiter::dashmap_with_clock(governor_quota, upkeep),
                keys,
            },
        };
        for key in 0..keys {
            assert!(
                gates.tsc.limiter.check(&key).is_ok()
                    && gates.coarse.limiter.check(&key).is_ok()
                    && gates.governor.limiter.check_key(&key).is_ok()
                    && gates.governor_coarse.limiter.check_key(&key).is_ok(),
                "every key is admitted"
            );
        }
        gates
    }

    /// The contenders in the order of [`CONTENDERS`].
    pub(super) fn all(&self) -> [&dyn Gate; 4] {
        [&self.tsc, &self.coarse, &self.governor, &self.governor_coarse]
    }
}

/// Hands each thread a distinct starting point in the key sequence.
static NEXT_START: AtomicU64 = AtomicU64::new(0);

std::thread_local!(static STEP: Cell<Option<u64>> = const { Cell::new(None) });

/// The calling thread's next key, scattered over `0..keys`.
fn next_key(keys: u64) -> u64 {
    STEP.with(|step| {
        // Relaxed: only distinctness of the starting points matters.
        let i = step.get().unwrap_or_else(|| NEXT_START.fetch_add(7_919, Ordering::Relaxed)) + 1;
        step.set(Some(i));
        (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16) % keys
    })
}

impl<C: Clock> Gate for KeyedGate<KeyedLimiter<u64, C>> {
    fn allow(&self) -> bool {
        self.limiter.check(&next_key(self.keys)).is_ok()
    }
}

impl<C: governor::clock::Clock + Sync> Gate for KeyedGate<GovernorKeyed<C>> {
    fn allow(&self) -> bool {
        self.limiter.check_key(&next_key(self.keys)).is_ok()
    }
}
