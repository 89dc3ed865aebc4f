//! Throughput: wall time per decision over all threads, in interleaved rounds of time slices.

use leakgate::{CoarseClock, TscClock};
use leakgate_baselines::{median, ns_per_decision, KeyedContenders, Scenario, Workload};
use std::time::Duration;

/// The single-limiter contenders, in table order.
pub(super) const CONTENDERS: [&str; 6] = [
    "leakgate (tsc)",
    "leakgate (coarse)",
    "governor",
    "mutex bucket",
    "leakgate (leased)",
    "leakgate (local)",
];
/// The contender the others are compared with, in both tables.
pub(super) const GOVERNOR: usize = 2;
/// The keyed table sizes: one that fits in a core's caches and one that does not.
const KEY_COUNTS: [u64; 2] = [1_000, 1_000_000];

/// How long the run takes, and on how many threads.
pub(super) struct Plan {
    pub(super) rounds: usize,
    pub(super) slice: Duration,
    pub(super) threads: Vec<usize>,
}

impl Plan {
    pub(super) fn new(quick: bool, threads: Vec<usize>) -> Self {
        let (rounds, slice) = if quick { (3, 15) } else { (9, 50) };
        Plan { rounds, slice: Duration::from_millis(slice), threads }
    }
}

/// One table row: a scenario at a thread count, each contender's median ns/decision.
pub(super) struct Row {
    pub(super) scenario: String,
    pub(super) threads: usize,
    pub(super) ns: Vec<f64>,
}

/// The two tables: single limiter (`CONTENDERS`) and keyed (`KEYED_CONTENDERS`).
pub(super) struct Results {
    pub(super) single: Vec<Row>,
    pub(super) keyed: Vec<Row>,
}

pub(super) fn measure(plan: &Plan) -> Results {
    // The keyed tables have one contender fewer than the single-limiter ones.
    let steps = plan.threads.len() * plan.rounds * (2 * CONTENDERS.len() + KEY_COUNTS.len() * 4);
    let bar = super::progress(steps as u64);
    let mut single = Vec::new();
    for (name, scenario) in [("allowed", Scenario::Allowed), ("denied", Scenario::Denied)] {
        let tsc = scenario.leakgate(TscClock::new());
        let coarse = scenario.leakgate(CoarseClock::new());
        let governor = scenario.governor();
        let mutex = scenario.mutex_bucket();
        let leased = scenario.leased(TscClock::new());
        let local = scenario.local_leased(TscClock::new());
        let contenders: [&dyn Workload; 6] = [&tsc, &coarse, &governor, &mutex, &leased, &local];
        single.extend(rows(plan, name, &contenders, &bar));
    }
    let mut keyed = Vec::new();
    for keys in KEY_COUNTS {
        bar.set_message(format!("inserting {keys} keys"));
        let contenders = KeyedContenders::new(keys);
        keyed.extend(rows(plan, &format!("{keys} keys"), &contenders.all(), &bar));
    }
    bar.finish_and_clear();
    Results { single, keyed }
}

/// Measures `contenders` on every thread count of the plan, interleaved within each round.
fn rows(
    plan: &Plan,
    scenario: &str,
    contenders: &[&dyn Workload],
    bar: &indicatif::ProgressBar,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for &threads in &plan.threads {
        bar.set_message(format!("{scenario}, {threads} thread(s)"));
        let mut samples = vec![Vec::new(); contenders.len()];
        for _ in 0..plan.rounds {
            for (contender, samples) in contenders.iter().zip(&mut samples) {
                samples.push(ns_per_decision(*contender, threads, plan.slice));
                bar.inc(1);
            }
        }
        let ns = samples.iter_mut().map(|s| median(s)).collect();
        rows.push(Row { scenario: scenario.to_owned(), threads, ns });
    }
    rows
}
