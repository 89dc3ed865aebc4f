//! The per-key adaptive concurrency layer on a real axum server: each key learns its own limit
//! from its own responses (5xx, 429 and timeouts back it off, successes grow it), a key at its
//! limit is refused at once with 503 and `Retry-After` while other keys pass, and the key table
//! stays within its bound (a new key past it is refused while every key held is busy). Latency
//! is a signal too (Gradient2 on a manual clock), through this layer and the global adaptive one.

mod support;

use axum::{routing::get, Router};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use leakgate::{KeyedAdaptiveConcurrency, ManualClock};
use leakgate_tower::{ConcurrencyLimitLayer, HeaderKey};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{client, held_route, until, Server};
use tokio::sync::Semaphore;
use tower::{ServiceBuilder, ServiceExt};

fn tenant() -> HeaderKey {
    HeaderKey::new(http::HeaderName::from_static("x-tenant"))
}

#[tokio::test]
async fn each_key_learns_its_own_limit_from_its_own_responses() {
    let table = Arc::new(KeyedAdaptiveConcurrency::<String>::aimd(1, 10, 10).unwrap());
    let app = Router::new()
        .route("/ok", get(|| async { "ok" }))
        .route("/fail", get(|| async { (StatusCode::BAD_GATEWAY, "upstream down") }))
        .route("/busy", get(|| async { (StatusCode::TOO_MANY_REQUESTS, "slow down") }))
        .route("/missing", get(|| async { (StatusCode::NOT_FOUND, "no") }))
        .layer(ConcurrencyLimitLayer::keyed_adaptive(table.clone(), tenant()));
    let server = Server::start(app).await;
    let get = |path: &'static str, key: &'static [u8]| {
        let url = server.url(path);
        async move { client().get_with(&url, &[("x-tenant", key)]).await.status }
    };
    assert_eq!(get("/fail", b"a").await, StatusCode::BAD_GATEWAY);
    assert_eq!(table.limit(&"a".into()), 9, "a 5xx backs key a off by 10%");
    assert_eq!(get("/busy", b"a").await, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(table.limit(&"a".into()), 8, "so does a 429 (9 * 0.9, rounded down)");
    assert_eq!(get("/missing", b"a").await, StatusCode::NOT_FOUND);
    assert_eq!(table.limit(&"a".into()), 8, "a 4xx is the client's fault");
    assert_eq!(table.limit(&"b".into()), 10, "key b is not touched");
    assert_eq!(get("/ok", b"b").await, StatusCode::OK);
    assert_eq!(table.limit(&"b".into()), 10, "at the max already");
    assert_eq!(client().get(&server.url("/ok")).await.status, StatusCode::BAD_REQUEST, "no key");
    assert_eq!(table.len(), 2);
    assert_eq!((table.in_flight(&"a".into()), table.in_flight(&"b".into())), (0, 0));
}

#[tokio::test]
async fn a_key_at_its_limit_is_refused_at_once_and_grows_when_its_window_succeeds() {
    let table = Arc::new(KeyedAdaptiveConcurrency::<String>::aimd(1, 1, 10).unwrap());
    let gate = Arc::new(Semaphore::new(0));
    let app = held_route(gate.clone()).layer(
        ConcurrencyLimitLayer::keyed_adaptive(table.clone(), tenant())
            .retry_after(Duration::from_millis(2500)),
    );
    let server = Server::start(app).await;
    let url = server.url("/");
    let first = tokio::spawn({
        let url = url.clone();
        async move { client().get_with(&url, &[("x-tenant", b"a")]).await }
    });
    until(|| table.in_flight(&"a".into()) == 1).await;
    let refused = client().get_with(&url, &[("x-tenant", b"a")]).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.header("retry-after"), "3", "whole seconds, rounded up");
    // Another key passes while a is full (one pass each for a and b, whichever takes which).
    gate.add_permits(2);
    assert_eq!(client().get_with(&url, &[("x-tenant", b"b")]).await.status, StatusCode::OK);
    assert_eq!(first.await.unwrap().status, StatusCode::OK);
    assert_eq!(table.limit(&"a".into()), 2, "a full window that succeeded: one more");
    assert_eq!(table.in_flight(&"a".into()), 0);
}

#[tokio::test(start_paused = true)]
async fn a_timeout_answers_with_the_refusal_and_backs_that_key_off() {
    let clock = ManualClock::new();
    let table =
        Arc::new(KeyedAdaptiveConcurrency::<String, _>::aimd_with_clock(1, 10, 10, clock).unwrap());
    let layer = ConcurrencyLimitLayer::keyed_adaptive(table.clone(), tenant())
        .timeout(Duration::from_secs(2));
    let service = ServiceBuilder::new().layer(layer).service_fn(|_: Request<()>| async {
        std::future::pending::<()>().await;
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("never"))))
    });
    let request = Request::builder().header("x-tenant", "slow").body(()).unwrap();
    let response = service.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["retry-after"], "1");
    assert_eq!((table.limit(&"slow".into()), table.in_flight(&"slow".into())), (9, 0));
    assert_eq!(table.limit(&"other".into()), 10);
}

#[tokio::test]
async fn past_its_bound_the_table_refuses_new_keys_while_all_are_busy() {
    // 64 keys at most (one per shard), each allowed one request at a time.
    let table =
        Arc::new(KeyedAdaptiveConcurrency::<String>::aimd(1, 1, 1).unwrap().with_capacity(64));
    let gate = Arc::new(Semaphore::new(0));
    let app = held_route(gate.clone())
        .layer(ConcurrencyLimitLayer::keyed_adaptive(table.clone(), tenant()));
    let server = Server::start(app).await;
    let url = server.url("/");
    const KEYS: usize = 200;
    let answered = Arc::new(AtomicUsize::new(0));
    let calls: Vec<_> = (0..KEYS)
        .map(|k| {
            let (url, answered) = (url.clone(), answered.clone());
            tokio::spawn(async move {
                let key = k.to_string();
                let response = client().get_with(&url, &[("x-tenant", key.as_bytes())]).await;
                answered.fetch_add(1, Ordering::SeqCst);
                response
            })
        })
        .collect();
    let busy = || (0..KEYS).filter(|k| table.in_flight(&k.to_string()) == 1).count();
    // Every call is either in a handler or answered.
    until(|| answered.load(Ordering::SeqCst) + busy() == KEYS).await;
    let held = busy();
    assert!(held <= 64 && table.len() <= 64, "{held} busy, {} kept", table.len());
    assert!(held >= 1);
    gate.add_permits(KEYS);
    let mut refused_key = None;
    let (mut ok, mut refused) = (0, 0);
    for (k, call) in calls.into_iter().enumerate() {
        let response = call.await.unwrap();
        match response.status {
            StatusCode::OK => ok += 1,
            StatusCode::SERVICE_UNAVAILABLE => {
                assert_eq!(response.header("retry-after"), "1");
                refused += 1;
                refused_key = Some(k);
            }
            other => panic!("{other}"),
        }
    }
    assert_eq!((ok, refused), (held, KEYS - held));
    assert!(refused > 0, "200 keys in a table of 64: some were refused");
    // Nothing in flight now: a refused key is admitted (idle keys make room).
    let key = refused_key.unwrap().to_string();
    assert_eq!(
        client().get_with(&url, &[("x-tenant", key.as_bytes())]).await.status,
        StatusCode::OK
    );
    assert!(table.len() <= 64);
}

/// Runs rounds of as many concurrent calls as `limit()` allows through `layer` (key "slow"),
/// each taking `latency` on `clock`; returns the limit after each round.
async fn rounds(
    layer: ConcurrencyLimitLayer,
    clock: &ManualClock,
    limit: impl Fn() -> u32,
    in_flight: impl Fn() -> u32,
    latencies: &[u64],
) -> Vec<u32> {
    let gate = Arc::new(Semaphore::new(0));
    let service = ServiceBuilder::new().layer(layer).service_fn({
        let gate = gate.clone();
        move |_: Request<()>| {
            let gate = gate.clone();
            async move {
                gate.acquire().await.unwrap().forget();
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("ok"))))
            }
        }
    });
    let mut limits = Vec::new();
    for &ms in latencies {
        let n = limit();
        let calls: Vec<_> = (0..n)
            .map(|_| {
                let request = Request::builder().header("x-tenant", "slow").body(()).unwrap();
                tokio::spawn(service.clone().oneshot(request))
            })
            .collect();
        until(|| in_flight() == n).await;
        clock.advance(Duration::from_millis(ms));
        gate.add_permits(n as usize);
        for call in calls {
            assert_eq!(call.await.unwrap().unwrap().status(), StatusCode::OK);
        }
        limits.push(limit());
    }
    limits
}

#[tokio::test]
async fn latency_is_a_signal_per_key_and_globally() {
    // 30 windows at 10 ms, then 10 at 100 ms: Gradient2 holds its max, then falls.
    let latencies: Vec<u64> = [10].repeat(30).into_iter().chain([100].repeat(10)).collect();
    let clock = ManualClock::new();
    let table = Arc::new(
        KeyedAdaptiveConcurrency::<String, _>::gradient2_with_clock(1, 20, 20, clock.clone())
            .unwrap(),
    );
    let layer = ConcurrencyLimitLayer::keyed_adaptive(table.clone(), tenant());
    let slow = String::from("slow");
    let limits =
        rounds(layer, &clock, || table.limit(&slow), || table.in_flight(&slow), &latencies).await;
    assert!(limits[..30].iter().all(|&l| l == 20), "steady latency: kept at max, {limits:?}");
    assert!(limits[39] < 15, "ten times the latency: the limit falls, {limits:?}");
    assert_eq!(table.limit(&"other".into()), 20, "another key is not touched");

    // The same through the global adaptive layer.
    let clock = ManualClock::new();
    let global = Arc::new(
        leakgate::AdaptiveConcurrency::gradient2_with_clock(1, 20, 20, clock.clone()).unwrap(),
    );
    let layer = ConcurrencyLimitLayer::adaptive(global.clone());
    let limits = rounds(layer, &clock, || global.limit(), || global.in_flight(), &latencies).await;
    assert!(limits[..30].iter().all(|&l| l == 20), "{limits:?}");
    assert!(limits[39] < 15, "{limits:?}");
}
