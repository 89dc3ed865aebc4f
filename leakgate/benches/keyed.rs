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
//!
//! Group `keyed_batch`: one thread deciding bursts of 32 requests at one clock reading,
//! leakgate's `check_batch` beside governor's `check_key` one by one (and leakgate's own single
//! checks), per decision, for the same scattered keys.

mod support;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use leakgate::{Clock, TscClock};
use leakgate_baselines::{hammer, scattered_key, KeyedCheck, KeyedContenders, Workload};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Two keyed contenders tracking `keys` keys, every check allowed, compared on 1 and 2 threads.
fn compare(
    c: &mut Criterion,
    group: &str,
    keys: u64,
    leakgate: &impl Workload,
    governor: &impl Workload,
) {
    let mut group = c.benchmark_group(group);
    for threads in [1usize, 2] {
        group.throughput(Throughput::Elements(threads as u64));
        let id = |who: &str| BenchmarkId::new(format!("{who}/{keys}_keys"), threads);
        group.bench_function(id("leakgate"), |b| {
            b.iter_custom(|iters| hammer(leakgate, threads, iters))
        });
        group.bench_function(id("governor"), |b| {
            b.iter_custom(|iters| hammer(governor, threads, iters))
        });
    }
    group.finish();
}

fn keyed(c: &mut Criterion) {
    for keys in [1_000u64, 1_000_000] {
        // Every key inserted and checked to be tracked: the benchmark measures lookups only.
        let contenders = KeyedContenders::new(keys);
        compare(c, "keyed", keys, &contenders.tsc, &contenders.governor);
        compare(c, "keyed_coarse", keys, &contenders.coarse, &contenders.governor_coarse);
    }
}

/// Bursts of 32 scattered keys: one batch call against 32 single checks.
fn batch(c: &mut Criterion) {
    const BURST: usize = 32;
    let mut group = c.benchmark_group("keyed_batch");
    group.throughput(Throughput::Elements(1));
    for keys in [1_000u64, 1_000_000] {
        let contenders = KeyedContenders::new(keys);
        // Enough bursts that the keys of a run are not all in cache from the run before.
        let burst_keys: Vec<u64> =
            (0..keys.max(64_000)).map(|i| scattered_key(0, i, keys)).collect();
        let refs: Vec<&u64> = burst_keys.iter().collect();
        let costs = [1u64; BURST];
        // Runs `iters` decisions through `decide_burst`, cycling through the keys in bursts.
        let run = |iters: u64, decide_burst: &dyn Fn(&[&u64])| {
            let start = Instant::now();
            let bursts =
                refs.chunks_exact(BURST).cycle().take(iters.div_ceil(BURST as u64) as usize);
            for burst in bursts {
                decide_burst(burst);
            }
            start.elapsed()
        };
        let id = |who: &str| BenchmarkId::new(who, format!("{keys}_keys"));
        group.bench_function(id("leakgate_batch32"), |b| {
            b.iter_custom(|iters| {
                run(iters, &|burst| {
                    let mut admitted = [false; BURST];
                    black_box(contenders.tsc.limiter.check_batch(burst, &costs, &mut admitted));
                    black_box(admitted);
                })
            })
        });
        group.bench_function(id("leakgate_single"), |b| {
            b.iter_custom(|iters| {
                run(iters, &|burst| {
                    for key in burst {
                        black_box(KeyedCheck::check_key(&contenders.tsc.limiter, key));
                    }
                })
            })
        });
        group.bench_function(id("governor_single"), |b| {
            b.iter_custom(|iters| {
                run(iters, &|burst| {
                    for key in burst {
                        black_box(KeyedCheck::check_key(&contenders.governor.limiter, key));
                    }
                })
            })
        });
    }
    group.finish();
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
            let word = &words[scattered_key(0, i, lines) as usize * 8];
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
    config = support::config(Duration::from_secs(1), Duration::from_secs(3), 30);
    targets = keyed, batch, floor
}
criterion_main!(benches);
