//! Keyed limiting: checks of already-tracked `u64` keys, always allowed, for 1,000 and 1,000,000
//! keys on 1 and 2 threads, leakgate's `KeyedLimiter` beside governor's keyed limiter (a DashMap
//! of GCRA cells) in one group.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use governor::{DefaultKeyedRateLimiter, Quota as GovernorQuota, RateLimiter};
use leakgate::{KeyedLimiter, Quota};
use std::hint::black_box;
use std::num::NonZeroU32;
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

impl KeyedGate for KeyedLimiter<u64> {
    #[inline]
    fn allow(&self, key: &u64) -> bool {
        self.check(key).is_ok()
    }
}

impl KeyedGate for DefaultKeyedRateLimiter<u64> {
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

fn keyed(c: &mut Criterion) {
    let mut group = c.benchmark_group("keyed");
    for keys in [1_000u64, 1_000_000] {
        let allowed =
            Quota::new(100_000_000_000, Duration::from_secs(1), 1_000_000_000_000).unwrap();
        let leakgate = KeyedLimiter::<u64>::with_capacity(allowed, 2 * keys as usize);
        let max = NonZeroU32::new(u32::MAX).unwrap();
        let governor = RateLimiter::keyed(GovernorQuota::per_second(max).allow_burst(max));
        for k in 0..keys {
            assert!(leakgate.allow(&k) && governor.allow(&k), "every key tracked and allowed");
        }
        assert_eq!(leakgate.overflow_denials(), 0);
        for threads in [1usize, 2] {
            group.throughput(Throughput::Elements(threads as u64));
            let id = |who: &str| BenchmarkId::new(format!("{who}/{keys}_keys"), threads);
            group.bench_function(id("leakgate"), |b| {
                b.iter_custom(|iters| run(&leakgate, threads, iters, keys))
            });
            group.bench_function(id("governor"), |b| {
                b.iter_custom(|iters| run(&governor, threads, iters, keys))
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    targets = keyed
}
criterion_main!(benches);
