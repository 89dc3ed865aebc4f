//! The concurrency layer on a real axum server: at most `max` requests in the handlers, the rest
//! refused at once with 503 and `Retry-After`; per key; adaptive limits fed by 5xx, errors and
//! timeouts.

mod support;

use axum::{routing::get, Router};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use leakgate::{AdaptiveConcurrency, ConcurrencyLimiter, KeyedConcurrencyLimiter, ManualClock};
use leakgate_tower::{ConcurrencyLimitLayer, HeaderKey};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use support::{client, held_route, until, Server};
use tokio::sync::Semaphore;
use tower::{ServiceBuilder, ServiceExt};

#[tokio::test]
async fn past_max_is_refused_at_once_with_503_and_retry_after() {
    let limiter = Arc::new(ConcurrencyLimiter::new(1).unwrap());
    let gate = Arc::new(Semaphore::new(0));
    let layer =
        ConcurrencyLimitLayer::global(limiter.clone()).retry_after(Duration::from_millis(1500));
    let server = Server::start(held_route(gate.clone()).layer(layer)).await;
    let url = server.url("/");
    let first = tokio::spawn({
        let url = url.clone();
        async move { client().get(&url).await }
    });
    until(|| limiter.in_flight() == 1).await;
    let refused = client().get(&url).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.header("retry-after"), "2", "whole seconds, rounded up");
    gate.add_permits(1);
    assert_eq!(first.await.unwrap().status, StatusCode::OK);
    assert_eq!(limiter.in_flight(), 0, "the permit went back with the response");
    gate.add_permits(1);
    assert_eq!(client().get(&url).await.status, StatusCode::OK);
}

#[tokio::test]
async fn per_key_limits_do_not_touch_other_keys() {
    let limiter = Arc::new(KeyedConcurrencyLimiter::<String>::new(1).unwrap());
    let gate = Arc::new(Semaphore::new(0));
    let key = HeaderKey::new(http::HeaderName::from_static("x-api-key"));
    let layer = ConcurrencyLimitLayer::keyed(limiter.clone(), key)
        .refusal_status(StatusCode::TOO_MANY_REQUESTS);
    let server = Server::start(held_route(gate.clone()).layer(layer)).await;
    let url = server.url("/");
    let first = tokio::spawn({
        let url = url.clone();
        async move { client().get_with(&url, &[("x-api-key", b"a")]).await }
    });
    until(|| limiter.len() == 1).await;
    let again = client().get_with(&url, &[("x-api-key", b"a")]).await;
    assert_eq!(again.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(again.header("retry-after"), "1");
    assert_eq!(client().get(&url).await.status, StatusCode::BAD_REQUEST, "no key");
    // One pass for "a", one for "b", whichever handler takes which.
    gate.add_permits(2);
    assert_eq!(client().get_with(&url, &[("x-api-key", b"b")]).await.status, StatusCode::OK);
    assert_eq!(first.await.unwrap().status, StatusCode::OK);
    assert!(limiter.is_empty(), "keys with nothing in flight are not kept");
}

#[tokio::test]
async fn an_adaptive_limit_backs_off_on_5xx_and_grows_on_success() {
    let app = |adaptive: Arc<AdaptiveConcurrency>| {
        Router::new()
            .route("/ok", get(|| async { "ok" }))
            .route("/fail", get(|| async { (StatusCode::BAD_GATEWAY, "upstream down") }))
            .route("/busy", get(|| async { (StatusCode::TOO_MANY_REQUESTS, "slow down") }))
            .route("/missing", get(|| async { (StatusCode::NOT_FOUND, "no") }))
            .layer(ConcurrencyLimitLayer::adaptive(adaptive))
    };
    let growing = Arc::new(AdaptiveConcurrency::aimd(1, 1, 10).unwrap());
    let server = Server::start(app(growing.clone())).await;
    assert_eq!(client().get(&server.url("/ok")).await.status, StatusCode::OK);
    assert_eq!(growing.limit(), 2, "a full window that succeeded: one more");
    drop(server);

    let full = Arc::new(AdaptiveConcurrency::aimd(1, 10, 10).unwrap());
    let server = Server::start(app(full.clone())).await;
    assert_eq!(client().get(&server.url("/missing")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(full.limit(), 10, "a 4xx is the client's fault, not overload");
    assert_eq!(client().get(&server.url("/fail")).await.status, StatusCode::BAD_GATEWAY);
    assert_eq!(full.limit(), 9, "a 5xx backs off by 10%");
    assert_eq!(client().get(&server.url("/busy")).await.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(full.limit(), 8, "so does a 429 (9 * 0.9, rounded down)");
    assert_eq!(full.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_timeout_answers_with_the_refusal_and_counts_as_overload() {
    let clock = ManualClock::new();
    let adaptive = Arc::new(AdaptiveConcurrency::aimd_with_clock(1, 10, 10, clock).unwrap());
    let layer = ConcurrencyLimitLayer::adaptive(adaptive.clone()).timeout(Duration::from_secs(2));
    let service = ServiceBuilder::new().layer(layer).service_fn(|_: Request<()>| async {
        std::future::pending::<()>().await;
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("never"))))
    });
    let response = service.oneshot(Request::new(())).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["retry-after"], "1");
    assert_eq!((adaptive.limit(), adaptive.in_flight()), (9, 0));
}

#[tokio::test]
async fn a_dropped_request_gives_its_permit_back() {
    let limiter = Arc::new(ConcurrencyLimiter::new(1).unwrap());
    let service = ServiceBuilder::new()
        .layer(ConcurrencyLimitLayer::global(limiter.clone()))
        .service_fn(|_: Request<()>| async {
            std::future::pending::<()>().await;
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
        });
    let call = service.clone().oneshot(Request::new(()));
    let timed_out = tokio::time::timeout(Duration::from_millis(5), call).await;
    assert!(timed_out.is_err());
    assert_eq!(limiter.in_flight(), 0);
}
