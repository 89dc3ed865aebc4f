//! One limiter shared by 1 and 2 threads: `LeasedLimiter` beside the exact `Limiter`, governor
//! and a mutex token bucket in one group; every decision admitted, every decision denied (one an
//! hour: the leased limiter's leases are then off), and saturated (1M/s burst 1,000 asked far
//! above its rate: mostly refusals, with leases on).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use leakgate::{LeasedLimiter, Leases, Limiter, Quota, TscClock};
use leakgate_baselines::{hammer, Gate, Governor, MutexTokenBucket, Scenario};
use std::time::Duration;

const THREADS: [usize; 2] = [1, 2];

fn leased(c: &mut Criterion) {
    let mut group = c.benchmark_group("leased");
    for (name, scenario) in [("allowed", Scenario::Allowed), ("denied", Scenario::Denied)] {
        for threads in THREADS {
            // Elements = decisions made per iteration: one per thread.
            group.throughput(Throughput::Elements(threads as u64));
            let lim = scenario.leakgate(TscClock::new());
            bench(&mut group, &format!("leakgate/{name}"), threads, &lim);
            let leased = scenario.leased(TscClock::new());
            bench(&mut group, &format!("leased/{name}"), threads, &leased);
            bench(&mut group, &format!("governor/{name}"), threads, &scenario.governor());
            bench(&mut group, &format!("mutex_bucket/{name}"), threads, &scenario.mutex_bucket());
        }
    }
    let q = Quota::per_second(1_000_000).and_then(|q| q.with_burst(1_000)).expect("a quota");
    for threads in THREADS {
        group.throughput(Throughput::Elements(threads as u64));
        let exact = Limiter::new(q);
        bench(&mut group, "leakgate/saturated", threads, &exact);
        let leased = LeasedLimiter::with_leases(q, TscClock::new(), Leases::new());
        bench(&mut group, "leased/saturated", threads, &leased);
        bench(&mut group, "governor/saturated", threads, &Governor::new(1_000_000, 1_000));
        let mutex = MutexTokenBucket::new(1e6, 1_000);
        bench(&mut group, "mutex_bucket/saturated", threads, &mutex);
    }
    group.finish();
}

fn bench(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    threads: usize,
    gate: &impl Gate,
) {
    group.bench_with_input(BenchmarkId::new(name, threads), &threads, |b, &threads| {
        b.iter_custom(|iters| hammer(gate, threads, iters))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = leased
}
criterion_main!(benches);
