//! Where a GCRA in floating-point seconds drifts and leakgate's does not: the same demand (every
//! request at the first microsecond it could conform), driven by the caller's clock, against a
//! float script written after the redis-gcra design and against leakgate's script.
//!
//! Redis 7 writes a Lua number passed to `redis.call` with 17 significant digits, so the float
//! state keeps a double's full precision: seconds since 2017 are about 3 * 10^8 in 2026, whose
//! last bit is 2^-24 s = 59.6 ns. Every admission rounds the state to that grid, which is
//! invisible at a few units per second (tens of ns per admission: a hundredth of a unit a day at
//! 3/s) and large at millions per second, too fast or too slow as `T` falls on the grid (at
//! 10,000/s this script admitted 29,997 where the exact count over 3 s is 30,002). Redis 6 and
//! older wrote 14 digits: a 10 us grid, which made 3/s admit about 2.6 units a day too many.

mod support;

use leakgate::{ManualClock, Quota};
use leakgate_redis::RedisLimiter;
use std::time::Duration;
use support::float::FloatGcra;
use support::model::{observed, Model};
use support::RedisServer;

/// 2026-11-23, in ns since the Unix epoch.
const START_NS: u64 = 1_795_400_000_000_000_000;

fn up_to_us(d: Duration) -> Duration {
    Duration::from_micros(d.as_nanos().div_ceil(1000) as u64)
}

/// Admissions by leakgate's script over `span` of caller time, each request at the first
/// microsecond it conforms; every decision checked against the exact model on the way.
fn leakgate_admits(server: &RedisServer, quota: Quota, span: Duration) -> u64 {
    let clock = ManualClock::new();
    clock.set(Duration::from_nanos(START_NS));
    let lim = RedisLimiter::builder(&server.url())
        .quota(quota)
        .caller_clock(clock.clone())
        .expiry_slack(Duration::from_secs(3600))
        .deadline(Duration::from_secs(5))
        .connect()
        .unwrap();
    let mut model = Model::new(vec![quota]);
    let end = clock.now() + span;
    let mut admitted = 0;
    while clock.now() <= end {
        let t = clock.now().as_nanos() as u64;
        let expected = model.request(&[b"drift"], 1, t, 0);
        let got = lim.check("drift");
        assert_eq!(observed(got.map(|ok| (ok, 0))), expected);
        match got {
            Ok(_) => admitted += 1,
            Err(no) => clock.advance(up_to_us(no.retry_after().unwrap())),
        }
    }
    admitted
}

/// The same demand against the float script.
fn float_admits(server: &RedisServer, quota: Quota, span: Duration) -> u64 {
    let float = FloatGcra::new(quota.count(), quota.period(), quota.burst());
    let mut con = server.connection();
    let mut now = Duration::from_nanos(START_NS);
    let end = now + span;
    let mut admitted = 0;
    while now <= end {
        match float.check(&mut con, "float", Some(now)) {
            Ok(()) => admitted += 1,
            Err(retry) => now += up_to_us(retry).max(Duration::from_micros(1)),
        }
    }
    admitted
}

#[test]
fn five_million_per_second_drifts_in_floating_seconds_and_not_in_leakgate() {
    let server = RedisServer::start();
    // T = 200 ns: each admission moves the float state by 3 grid steps of 59.6 ns, 178.8 ns.
    // A burst of 10 (2 us): requests come on a 1 us clock, up to 1 us after their time.
    let quota = Quota::new(5_000_000, Duration::from_secs(1), 10).unwrap();
    let span = Duration::from_millis(1);
    let exact = leakgate_admits(&server, quota, span);
    let float = float_admits(&server, quota, span);
    println!("5,000,000/s burst 10 over 1 ms: leakgate {exact}, float seconds {float}");
    assert_eq!(exact, 10 + 5000);
    assert!(float > exact + exact / 20, "float {float} vs exact {exact}: expected > 5% over");
}

#[test]
fn three_per_millisecond_for_a_second_is_exact() {
    let server = RedisServer::start();
    let quota = Quota::new(3, Duration::from_millis(1), 2).unwrap();
    let span = Duration::from_secs(1);
    let exact = leakgate_admits(&server, quota, span);
    let float = float_admits(&server, quota, span);
    println!("3/ms burst 2 over 1 s: leakgate {exact}, float seconds {float}");
    assert_eq!(exact, 2 + 3000);
    assert!(float >= exact, "the float script never admits less here");
}
