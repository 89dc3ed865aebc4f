//! `RedisPermit::keep_alive` against real redis-servers: a holder keeps its permit for many TTLs
//! by background renewal (also on a Redis Cluster); the permit reports itself lost when its
//! entry vanishes or Redis stops answering before it could expire; a renewing holder killed
//! with `kill -9` gives its permits back within the TTL; and renewing holders in several
//! processes never hold more than `max` (this test binary re-run as children:
//! `worker_entry_point`). Bounds are on Redis's clock (`TIME`), not on timings.

mod support;

use leakgate_redis::{AsyncRedisConcurrency, Builder};
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

/// Redis's clock, for async code (a connection of its own).
fn redis_now_us(url: &str) -> u64 {
    let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
    redis_time_us(&mut con)
}

/// The entry point of the child processes; does nothing unless started by a test below.
#[test]
fn worker_entry_point() {
    let Ok(role) = std::env::var("LEAKGATE_KEPT_ROLE") else { return };
    let url = std::env::var("LEAKGATE_KEPT_URL").unwrap();
    rt().block_on(async {
        let p = permits(&url).await;
        match role.as_str() {
            // Takes both permits of "kept" (TTL 1 s), keeps them alive, says so, never lets go.
            "keep" => {
                let ttl = Duration::from_secs(1);
                let mut a = p.try_acquire(b"kept", 2, ttl).await.unwrap().unwrap();
                let mut b = p.try_acquire(b"kept", 2, ttl).await.unwrap().unwrap();
                a.keep_alive().unwrap();
                b.keep_alive().unwrap();
                println!("HELD {} {}", a.token(), b.token());
                loop {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
            }
            "hammer" => hammer(&p, &url).await,
            _ => panic!("unknown role {role}"),
        }
    });
}

/// Takes "shared" (max 2, TTL 150 ms) and holds each permit for longer than its TTL (renewed
/// in the background), counting holders in Redis: incremented after the acquire, decremented
/// before the release, so the counter never exceeds the permits really held.
async fn hammer(p: &AsyncRedisConcurrency, url: &str) {
    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let (mut peak, mut got, mut busy) = (0i64, 0u64, 0u64);
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(2500) {
        match p.try_acquire(b"shared", 2, Duration::from_millis(150)).await.unwrap() {
            Ok(mut permit) => {
                permit.keep_alive().unwrap();
                got += 1;
                let n: i64 = redis::cmd("INCR").arg("holders").query_async(&mut con).await.unwrap();
                peak = peak.max(n);
                tokio::time::sleep(Duration::from_millis(400)).await;
                assert!(!permit.is_lost(), "a kept permit is not lost while Redis answers");
                let _: i64 = redis::cmd("DECR").arg("holders").query_async(&mut con).await.unwrap();
                assert!(permit.release().await.unwrap(), "held past 2 TTLs: still held");
            }
            Err(_) => {
                busy += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    println!("HAMMER {peak} {got} {busy}");
}

/// Keeps a permit of `key` (max 1, `ttl`) for at least `ttls` TTLs on Redis's clock, checking
/// all along that nobody else can take it, then releases it.
async fn keep_for(p: &AsyncRedisConcurrency, url: &str, key: &[u8], ttl: Duration, ttls: u32) {
    let start_us = redis_now_us(url);
    let mut permit = p.try_acquire(key, 1, ttl).await.unwrap().unwrap();
    permit.keep_alive().unwrap();
    permit.keep_alive().unwrap(); // again: nothing more
    let span_us = u64::try_from((ttl * ttls).as_micros()).unwrap();
    while redis_now_us(url) - start_us < span_us {
        let other = p.try_acquire(key, 1, ttl).await.unwrap();
        assert!(other.is_err(), "the kept permit is still the one held");
        assert!(!permit.is_lost());
        tokio::time::sleep(ttl / 4).await;
    }
    assert!(permit.release().await.unwrap(), "still held after {ttls} TTLs");
    assert!(p.try_acquire(key, 1, ttl).await.unwrap().is_ok(), "released");
}

#[test]
fn a_long_holder_keeps_its_permit_past_several_ttls() {
    let server = RedisServer::start();
    let url = server.url();
    rt().block_on(async {
        let p = permits(&url).await;
        keep_for(&p, &url, b"long", Duration::from_millis(200), 6).await;
        // Without keep_alive the same permit is gone after one TTL.
        let ttl = Duration::from_millis(200);
        let plain = p.try_acquire(b"plain", 1, ttl).await.unwrap().unwrap();
        let start_us = redis_now_us(&url);
        while redis_now_us(&url) - start_us < 400_000 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!plain.renew().await.unwrap(), "expired");
        assert!(plain.is_lost(), "a renewal that found it gone marks it lost");
    });
}

#[test]
fn a_permit_whose_entry_vanishes_is_reported_lost() {
    let server = RedisServer::start();
    rt().block_on(async {
        let p = permits(&server.url()).await;
        let mut permit = p.try_acquire(b"k", 1, Duration::from_millis(300)).await.unwrap().unwrap();
        permit.keep_alive().unwrap();
        // Someone (an operator, a failover that lost the write) removes it.
        let mut con = server.connection();
        let _: () = redis::cmd("DEL").arg(p.redis_key(b"k")).query(&mut con).unwrap();
        tokio::time::timeout(Duration::from_secs(10), permit.lost()).await.expect("lost");
        assert!(permit.is_lost());
        permit.lost().await; // resolves again at once
        assert!(!permit.release().await.unwrap(), "not held");
    });
}

#[test]
fn a_permit_is_reported_lost_before_it_could_expire_when_redis_stops_answering() {
    let server = RedisServer::start();
    let mut con = server.connection();
    rt().block_on(async {
        let p = permits(&server.url()).await;
        let ttl = Duration::from_millis(300);
        let mut permit = p.try_acquire(b"k", 1, ttl).await.unwrap().unwrap();
        permit.keep_alive().unwrap();
        // Redis answers nobody for 5 s: the renewals hang past the permit's deadline.
        let _: () = redis::cmd("CLIENT").arg("PAUSE").arg(5000).arg("ALL").query(&mut con).unwrap();
        let waited = Instant::now();
        tokio::time::timeout(Duration::from_secs(4), permit.lost())
            .await
            .expect("lost while Redis is still paused, not when it answers");
        println!("lost {:?} after the pause (TTL {ttl:?})", waited.elapsed());
        assert!(permit.is_lost());
        let _ = permit.into_token();
    });
}

#[test]
fn a_killed_renewing_holder_gives_its_permits_back_within_the_ttl() {
    let server = RedisServer::start();
    let url = server.url();
    let mut child = spawn_worker(&[("LEAKGATE_KEPT_ROLE", "keep"), ("LEAKGATE_KEPT_URL", &url)]);
    line_with(&mut child, "HELD ");
    let mut con = server.connection();
    let held_us = redis_time_us(&mut con);
    let ttl_us = 1_000_000;
    rt().block_on(async {
        let p = permits(&url).await;
        // Renewed across 2.5 TTLs: still both held by the child.
        while redis_now_us(&url) - held_us < 2 * ttl_us + ttl_us / 2 {
            assert!(p.try_acquire(b"kept", 2, Duration::from_secs(30)).await.unwrap().is_err());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let killed_us = redis_time_us(&mut con);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    rt().block_on(async {
        let p = permits(&url).await;
        let limit = Instant::now() + Duration::from_secs(20);
        let mut got = Vec::new();
        while got.len() < 2 {
            if let Ok(permit) = p.try_acquire(b"kept", 2, Duration::from_secs(30)).await.unwrap() {
                got.push(permit.into_token());
            }
            assert!(Instant::now() < limit, "the killed holder's permits return");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let back_us = redis_now_us(&url) - killed_us;
        println!("both permits back {back_us} us after the kill (TTL {ttl_us} us)");
        // Expired at most one TTL after the last renewal, which came before the kill; the rest
        // is this test noticing (polls every 5 ms, at load).
        assert!(back_us <= ttl_us + 500_000, "{back_us} us");
        assert!(p.try_acquire(b"kept", 2, Duration::from_secs(30)).await.unwrap().is_err());
    });
}

#[test]
fn renewing_holders_in_several_processes_never_exceed_max() {
    let server = RedisServer::start();
    let url = server.url();
    let (peak, got, busy) =
        hammers(4, &[("LEAKGATE_KEPT_ROLE", "hammer"), ("LEAKGATE_KEPT_URL", &url)]);
    assert!(peak <= 2, "{peak} holders of 2 permits");
    assert!(got >= 4 && busy > 0, "the processes contended: {got} acquired, {busy} busy");
    assert_hammers_left_nothing(&server);
}

#[test]
fn kept_permits_on_a_cluster() {
    let cluster = Cluster::start();
    let url = cluster.seeds()[0].clone();
    rt().block_on(async {
        let p = Builder::cluster(cluster.seeds())
            .deadline(Duration::from_secs(5))
            .connect_concurrency_async()
            .await
            .unwrap();
        // Keys on different slots (and so, masters); Redis's clock read from one node.
        for key in [&b"a"[..], b"b", b"{tag}d"] {
            keep_for(&p, &url, key, Duration::from_millis(200), 4).await;
        }
    });
}
