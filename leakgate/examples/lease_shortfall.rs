//! Shortfall of `LeasedLimiter` beside the exact `Limiter`: threads ask as fast as they can for
//! a fixed time at rates from 1k/s to 100M/s (burst: 10 ms of the rate, at least 10), and the
//! units admitted are set against what the quota allowed over the run (`burst + rate * elapsed`),
//! or against what was asked when that was less. Shortfall = units refused while the limiter
//! had room, as a share of those it had room for; excess = units admitted beyond the quota's
//! `burst + rate * elapsed` (the leased bound allows up to `E`).
//!
//! `cargo run --release -p leakgate --example lease_shortfall -- [THREADS] [MILLIS] [ROUNDS]`
//! (defaults 2, 200, 3): a row per rate and limiter, the median of the rounds. Real threads on
//! the real clock lose units to scheduling too (a gap with no thread running longer than the
//! burst's time): the exact limiter's row shows that part.
//!
//! First, the same on a simulated clock, free of scheduling: `THREADS` slots take turns asking
//! at twice the rate for one second of clock, the leased and the exact limiter fed the same
//! sequence; then the same with all slots but one stopping halfway, holding their leases (threads
//! that exit holding one). The `local` columns do the same with one `LocalLease` per slot (a
//! thread's own handle), the stopped ones kept alive unused: a handle's units do not expire, so
//! they stay out of reach until it is used or dropped.

use leakgate::{Clock, LeasedLimiter, Leases, Limiter, Quota, TscClock};
use std::sync::atomic::{AtomicU64, Ordering};

/// What one run measured.
#[derive(Clone, Copy)]
struct Run {
    asked: u64,
    admitted: u64,
    allowed: u64,
}

impl Run {
    /// Units refused while there was room, as a share of the room (or of what was asked).
    fn shortfall(&self) -> f64 {
        let room = self.allowed.min(self.asked);
        room.saturating_sub(self.admitted) as f64 / room.max(1) as f64
    }
}

/// Runs `threads` threads asking `check` for `millis` on `clock`; the quota's allowance over the
/// time between the first and the last check.
fn run(
    threads: usize,
    millis: u64,
    q: &Quota,
    clock: &TscClock,
    check: &(dyn Fn() -> bool + Sync),
) -> Run {
    let (asked, admitted) = (AtomicU64::new(0), AtomicU64::new(0));
    let start = clock.now_ns();
    let end = start + millis * 1_000_000;
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let (mut a, mut ok) = (0u64, 0u64);
                while clock.now_ns() < end {
                    for _ in 0..64 {
                        a += 1;
                        ok += u64::from(check());
                    }
                }
                asked.fetch_add(a, Ordering::Relaxed);
                admitted.fetch_add(ok, Ordering::Relaxed);
            });
        }
    });
    let elapsed = clock.now_ns() - start;
    let by_rate = u128::from(elapsed) * u128::from(q.count()) / q.period().as_nanos();
    let allowed = u64::try_from(by_rate).unwrap_or(u64::MAX).saturating_add(q.burst());
    Run { asked: asked.into_inner(), admitted: admitted.into_inner(), allowed }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The simulated run: `slots` slots in turn, one check each `step_ns` ns of a manual clock for
/// one second, all slots but slot 0 stopping at `stop_ns`; (exact, leased) units admitted.
fn simulate(q: &Quota, slots: usize, step_ns: u64, stop_ns: u64) -> (u64, u64) {
    let exact = Limiter::with_clock(*q, leakgate::ManualClock::new());
    let leased =
        LeasedLimiter::with_leases(*q, leakgate::ManualClock::new(), Leases::new().slots(slots));
    let (mut a, mut b) = (0u64, 0u64);
    let mut now = 0u64;
    let mut i = 0usize;
    while now < 1_000_000_000 {
        let slot = if now < stop_ns { i % slots } else { 0 };
        a += u64::from(exact.check_n_at(1, now).is_ok());
        b += u64::from(leased.check_n_at_slot(slot, 1, now).is_ok());
        now += step_ns;
        i += 1;
    }
    (a, b)
}

/// [`simulate`] with one [`leakgate::LocalLease`] per slot instead of the slots' own leases;
/// units admitted.
fn simulate_local(q: &Quota, slots: usize, step_ns: u64, stop_ns: u64) -> u64 {
    let clock = leakgate::ManualClock::new();
    let lim = LeasedLimiter::with_leases(*q, clock.clone(), Leases::new().slots(slots));
    let mut handles: Vec<_> = (0..slots).map(|i| lim.local_at(i)).collect();
    let (mut admitted, mut now, mut i) = (0u64, 0u64, 0usize);
    while now < 1_000_000_000 {
        let slot = if now < stop_ns { i % slots } else { 0 };
        clock.set(std::time::Duration::from_nanos(now));
        admitted += u64::from(handles[slot].check().is_ok());
        now += step_ns;
        i += 1;
    }
    admitted
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().expect("a number")).collect();
    let threads = args.first().copied().unwrap_or(2) as usize;
    let millis = args.get(1).copied().unwrap_or(200);
    let rounds = args.get(2).copied().unwrap_or(3) as usize;
    println!(
        "simulated clock: {threads} slots in turn asking at twice the rate for 1 s (slots 1.. \
         stop at 0.5 s holding their leases in the second pair of columns)"
    );
    println!(
        "{:>12} {:>12} {:>12} {:>10} {:>12} {:>12} {:>10} {:>12} {:>10} {:>12} {:>10}",
        "rate/s",
        "exact",
        "leased",
        "shortfall",
        "exact",
        "leased",
        "shortfall",
        "local",
        "shortfall",
        "local",
        "shortfall"
    );
    for rate in [1_000u64, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000] {
        let q = Quota::per_second(rate).and_then(|q| q.with_burst((rate / 100).max(10)));
        let q = q.expect("a valid quota");
        let step = (500_000_000 / rate).max(1);
        let (e1, l1) = simulate(&q, threads, step, u64::MAX);
        let (e2, l2) = simulate(&q, threads, step, 500_000_000);
        let h1 = simulate_local(&q, threads, step, u64::MAX);
        let h2 = simulate_local(&q, threads, step, 500_000_000);
        let short = |e: u64, l: u64| e.saturating_sub(l) as f64 * 100.0 / e.max(1) as f64;
        println!(
            "{rate:>12} {e1:>12} {l1:>12} {:>9.3}% {e2:>12} {l2:>12} {:>9.3}% {h1:>12} {:>9.3}% \
             {h2:>12} {:>9.3}%",
            short(e1, l1),
            short(e2, l2),
            short(e1, h1),
            short(e2, h2)
        );
    }
    println!(
        "shortfall: {threads} threads asking as fast as they can for {millis} ms, median of \
         {rounds} rounds (interleaved)"
    );
    println!(
        "{:>12} {:>9} {:>16} {:>14} {:>14} {:>11} {:>10} {:>8}",
        "rate/s", "limiter", "asked", "admitted", "allowed", "shortfall", "excess", "E"
    );
    for rate in [1_000u64, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000] {
        let q = Quota::per_second(rate).and_then(|q| q.with_burst((rate / 100).max(10)));
        let q = q.expect("a valid quota");
        let mut rows: [(Vec<Run>, u64); 2] = [(Vec::new(), 0), (Vec::new(), 0)];
        for _ in 0..rounds {
            let clock = TscClock::new();
            let exact = Limiter::with_clock(q, clock.clone());
            rows[0].0.push(run(threads, millis, &q, &clock, &|| exact.check().is_ok()));
            let leased = LeasedLimiter::with_leases(q, clock.clone(), Leases::new());
            rows[1].1 = leased.excess_bound();
            rows[1].0.push(run(threads, millis, &q, &clock, &|| leased.check().is_ok()));
        }
        for ((runs, e), name) in rows.iter().zip(["exact", "leased"]) {
            let shortfall = median(runs.iter().map(Run::shortfall).collect());
            let excess =
                median(runs.iter().map(|r| r.admitted.saturating_sub(r.allowed) as f64).collect());
            let mid = |f: fn(&Run) -> u64| median(runs.iter().map(|r| f(r) as f64).collect());
            println!(
                "{rate:>12} {name:>9} {:>16.0} {:>14.0} {:>14.0} {:>10.3}% {excess:>10.0} {e:>8}",
                mid(|r| r.asked),
                mid(|r| r.admitted),
                mid(|r| r.allowed),
                shortfall * 100.0,
            );
        }
    }
}
