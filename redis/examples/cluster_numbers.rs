//! The numbers in the README's "Redis Cluster" section: one redis-server against a 3-master,
//! 3-replica Redis Cluster, both started for the run on this machine (`scripts/ensure-redis.sh`).
//!
//! `cargo run --release -p leakgate-redis --example cluster_numbers [seconds per measurement]`
//!
//! The same client (one process, 64 tokio tasks on 2 worker threads, a plain limiter) against
//! each target, interleaved, 3 rounds, medians: decisions/s and Redis CPU (user + system, summed
//! over the masters) per decision, for 1024 distinct keys (spread over every slot) and for one
//! hot key (the worst pattern: one master does all the work), and the cluster with
//! `wait_for_replicas(1)` (a `WAIT` after each admission); then a hot key with leases on the
//! cluster: round trips saved.

#[path = "../tests/support/mod.rs"]
mod support;

use leakgate_redis::{AsyncRedisLimiter, Builder, LeaseConfig};
use leakgate_test_support::Cluster;
use std::sync::Arc;
use std::time::Duration;
use support::numbers::{drive, measure, median, rounded, runtime, seconds_arg};
use support::RedisServer;

const TASKS: usize = 64;

fn main() {
    let secs = seconds_arg(2.0);
    let run_for = Duration::from_secs_f64(secs);
    let server = RedisServer::start();
    let cluster = Cluster::start();
    let rt = runtime();
    let one = vec![server.port()];
    let masters: Vec<u16> = cluster.masters().iter().map(|&i| cluster.nodes()[i].port()).collect();
    println!("one node at {}, cluster masters {masters:?}; {secs} s per measurement", server.url());
    for (pattern, keys) in [("1024 distinct keys", 1024), ("one hot key", 1)] {
        let (mut one_rate, mut one_cpu, mut cl_rate, mut cl_cpu) = (vec![], vec![], vec![], vec![]);
        let (mut wait_rate, mut wait_cpu) = (vec![], vec![]);
        for round in 0..3 {
            let b = Builder::new(server.url());
            let (r, c) = measure_keys(&rt, b, &one, keys, run_for, round);
            one_rate.push(r);
            one_cpu.push(c);
            let b = Builder::cluster(cluster.seeds());
            let (r, c) = measure_keys(&rt, b, &masters, keys, run_for, round);
            cl_rate.push(r);
            cl_cpu.push(c);
            let b = Builder::cluster(cluster.seeds()).wait_for_replicas(1);
            let (r, c) = measure_keys(&rt, b, &masters, keys, run_for, round);
            wait_rate.push(r);
            wait_cpu.push(c);
        }
        println!("\n{pattern}, {TASKS} tasks (median of 3; rounds in brackets):");
        println!(
            "  one node   {:>9.0} decisions/s {:?}   Redis CPU {:>5.1} us/decision",
            median(&mut one_rate.clone()),
            rounded(&one_rate),
            median(&mut one_cpu)
        );
        println!(
            "  3 masters  {:>9.0} decisions/s {:?}   Redis CPU {:>5.1} us/decision (all masters)",
            median(&mut cl_rate.clone()),
            rounded(&cl_rate),
            median(&mut cl_cpu)
        );
        println!(
            "  3 m., WAIT {:>9.0} decisions/s {:?}   Redis CPU {:>5.1} us/decision (all masters)",
            median(&mut wait_rate.clone()),
            rounded(&wait_rate),
            median(&mut wait_cpu)
        );
    }
    let (decisions, trips) = rt.block_on(leased(&cluster, run_for));
    println!(
        "\nhot key with leases (max 64) on the cluster: {decisions} decisions, {trips} round trips \
         ({:.1}% saved)",
        100.0 * (1.0 - trips as f64 / decisions.max(1) as f64)
    );
}

/// Decisions/s and Redis CPU µs per decision (summed over `ports`) for `keys` keys.
fn measure_keys(
    rt: &tokio::runtime::Runtime,
    builder: Builder,
    ports: &[u16],
    keys: usize,
    run_for: Duration,
    round: usize,
) -> (f64, f64) {
    let prefix = format!("n{round}:");
    let (count, secs, cpu_us, _) =
        measure(rt, builder, prefix, ports, |lim| drive_keys(lim, keys, run_for));
    (count as f64 / secs, cpu_us)
}

/// `TASKS` tasks checking keys in turn until `run_for` has passed: (decisions, seconds).
async fn drive_keys(lim: AsyncRedisLimiter, keys: usize, run_for: Duration) -> (u64, f64) {
    let names: Arc<Vec<String>> = Arc::new((0..keys).map(|i| format!("k{i}")).collect());
    drive(TASKS, run_for, move |i| {
        let (lim, names) = (lim.clone(), names.clone());
        async move {
            let _ = lim.check(&names[i % names.len()]).await;
        }
    })
    .await
}

/// A hot key with leases on the cluster: (decisions, round trips).
async fn leased(cluster: &Cluster, run_for: Duration) -> (u64, u64) {
    let lim = Builder::cluster(cluster.seeds())
        .quota("100000/s burst 1000".parse().unwrap())
        .prefix("leased:")
        .leases(LeaseConfig::new(64))
        .deadline(Duration::from_millis(200))
        .connect_async()
        .await
        .unwrap();
    let (count, _) = drive_keys(lim.clone(), 1, run_for).await;
    (count, lim.stats().round_trips)
}
