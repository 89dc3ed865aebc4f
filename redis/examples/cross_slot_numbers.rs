//! What a call over several slots of a Redis Cluster costs: a 3-master, 3-replica cluster started
//! for the run on this machine (`scripts/ensure-redis.sh`).
//!
//! `cargo run --release -p leakgate-redis --example cross_slot_numbers [seconds per measurement]`
//!
//! One process, 64 tokio tasks on 2 worker threads, a plain limiter, 1024 key pairs; interleaved,
//! 3 rounds, medians: decisions/s, round trips per decision and Redis CPU (user + system, summed
//! over the masters) per decision for one key, for `check_all_n` over two keys sharing a `{tag}`
//! (one script), and over two keys in different slots (reserve and commit on each: holds).

#[path = "../tests/support/mod.rs"]
mod support;

use leakgate_redis::{AsyncRedisLimiter, Builder};
use leakgate_test_support::Cluster;
use std::sync::Arc;
use std::time::Duration;
use support::numbers::{drive, measure, median, rounded, runtime, seconds_arg};

const TASKS: usize = 64;
const PAIRS: usize = 1024;

/// How a decision names its keys.
#[derive(Clone, Copy)]
enum Shape {
    One,
    Tagged,
    CrossSlot,
}

fn main() {
    let secs = seconds_arg(2.0);
    let run_for = Duration::from_secs_f64(secs);
    let cluster = Cluster::start();
    let rt = runtime();
    let masters: Vec<u16> = cluster.masters().iter().map(|&i| cluster.nodes()[i].port()).collect();
    println!("cluster masters {masters:?}; {secs} s per measurement, {TASKS} tasks");
    let shapes = [
        ("one key          ", Shape::One),
        ("2 keys, one {tag}", Shape::Tagged),
        ("2 keys, 2 slots  ", Shape::CrossSlot),
    ];
    let mut results = vec![(vec![], vec![], vec![]); shapes.len()];
    for round in 0..3 {
        for (s, &(_, shape)) in shapes.iter().enumerate() {
            let (rate, trips, cpu) = measure_shape(&rt, &cluster, &masters, shape, run_for, round);
            results[s].0.push(rate);
            results[s].1.push(trips);
            results[s].2.push(cpu);
        }
    }
    println!("\nmedian of 3 (decisions/s of each round in brackets):");
    for ((label, _), (rate, trips, cpu)) in shapes.iter().zip(&mut results) {
        let rounds = rounded(rate);
        println!(
            "  {label} {:>8.0} decisions/s {rounds:?}  {:.2} round trips/decision  Redis CPU \
             {:>5.1} us/decision (all masters)",
            median(rate),
            median(trips),
            median(cpu)
        );
    }
}

/// Decisions/s, round trips per decision and Redis CPU µs per decision for `shape`.
fn measure_shape(
    rt: &tokio::runtime::Runtime,
    cluster: &Cluster,
    ports: &[u16],
    shape: Shape,
    run_for: Duration,
    round: usize,
) -> (f64, f64, f64) {
    let builder = Builder::cluster(cluster.seeds());
    let prefix = format!("x{round}:");
    let (count, secs, cpu_us, stats) =
        measure(rt, builder, prefix, ports, |lim| drive_pairs(lim, shape, run_for));
    assert_eq!(stats.redis_denied, 0, "every call admitted: {stats:?}");
    (count as f64 / secs, stats.round_trips as f64 / count.max(1) as f64, cpu_us)
}

/// `TASKS` tasks deciding key pairs in turn until `run_for` has passed: (decisions, seconds).
async fn drive_pairs(lim: AsyncRedisLimiter, shape: Shape, run_for: Duration) -> (u64, f64) {
    let pairs: Arc<Vec<[String; 2]>> = Arc::new(
        (0..PAIRS)
            .map(|i| match shape {
                Shape::One | Shape::CrossSlot => [format!("a{i}"), format!("b{i}")],
                Shape::Tagged => [format!("{{t{i}}}a"), format!("{{t{i}}}b")],
            })
            .collect(),
    );
    drive(TASKS, run_for, move |i| {
        let (lim, pairs) = (lim.clone(), pairs.clone());
        async move {
            let pair = &pairs[i % pairs.len()];
            let _ = match shape {
                Shape::One => lim.check(&pair[0]).await,
                _ => lim.check_all_n(&pair[..], 1).await,
            };
        }
    })
    .await
}
