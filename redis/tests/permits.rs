//! `AsyncRedisConcurrency` against real redis-servers: the replies, bad input, a permit that
//! returns by its TTL (bounds on Redis's clock, not timings), a `kill -9`ed holder's permits
//! returning, never more than `max` in flight across several processes (this test binary re-run
//! as children: `worker_entry_point`), and the same on a Redis Cluster.

mod support;

use leakgate_redis::{AsyncRedisConcurrency, Builder, Error};
use leakgate_test_support::cluster::Cluster;
use std::time::{Duration, Instant};
use support::workers::{assert_hammers_left_nothing, hammers, line_with, spawn_worker};
use support::{redis_time_us, RedisServer};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

async fn permits(url: &str) -> AsyncRedisConcurrency {
    Builder::new(url).deadline(Duration::from_secs(5)).connect_concurrency_async().await.unwrap()
}

/// The entry point of the child processes; does nothing unless started by a test below.
#[test]
fn worker_entry_point() {
    let Ok(role) = std::env::var("LEAKGATE_PERMITS_ROLE") else { return };
    let url = std::env::var("LEAKGATE_PERMITS_URL").unwrap();
    rt().block_on(async {
        let p = permits(&url).await;
        match role.as_str() {
            // Takes both permits of "held", says so, and never lets go.
            "hold" => {
                let ttl = Duration::from_millis(1500);
                let a = p.try_acquire(b"held", 2, ttl).await.unwrap().unwrap().into_token();
                let b = p.try_acquire(b"held", 2, ttl).await.unwrap().unwrap().into_token();
                println!("HELD {a} {b}");
                loop {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
            }
            // Acquires and releases "shared" (max 3) for a while, counting holders in Redis.
            "hammer" => hammer(&p, &url).await,
            _ => panic!("unknown role {role}"),
        }
    });
}

/// While a permit is held, a Redis counter of holders is incremented (after the acquire) and
/// decremented (before the release): it never exceeds the permits really held.
async fn hammer(p: &AsyncRedisConcurrency, url: &str) {
    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let (mut peak, mut got, mut busy) = (0i64, 0u64, 0u64);
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1500) {
        match p.try_acquire(b"shared", 3, Duration::from_secs(30)).await.unwrap() {
            Ok(permit) => {
                got += 1;
                let n: i64 = redis::cmd("INCR").arg("holders").query_async(&mut con).await.unwrap();
                peak = peak.max(n);
                tokio::task::yield_now().await;
                let _: i64 = redis::cmd("DECR").arg("holders").query_async(&mut con).await.unwrap();
                assert!(permit.release().await.unwrap(), "a held permit releases");
            }
            Err(_) => busy += 1,
        }
    }
    println!("HAMMER {peak} {got} {busy}");
}

#[test]
fn replies_and_release() {
    let server = RedisServer::start();
    rt().block_on(async {
        let p = permits(&server.url()).await;
        let ttl = Duration::from_secs(30);
        let a = p.try_acquire(b"k", 2, ttl).await.unwrap().unwrap();
        assert_eq!(a.in_flight(), 1);
        assert_eq!(a.token().len(), 32);
        let b = p.try_acquire(b"k", 2, ttl).await.unwrap().unwrap();
        assert_eq!(b.in_flight(), 2);
        assert_ne!(a.token(), b.token());
        let busy = p.try_acquire(b"k", 2, ttl).await.unwrap().unwrap_err();
        assert_eq!(busy.in_flight, 2);
        assert!(busy.retry_after <= ttl && busy.retry_after > Duration::from_secs(25));
        // Another key is another set of permits.
        assert!(p.try_acquire(b"other", 1, ttl).await.unwrap().is_ok());
        assert!(a.renew().await.unwrap());
        let token = a.into_token();
        assert!(p.release_token(b"k", &token).await.unwrap());
        assert!(!p.release_token(b"k", &token).await.unwrap(), "released twice");
        assert!(!p.renew_token(b"k", &token, ttl).await.unwrap(), "renewing a released one");
        assert!(!p.release_token(b"k", "not-a-token").await.unwrap());
        let c = p.try_acquire(b"k", 2, ttl).await.unwrap().unwrap();
        assert_eq!(c.in_flight(), 2);
        // A lower max for the same key refuses while more are held; nothing is revoked.
        assert_eq!(p.try_acquire(b"k", 1, ttl).await.unwrap().unwrap_err().in_flight, 2);
        assert!(b.release().await.unwrap());
        // Dropped inside the runtime: released in the background.
        drop(c);
        let until = Instant::now() + Duration::from_secs(10);
        while p.try_acquire(b"k", 1, ttl).await.unwrap().map(|p| p.into_token()).is_err() {
            assert!(Instant::now() < until, "a dropped permit is released");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    // Every set has an expiry: nothing is left behind for ever.
    let mut con = server.connection();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    for k in keys {
        let pttl: i64 = redis::cmd("PTTL").arg(&k).query(&mut con).unwrap();
        assert!(pttl > 0, "{k} expires");
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    let server = RedisServer::start();
    rt().block_on(async {
        let p = permits(&server.url()).await;
        let s = Duration::from_secs(1);
        let bad = [
            p.try_acquire(b"k", 0, s).await.err(),
            p.try_acquire(b"k", u64::MAX, s).await.err(),
            p.try_acquire(b"k", 1, Duration::ZERO).await.err(),
            p.try_acquire(b"k", 1, Duration::from_micros(999)).await.err(),
            p.try_acquire(b"k", 1, Duration::MAX).await.err(),
            p.renew_token(b"k", "t", Duration::ZERO).await.err(),
        ];
        for e in bad {
            let e = e.expect("refused");
            assert!(matches!(e, Error::InvalidRequest(_)), "{e:?}");
            assert!(!e.to_string().is_empty());
        }
        // Nothing was written.
        assert!(p.try_acquire(b"k", 1, s).await.unwrap().is_ok());
    });
    // A key that holds something else: Redis's error, not a panic.
    let mut con = server.connection();
    let _: () = redis::cmd("SET").arg("leakgate:permits1:str").arg("x").query(&mut con).unwrap();
    rt().block_on(async {
        let p = permits(&server.url()).await;
        let k = p.redis_key(b"str");
        assert_eq!(k, b"leakgate:permits1:str", "the prefix this test assumes");
        let e = p.try_acquire(b"str", 1, Duration::from_secs(1)).await.unwrap_err();
        assert!(matches!(e, Error::Rejected(_)), "{e:?}");
    });
}

#[test]
fn an_unreleased_permit_returns_after_its_ttl_not_before() {
    let server = RedisServer::start();
    let mut con = server.connection();
    rt().block_on(async {
        let p = permits(&server.url()).await;
        let ttl = Duration::from_millis(300);
        let before_us = redis_time_us(&mut con);
        let _kept = p.try_acquire(b"k", 1, ttl).await.unwrap().unwrap().into_token();
        let limit = Instant::now() + Duration::from_secs(20);
        let busy = p.try_acquire(b"k", 1, ttl).await.unwrap().expect_err("one permit is held");
        assert!(busy.retry_after <= ttl);
        loop {
            if let Ok(permit) = p.try_acquire(b"k", 1, ttl).await.unwrap() {
                let after_us = redis_time_us(&mut con);
                // On Redis's clock: not before the TTL passed.
                assert!(
                    after_us - before_us >= 300_000,
                    "returned after {}us",
                    after_us - before_us
                );
                permit.into_token();
                break;
            }
            assert!(Instant::now() < limit, "the permit returns by its TTL");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
}

#[test]
fn a_killed_holder_gives_its_permits_back_within_the_ttl() {
    let server = RedisServer::start();
    let url = server.url();
    let mut child =
        spawn_worker(&[("LEAKGATE_PERMITS_ROLE", "hold"), ("LEAKGATE_PERMITS_URL", &url)]);
    let held = line_with(&mut child, "HELD ");
    assert!(held.len() > 60, "{held}");
    let mut con = server.connection();
    let killed_us = redis_time_us(&mut con);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    rt().block_on(async {
        let p = permits(&server.url()).await;
        let ttl = Duration::from_secs(30);
        let limit = Instant::now() + Duration::from_secs(20);
        let mut got = Vec::new();
        while got.len() < 2 {
            match p.try_acquire(b"held", 2, ttl).await.unwrap() {
                Ok(permit) => got.push(permit.into_token()),
                Err(busy) => assert!(busy.retry_after <= Duration::from_millis(1500)),
            }
            assert!(Instant::now() < limit, "the killed holder's permits return");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Both came back, and no sooner than the holder's TTL allowed; never a third.
        let back_us = redis_time_us(&mut con);
        assert!(back_us - killed_us <= 20_000_000);
        assert!(p.try_acquire(b"held", 2, ttl).await.unwrap().is_err());
    });
}

#[test]
fn never_more_than_max_across_processes() {
    let server = RedisServer::start();
    let url = server.url();
    let (peak, got, busy) =
        hammers(4, &[("LEAKGATE_PERMITS_ROLE", "hammer"), ("LEAKGATE_PERMITS_URL", &url)]);
    assert!(peak <= 3, "{peak} holders of 3 permits");
    assert!(got > 0 && busy > 0, "the processes contended: {got} acquired, {busy} busy");
    assert_hammers_left_nothing(&server);
}

#[test]
fn permits_on_a_cluster() {
    let cluster = Cluster::start();
    rt().block_on(async {
        let p = Builder::cluster(cluster.seeds())
            .deadline(Duration::from_secs(5))
            .connect_concurrency_async()
            .await
            .unwrap();
        let ttl = Duration::from_secs(30);
        // Keys on different slots (and so, masters).
        for key in [&b"a"[..], b"b", b"c", b"{tag}d"] {
            let first = p.try_acquire(key, 2, ttl).await.unwrap().unwrap();
            let _second = p.try_acquire(key, 2, ttl).await.unwrap().unwrap();
            assert_eq!(p.try_acquire(key, 2, ttl).await.unwrap().unwrap_err().in_flight, 2);
            assert!(first.release().await.unwrap());
            let third = p.try_acquire(key, 2, ttl).await.unwrap().unwrap();
            assert_eq!(third.in_flight(), 2);
            assert!(third.release().await.unwrap());
        }
    });
}
