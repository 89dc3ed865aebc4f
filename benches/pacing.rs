//! Pacing accuracy at 10,000 per second with burst 1: how late each release is against its
//! scheduled time, for leakgate's reservation + sleep-then-spin wait, beside an uber-go-style
//! pacer that only sleeps. Prints p50/p99/max lateness for each, then lets criterion time a
//! release (which should be the 100 µs interval for both).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use leakgate::{Clock, Limiter, Quota, TscClock, WaitPolicy};
use std::time::{Duration, Instant};

const RATE: u64 = 10_000;
const RELEASES: usize = 5_000;

/// uber-go's ratelimit in spirit: remember the last release, sleep until last + interval.
struct SleepPacer {
    interval: Duration,
    last: Option<Instant>,
}

impl SleepPacer {
    /// Blocks until the next slot; returns the slot (the scheduled time).
    fn take(&mut self) -> Instant {
        let now = Instant::now();
        let slot = match self.last {
            Some(last) => (last + self.interval).max(now),
            None => now,
        };
        if slot > now {
            std::thread::sleep(slot - now);
        }
        self.last = Some(slot);
        slot
    }
}

/// Lateness of each release in nanoseconds, for leakgate with `policy`.
fn leakgate_lateness(policy: WaitPolicy) -> Vec<u64> {
    let clock = TscClock::new();
    let lim = Limiter::with_clock(Quota::per_second(RATE).unwrap().with_burst(1).unwrap(), &clock);
    (0..RELEASES)
        .map(|_| {
            let r = lim.reserve(Duration::MAX).unwrap();
            let due = r.ready_at();
            r.wait_with(policy);
            clock.now_ns().saturating_sub(due.as_nanos() as u64)
        })
        .collect()
}

fn sleep_only_lateness() -> Vec<u64> {
    let mut pacer = SleepPacer { interval: Duration::from_nanos(1_000_000_000 / RATE), last: None };
    (0..RELEASES)
        .map(|_| {
            let slot = pacer.take();
            Instant::now().saturating_duration_since(slot).as_nanos() as u64
        })
        .collect()
}

fn report(name: &str, mut lateness: Vec<u64>) {
    lateness.sort_unstable();
    let pct = |p: usize| lateness[(lateness.len() * p / 100).min(lateness.len() - 1)] as f64 / 1e3;
    println!(
        "pacing/{name:<28} lateness over {RELEASES} releases: p50 {:7.1} µs  p99 {:7.1} µs  max {:8.1} µs",
        pct(50),
        pct(99),
        *lateness.last().unwrap() as f64 / 1e3
    );
}

fn pacing(c: &mut Criterion) {
    report("leakgate (sleep+spin 150µs)", leakgate_lateness(WaitPolicy::default()));
    report("leakgate (sleep only)", leakgate_lateness(WaitPolicy::new(Duration::ZERO)));
    report("uber-go style (sleep only)", sleep_only_lateness());

    let mut group = c.benchmark_group("pacing");
    group.throughput(Throughput::Elements(1));
    group.bench_function("leakgate/release", |b| {
        let lim = Limiter::new(Quota::per_second(RATE).unwrap().with_burst(1).unwrap());
        b.iter(|| lim.wait_n(1).unwrap())
    });
    group.bench_function("sleep_pacer/release", |b| {
        let mut pacer =
            SleepPacer { interval: Duration::from_nanos(1_000_000_000 / RATE), last: None };
        b.iter(|| pacer.take())
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = pacing
}
criterion_main!(benches);
