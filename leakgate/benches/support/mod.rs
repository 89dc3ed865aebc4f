//! What the criterion benchmarks share: their settings, written once. Each bench target
//! includes this module with `mod support;` (cargo does not take a folder without a
//! `main.rs` for a bench target of its own).

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion};
use leakgate_baselines::{hammer, Gate, Scenario};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Criterion with `warm_up` of warm-up, `measure` of measurement and `samples` samples per
/// benchmark: the three settings the benchmarks choose by how noisy their operation is.
pub(crate) fn config(warm_up: Duration, measure: Duration, samples: usize) -> Criterion {
    Criterion::default().warm_up_time(warm_up).measurement_time(measure).sample_size(samples)
}

/// Benchmark `name` at `threads` threads in `group`: each iteration one decision of `gate` per
/// thread (`leakgate_baselines::hammer`), for the benches of one gate shared by threads.
#[allow(dead_code, reason = "only the benches of a shared gate use it")]
pub(crate) fn shared_gate(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    threads: usize,
    gate: &impl Gate,
) {
    group.bench_with_input(BenchmarkId::new(name, threads), &threads, |b, &threads| {
        b.iter_custom(|iters| hammer(gate, threads, iters))
    });
}

/// The baselines every comparison of one shared gate includes, governor and a mutex token
/// bucket, in `scenario` at `threads` threads, named `governor/NAME` and `mutex_bucket/NAME`.
#[allow(dead_code, reason = "only the benches of a shared gate use it")]
pub(crate) fn baselines(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    threads: usize,
    scenario: Scenario,
) {
    shared_gate(group, &format!("governor/{name}"), threads, &scenario.governor());
    shared_gate(group, &format!("mutex_bucket/{name}"), threads, &scenario.mutex_bucket());
}

/// The `main` of a bench with an interleaved mode: `interleaved(rounds)` when the environment
/// variable `var` holds a number of rounds, the criterion `benches` otherwise.
#[allow(dead_code, reason = "only the benches with an interleaved mode use it")]
pub(crate) fn rounds_or_criterion(var: &str, interleaved: fn(usize), benches: fn()) {
    match std::env::var(var).ok().and_then(|r| r.parse().ok()) {
        Some(rounds) => interleaved(rounds),
        None => {
            benches();
            Criterion::default().configure_from_args().final_summary();
        }
    }
}

/// Runs `work` on `threads` threads started together, each given the stop flag and returning
/// how much it did; with `slice`, the flag is raised after about `slice`. The wall time from
/// the start to the last thread's end, and the threads' total.
#[allow(dead_code, reason = "only the meters' packet benches use it")]
pub(crate) fn threads_run(
    threads: usize,
    slice: Option<Duration>,
    work: impl Fn(&AtomicBool) -> u64 + Sync,
) -> (Duration, u64) {
    let (stop, barrier, work) = (AtomicBool::new(false), Barrier::new(threads + 1), &work);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (stop, barrier) = (&stop, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    work(stop)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        if let Some(slice) = slice {
            std::thread::sleep(slice);
            stop.store(true, Ordering::Relaxed);
        }
        let n = workers.into_iter().map(|w| w.join().expect("bench thread panicked")).sum();
        (start.elapsed(), n)
    })
}

/// The CPU's model name (`/proc/cpuinfo`), for a printed table; empty where it cannot be read.
#[allow(dead_code, reason = "only the benches that print a table use it")]
pub(crate) fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let line = info.lines().find(|l| l.starts_with("model name")).unwrap_or("");
    line.split(':').nth(1).unwrap_or("").trim().to_string()
}
