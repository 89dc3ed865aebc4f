//! The measuring loops: threads started together on one shared workload.

use crate::Workload;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Runs `per_thread` decisions on each of `threads` threads sharing `work`, started together,
/// and returns the wall time from the common start until the last thread finishes.
///
/// For criterion's `iter_custom`: `per_thread` is its iteration count.
///
/// ```
/// use leakgate_baselines::{hammer, Scenario};
/// let lim = Scenario::Allowed.governor();
/// assert!(hammer(&lim, 2, 1000) > std::time::Duration::ZERO);
/// ```
pub fn hammer<W: Workload + ?Sized>(work: &W, threads: usize, per_thread: u64) -> Duration {
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads as u64)
            .map(|thread| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mut decide = work.on_thread(thread);
                    barrier.wait();
                    for step in 0..per_thread {
                        black_box(decide(step));
                    }
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        for w in workers {
            w.join().expect("benchmark thread panicked");
        }
        start.elapsed()
    })
}

/// Runs `threads` threads on `work` for about `slice`; returns wall nanoseconds per decision
/// over all decisions of all threads.
///
/// ```
/// use leakgate_baselines::{ns_per_decision, Scenario};
/// let lim = Scenario::Denied.mutex_bucket();
/// let ns = ns_per_decision(&lim, 1, std::time::Duration::from_millis(5));
/// assert!(ns > 0.0);
/// ```
pub fn ns_per_decision<W: Workload + ?Sized>(work: &W, threads: usize, slice: Duration) -> f64 {
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(threads + 1);
    let (decisions, elapsed) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads as u64)
            .map(|thread| {
                let (stop, barrier) = (&stop, &barrier);
                s.spawn(move || {
                    let mut decide = work.on_thread(thread);
                    barrier.wait();
                    let mut step = 0u64;
                    // Relaxed: a stop flag; being late by one batch is harmless.
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..256 {
                            black_box(decide(step));
                            step += 1;
                        }
                    }
                    step
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        std::thread::sleep(slice);
        stop.store(true, Ordering::Relaxed);
        let n: u64 = workers.into_iter().map(|w| w.join().expect("bench thread panicked")).sum();
        (n, start.elapsed())
    });
    elapsed.as_nanos() as f64 / decisions.max(1) as f64
}

/// The median of `samples` (the upper one of the two middle values for an even count).
///
/// ```
/// assert_eq!(leakgate_baselines::median(&mut [3.0, 1.0, 2.0]), 2.0);
/// ```
pub fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN)
}
