//! One limiter shared by 1 and 2 threads: `LeasedLimiter` beside the exact `Limiter`, governor
//! and a mutex token bucket in one group; every decision admitted, every decision denied (one an
//! hour: the leased limiter's leases are then off), and saturated (1M/s burst 1,000 asked far
//! above its rate: mostly refusals, with leases on).

mod support;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use leakgate::{LeasedLimiter, Leases, Limiter, Quota, TscClock};
use leakgate_baselines::{Governor, MutexTokenBucket, Scenario};
use std::time::Duration;

const THREADS: [usize; 2] = [1, 2];

fn leased(c: &mut Criterion) {
    let mut group = c.benchmark_group("leased");
    for (name, scenario) in [("allowed", Scenario::Allowed), ("denied", Scenario::Denied)] {
        for threads in THREADS {
            // Elements = decisions made per iteration: one per thread.
            group.throughput(Throughput::Elements(threads as u64));
            let lim = scenario.leakgate(TscClock::new());
            support::shared_gate(&mut group, &format!("leakgate/{name}"), threads, &lim);
            let leased = scenario.leased(TscClock::new());
            support::shared_gate(&mut group, &format!("leased/{name}"), threads, &leased);
            support::baselines(&mut group, name, threads, scenario);
        }
    }
    let q = Quota::per_second(1_000_000).and_then(|q| q.with_burst(1_000)).expect("a quota");
    for threads in THREADS {
        group.throughput(Throughput::Elements(threads as u64));
        let exact = Limiter::new(q);
        support::shared_gate(&mut group, "leakgate/saturated", threads, &exact);
        let leased = LeasedLimiter::with_leases(q, TscClock::new(), Leases::new());
        support::shared_gate(&mut group, "leased/saturated", threads, &leased);
        support::shared_gate(
            &mut group,
            "governor/saturated",
            threads,
            &Governor::new(1_000_000, 1_000),
        );
        let mutex = MutexTokenBucket::new(1e6, 1_000);
        support::shared_gate(&mut group, "mutex_bucket/saturated", threads, &mutex);
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = support::config(Duration::from_secs(1), Duration::from_secs(2), 20);
    targets = leased
}
criterion_main!(benches);
