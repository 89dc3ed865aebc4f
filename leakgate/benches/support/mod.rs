//! What the criterion benchmarks share: their settings, written once. Each bench target
//! includes this module with `mod support;` (cargo does not take a folder without a
//! `main.rs` for a bench target of its own).

use criterion::Criterion;
use std::time::Duration;

/// Criterion with `warm_up` of warm-up, `measure` of measurement and `samples` samples per
/// benchmark: the three settings the benchmarks choose by how noisy their operation is.
pub(crate) fn config(warm_up: Duration, measure: Duration, samples: usize) -> Criterion {
    Criterion::default().warm_up_time(warm_up).measurement_time(measure).sample_size(samples)
}
