//! A Redis Cluster losing a master (`kill -9`) or freezing one (`SIGSTOP`) under load: calls
//! return by their deadline (the failure policy answers meanwhile), Redis decides again once the
//! replica is promoted, and what the fleet admits stays within the documented bound: with the
//! caller's clock held still (no unit refills), each key admits at most its burst, plus, for a
//! key on the lost master, what the replica had not received (at most one more burst).

mod support;

use leakgate::Quota;
use leakgate_redis::{Builder, RedisLimiter};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::cluster::RedisCluster;

const DEADLINE: Duration = Duration::from_millis(200);
/// What "returns by its deadline" allows for scheduling on a busy machine.
const SLACK: Duration = Duration::from_secs(1);
const BURST: u64 = 40;
const KEYS: usize = 24;

fn limiter(cluster: &RedisCluster, clock: &leakgate::ManualClock) -> RedisLimiter {
    Builder::cluster(cluster.seeds())
        .quota(Quota::new(1, Duration::from_secs(3600), BURST).unwrap())
        .caller_clock(clock.clone())
        .expiry_slack(Duration::from_secs(3600))
        .deadline(DEADLINE)
        .breaker(3, Duration::from_millis(100))
        .connect()
        .unwrap()
}

/// Checks every key in turn from `threads` threads until `stop`; counts admissions per key and
/// fails the test if a call takes longer than its deadline allows.
fn load(
    lim: &Arc<RedisLimiter>,
    admitted: &Arc<Vec<AtomicU64>>,
    stop: &Arc<AtomicBool>,
    threads: usize,
) -> Vec<std::thread::JoinHandle<Duration>> {
    (0..threads)
        .map(|t| {
            let (lim, admitted, stop) = (lim.clone(), admitted.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut slowest = Duration::ZERO;
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    let start = Instant::now();
                    let ok = lim.check(format!("k{}", i % KEYS)).is_ok();
                    slowest = slowest.max(start.elapsed());
                    if ok {
                        admitted[i % KEYS].fetch_add(1, Ordering::Relaxed);
                    }
                    i += 1;
                }
                slowest
            })
        })
        .collect()
}

#[test]
fn a_master_killed_under_load_fails_over_within_the_bound() {
    let cluster = RedisCluster::start();
    let clock = support::epoch();
    let lim = Arc::new(limiter(&cluster, &clock));
    let victim = cluster.master_of(&lim.redis_key("k0"));
    let on_victim: Vec<bool> =
        (0..KEYS).map(|i| cluster.master_of(&lim.redis_key(format!("k{i}"))) == victim).collect();
    let admitted = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect::<Vec<_>>());
    let stop = Arc::new(AtomicBool::new(false));
    let workers = load(&lim, &admitted, &stop, 4);
    std::thread::sleep(Duration::from_millis(300));
    cluster.kill(victim);
    assert!(cluster.wait_ok(Duration::from_secs(30)), "the replica was not promoted");
    // Checks resume: Redis decides again soon after the promotion (the client finds the new
    // master by MOVED or a refreshed slot map).
    let decided = |s: leakgate_redis::Stats| s.redis_admitted + s.redis_denied;
    let before = decided(lim.stats());
    let start = Instant::now();
    while decided(lim.stats()) < before + 200 && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(decided(lim.stats()) >= before + 200, "Redis did not decide again: {:?}", lim.stats());
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let slowest = w.join().unwrap();
        assert!(slowest <= DEADLINE + SLACK, "a call took {slowest:?}");
    }
    let mut over = 0;
    for (i, count) in admitted.iter().enumerate() {
        let count = count.load(Ordering::Relaxed);
        if on_victim[i] {
            assert!(count <= 2 * BURST, "k{i} on the lost master admitted {count}");
            over += count.saturating_sub(BURST);
        } else {
            assert_eq!(count, BURST, "k{i} on a live master admitted {count}");
        }
    }
    let stats = lim.stats();
    eprintln!(
        "failover: {} keys on the lost master, {over} units over their bursts ({} per key at most \
         {}), stats {stats:?}",
        on_victim.iter().filter(|v| **v).count(),
        BURST,
        2 * BURST
    );
}

#[test]
fn a_frozen_master_is_answered_by_the_policy_and_charges_nothing_late() {
    let cluster = RedisCluster::start();
    let clock = support::epoch();
    let lim = Arc::new(limiter(&cluster, &clock));
    let frozen = cluster.master_of(&lim.redis_key("k0"));
    let admitted = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect::<Vec<_>>());
    let stop = Arc::new(AtomicBool::new(false));
    // Below the cluster's node timeout (2 s): a freeze, not a failover.
    cluster.freeze(frozen, true);
    let workers = load(&lim, &admitted, &stop, 4);
    std::thread::sleep(Duration::from_millis(1_000));
    let during = lim.stats();
    cluster.freeze(frozen, false);
    // Until every key has had its burst (or 20 s): Redis decides again after the thaw.
    let total = || admitted.iter().map(|c| c.load(Ordering::Relaxed)).sum::<u64>();
    let start = Instant::now();
    while total() < KEYS as u64 * BURST && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // A little longer: an admission past the burst would show.
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let slowest = w.join().unwrap();
        assert!(slowest <= DEADLINE + SLACK, "a call took {slowest:?}");
    }
    assert!(during.timeouts + during.short_circuited > 0, "the policy answered: {during:?}");
    assert!(during.policy_denied > 0, "{during:?}");
    // Every key admitted exactly its burst: the scripts the frozen master ran late (after their
    // deadline) charged nothing, and no admission was lost or doubled.
    for (i, count) in admitted.iter().enumerate() {
        let count = count.load(Ordering::Relaxed);
        assert_eq!(count, BURST, "k{i} admitted {count}");
    }
    // What Redis holds agrees: each key's bucket is exactly full (burst units charged).
    for i in 0..KEYS {
        let peek = lim.peek(format!("k{i}")).expect("Redis answers a peek");
        assert_eq!(peek.remaining(), 0, "k{i} should have no unit left");
    }
}
