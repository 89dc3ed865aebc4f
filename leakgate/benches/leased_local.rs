//! One limiter, every decision admitted, at 1 and 2 threads: a thread's own [`LocalLease`]
//! beside the shared `LeasedLimiter::check`, the exact `Limiter` and governor, and two floors
//! (a clock reading plus one uncontended atomic RMW; one plain decrement), interleaved in rounds
//! of time slices in one process; prints each contender's median ns per decision over all
//! threads and its ratio to governor's. Also a denied row (one an hour) for the handle.
//!
//! `cargo bench -p leakgate --bench leased_local` (`-- --quick` for a short run).
//!
//! [`LocalLease`]: leakgate::LocalLease

use crossbeam_utils::CachePadded;
use leakgate::{Clock, TscClock};
use leakgate_baselines::{median, Gate, Scenario};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Wall ns per decision over all threads: each thread makes its decider with `make(thread)`,
/// then all run together for about `slice`.
fn ns_per<F, D>(threads: usize, slice: Duration, make: &F) -> f64
where
    F: Fn(usize) -> D + Sync,
    D: FnMut() -> bool,
{
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(threads + 1);
    let (decisions, elapsed) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                let (stop, barrier) = (&stop, &barrier);
                s.spawn(move || {
                    let mut decide = make(thread);
                    barrier.wait();
                    let mut n = 0u64;
                    // Relaxed: a stop flag; being late by one batch is harmless.
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..256 {
                            black_box(decide());
                        }
                        n += 256;
                    }
                    n
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        std::thread::sleep(slice);
        stop.store(true, Ordering::Relaxed);
        let n: u64 = workers.into_iter().map(|w| w.join().expect("bench thread")).sum();
        (n, start.elapsed())
    });
    elapsed.as_nanos() as f64 / decisions.max(1) as f64
}

const NAMES: [&str; 6] = [
    "governor",
    "leakgate (exact)",
    "leased check",
    "leased local",
    "floor: tsc+rmw",
    "floor: dec",
];

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, slice) =
        if quick { (3, Duration::from_millis(20)) } else { (9, Duration::from_millis(60)) };
    let governor = Scenario::Allowed.governor();
    let exact = Scenario::Allowed.leakgate(TscClock::new());
    let leased = Scenario::Allowed.leased(TscClock::new());
    let denied = Scenario::Denied.leased(TscClock::new());
    let denied_gov = Scenario::Denied.governor();
    let clock = TscClock::new();
    let words: Vec<CachePadded<AtomicU64>> =
        (0..2).map(|_| CachePadded::new(AtomicU64::new(u64::MAX))).collect();
    println!(
        "allowed: one limiter, every decision admitted; median ns/decision over {rounds} rounds"
    );
    for threads in [1usize, 2] {
        let mut samples = vec![Vec::new(); NAMES.len()];
        for _ in 0..rounds {
            samples[0].push(ns_per(threads, slice, &|_| || governor.allow()));
            samples[1].push(ns_per(threads, slice, &|_| || exact.allow()));
            samples[2].push(ns_per(threads, slice, &|_| || leased.allow()));
            samples[3].push(ns_per(threads, slice, &|_| {
                let mut local = leased.local();
                move || local.check().is_ok()
            }));
            samples[4].push(ns_per(threads, slice, &|t| {
                let (clock, word) = (&clock, &words[t]);
                // Relaxed: a counter of this thread's own.
                move || black_box(clock.now_ns()) > 0 && word.fetch_sub(1, Ordering::Relaxed) > 0
            }));
            samples[5].push(ns_per(threads, slice, &|_| {
                let mut left = u64::MAX;
                move || {
                    left = black_box(left) - 1;
                    left > 0
                }
            }));
        }
        let ns: Vec<f64> = samples.iter_mut().map(|s| median(s)).collect();
        for (name, ns_i) in NAMES.iter().zip(&ns) {
            println!(
                "{threads} thread(s)  {name:<18} {ns_i:>7.2} ns  {:>5.2}x governor",
                ns_i / ns[0]
            );
        }
    }
    println!("denied (one an hour): median ns/decision");
    for threads in [1usize, 2] {
        let mut samples = vec![Vec::new(); 3];
        for _ in 0..rounds {
            samples[0].push(ns_per(threads, slice, &|_| || denied_gov.allow()));
            samples[1].push(ns_per(threads, slice, &|_| || denied.allow()));
            samples[2].push(ns_per(threads, slice, &|_| {
                let mut local = denied.local();
                move || local.check().is_ok()
            }));
        }
        let ns: Vec<f64> = samples.iter_mut().map(|s| median(s)).collect();
        for (name, ns_i) in ["governor", "leased check", "leased local"].iter().zip(&ns) {
            println!(
                "{threads} thread(s)  {name:<18} {ns_i:>7.2} ns  {:>5.2}x governor",
                ns_i / ns[0]
            );
        }
    }
}
