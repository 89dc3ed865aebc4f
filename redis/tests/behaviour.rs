//! What a user sees: decisions and reports, shared buckets, expiry, several quotas and keys,
//! reservations, leases, the async API. Real redis-server, server time unless stated.

mod support;

use leakgate::{ManualClock, Quota};
use leakgate_redis::{AsyncRedisLimiter, LeaseConfig, RedisLimiter};
use redis::Commands;
use std::time::Duration;
use support::RedisServer;

fn q(s: &str) -> Quota {
    s.parse().unwrap()
}

/// A limiter on `server` with a generous deadline (debug builds on a busy machine).
fn limiter(server: &RedisServer, quota: &str) -> RedisLimiter {
    RedisLimiter::builder(&server.url())
        .quota(q(quota))
        .deadline(Duration::from_secs(5))
        .connect()
        .unwrap()
}

fn manual(server: &RedisServer, quotas: &[&str], clock: &ManualClock) -> RedisLimiter {
    let mut b = RedisLimiter::builder(&server.url())
        .caller_clock(clock.clone())
        .deadline(Duration::from_secs(5))
        .expiry_slack(Duration::from_secs(3600));
    for quota in quotas {
        b = b.quota(q(quota));
    }
    b.connect().unwrap()
}

#[test]
fn contract_example_two_servers_share_one_bucket() {
    let server = RedisServer::start();
    // Two limiters, two connections: two servers of a fleet. A day's quota cannot refill here.
    let a = support::patient_limiter(&server.url(), q("3/d"));
    let b = support::patient_limiter(&server.url(), q("3/d"));
    assert_eq!(a.check("refunds/bank-a").unwrap().remaining(), 2);
    assert_eq!(b.check("refunds/bank-a").unwrap().remaining(), 1);
    assert_eq!(a.check_n("refunds/bank-a", 1).unwrap().remaining(), 0);
    let denied = b.check("refunds/bank-a").unwrap_err();
    let retry = denied.retry_after().unwrap();
    // One refill is 8 h; some time passed since the first admission, never more than a minute.
    assert!(retry <= Duration::from_secs(8 * 3600) && retry > Duration::from_secs(8 * 3600 - 60));
    assert!(b.check("refunds/bank-b").is_ok(), "another key has its own bucket");
    let s = a.stats();
    assert_eq!((s.redis_admitted, s.redis_denied, s.round_trips), (2, 0, 2));
}

#[test]
fn reports_match_the_limiter_with_the_callers_clock() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    clock.set(Duration::from_secs(1_700_000_000));
    let lim = manual(&server, &["2/s"], &clock);
    let local = leakgate::Limiter::with_clock(q("2/s"), clock.clone());
    for step_ms in [0, 0, 0, 100, 400, 0, 250, 2000, 0, 0, 0] {
        clock.advance(Duration::from_millis(step_ms));
        let (r, l) = (lim.check("k"), local.check());
        assert_eq!(r.is_ok(), l.is_ok());
        match (r, l) {
            (Ok(r), Ok(l)) => {
                assert_eq!((r.remaining(), r.reset_after()), (l.remaining(), l.reset_after()))
            }
            (Err(r), Err(l)) => {
                assert_eq!((r.remaining(), r.retry_after()), (l.remaining(), l.retry_after()));
                assert_eq!(r.reset_after(), l.reset_after());
            }
            _ => unreachable!(),
        }
    }
}

#[test]
fn keys_expire_when_their_buckets_are_empty() {
    let server = RedisServer::start();
    let lim = limiter(&server, "10/h");
    let mut con = server.connection();
    lim.check_n("k", 4).unwrap();
    let key = lim.redis_key("k");
    let ttl: i64 = con.pttl(&key).unwrap();
    // 4 units of 6 minutes: empty 24 minutes later (plus the 1 ms rounding margin).
    assert!(ttl > 24 * 60_000 - 60_000 && ttl <= 24 * 60_000 + 1, "ttl {ttl}");
    // A peek and a denial write nothing.
    lim.peek("p").unwrap();
    lim.check_n("p", 11).unwrap_err();
    assert!(!con.exists::<_, bool>(lim.redis_key("p")).unwrap());
}

#[test]
fn cost_zero_is_a_peek_and_above_burst_never_conforms() {
    let server = RedisServer::start();
    let lim = limiter(&server, "5/h");
    lim.check_n("k", 2).unwrap();
    let peek = lim.peek("k").unwrap();
    assert_eq!(peek.remaining(), 3);
    let never = lim.check_n("k", 6).unwrap_err();
    assert_eq!((never.retry_after(), never.remaining()), (None, 3));
    assert_eq!(lim.check_n("k", 3).unwrap().remaining(), 0);
}

#[test]
fn several_quotas_are_charged_all_or_none() {
    let server = RedisServer::start();
    let lim = RedisLimiter::builder(&server.url())
        .quota(q("3/h"))
        .quota(q("2/d burst 5"))
        .deadline(Duration::from_secs(5))
        .connect()
        .unwrap();
    assert_eq!(lim.check_n("k", 2).unwrap().remaining(), 1);
    // 3/h has 1 left, 2/d has 3 left: 2 more do not conform, and neither bucket is charged.
    let no = lim.check_n("k", 2).unwrap_err();
    assert_eq!(no.remaining(), 1);
    assert!(no.retry_after().unwrap() > Duration::from_secs(1000));
    assert_eq!(lim.check("k").unwrap().remaining(), 0);
    // Over a day's burst of 5 in the second quota, above the first's burst of 3: never.
    assert_eq!(lim.check_n("k", 4).unwrap_err().retry_after(), None);
}

#[test]
fn several_keys_are_charged_all_or_none_and_a_key_named_twice_twice() {
    let server = RedisServer::start();
    let lim = limiter(&server, "4/h");
    lim.check_n("{t}a", 3).unwrap();
    assert!(lim.check_all_n(&["{t}a", "{t}b"], 2).is_err());
    assert_eq!(lim.peek("{t}b").unwrap().remaining(), 4, "b was not charged");
    assert_eq!(lim.check_all_n(&["{t}b", "{t}b", "{t}a"], 1).unwrap().remaining(), 0);
    assert_eq!(lim.peek("{t}b").unwrap().remaining(), 2);
    assert_eq!(lim.check_all_n(&["{t}c", "{t}c", "{t}c"], 2).unwrap_err().retry_after(), None);
}

#[test]
fn quota_sets_and_prefixes_do_not_share_buckets() {
    let server = RedisServer::start();
    let per_hour = limiter(&server, "1/h");
    let per_day = limiter(&server, "1/d");
    per_hour.check("k").unwrap();
    per_day.check("k").unwrap();
    let other =
        RedisLimiter::builder(&server.url()).quota(q("1/h")).prefix("other:").connect().unwrap();
    other.check("k").unwrap();
    assert!(per_hour.check("k").is_err());
    assert_ne!(per_hour.redis_key("k"), per_day.redis_key("k"));
}

#[test]
fn reservations_queue_across_limiters() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    clock.set(Duration::from_secs(1_800_000_000));
    let a = manual(&server, &["10/s burst 1"], &clock);
    let b = manual(&server, &["10/s burst 1"], &clock);
    let wait = Duration::from_secs(1);
    let r1 = a.reserve("q", wait).unwrap();
    let r2 = b.reserve("q", wait).unwrap();
    let r3 = a.reserve_n("q", 1, wait).unwrap();
    assert_eq!([r1.delay(), r2.delay(), r3.delay()], [0, 100, 200].map(Duration::from_millis));
    assert_eq!(r3.ready_at() - r1.ready_at(), Duration::from_millis(200));
    let no = b.reserve("q", Duration::from_millis(250)).unwrap_err();
    assert_eq!(no.retry_after(), Some(Duration::from_millis(50)));
    assert!(a.check("q").is_err(), "a meter does not jump the queue");
}

#[test]
fn leases_serve_a_hot_key_locally_and_never_beyond_the_bound() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    clock.set(Duration::from_secs(1_700_000_000));
    let mk = || {
        RedisLimiter::builder(&server.url())
            .quota(q("100/s burst 20"))
            .caller_clock(clock.clone())
            .expiry_slack(Duration::from_secs(3600))
            .deadline(Duration::from_secs(5))
            .leases(LeaseConfig::new(16))
            .connect()
            .unwrap()
    };
    let (a, b) = (mk(), mk());
    let mut admitted = 0u64;
    let steps = 200;
    for _ in 0..steps {
        // Both processes want 5 units per millisecond: far above 100/s.
        for _ in 0..5 {
            admitted += u64::from(a.check("hot").is_ok()) + u64::from(b.check("hot").is_ok());
        }
        clock.advance(Duration::from_millis(1));
    }
    // Window of 200 ms: at most burst + rate * window = 20 + 20 (+1 for the boundary).
    assert!(admitted <= 41, "admitted {admitted}");
    assert!(admitted >= 35, "admitted {admitted}: leases wasted too much");
    let (sa, sb) = (a.stats(), b.stats());
    let decisions = sa.decisions() + sb.decisions();
    assert_eq!(decisions, 2 * 5 * steps);
    assert!(sa.round_trips + sb.round_trips < decisions / 10, "{sa:?} {sb:?}");
    assert!(sa.local_admitted + sb.local_admitted > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_tasks_share_one_connection_and_never_exceed_the_burst() {
    let server = RedisServer::start();
    let lim = AsyncRedisLimiter::builder(&server.url())
        .quota(q("50/h"))
        .deadline(Duration::from_secs(5))
        .connect_async()
        .await
        .unwrap();
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let lim = lim.clone();
            tokio::spawn(async move { lim.check("shared").await.is_ok() })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += usize::from(t.await.unwrap());
    }
    assert_eq!(admitted, 50);
    assert_eq!(lim.stats().redis_denied, 14);
}

#[test]
fn blocking_limiter_works_inside_an_async_runtime_and_drops_there() {
    let server = RedisServer::start();
    let url = server.url();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let lim = support::patient_limiter(&url, q("1/h"));
        assert!(lim.check("k").is_ok());
        assert!(lim.check("k").is_err());
        drop(lim);
    });
}

#[test]
fn leases_under_several_quotas_keep_every_bound() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    clock.set(Duration::from_secs(1_700_000_000));
    let mk = || {
        RedisLimiter::builder(&server.url())
            .quota(q("100/s burst 30"))
            .quota(q("70/s burst 50"))
            .caller_clock(clock.clone())
            .expiry_slack(Duration::from_secs(3600))
            .deadline(Duration::from_secs(5))
            .leases(LeaseConfig::new(64))
            .connect()
            .unwrap()
    };
    let (a, b) = (mk(), mk());
    let mut admitted = 0u64;
    for _ in 0..300 {
        for _ in 0..3 {
            admitted += u64::from(a.check("hot").is_ok()) + u64::from(b.check("hot").is_ok());
        }
        clock.advance(Duration::from_millis(1));
    }
    // 300 ms: the tighter bound is min(30 + 100 * 0.3, 50 + 70 * 0.3) = 60 (+1 at the boundary).
    assert!(admitted <= 61, "admitted {admitted}");
    assert!(admitted >= 50, "admitted {admitted}");
    let leased = a.stats().leased_units + b.stats().leased_units;
    assert!(leased > 0, "{:?} {:?}", a.stats(), b.stats());
}

#[test]
fn leased_units_are_dropped_once_their_slot_has_begun() {
    let server = RedisServer::start();
    let clock = ManualClock::new();
    clock.set(Duration::from_secs(1_700_000_000));
    let b = RedisLimiter::builder(&server.url())
        .quota(q("10/s burst 5"))
        .caller_clock(clock.clone())
        .deadline(Duration::from_secs(5)) // the 5 ms default ran out under load (a Deny, not a wrong answer)
        .expiry_slack(Duration::from_secs(3600));
    let with_leases = b.clone().leases(LeaseConfig::new(4)).connect().unwrap();
    let plain = b.connect().unwrap();
    // Take leases until some leased units are unused.
    for _ in 0..5 {
        let s = with_leases.stats();
        if s.leased_units > s.local_admitted {
            break;
        }
        with_leases.check("k").unwrap();
    }
    let s = with_leases.stats();
    assert!(s.leased_units > s.local_admitted, "{s:?}");
    // A second later the bucket is empty again, and the other process takes the whole burst.
    clock.advance(Duration::from_secs(1));
    plain.check_n("k", 5).unwrap();
    // The leased units' slots have begun: using them now would exceed the burst.
    let refused = with_leases.check("k").expect_err("the burst is spent");
    // A refusal by the bucket (a tenth of a second at 10/s), not the failure policy's.
    assert!(refused.retry_after() >= Some(Duration::from_millis(50)), "{refused:?}");
}

/// A hot key asked far above its rate by 64 tasks, on Redis's clock: while one task renews the
/// lease of the full key, the others are refused here instead of each waiting for a round trip
/// of its own (which held the key to one decision per round trip when the rate's interval was
/// shorter than a round trip), and the fleet bound still holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_hot_key_is_refused_locally_while_its_lease_is_renewed() {
    let server = RedisServer::start();
    let lim = AsyncRedisLimiter::builder(&server.url())
        .quota(q("10000/s burst 100"))
        .deadline(Duration::from_secs(5))
        .leases(LeaseConfig::new(256))
        .connect_async()
        .await
        .unwrap();
    let start = support::redis_time_us(&mut server.connection());
    let until = std::time::Instant::now() + Duration::from_millis(300);
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let lim = lim.clone();
            tokio::spawn(async move {
                let mut admitted = 0u64;
                while std::time::Instant::now() < until {
                    admitted += u64::from(lim.check("hot").await.is_ok());
                    // Each decision yields, as a real handler would between requests.
                    tokio::task::yield_now().await;
                }
                admitted
            })
        })
        .collect();
    let mut admitted = 0;
    for task in tasks {
        admitted += task.await.unwrap();
    }
    let elapsed_us = support::redis_time_us(&mut server.connection()) - start;
    let bound = 100 + 10_000 * elapsed_us / 1_000_000 + 1;
    let s = lim.stats();
    assert!(admitted <= bound, "admitted {admitted} > bound {bound}: {s:?}");
    assert!(s.local_denied > 0, "{s:?}");
    // Waiting for a round trip each, they made about 1.5 decisions per round trip; refused
    // here, about 200 in a release build and 10 in a debug one (where each local answer is slow).
    assert!(s.decisions() >= 4 * s.round_trips, "fewer than 4 decisions per round trip: {s:?}");
}
