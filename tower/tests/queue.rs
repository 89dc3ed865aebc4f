//! Queue mode through a real server: requests wait for their reserved times on a `ManualClock`,
//! those that would wait past `max_wait` are refused at once, and a client that hangs up gives
//! its place back. tokio's clock is paused, so the layer's timer waits cost no real time; the
//! limiter's `ManualClock` alone decides when a request may go.

mod support;

use leakgate::{Limiter, ManualClock, Quota};
use leakgate_tower::RateLimitLayer;
use std::sync::Arc;
use std::time::Duration;
use support::{client, counting_router, Calls, Server};
use tokio::io::AsyncWriteExt;

fn one_per_second(clock: &ManualClock) -> Arc<Limiter<ManualClock>> {
    Arc::new(Limiter::with_clock("1/s burst 1".parse::<Quota>().unwrap(), clock.clone()))
}

/// Waits (in paused tokio time) until the bucket's backlog is `want`: the sign that the server
/// has taken or given back a place.
async fn backlog_becomes(lim: &Limiter<ManualClock>, want: Duration) {
    for _ in 0..10_000 {
        if lim.check_n(0).unwrap().reset_after() == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("the backlog stayed at {:?}, not {want:?}", lim.check_n(0).unwrap().reset_after());
}

/// Lets the server run for a while of paused tokio time.
async fn let_time_pass() {
    tokio::time::sleep(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn queued_requests_go_at_their_reserved_times() {
    let clock = ManualClock::new();
    let lim = one_per_second(&clock);
    let calls = Calls::default();
    let layer = RateLimitLayer::global_queue(lim.clone(), Duration::from_millis(2500));
    let server = Server::start(counting_router(&["/"], &calls).layer(layer.clone())).await;
    let url = server.url("/");

    let first = client().get(&url).await;
    assert_eq!((first.status.as_u16(), first.header("ratelimit")), (200, r#""default";r=0;t=1"#));

    // Two more are queued, due at 1 s and 2 s.
    let second = tokio::spawn({
        let url = url.clone();
        async move { client().get(&url).await }
    });
    backlog_becomes(&lim, Duration::from_secs(2)).await;
    let third = tokio::spawn({
        let url = url.clone();
        async move { client().get(&url).await }
    });
    backlog_becomes(&lim, Duration::from_secs(3)).await;

    // A fourth would wait 3 s, past max_wait: refused at once, and nothing taken.
    let fourth = client().get(&url).await;
    assert_eq!(fourth.status, 429);
    assert_eq!(fourth.header("retry-after"), "1", "3 s of wait less 2.5 s allowed, rounded up");
    // The bucket is held 3 s by the queue, past the policy's window: t says w (1), never more.
    assert_eq!(fourth.header("ratelimit"), r#""default";r=0;t=1"#);
    assert_eq!(lim.check_n(0).unwrap().reset_after(), Duration::from_secs(3));

    // However long tokio's clock runs, nothing goes before the limiter's clock says so.
    let_time_pass().await;
    clock.set(Duration::from_nanos(999_999_999));
    let_time_pass().await;
    assert!(!second.is_finished() && !third.is_finished());
    assert_eq!(calls.count(), 1);

    clock.set(Duration::from_secs(1));
    let second = second.await.unwrap();
    assert_eq!(second.status, 200);
    assert_eq!(
        second.header("ratelimit"),
        r#""default";r=0;t=1"#,
        "the third still waits behind it (2 s of backlog), and t <= w"
    );
    let_time_pass().await;
    assert!(!third.is_finished(), "due at 2 s");

    clock.set(Duration::from_secs(2));
    let third = third.await.unwrap();
    assert_eq!((third.status.as_u16(), third.header("ratelimit")), (200, r#""default";r=0;t=1"#));
    assert_eq!(calls.count(), 3);
    let counts = layer.counts();
    assert_eq!((counts.admitted, counts.refused, counts.queued), (3, 1, 2));
}

#[tokio::test(start_paused = true)]
async fn a_client_that_hangs_up_gives_its_place_back() {
    let clock = ManualClock::new();
    let lim = one_per_second(&clock);
    let calls = Calls::default();
    let layer = RateLimitLayer::global_queue(lim.clone(), Duration::from_secs(10));
    let server = Server::start(counting_router(&["/"], &calls).layer(layer.clone())).await;
    let url = server.url("/");
    assert_eq!(client().get(&url).await.status, 200);

    // A raw connection sends a request, is queued (due at 1 s), and closes.
    let mut raw = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\nhost: test\r\n\r\n").await.unwrap();
    backlog_becomes(&lim, Duration::from_secs(2)).await;
    drop(raw);
    backlog_becomes(&lim, Duration::from_secs(1)).await;

    // The next request takes the freed place: due at 1 s, not 2 s.
    let next = tokio::spawn({
        let url = url.clone();
        async move { client().get(&url).await }
    });
    backlog_becomes(&lim, Duration::from_secs(2)).await;
    clock.set(Duration::from_secs(1));
    assert_eq!(next.await.unwrap().status, 200);
    assert_eq!(calls.count(), 2, "the abandoned request never reached the handler");
    assert_eq!(layer.counts().admitted, 2);
}

#[tokio::test(start_paused = true)]
async fn a_request_that_conforms_is_not_queued() {
    let clock = ManualClock::new();
    let lim = Arc::new(Limiter::with_clock("2/s".parse::<Quota>().unwrap(), clock.clone()));
    let layer = RateLimitLayer::global_queue(lim, Duration::ZERO);
    let server =
        Server::start(counting_router(&["/"], &Calls::default()).layer(layer.clone())).await;
    let http = client();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(http.get(&server.url("/")).await.status.as_u16());
    }
    assert_eq!(seen, [200, 200, 429], "max_wait 0 is a meter");
    let counts = layer.counts();
    assert_eq!((counts.admitted, counts.refused, counts.queued), (2, 1, 0));
}

/// The value of parameter `name` in a one-item field such as `"default";r=0;t=1`.
fn param(field: &str, name: &str) -> u64 {
    let prefix = format!("{name}=");
    field.split(';').find_map(|p| p.trim().strip_prefix(prefix.as_str())).unwrap().parse().unwrap()
}

/// Regression (reproducer `adv_tower_queue_t_over_w.rs`): a queue-mode 429 reported `t` larger
/// than the policy's `w` (`"default";r=0;t=11` under `q=1;w=1`), and so could the responses of
/// queued requests: the module docs promise `t <= w` on every response.
#[tokio::test(start_paused = true)]
async fn queue_mode_t_never_exceeds_w() {
    use http::{Request, Response};
    use tower::{Layer, ServiceExt};
    // 1/s burst 1: the policy is q=1;w=1. Requests may queue for up to 10 s.
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(Quota::per_second(1).unwrap(), clock.clone());
    let layer = RateLimitLayer::global_queue(limiter, Duration::from_secs(10));
    let svc = layer.layer(tower::service_fn(|_r: Request<String>| async {
        Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    }));
    // Queue 10 requests (they wait on tokio's paused timer), then one more is refused.
    let mut waiting = Vec::new();
    for _ in 0..11 {
        let s = svc.clone();
        waiting.push(tokio::spawn(async move { s.oneshot(Request::new(String::new())).await }));
    }
    tokio::task::yield_now().await;
    let refused = svc.clone().oneshot(Request::new(String::new())).await.unwrap();
    let policy = refused.headers()["ratelimit-policy"].to_str().unwrap().to_owned();
    let limit = refused.headers()["ratelimit"].to_str().unwrap().to_owned();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1", "the real wait is Retry-After's");
    assert!(param(&limit, "t") <= param(&policy, "w"), "t > w: {limit} vs {policy}");
    // The queued ones too, released one a second with 9 s, 8 s, ... still queued behind them.
    for (i, waiter) in waiting.into_iter().enumerate() {
        clock.set(Duration::from_secs(i as u64));
        let response = waiter.await.unwrap().unwrap();
        assert_eq!(response.status(), 200, "request {i}");
        let limit = response.headers()["ratelimit"].to_str().unwrap();
        assert!(param(limit, "t") <= param(&policy, "w"), "request {i}: {limit} vs {policy}");
    }
}

/// A queue's refusal (a request that would wait past `max_wait`) goes through the refusal
/// handler too, with the request and the real wait.
#[tokio::test(start_paused = true)]
async fn a_queue_refusal_goes_through_the_refusal_handler() {
    let clock = ManualClock::new();
    let lim = one_per_second(&clock);
    let layer = RateLimitLayer::global_queue(lim.clone(), Duration::from_millis(500)).on_refusal(
        |refusal| {
            let text =
                format!("{} waits {:?}", refusal.request().uri.path(), refusal.retry_after());
            let mut response = http::Response::new(bytes::Bytes::from(text));
            *response.status_mut() = http::StatusCode::TOO_MANY_REQUESTS;
            response
        },
    );
    let server =
        Server::start(counting_router(&["/"], &Calls::default()).layer(layer.clone())).await;
    let url = server.url("/");
    assert_eq!(client().get(&url).await.status, 200);
    // The next would wait 1 s, past 500 ms: refused, shaped.
    let refused = client().get(&url).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.text(), "/ waits Some(500ms)");
    assert_eq!(refused.header("retry-after"), "1");
    assert_eq!(refused.header("ratelimit"), r#""default";r=0;t=1"#);
    assert_eq!(layer.counts().refused, 1);
}
