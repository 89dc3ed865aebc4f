//! The README's failover numbers: how much a Redis Cluster over-admits when a master is killed
//! (`kill -9`) under load, with its replica in sync and with its replica lagging behind, with
//! and without `Builder::wait_for_replicas(1)`, against the documented bound (one burst per key
//! of the lost master).
//!
//! `cargo run --release -p leakgate-redis --example failover_numbers [lag_ms...]`
//! (default lags: 0 300 1000).
//!
//! Each case starts its own 3-master, 3-replica cluster (`scripts/ensure-redis.sh`), and four
//! threads check 24 keys (quota 1 per 10 ms, burst 1000) on a caller's clock that moves 1 ms a
//! ms while the load runs, as `tests/cluster_faults.rs` does; so each key may admit at most
//! `burst + W / T` over the clock's move `W`, and anything past that is over-admission. The
//! clock stands still from the kill until Redis decides again: as if the failover were short
//! beside the burst's window (`tau` = 10 s here), the worst case; otherwise the units that refill
//! while the failure policy refuses (about 3 s with the 2 s node timeout) fill the bucket the
//! loss emptied, and hide it (with burst 40 and a moving clock, 0 over was measured).
//!
//! The lag is forced: the victim's replica is frozen (`SIGSTOP`) and its replication link cut
//! on the master (`CLIENT KILL TYPE replica`); `lag_ms` of load later the master is killed and
//! the replica resumed. The replica then has the master's writes up to the cut and nothing
//! after: every charge of the last `lag_ms` is lost when it takes over (the cut comes once every
//! key has taken its burst, so the loss is not hidden under a bucket's cap: expect about
//! `lag_ms / T` units over per key, never more than one burst). With `lag_ms = 0` the
//! master is killed with its replica in sync, as far as asynchronous replication allows.

#[path = "../tests/support/mod.rs"]
mod support;

use leakgate::{ManualClock, Quota};
use leakgate_redis::{Builder, RedisLimiter};
use leakgate_test_support::Cluster;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BURST: u64 = 1000;
/// The emission interval `T`, in ms: 100/s.
const T_MS: u64 = 10;
const KEYS: usize = 24;
const THREADS: usize = 4;

fn main() {
    let lags: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().expect("lag in ms")).collect();
    let lags = if lags.is_empty() { vec![0, 300, 1000] } else { lags };
    println!(
        "quota 1/{T_MS} ms burst {BURST}, {KEYS} keys, {THREADS} threads; bound per key of the \
         lost master: burst + W/T + one burst"
    );
    for &lag in &lags {
        for wait in [false, true] {
            let r = case(lag, wait);
            println!(
                "lag {lag:>5} ms (unreplicated {} ms, replica {} bytes behind before), \
                 wait_for_replicas({}): {} keys on the lost \
                 master: over the quota by {} units in all, at most {} a key (bound {BURST}); keys \
                 on live masters over: {}; clock moved {} ms; {} decisions by Redis, {} by the \
                 failure policy",
                r.unreplicated_ms,
                r.behind_bytes,
                u32::from(wait),
                r.on_victim,
                r.over_total,
                r.over_max,
                r.live_over,
                r.moved,
                r.redis_decided,
                r.policy_decided
            );
        }
    }
}

struct Report {
    /// From the cut to the master's death: the writes the replica never got.
    unreplicated_ms: u64,
    /// How far the replica's acknowledged offset was behind the master's just before the cut.
    behind_bytes: u64,
    on_victim: usize,
    over_total: u64,
    over_max: u64,
    live_over: u64,
    moved: u64,
    redis_decided: u64,
    policy_decided: u64,
}

fn case(lag_ms: u64, wait: bool) -> Report {
    let mut cluster = Cluster::start();
    let clock = support::epoch();
    let mut b = Builder::cluster(cluster.seeds())
        .quota(Quota::new(1, Duration::from_millis(T_MS), BURST).unwrap())
        .caller_clock(clock.clone())
        .expiry_slack(Duration::from_secs(3600))
        .deadline(Duration::from_millis(200))
        .breaker(3, Duration::from_millis(100));
    if wait {
        b = b.wait_for_replicas(1);
    }
    let lim = Arc::new(b.connect().unwrap());
    let victim = cluster.master_of(&lim.redis_key("k0"));
    let replica = replica_of(&cluster, victim);
    let on_victim: Vec<bool> =
        (0..KEYS).map(|i| cluster.master_of(&lim.redis_key(format!("k{i}"))) == victim).collect();
    let admitted = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect::<Vec<_>>());
    let (stop, stop_clock) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let frozen = Arc::new(AtomicBool::new(false));
    let ticker = tick(&clock, &stop_clock, &frozen);
    let workers = load(&lim, &admitted, &stop);
    // Every key's burst taken first (at most 10 s): a bucket that still has room when its
    // charges are lost would hide the loss under its cap.
    let start = Instant::now();
    while admitted.iter().any(|c| c.load(Ordering::Relaxed) < BURST)
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let cut_at = Instant::now();
    let behind_bytes = replica_behind(&cluster, victim);
    if lag_ms > 0 {
        cluster.nodes()[replica].pause();
        let cut: u64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("replica")
            .query(&mut cluster.nodes()[victim].connection())
            .unwrap();
        assert_eq!(cut, 1, "the victim's replication link");
        std::thread::sleep(Duration::from_millis(lag_ms));
    }
    cluster.node_mut(victim).kill();
    // No time passes on the quota's clock until Redis decides again: as if the failover were
    // short beside the burst's window, so the refused failover refills nothing to hide the loss.
    frozen.store(true, Ordering::Relaxed);
    let unreplicated_ms = if lag_ms > 0 { cut_at.elapsed().as_millis() as u64 } else { 0 };
    if lag_ms > 0 {
        std::thread::sleep(Duration::from_millis(100));
        cluster.nodes()[replica].resume();
    }
    cluster.wait_ok();
    // Redis decides again, then a little more load; then the clock stops and the load takes
    // whatever is left.
    support::wait_for_redis_decisions(|| lim.stats(), 200);
    frozen.store(false, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(300));
    stop_clock.store(true, Ordering::Relaxed);
    let moved = ticker.join().unwrap();
    let bound = BURST + moved / T_MS;
    let total = || admitted.iter().map(|c| c.load(Ordering::Relaxed)).sum::<u64>();
    let start = Instant::now();
    while total() < KEYS as u64 * bound && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500)); // an admission past the bound would show
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let (mut over_total, mut over_max, mut live_over) = (0, 0, 0);
    for (i, count) in admitted.iter().enumerate() {
        let over = count.load(Ordering::Relaxed).saturating_sub(bound);
        if on_victim[i] {
            over_total += over;
            over_max = over_max.max(over);
        } else {
            live_over += over;
        }
    }
    let s = lim.stats();
    Report {
        unreplicated_ms,
        behind_bytes,
        on_victim: on_victim.iter().filter(|v| **v).count(),
        over_total,
        over_max,
        live_over,
        moved,
        redis_decided: s.redis_admitted + s.redis_denied,
        policy_decided: s.policy_admitted + s.policy_denied,
    }
}

/// The node that replicates `master` (by its `INFO replication`).
fn replica_of(cluster: &Cluster, master: usize) -> usize {
    let port = cluster.nodes()[master].port();
    (0..cluster.nodes().len())
        .find(|&i| {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut cluster.nodes()[i].connection())
                .unwrap();
            info.lines().any(|l| l.trim() == format!("master_port:{port}"))
        })
        .expect("the victim has a replica")
}

/// The master's replication offset less its replica's last acknowledged one (`INFO
/// replication`: `master_repl_offset` and `slave0:...,offset=N,...`).
fn replica_behind(cluster: &Cluster, master: usize) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut cluster.nodes()[master].connection())
        .unwrap();
    let field = |line: &str, name: &str| -> Option<u64> {
        line.split([',', ':']).find_map(|kv| kv.strip_prefix(name)?.parse().ok())
    };
    let master_offset: u64 = info
        .lines()
        .find_map(|l| l.trim().strip_prefix("master_repl_offset:")?.parse().ok())
        .unwrap_or(0);
    let replica_offset =
        info.lines().filter(|l| l.starts_with("slave0:")).find_map(|l| field(l, "offset="));
    master_offset.saturating_sub(replica_offset.unwrap_or(master_offset))
}

/// Moves `clock` 1 ms a ms (not while `frozen`) until `stop`; returns how far it moved, in ms.
fn tick(
    clock: &ManualClock,
    stop: &Arc<AtomicBool>,
    frozen: &Arc<AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    let (clock, stop, frozen) = (clock.clone(), stop.clone(), frozen.clone());
    std::thread::spawn(move || {
        let mut moved = 0;
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(1));
            if frozen.load(Ordering::Relaxed) {
                continue;
            }
            clock.advance(Duration::from_millis(1));
            moved += 1;
        }
        moved
    })
}

/// Checks every key in turn from `THREADS` threads until `stop`, counting admissions per key.
fn load(
    lim: &Arc<RedisLimiter>,
    admitted: &Arc<Vec<AtomicU64>>,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..THREADS)
        .map(|t| {
            let (lim, admitted, stop) = (lim.clone(), admitted.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    if lim.check(format!("k{}", i % KEYS)).is_ok() {
                        admitted[i % KEYS].fetch_add(1, Ordering::Relaxed);
                    }
                    i += 1;
                }
            })
        })
        .collect()
}
