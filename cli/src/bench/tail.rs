//! Per-check latency on one always-allowing shared limiter: every check timed, per thread count,
//! contenders interleaved in rounds, each contender's histograms merged over the rounds.

use leakgate::TscClock;
use leakgate_baselines::{time_each_check, Gate, LatencyHistogram, Scenario, Workload};

/// The contenders, in table order; the first measures the timer alone.
pub(super) const CONTENDERS: [&str; 6] = [
    "timer only",
    "leakgate (tsc)",
    "leakgate (leased)",
    "leakgate (local)",
    "governor",
    "mutex bucket",
];

/// How many checks, in how many rounds, on how many threads.
pub(super) struct Plan {
    pub(super) rounds: usize,
    pub(super) checks: u64,
    pub(super) threads: Vec<usize>,
}

/// One contender at one thread count.
pub(super) struct TailRow {
    pub(super) threads: usize,
    pub(super) contender: &'static str,
    /// Every check of every round.
    pub(super) all: LatencyHistogram,
    /// The slowest check of each round.
    pub(super) slowest_per_round: Vec<u64>,
}

/// A decision that does nothing: what the timing itself costs.
struct Nothing;

impl Gate for Nothing {
    #[inline]
    fn allow(&self) -> bool {
        true
    }
}

pub(super) fn measure(plan: &Plan) -> Vec<TailRow> {
    let steps = plan.threads.len() * plan.rounds * CONTENDERS.len();
    let bar = super::progress(steps as u64);
    let mut rows = Vec::new();
    for &threads in &plan.threads {
        bar.set_message(format!("{threads} thread(s)"));
        // Fresh limiters per thread count, so no run starts on another's state.
        let leakgate = Scenario::Allowed.leakgate(TscClock::new());
        let governor = Scenario::Allowed.governor();
        let mutex = Scenario::Allowed.mutex_bucket();
        let leased = Scenario::Allowed.leased(TscClock::new());
        let local = Scenario::Allowed.local_leased(TscClock::new());
        let contenders: [&dyn Workload; 6] =
            [&Nothing, &leakgate, &leased, &local, &governor, &mutex];
        let mut merged: Vec<TailRow> = CONTENDERS
            .iter()
            .map(|&contender| TailRow {
                threads,
                contender,
                all: LatencyHistogram::new(),
                slowest_per_round: Vec::new(),
            })
            .collect();
        for _ in 0..plan.rounds {
            for (contender, row) in contenders.iter().zip(&mut merged) {
                let round = time_each_check(*contender, threads, plan.checks);
                row.slowest_per_round.push(round.max());
                row.all.merge(&round);
                bar.inc(1);
            }
        }
        rows.extend(merged);
    }
    bar.finish_and_clear();
    rows
}
