//! Pacing accuracy at 10,000 per second with burst 1: how late each release is against its
//! scheduled time. Contenders, each releasing 5,000 times in a row on one thread:
//!
//! * leakgate: a reservation, then `Reservation::wait_with` (sleep, then spin the last 150 µs);
//! * leakgate, sleep only (`WaitPolicy::new(Duration::ZERO)`), to show what the spin buys;
//! * an uber-go-style pacer (written here): remember the last slot, sleep until one interval
//!   after it;
//! * governor used as a blocking pacer: `check()`, and on denial sleep `wait_time_from(now)`.
//!
//! Lateness is read on each contender's own clock right after it returns, against the time it
//! was scheduled for; p50, p99 and the max are printed (criterion measures time, not this). Then
//! criterion times one release of each, which should be the 100 µs interval. The tail depends on
//! what else the machine runs: compare contenders within one run.

mod support;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use governor::clock::{Clock as _, Reference as _};
use leakgate::{Clock, Limiter, Quota, TscClock, WaitPolicy};
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

const RATE: u64 = 10_000;
const RELEASES: usize = 5_000;
const INTERVAL: Duration = Duration::from_nanos(1_000_000_000 / RATE);

/// uber-go's ratelimit in spirit: remember the last slot, sleep until last + interval.
struct SleepPacer {
    last: Option<Instant>,
}

impl SleepPacer {
    /// Blocks until the next slot; returns the slot (the scheduled time).
    fn take(&mut self) -> Instant {
        let now = Instant::now();
        let slot = match self.last {
            Some(last) => (last + INTERVAL).max(now),
            None => now,
        };
        if slot > now {
            std::thread::sleep(slot - now);
        }
        self.last = Some(slot);
        slot
    }
}

fn quota() -> Quota {
    Quota::per_second(RATE).unwrap().with_burst(1).unwrap()
}

/// Lateness of each release in nanoseconds, for leakgate with `policy`.
fn leakgate_lateness(policy: WaitPolicy) -> Vec<u64> {
    let clock = TscClock::new();
    let lim = Limiter::with_clock(quota(), &clock);
    (0..RELEASES)
        .map(|_| {
            let r = lim.reserve(Duration::MAX).unwrap();
            let due = r.ready_at().as_nanos() as u64;
            r.wait_with(policy);
            clock.now_ns().saturating_sub(due)
        })
        .collect()
}

fn sleep_pacer_lateness() -> Vec<u64> {
    let mut pacer = SleepPacer { last: None };
    (0..RELEASES)
        .map(|_| {
            let slot = pacer.take();
            Instant::now().saturating_duration_since(slot).as_nanos() as u64
        })
        .collect()
}

fn governor_lateness() -> Vec<u64> {
    let per_second = NonZeroU32::new(RATE as u32).unwrap();
    let gov = governor::RateLimiter::direct(
        governor::Quota::per_second(per_second).allow_burst(NonZeroU32::MIN),
    );
    let clock = gov.clock();
    (0..RELEASES)
        .map(|_| {
            let mut due = clock.now();
            while let Err(not_until) = gov.check() {
                due = not_until.earliest_possible();
                std::thread::sleep(not_until.wait_time_from(clock.now()));
            }
            clock.now().duration_since(due).as_u64()
        })
        .collect()
}

fn report(name: &str, mut lateness: Vec<u64>) {
    lateness.sort_unstable();
    let us = |ns: u64| ns as f64 / 1e3;
    let pct = |p: usize| us(lateness[(lateness.len() * p / 100).min(lateness.len() - 1)]);
    println!(
        "pacing/{name:<30} lateness over {RELEASES} releases: \
         p50 {:7.2} µs  p99 {:7.2} µs  max {:8.1} µs",
        pct(50),
        pct(99),
        us(*lateness.last().unwrap())
    );
}

fn pacing(c: &mut Criterion) {
    report("leakgate (sleep + spin 150 µs)", leakgate_lateness(WaitPolicy::default()));
    report("leakgate (sleep only)", leakgate_lateness(WaitPolicy::new(Duration::ZERO)));
    report("uber-go style (sleep only)", sleep_pacer_lateness());
    report("governor (check + sleep)", governor_lateness());

    let mut group = c.benchmark_group("pacing");
    group.throughput(Throughput::Elements(1));
    group.bench_function("leakgate/release", |b| {
        let lim = Limiter::new(quota());
        b.iter(|| lim.wait_n(1).unwrap())
    });
    group.bench_function("sleep_pacer/release", |b| {
        let mut pacer = SleepPacer { last: None };
        b.iter(|| pacer.take())
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = support::config(Duration::from_secs(1), Duration::from_secs(2), 20);
    targets = pacing
}
criterion_main!(benches);
