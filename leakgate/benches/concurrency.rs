//! Concurrency limits: `try_acquire` + release of one permit at 1 and 2 threads, leakgate's
//! `ConcurrencyLimiter` beside `tokio::sync::Semaphore`'s `try_acquire` + drop and a
//! `Mutex<usize>` counter, in one group; and per key at 1M keys, `KeyedConcurrencyLimiter`
//! beside `KeyedLimiter::check` on the same keys.

mod support;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use leakgate::{ConcurrencyLimiter, KeyedConcurrencyLimiter, KeyedLimiter, Quota};
use std::hint::black_box;
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

const THREADS: [usize; 2] = [1, 2];
const KEYS: u64 = 1 << 20;

/// Runs `op` `iters` times on each of `threads` threads, started together; the slowest thread's
/// time.
fn hammer(threads: usize, iters: u64, op: &(impl Fn(u64) + Sync)) -> Duration {
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    for i in 0..iters {
                        op(i.wrapping_mul(threads as u64) + t as u64);
                    }
                    start.elapsed()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    })
}

fn acquire_release(c: &mut Criterion) {
    let mut group = c.benchmark_group("concurrency");
    for threads in THREADS {
        // Elements = acquire + release pairs per iteration: one per thread.
        group.throughput(Throughput::Elements(threads as u64));
        // A limit above the threads: every try succeeds, as at a pool that is not full.
        let ours = ConcurrencyLimiter::new(64).unwrap();
        group.bench_function(BenchmarkId::new("leakgate", threads), |b| {
            b.iter_custom(|iters| hammer(threads, iters, &|_| drop(black_box(ours.try_acquire()))))
        });
        let semaphore = tokio::sync::Semaphore::new(64);
        group.bench_function(BenchmarkId::new("tokio_semaphore", threads), |b| {
            b.iter_custom(|iters| {
                hammer(threads, iters, &|_| drop(black_box(semaphore.try_acquire())))
            })
        });
        let counter = Mutex::new(0usize);
        group.bench_function(BenchmarkId::new("mutex_counter", threads), |b| {
            b.iter_custom(|iters| {
                hammer(threads, iters, &|_| {
                    let took = {
                        let mut n = counter.lock().unwrap();
                        (*n < 64).then(|| *n += 1).is_some()
                    };
                    if black_box(took) {
                        *counter.lock().unwrap() -= 1;
                    }
                })
            })
        });
    }
    group.finish();
}

fn keyed(c: &mut Criterion) {
    let mut group = c.benchmark_group("concurrency_keyed_1M");
    group.throughput(Throughput::Elements(1));
    // Keys spread over 1M, each new at its first acquire: a key at 0 keeps its slot until a new
    // key needs it, so later rounds mostly find their keys (`keyed_concurrency` measures the two
    // cases apart, beside the table this one replaced).
    // Room for every key at once, with slack for uneven shards.
    let ours = KeyedConcurrencyLimiter::<u64>::with_capacity(4, 2 * KEYS as usize).unwrap();
    group.bench_function("keyed_concurrency/acquire_release", |b| {
        b.iter_custom(|iters| {
            hammer(1, iters, &|i| {
                drop(black_box(ours.try_acquire(&(i.wrapping_mul(0x9E37_79B9) % KEYS))))
            })
        })
    });
    // Every key held once already: each acquire finds its key present.
    let held: Vec<_> = (0..KEYS).map(|k| ours.try_acquire(&k).unwrap()).collect();
    group.bench_function("keyed_concurrency/acquire_release_present", |b| {
        b.iter_custom(|iters| {
            hammer(1, iters, &|i| {
                drop(black_box(ours.try_acquire(&(i.wrapping_mul(0x9E37_79B9) % KEYS))))
            })
        })
    });
    drop(held);
    let rate = KeyedLimiter::<u64>::with_capacity(
        Quota::per_second(1_000_000_000).unwrap(),
        KEYS as usize,
    );
    for k in 0..KEYS {
        let _ = rate.check(&k);
    }
    group.bench_function("keyed_rate/check", |b| {
        b.iter_custom(|iters| {
            hammer(1, iters, &|i| {
                let _ = black_box(rate.check(&(i.wrapping_mul(0x9E37_79B9) % KEYS)));
            })
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = support::config(Duration::from_millis(500), Duration::from_secs(2), 20);
    targets = acquire_release, keyed
}
criterion_main!(benches);
