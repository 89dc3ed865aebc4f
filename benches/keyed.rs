//! Keyed limiting: checks of already-tracked `u64` keys, always allowed, for 1,000 and 1,000,000
//! keys on 1 and 2 threads, leakgate's `KeyedLimiter` beside governor's keyed limiter (a DashMap
//! of GCRA cells) in one group.
//!
//! Group `keyed`: each on its default clock (both read the TSC through quanta). Group
//! `keyed_coarse`: both on a clock refreshed every millisecond by a background thread
//! (leakgate's `CoarseClock`, governor's `QuantaUpkeepClock`), which takes the clock read
//! (about 12 ns on this kind of machine) out of the comparison and leaves the tables.
//!
//! Group `keyed_floor`: no limiter at all, only what any keyed limiter must do per check, as a
//! lower bound for the figures above: read the clock (or not), then one CAS on a word in a line
//! picked in the same scattered order, among as many lines as leakgate's table has groups for
//! that many keys. No key is hashed, compared or protected.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use governor::clock::{Clock as GovernorClock, QuantaUpkeepClock};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::{Quota as GovernorQuota, RateLimiter};
use leakgate::{Clock, CoarseClock, KeyedLimiter, Quota, TscClock};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Visits every key of `0..keys` once per `keys` steps in a scattered order (an odd multiplier
/// modulo a power of two is a permutation), starting at `offset`.
#[inline]
fn key(i: u64, offset: u64, keys: u64) -> u64 {
    (i.wrapping_add(offset).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16) % keys
}

trait KeyedGate: Sync {
    fn allow(&self, key: &u64) -> bool;
}

impl<C: Clock> KeyedGate for KeyedLimiter<u64, C> {
    #[inline]
    fn allow(&self, key: &u64) -> bool {
        self.check(key).is_ok()
    }
}

type GovernorKeyed<C> =
    RateLimiter<u64, DashMapStateStore<u64>, C, NoOpMiddleware<<C as GovernorClock>::Instant>>;

impl<C: GovernorClock + Sync> KeyedGate for GovernorKeyed<C> {
    #[inline]
    fn allow(&self, key: &u64) -> bool {
        self.check_key(key).is_ok()
    }
}

fn run(gate: &impl KeyedGate, threads: usize, iters: u64, keys: u64) -> Duration {
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads as u64)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let offset = t * 7_919;
                    for i in 0..iters {
                        black_box(gate.allow(&key(i, offset, keys)));
                    }
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        for w in workers {
            w.join().unwrap();
        }
        start.elapsed()
    })
}

/// Both limiters tracking `keys` keys, every check allowed, compared on 1 and 2 threads.
fn compare(
    c: &mut Criterion,
    group: &str,
    keys: u64,
    leakgate: &impl KeyedGate,
    governor: &impl KeyedGate,
) {
    for k in 0..keys {
        assert!(leakgate.allow(&k) && governor.allow(&k), "every key tracked and allowed");
    }
    let mut group = c.benchmark_group(group);
    for threads in [1usize, 2] {
        group.throughput(Throughput::Elements(threads as u64));
        let id = |who: &str| BenchmarkId::new(format!("{who}/{keys}_keys"), threads);
        group.bench_function(id("leakgate"), |b| {
            b.iter_custom(|iters| run(leakgate, threads, iters, keys))
        });
        group.bench_function(id("governor"), |b| {
            b.iter_custom(|iters| run(governor, threads, iters, keys))
        });
    }
    group.finish();
}

/// Inserts every key, and checks that none took another's slot: the benchmark then measures
/// lookups of tracked keys only.
fn assert_all_tracked<C: Clock>(leakgate: &KeyedLimiter<u64, C>, keys: u64) {
    assert!((0..keys).all(|k| leakgate.allow(&k)));
    assert_eq!(leakgate.overflow_denials(), 0);
    assert_eq!(leakgate.snapshot().len() as u64, keys, "a key's slot was reclaimed for another");
}

fn keyed(c: &mut Criterion) {
    let allowed = Quota::new(100_000_000_000, Duration::from_secs(1), 1_000_000_000_000).unwrap();
    let max = NonZeroU32::new(u32::MAX).unwrap();
    let governor_quota = GovernorQuota::per_second(max).allow_burst(max);
    for keys in [1_000u64, 1_000_000] {
        let capacity = 2 * keys as usize;
        let leakgate =
            KeyedLimiter::<u64>::with_capacity_and_clock(allowed, capacity, TscClock::new());
        let governor = RateLimiter::keyed(governor_quota);
        assert_all_tracked(&leakgate, keys);
        compare(c, "keyed", keys, &leakgate, &governor);
    }
    let upkeep = QuantaUpkeepClock::from_interval(Duration::from_millis(1)).unwrap();
    for keys in [1_000u64, 1_000_000] {
        let capacity = 2 * keys as usize;
        let leakgate =
            KeyedLimiter::<u64, _>::with_capacity_and_clock(allowed, capacity, CoarseClock::new());
        let governor = RateLimiter::dashmap_with_clock(governor_quota, upkeep.clone());
        assert_all_tracked(&leakgate, keys);
        compare(c, "keyed_coarse", keys, &leakgate, &governor);
    }
}

/// The floor: per check, an optional clock read and one CAS on a word of a scattered line.
fn floor(c: &mut Criterion) {
    let clock = TscClock::new();
    let mut group = c.benchmark_group("keyed_floor");
    group.throughput(Throughput::Elements(1));
    for keys in [1_000u64, 1_000_000] {
        // As many 64-byte lines as the keyed table has groups of four slots for `keys` keys.
        let lines = (2 * keys).next_power_of_two() / 4;
        let words: Vec<AtomicU64> = (0..lines * 8).map(|_| AtomicU64::new(0)).collect();
        let cas = |i: u64, now: u64| {
            let word = &words[key(i, 0, lines) as usize * 8];
            // Relaxed: a lone counter standing in for a bucket's state word.
            let tat = word.load(Ordering::Relaxed);
            let new = tat.max(now) + 1;
            black_box(word.compare_exchange(tat, new, Ordering::Relaxed, Ordering::Relaxed).is_ok())
        };
        group.bench_function(BenchmarkId::new("cas_only", format!("{keys}_keys")), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for i in 0..iters {
                    cas(i, i);
                }
                start.elapsed()
            })
        });
        group.bench_function(BenchmarkId::new("tsc_and_cas", format!("{keys}_keys")), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for i in 0..iters {
                    cas(i, clock.now_ns());
                }
                start.elapsed()
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    targets = keyed, floor
}
criterion_main!(benches);
