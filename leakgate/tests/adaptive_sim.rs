//! `AdaptiveConcurrency` against a simulated server whose capacity halves, doubles and fails
//! (`examples/adaptive/sim.rs`), on a manual clock: each algorithm's limit converges to within
//! 20% of the capacity, follows each change within a stated number of round trips, never leaves
//! `[min, max]`, and stays within a stated band once settled.

#[path = "../examples/adaptive/sim.rs"]
mod sim;

use leakgate::{AdaptiveConcurrency, ManualClock};
use sim::{capacity_at, Round};

const MIN: u32 = 1;
const MAX: u32 = 200;

/// The first round from `from` on where the limit is within 20% of the capacity.
fn settled_at(rounds: &[Round], from: u32) -> u32 {
    rounds[from as usize..]
        .iter()
        .find(|r| r.capacity > 0 && r.limit.abs_diff(r.capacity) * 5 <= r.capacity)
        .map(|r| r.round)
        .unwrap_or(u32::MAX)
}

/// The lowest and highest limit over `[from, to)`, as fractions of the capacity.
fn band(rounds: &[Round], from: u32, to: u32) -> (f64, f64) {
    let cap = f64::from(capacity_at(from));
    let ls = rounds[from as usize..to as usize].iter().map(|r| f64::from(r.limit));
    let (lo, hi) = ls.fold((f64::MAX, 0.0f64), |(lo, hi), l| (lo.min(l), hi.max(l)));
    (lo / cap, hi / cap)
}

/// Each change (start, halving at 200, doubling at 400, recovery after the outage at 620) is
/// followed within `follow[i]` round trips; after that, until the next change, the limit stays
/// within `[lo, hi]` of the capacity; during the outage it falls every round trip (by the 10%
/// backoff), to at most `0.9^20` of where it was.
fn check(name: &str, rounds: &[Round], follow: [u32; 4], lo: f64, hi: f64) {
    assert!(rounds.iter().all(|r| (MIN..=MAX).contains(&r.limit)), "{name}: left [min, max]");
    for (i, (start, end)) in [(0, 200), (200, 400), (400, 600), (620, 900)].into_iter().enumerate()
    {
        let at = settled_at(rounds, start);
        println!("{name}: change at {start}: within 20% after {} round trips", at - start);
        assert!(at - start <= follow[i], "{name}: the change at {start} took {}", at - start);
        let (l, h) = band(rounds, at + 20, end);
        println!("{name}: settled from {} to {end}: {l:.2}..{h:.2} of capacity", at + 20);
        assert!(l >= lo && h <= hi, "{name}: {l:.2}..{h:.2} outside {lo}..{hi}");
    }
    for r in &rounds[600..620] {
        let before = rounds[r.round as usize - 1].limit;
        assert!(r.limit < before || r.limit == MIN, "{name}: round {} did not back off", r.round);
    }
    let fell_to = f64::from(rounds[619].limit) / f64::from(rounds[599].limit);
    println!("{name}: the 20-round outage took the limit to {fell_to:.2} of before");
    assert!(fell_to <= 0.9f64.powi(20) + 0.02, "{name}: fell only to {fell_to:.2}");
}

#[test]
fn aimd_follows_capacity() {
    let a = AdaptiveConcurrency::aimd_with_clock(MIN, 10, MAX, ManualClock::new()).unwrap();
    // Additive increase: one a round trip, so 10 -> 100 takes about 90 windows of growth.
    check("AIMD", &sim::run(&a), [150, 10, 65, 150], 0.85, 1.1);
}

#[test]
fn gradient2_follows_capacity() {
    let a = AdaptiveConcurrency::gradient2_with_clock(MIN, 10, MAX, ManualClock::new()).unwrap();
    // Grows by a fifth of sqrt(limit) a round trip: faster than AIMD from far below.
    check("Gradient2", &sim::run(&a), [65, 10, 20, 60], 0.85, 1.1);
}
