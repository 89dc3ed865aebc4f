//! A simulated server whose capacity changes, and a client whose concurrency an
//! `AdaptiveConcurrency` sets: shared by the `adaptive` example (which plots it) and the
//! `adaptive_sim` test (which checks it).
//!
//! The server takes `capacity` calls at once; each answers after `10 ms * (1 + in_flight /
//! (2 * capacity))` (latency rises with load), and calls past `capacity` are refused at once with
//! a 503 (a partner API's concurrency cap). At capacity 0 it is down: every call is refused. The
//! client always has more work than the limit allows, so each round trip it fills the limit.

#![allow(dead_code)] // each user takes the part it needs

use leakgate::{AdaptiveConcurrency, ManualClock};
use std::time::Duration;

/// One round trip's record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Round {
    pub(crate) round: u32,
    pub(crate) capacity: u32,
    pub(crate) limit: u32,
}

/// The server's capacity at each round: 100, halved to 50 at round 200, doubled to 100 at 400,
/// down (0) for 20 rounds at 600, back to 100 from 620 to the end at 900.
pub(crate) fn capacity_at(round: u32) -> u32 {
    match round {
        0..200 => 100,
        200..400 => 50,
        400..600 => 100,
        600..620 => 0,
        _ => 100,
    }
}

/// The last round simulated.
pub(crate) const ROUNDS: u32 = 900;

/// Runs the client and server for `ROUNDS` round trips; the limit after each.
pub(crate) fn run(limiter: &AdaptiveConcurrency<ManualClock>) -> Vec<Round> {
    let mut out = Vec::new();
    for round in 0..ROUNDS {
        let capacity = capacity_at(round);
        let mut calls = Vec::new();
        while let Some(p) = limiter.try_acquire() {
            calls.push(p);
        }
        let n = calls.len() as u32;
        let served = n.min(capacity);
        let latency_ms = 10.0 * (1.0 + f64::from(served) / (2.0 * f64::from(capacity.max(1))));
        limiter.clock().advance(Duration::from_micros((latency_ms * 1000.0) as u64));
        for (i, p) in calls.into_iter().enumerate() {
            if (i as u32) < served {
                p.success();
            } else {
                p.dropped();
            }
        }
        out.push(Round { round, capacity, limit: limiter.limit() });
    }
    out
}
