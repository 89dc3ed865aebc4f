//! Many threads, one limiter: aggregate decisions per second for 1, 2, 4 and 8 threads, allowed
//! (every decision writes) and denied (every decision only reads), leakgate beside governor and a
//! mutex token bucket in one group.

mod support;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use leakgate::TscClock;
use leakgate_baselines::Scenario;
use std::time::Duration;

const THREADS: [usize; 4] = [1, 2, 4, 8];

fn contended(c: &mut Criterion) {
    let mut group = c.benchmark_group("contended");
    for (name, scenario) in [("allowed", Scenario::Allowed), ("denied", Scenario::Denied)] {
        for threads in THREADS {
            // Elements = decisions made per iteration: one per thread.
            group.throughput(Throughput::Elements(threads as u64));
            let lim = scenario.leakgate(TscClock::new());
            support::shared_gate(&mut group, &format!("leakgate/{name}"), threads, &lim);
            support::baselines(&mut group, name, threads, scenario);
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = support::config(Duration::from_secs(1), Duration::from_secs(3), 30);
    targets = contended
}
criterion_main!(benches);
