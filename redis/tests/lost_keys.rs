//! Redis loses a key (`FLUSHALL` here; a restart without persistence or an eviction alike) while
//! a process still holds units leased from it. The fleet may then admit more than the bound only
//! by the units the re-created bucket admitted before the first lease request that finds the loss,
//! and by no more than the units still leased: that request starts the key full. Before, the
//! re-created bucket gave a whole new burst on top of the leased units.

mod support;

use leakgate::{ManualClock, Quota};
use leakgate_redis::{LeaseConfig, RedisLimiter};
use std::time::Duration;
use support::{epoch, RedisServer};

const QUOTA: &str = "10/h burst 20";

/// A server of the fleet with leases of up to 8 units, for which every key is hot; on `clock` if
/// given, else on Redis's.
fn leasing(server: &RedisServer, clock: Option<&ManualClock>) -> RedisLimiter {
    let mut b = RedisLimiter::builder(&server.url())
        .quota(QUOTA.parse::<Quota>().unwrap())
        .deadline(Duration::from_secs(5))
        .leases(LeaseConfig::new(8).hot_within(Duration::from_secs(3600)));
    if let Some(clock) = clock {
        b = b.caller_clock(clock.clone()).expiry_slack(Duration::from_secs(3600));
    }
    b.connect().unwrap()
}

/// Another server of the fleet, without leases.
fn plain(server: &RedisServer, clock: Option<&ManualClock>) -> RedisLimiter {
    let mut b = RedisLimiter::builder(&server.url())
        .quota(QUOTA.parse::<Quota>().unwrap())
        .deadline(Duration::from_secs(5));
    if let Some(clock) = clock {
        b = b.caller_clock(clock.clone()).expiry_slack(Duration::from_secs(3600));
    }
    b.connect().unwrap()
}

/// How many of `count` checks of `key` were admitted.
fn admitted(lim: &RedisLimiter, key: &str, count: usize) -> usize {
    (0..count).filter(|_| lim.check(key).is_ok()).count()
}

/// Takes the whole burst of `key` from `a`, 12 requests, ending with 8 units leased and unused
/// (leases of 1, 2, 4, then 8 units, each taken with a request of its own). One unit refills
/// every 6 minutes: none does during a test.
fn fill_leaving_eight_leased(a: &RedisLimiter, key: &str) {
    assert_eq!(admitted(a, key, 12), 12);
    let s = a.stats();
    assert_eq!((s.leased_units, s.local_admitted), (15, 7), "{s:?}");
}

fn flushall(server: &RedisServer) {
    let _: () = redis::cmd("FLUSHALL").query(&mut server.connection()).unwrap();
}

#[test]
fn a_lease_request_after_a_flush_finds_the_lost_key_and_the_fleet_keeps_the_burst() {
    let server = RedisServer::start();
    let (a, b) = (leasing(&server, None), plain(&server, None));
    fill_leaving_eight_leased(&a, "hot");
    assert!(b.check("hot").is_err(), "the bucket is full");
    flushall(&server);
    // A serves its 8 leased units, then asks Redis for a lease: the key is gone though A's last
    // answer showed it in use for hours, so the key was lost, and starts full.
    assert_eq!(admitted(&a, "hot", 12), 8);
    assert_eq!(a.stats().lost_buckets, 1);
    assert_eq!(admitted(&b, "hot", 20), 0, "before: the re-created bucket gave 20 more");
    // 12 + 8 admitted in all: the burst, as if nothing had been lost.
    assert!(b.peek("hot").unwrap().remaining() == 0);
}

#[test]
fn a_bucket_re_created_by_another_server_gives_at_most_the_leased_units_more() {
    let server = RedisServer::start();
    let clock = epoch();
    let (a, b) = (leasing(&server, Some(&clock)), plain(&server, Some(&clock)));
    fill_leaving_eight_leased(&a, "hot");
    flushall(&server);
    // B, which holds no lease, re-creates the key: a fresh bucket, it cannot know better.
    assert_eq!(admitted(&b, "hot", 5), 5);
    // A serves its leased units, then its lease request finds the key emptier than A's last
    // answer allows (5 units in it, A saw 20): lost, so the key starts full.
    assert_eq!(admitted(&a, "hot", 12), 8);
    assert_eq!(a.stats().lost_buckets, 1);
    assert_eq!(admitted(&b, "hot", 20), 0, "before: the fresh bucket had 15 more");
    // 12 + 5 + 8 admitted: the burst and 5, the units the fresh bucket gave before the request
    // that found the loss (at most the 8 units still leased). From now on, the rate alone.
    clock.advance(Duration::from_secs(360));
    assert_eq!(admitted(&b, "hot", 3), 1);
    assert_eq!(a.stats().lost_buckets, 1, "the key is not found lost again");
}

#[test]
fn a_key_that_expired_is_not_taken_for_lost() {
    let server = RedisServer::start();
    let clock = epoch();
    let a = leasing(&server, Some(&clock));
    fill_leaving_eight_leased(&a, "hot");
    // Two hours later every bucket is empty again, and the leased units' slots are long gone.
    clock.advance(Duration::from_secs(7200));
    let _: () = redis::cmd("DEL").arg(a.redis_key("hot")).query(&mut server.connection()).unwrap();
    assert_eq!(admitted(&a, "hot", 20), 20, "a full burst again");
    assert_eq!(a.stats().lost_buckets, 0);
}
