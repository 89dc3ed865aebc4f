//! What the criterion benchmarks share: their settings, written once. Each bench target
//! includes this module with `mod support;` (cargo does not take a folder without a
//! `main.rs` for a bench target of its own).

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion};
use leakgate_baselines::{hammer, Gate};
use std::time::Duration;

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
