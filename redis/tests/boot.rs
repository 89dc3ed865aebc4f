//! Booting while Redis is down: `connect` returns a limiter (a bad URL is still an error, and so is
//! a Redis that refuses the limiter), its calls are answered by the failure policy without
//! waiting, and it limits from Redis once Redis answers, without a restart. Plain and rules
//! limiters, blocking and async alike.

mod support;

use leakgate::{Quota, Rules};
use leakgate_redis::{
    AsyncRedisLimiter, AsyncRedisRuleLimiter, Error, FailurePolicy, RedisLimiter, RedisRuleLimiter,
    Stats,
};
use std::time::{Duration, Instant};
use support::RedisServer;

const CONNECT_TIMEOUT: Duration = Duration::from_millis(200);
/// What "at once" allows for scheduling on a busy machine.
const SLACK: Duration = Duration::from_secs(2);
/// The longest a test waits for Redis to decide again after it came back.
const RESUME_BOUND: Duration = Duration::from_secs(10);

fn q(s: &str) -> Quota {
    s.parse().unwrap()
}

fn rules() -> Rules {
    let mut rules = Rules::new();
    rules.insert("api", [q("2/h")]);
    rules
}

/// A server whose port is known, then stopped: Redis is down at that address.
fn down() -> RedisServer {
    let mut server = RedisServer::start();
    server.kill();
    server
}

fn redis_decisions(s: &Stats) -> u64 {
    s.redis_admitted + s.redis_denied
}

/// Checks with `check` until Redis (not the policy) decides, at most [`RESUME_BOUND`].
fn until_redis_decides(check: impl Fn() -> Stats) -> Duration {
    let start = Instant::now();
    loop {
        if redis_decisions(&check()) > 0 {
            return start.elapsed();
        }
        assert!(start.elapsed() < RESUME_BOUND, "Redis did not decide again: {:?}", check());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn blocking_limiters_built_while_redis_is_down_answer_by_their_policy_then_limit() {
    let mut server = down();
    let start = Instant::now();
    let plain = RedisLimiter::builder(&server.url())
        .quota(q("2/h"))
        .connect_timeout(CONNECT_TIMEOUT)
        .connect()
        .expect("an unreachable Redis is not an error");
    let open = RedisLimiter::builder(&server.url())
        .quota(q("2/h"))
        .connect_timeout(CONNECT_TIMEOUT)
        .failure_policy(FailurePolicy::Allow)
        .connect()
        .unwrap();
    let by_rules = RedisRuleLimiter::builder(&server.url())
        .connect_timeout(CONNECT_TIMEOUT)
        .connect_rules(rules())
        .unwrap();
    assert!(start.elapsed() <= 3 * CONNECT_TIMEOUT + SLACK, "took {:?}", start.elapsed());
    // Until Redis answers, the policy decides, at once and without a round trip.
    let start = Instant::now();
    for _ in 0..5 {
        assert!(plain.check("k").unwrap_err().retry_after().is_some());
        assert!(open.check("k").is_ok());
        assert!(by_rules.check("api/k").is_err());
    }
    assert!(start.elapsed() <= SLACK, "took {:?}", start.elapsed());
    assert!(matches!(plain.try_check_n("k", 1), Err(Error::Connecting)));
    assert!(matches!(by_rules.try_check_n("api/k", 1), Err(Error::Connecting)));
    let s = plain.stats();
    assert_eq!((s.policy_denied, s.round_trips, redis_decisions(&s)), (5, 0, 0), "{s:?}");
    assert_eq!(open.stats().policy_admitted, 5);
    assert_eq!(by_rules.stats().policy_denied, 5);

    server.restart();
    // Peeks (they take nothing) until Redis answers each limiter.
    let took = until_redis_decides(|| {
        let _ = plain.peek("k");
        plain.stats()
    });
    eprintln!("limiting began {took:?} after Redis came up");
    until_redis_decides(|| {
        let _ = open.peek("k");
        open.stats()
    });
    until_redis_decides(|| {
        let _ = by_rules.peek("api/k");
        by_rules.stats()
    });
    // Exactly the quota from Redis now: 2 per hour, shared by the plain limiters.
    assert!(plain.check("k").is_ok());
    assert!(open.check("k").is_ok());
    assert!(open.check("k").is_err(), "the open limiter shares the key, and Redis decides");
    assert!(plain.check("k").is_err());
    assert_eq!(open.stats().redis_denied, 1);
    assert!(by_rules.check_n("api/k", 2).is_ok());
    assert!(by_rules.check("api/k").is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_limiters_built_while_redis_is_down_answer_by_their_policy_then_limit() {
    let mut server = down();
    let plain = AsyncRedisLimiter::builder(&server.url())
        .quota(q("2/h"))
        .connect_timeout(CONNECT_TIMEOUT)
        .connect_async()
        .await
        .expect("an unreachable Redis is not an error");
    let by_rules = AsyncRedisRuleLimiter::builder(&server.url())
        .connect_timeout(CONNECT_TIMEOUT)
        .connect_rules_async(rules())
        .await
        .unwrap();
    assert!(plain.check("k").await.is_err());
    assert!(by_rules.check("api/k").await.is_err());
    assert!(matches!(plain.try_check_n("k", 1).await, Err(Error::Connecting)));
    assert_eq!((plain.stats().policy_denied, plain.stats().round_trips), (1, 0));

    let mut server = tokio::task::spawn_blocking(move || {
        server.restart();
        server
    })
    .await
    .unwrap();
    let start = Instant::now();
    while redis_decisions(&plain.stats()) == 0 || redis_decisions(&by_rules.stats()) == 0 {
        assert!(start.elapsed() < RESUME_BOUND, "Redis did not decide again");
        let _ = plain.peek("k").await;
        let _ = by_rules.peek("api/k").await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("async limiting began {:?} after Redis came up", start.elapsed());
    // 2 per hour from Redis.
    assert!(plain.check_n("k", 2).await.is_ok());
    assert!(plain.check("k").await.is_err());
    assert!(by_rules.check_n("api/k", 2).await.is_ok());
    assert!(by_rules.check("api/k").await.is_err());
    server.kill();
}

#[test]
fn a_redis_that_refuses_the_limiter_is_still_an_error() {
    let server = RedisServer::start();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("sesame")
        .query(&mut server.connection())
        .unwrap();
    let refused = RedisLimiter::builder(&server.url()).quota(q("1/s")).connect();
    assert!(matches!(refused, Err(Error::Config(_))), "{refused:?}");
    let with_password = format!("redis://:sesame@127.0.0.1:{}/", server.port());
    let lim = RedisLimiter::builder(&with_password)
        .quota(q("1/s"))
        .deadline(Duration::from_secs(5))
        .connect()
        .unwrap();
    assert!(lim.check("k").is_ok());
    assert_eq!(lim.stats().redis_admitted, 1);
}
