//! One thread, one limiter: the cost of a decision, allowed and denied, for leakgate (TSC and
//! coarse clocks), governor and a mutex token bucket, in one group so the ratios come from one run.

mod support;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use leakgate::{CoarseClock, TscClock};
use leakgate_baselines::{Gate, Scenario};
use std::hint::black_box;
use std::time::Duration;

fn single_thread(c: &mut Criterion) {
    let mut group = c.benchmark_group("single_thread");
    group.throughput(Throughput::Elements(1));
    for (name, scenario) in [("allowed", Scenario::Allowed), ("denied", Scenario::Denied)] {
        let tsc = scenario.leakgate(TscClock::new());
        bench_gate(&mut group, &format!("leakgate/tsc/{name}"), &tsc);
        let coarse = scenario.leakgate(CoarseClock::new());
        bench_gate(&mut group, &format!("leakgate/coarse/{name}"), &coarse);
        bench_gate(&mut group, &format!("governor/{name}"), &scenario.governor());
        bench_gate(&mut group, &format!("mutex_bucket/{name}"), &scenario.mutex_bucket());
    }
    group.finish();
}

/// Times `allow()`, statically dispatched for every contender alike.
fn bench_gate(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: &str,
    gate: &impl Gate,
) {
    group.bench_function(id, |b| b.iter(|| black_box(gate.allow())));
}

criterion_group! {
    name = benches;
    config = support::config(Duration::from_secs(1), Duration::from_secs(3), 100);
    targets = single_thread
}
criterion_main!(benches);
