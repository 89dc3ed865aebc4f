//! Redis killed, restarted, frozen, flushed: calls return by their deadline, the policy answers,
//! the counters say why, and limiting resumes without a restart of the client.

mod support;

use leakgate::Quota;
use leakgate_redis::{AsyncRedisLimiter, FailurePolicy, RedisLimiter};
use std::time::{Duration, Instant};
use support::RedisServer;

const DEADLINE: Duration = Duration::from_millis(200);
/// What "returns by its deadline" allows for scheduling on a busy machine.
const SLACK: Duration = Duration::from_secs(1);

fn limiter(server: &RedisServer, policy: FailurePolicy, open_for: Duration) -> RedisLimiter {
    RedisLimiter::builder(&server.url())
        .quota("1000/s".parse::<Quota>().unwrap())
        .deadline(DEADLINE)
        .breaker(3, open_for)
        .failure_policy(policy)
        .connect()
        .unwrap()
}

/// Checks until Redis decides again (at most `bound`); returns how long that took.
fn until_redis_decides(lim: &RedisLimiter, bound: Duration) -> Duration {
    let start = Instant::now();
    let before = lim.stats().redis_admitted + lim.stats().redis_denied;
    while start.elapsed() < bound {
        let _ = lim.check("k");
        let s = lim.stats();
        if s.redis_admitted + s.redis_denied > before {
            return start.elapsed();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("Redis did not decide again within {bound:?}: {:?}", lim.stats());
}

#[test]
fn killed_and_restarted_redis_fails_closed_then_recovers() {
    let mut server = RedisServer::start();
    let lim = limiter(&server, FailurePolicy::Deny, Duration::from_millis(100));
    assert!(lim.check("k").is_ok());
    server.kill();
    for _ in 0..20 {
        let start = Instant::now();
        let denied = lim.check("k").unwrap_err();
        assert!(start.elapsed() <= DEADLINE + SLACK);
        assert!(denied.retry_after().is_some());
    }
    let s = lim.stats();
    assert_eq!(s.policy_denied, 20);
    assert!(s.unavailable + s.timeouts >= 3, "{s:?}");
    assert!(s.breaker_opened >= 1 && s.short_circuited >= 1, "{s:?}");
    server.restart();
    let took = until_redis_decides(&lim, Duration::from_secs(10));
    eprintln!("limiting resumed {took:?} after the restart");
    // A restarted Redis without persistence starts with empty buckets (one unit was just taken).
    assert!(lim.check_n("k", 999).is_ok());
}

#[test]
fn frozen_redis_calls_return_by_their_deadline_and_the_breaker_opens() {
    let server = RedisServer::start();
    // The breaker stays open 2 s: longer than this test's calls while Redis is frozen.
    let open_for = Duration::from_secs(2);
    let lim = limiter(&server, FailurePolicy::Deny, open_for);
    let open = limiter(&server, FailurePolicy::Allow, open_for);
    let local = limiter(&server, FailurePolicy::Local { expected_servers: 10 }, open_for);
    for l in [&lim, &open, &local] {
        assert!(l.check("k").is_ok());
    }
    server.pause();
    for _ in 0..5 {
        let start = Instant::now();
        assert!(lim.check("k").is_err());
        assert!(open.check("k").is_ok());
        // Two calls (deny, then allow), each within its deadline.
        assert!(start.elapsed() <= 2 * (DEADLINE + SLACK), "took {:?}", start.elapsed());
    }
    let s = lim.stats();
    assert_eq!(s.timeouts, 3, "three timeouts open the breaker: {s:?}");
    assert_eq!((s.breaker_opened, s.short_circuited, s.policy_denied), (1, 2, 5));
    assert_eq!(open.stats().policy_admitted, 5);
    // The local fallback: 1000/s over 10 servers is a burst of 100 here.
    let admitted = (0..150).filter(|_| local.check("k").is_ok()).count();
    assert!((100..=105).contains(&admitted), "{admitted}");
    let l = local.stats();
    assert_eq!(l.fallback_admitted as usize, admitted);
    server.resume();
    until_redis_decides(&lim, Duration::from_secs(10));
    assert!(lim.check("k").is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_max_in_flight_are_answered_at_once() {
    let server = RedisServer::start();
    let lim = AsyncRedisLimiter::builder(&server.url())
        .quota("10/s".parse::<Quota>().unwrap())
        .deadline(DEADLINE)
        .breaker(1000, Duration::from_secs(1))
        .max_in_flight(2)
        .connect_async()
        .await
        .unwrap();
    server.pause();
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let lim = lim.clone();
            tokio::spawn(async move { lim.check("k").await.is_ok() })
        })
        .collect();
    for c in calls {
        assert!(!c.await.unwrap());
    }
    let s = lim.stats();
    assert_eq!((s.timeouts, s.overloaded, s.policy_denied), (2, 8, 10));
    server.resume();
}

#[test]
fn flushall_empties_every_bucket() {
    let server = RedisServer::start();
    let lim = support::patient_limiter(&server.url(), "2/h".parse().unwrap());
    lim.check_n("k", 2).unwrap();
    assert!(lim.check("k").is_err());
    let _: () = redis::cmd("FLUSHALL").query(&mut server.connection()).unwrap();
    // Documented: the bucket starts again with its full burst.
    assert_eq!(lim.check("k").unwrap().remaining(), 1);
}

#[test]
fn script_flush_is_transparent() {
    let server = RedisServer::start();
    let lim = RedisLimiter::builder(&server.url())
        .quota("2/h".parse().unwrap())
        .deadline(Duration::from_secs(5))
        .connect()
        .unwrap();
    lim.check("k").unwrap();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut server.connection()).unwrap();
    assert_eq!(lim.check("k").unwrap().remaining(), 0);
    assert!(lim.check("k").is_err());
    let s = lim.stats();
    assert_eq!((s.script_loads, s.redis_admitted, s.redis_denied, s.rejected), (1, 2, 1, 0));
}

#[test]
fn with_leases_every_call_still_returns_by_its_deadline() {
    let server = RedisServer::start();
    let lim = RedisLimiter::builder(&server.url())
        .quota("1000000/s".parse::<Quota>().unwrap())
        .deadline(DEADLINE)
        .breaker(1000, Duration::from_secs(1))
        .leases(leakgate_redis::LeaseConfig::new(8))
        .connect()
        .unwrap();
    // Make the key hot, then freeze Redis with the lease used up.
    for _ in 0..200 {
        let _ = lim.check("hot");
    }
    server.pause();
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..3 {
                    let start = Instant::now();
                    let _ = lim.check("hot");
                    assert!(start.elapsed() <= DEADLINE + SLACK, "took {:?}", start.elapsed());
                }
            });
        }
    });
    let s = lim.stats();
    assert!(s.timeouts > 0 && s.policy_denied > 0, "{s:?}");
    server.resume();
}

/// The number of scripts Redis has run (`EVALSHA` calls), from `INFO commandstats`.
fn scripts_run(server: &RedisServer) -> u64 {
    let info: String =
        redis::cmd("INFO").arg("commandstats").query(&mut server.connection()).unwrap();
    let line = info.lines().find(|l| l.starts_with("cmdstat_evalsha:")).unwrap_or("calls=0,");
    let calls = line.split("calls=").nth(1).and_then(|rest| rest.split(',').next());
    calls.unwrap().parse().unwrap()
}

#[test]
fn calls_refused_after_their_deadline_charge_nothing_when_a_frozen_redis_wakes() {
    let server = RedisServer::start();
    let lim = RedisLimiter::builder(&server.url())
        .quota("3/h".parse::<Quota>().unwrap())
        .deadline(DEADLINE)
        // Every call goes to Redis (the breaker never opens): each is sent, and each times out.
        .breaker(1000, Duration::from_secs(1))
        .connect()
        .unwrap();
    let before = scripts_run(&server);
    server.pause();
    assert!(lim.check("k").is_err());
    assert!(lim.check_n("k", 2).is_err());
    assert!(lim.reserve_n("k", 3, Duration::from_secs(3600)).is_err());
    assert!(lim.reserve("queue", Duration::from_secs(3600)).is_err());
    let s = lim.stats();
    assert_eq!((s.timeouts, s.policy_denied, s.round_trips), (4, 4, 4), "{s:?}");
    server.resume();
    // Redis runs the four scripts it held, each after its call's deadline.
    let start = Instant::now();
    while scripts_run(&server) < before + 4 {
        assert!(start.elapsed() < Duration::from_secs(10), "Redis did not run the held scripts");
        std::thread::sleep(Duration::from_millis(10));
    }
    // None charged anything: no bucket was written, and the whole burst is there.
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut server.connection()).unwrap();
    assert!(keys.is_empty(), "refused calls left buckets: {keys:?}");
    let patient = support::patient_limiter(&server.url(), "3/h".parse().unwrap());
    assert_eq!(patient.peek("k").unwrap().remaining(), 3);
    assert!(patient.check_n("k", 3).is_ok());
    assert!(patient.reserve("queue", Duration::ZERO).is_ok(), "no reservation holds a place");
}
