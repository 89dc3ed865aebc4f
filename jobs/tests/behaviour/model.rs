//! The claim step against a plain model, on the caller's clock: which job each `take` answers,
//! for random adds, takes, completions and clock moves (forwards and back), on both backends.

use crate::db::{Case, Db, clock};
use leakgate::ManualClock;
use leakgate_jobs::{Jobs, LaneRules};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::collections::VecDeque;
use std::time::Duration;

pub const ALL: &[(&str, Case)] =
    &[("claims_match_the_model", |db| Box::pin(claims_match_the_model(db)))];

const RULES: &str =
    "p0 = \"2/s burst 2\"\np1 = \"5/s burst 1\"\np3 = [\"3/s burst 3\", \"1/s burst 2\"]\n";
/// Each lane's quotas as (count, period ns, burst); lane 2 is not paced.
const QUOTAS: [&[(u128, u128, u128)]; 4] = [
    &[(2, 1_000_000_000, 2)],
    &[(5, 1_000_000_000, 1)],
    &[],
    &[(3, 1_000_000_000, 3), (1, 1_000_000_000, 2)],
];

#[derive(Clone, Debug)]
enum Op {
    Add(usize, u8),
    Take(usize),
    Advance(u64),
    Back(u64),
    DoneOldest,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0usize..4, 1u8..4).prop_map(|(l, n)| Op::Add(l, n)),
        3 => (1usize..5).prop_map(Op::Take),
        3 => (0u64..700).prop_map(Op::Advance),
        1 => (0u64..300).prop_map(Op::Back),
        1 => Just(Op::DoneOldest),
    ]
}

/// The model: FIFO lanes, one exact GCRA state (`TAT * count`) per quota, round robin by the
/// time each lane was last served (never served first, then by name).
struct Model {
    ready: [VecDeque<String>; 4],
    tat: [Vec<u128>; 4],
    served: [u64; 4],
    turn: u64,
}

impl Model {
    fn allowed(&self, lane: usize, t: u128) -> bool {
        QUOTAS[lane]
            .iter()
            .zip(&self.tat[lane])
            .all(|(&(c, p, b), &tat)| tat.max(t * c) + p <= b * p + t * c)
    }
    fn take(&mut self, max: usize, t: u128) -> Vec<String> {
        let mut out = Vec::new();
        while out.len() < max {
            let lane = (0..4)
                .filter(|&l| !self.ready[l].is_empty() && self.allowed(l, t))
                .min_by_key(|&l| (self.served[l], l));
            let Some(l) = lane else { break };
            for (q, tat) in QUOTAS[l].iter().zip(self.tat[l].iter_mut()) {
                *tat = (*tat).max(t * q.0) + q.1;
            }
            self.turn += 1;
            self.served[l] = self.turn;
            out.push(self.ready[l].pop_front().unwrap());
        }
        out
    }
}

async fn claims_match_the_model(db: Db) {
    let cases = if db.is_sqlite { 48 } else { 12 };
    let mut runner =
        TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let fresh = db.fresh.clone();
    let result = tokio::task::block_in_place(|| {
        let rt = tokio::runtime::Handle::current();
        runner.run(&proptest::collection::vec(op(), 1..60), |ops| {
            rt.block_on(check(&fresh(), ops)).map_err(TestCaseError::fail)
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

async fn check(url: &str, ops: Vec<Op>) -> Result<(), String> {
    let clock: ManualClock = clock();
    let jobs = Jobs::builder(url)
        .caller_clock(clock.clone())
        .lease(Duration::from_secs(1 << 30))
        .open()
        .await
        .unwrap();
    jobs.set_rules(&LaneRules::from_toml(RULES).unwrap()).await.unwrap();
    let mut model = Model {
        ready: Default::default(),
        tat: [vec![0], vec![0], vec![], vec![0, 0]],
        served: [0; 4],
        turn: 0,
    };
    let mut running = VecDeque::new();
    let (mut added, mut latest) = (0, clock.now());
    for op in ops {
        match op {
            Op::Add(lane, n) => {
                for _ in 0..n {
                    let payload = format!("j{added}");
                    added += 1;
                    jobs.add(&format!("p{lane}"), payload.clone()).await.unwrap();
                    model.ready[lane].push_back(payload);
                }
            }
            Op::Take(max) => {
                // The model decides at the latest time seen: a clock that went back admits
                // nothing more than it would have then (the stores keep TATs, not times).
                let t = clock.now().as_nanos();
                let got = jobs.take(max).await.unwrap();
                let got_payloads: Vec<String> =
                    got.iter().map(|j| String::from_utf8_lossy(j.payload()).into()).collect();
                let want = model.take(max, t);
                if got_payloads != want {
                    return Err(format!("at {t}: took {got_payloads:?}, the model {want:?}"));
                }
                running.extend(got);
            }
            Op::Advance(ms) => {
                clock.advance(Duration::from_millis(ms));
                latest = latest.max(clock.now());
            }
            Op::Back(ms) => clock.set(clock.now().saturating_sub(Duration::from_millis(ms))),
            Op::DoneOldest => {
                if let Some(job) = running.pop_front() {
                    jobs.done(&job).await.unwrap();
                }
            }
        }
    }
    let _ = latest;
    Ok(())
}
