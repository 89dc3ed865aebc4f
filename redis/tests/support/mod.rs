//! What the tests, the benchmark and the examples share: a real `redis-server` per test
//! (`leakgate-test-support`'s, re-exported), the exact model (`model`) and its rule keys across
//! reloads (`reload_model`), a floating-seconds script to compare with (`float`), child
//! processes of a test binary (`workers`), the numbers examples' CPU readings and medians
//! (`numbers`), and a few limiters, clocks and waits.
#![allow(dead_code, unreachable_pub)]

pub mod float;
pub mod model;
pub mod numbers;
pub mod reload_model;
pub mod workers;

pub use leakgate_test_support::RedisServer;
use std::time::Duration;

/// A limiter on `url` with the contract's defaults, except a deadline long enough that a test
/// machine busy with other tests never makes a call miss it (a missed deadline is the failure
/// policy's business, tested on its own in `faults.rs`).
pub fn patient_limiter(url: &str, quota: leakgate::Quota) -> leakgate_redis::RedisLimiter {
    leakgate_redis::RedisLimiter::builder(url)
        .quota(quota)
        .deadline(Duration::from_secs(5))
        .connect()
        .expect("a local redis-server")
}

/// Redis's clock (`TIME`), in µs.
pub fn redis_time_us(con: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(con).unwrap();
    s * 1_000_000 + us
}

/// Waits (at most 20 s, polling every 20 ms) until `stats` count `more` decisions by Redis
/// (admitted or refused) beyond those they count now: whether they did. For a test that waits
/// for Redis to decide again after a failover.
pub fn wait_for_redis_decisions(stats: impl Fn() -> leakgate_redis::Stats, more: u64) -> bool {
    let decided = |s: leakgate_redis::Stats| s.redis_admitted + s.redis_denied;
    let before = decided(stats());
    let start = std::time::Instant::now();
    while decided(stats()) < before + more && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    decided(stats()) >= before + more
}

/// A manual clock at a realistic Unix time (November 2023), for limiters on the caller's clock.
pub fn epoch() -> leakgate::ManualClock {
    let clock = leakgate::ManualClock::new();
    clock.set(Duration::from_secs(1_700_000_000));
    clock
}

/// A rules limiter on `server` deciding on the caller's `clock`, patient as
/// [`patient_limiter`], whose buckets outlive an hour of clock moves.
pub fn manual_rules(
    server: &RedisServer,
    rules: leakgate::Rules,
    clock: &leakgate::ManualClock,
) -> leakgate_redis::RedisRuleLimiter {
    leakgate_redis::RedisRuleLimiter::builder(&server.url())
        .caller_clock(clock.clone())
        .deadline(Duration::from_secs(5))
        .expiry_slack(Duration::from_secs(3600))
        .connect_rules(rules)
        .unwrap()
}

/// A proptest runner of `cases` cases for a test in `source_file` (`file!()`), replaying and
/// recording failures in the file's `.proptest-regressions` as the `proptest!` macro does. Tests
/// run it by hand, so that the server they start is theirs and stops when they end.
pub fn proptest_runner(source_file: &'static str, cases: u32) -> proptest::test_runner::TestRunner {
    use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};
    TestRunner::new(Config {
        cases,
        source_file: Some(source_file),
        failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel(
            "proptest-regressions",
        ))),
        ..Config::default()
    })
}
