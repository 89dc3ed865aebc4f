//! Queue mode per key through a real server: each client IP's requests wait for their reserved
//! times on a `ManualClock`, in their arrival order, whatever other keys do; those that would wait
//! past `max_wait` are refused at once; a client that hangs up gives its key's place back; and
//! `max_wait` zero answers exactly as the meter does. tokio's clock is paused, so the layer's
//! timer waits cost no real time; the limiter's `ManualClock` alone decides when a request may go.

mod support;

use http::HeaderName;
use leakgate::{KeyedLimiter, ManualClock, Quota};
use leakgate_tower::{HeaderKey, OnKeyError, RateLimitLayer};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use support::{client, client_from, counting_router, Calls, Reply, Server};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

type PerIp = Arc<KeyedLimiter<IpAddr, ManualClock>>;

const A: &str = "127.0.0.1";
const B: &str = "127.0.0.2";

fn ip(source: &str) -> IpAddr {
    source.parse().unwrap()
}

fn per_ip(quota: &str, clock: &ManualClock) -> PerIp {
    Arc::new(KeyedLimiter::with_clock(quota.parse::<Quota>().unwrap(), clock.clone()))
}

/// Waits (in paused tokio time) until `key`'s backlog is `want`: the sign that the server has
/// taken or given back a place of that key.
async fn backlog_becomes(keyed: &PerIp, key: IpAddr, want: Duration) {
    for _ in 0..10_000 {
        if keyed.check_n(&key, 0).unwrap().reset_after() == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let now = keyed.check_n(&key, 0).unwrap().reset_after();
    panic!("{key}'s backlog stayed at {now:?}, not {want:?}");
}

/// Lets the server run for a while of paused tokio time.
async fn let_time_pass() {
    tokio::time::sleep(Duration::from_secs(5)).await;
}

/// A GET from `source` on its own connection, in a task.
fn spawn_get(source: &'static str, url: &str) -> JoinHandle<Reply> {
    let url = url.to_owned();
    tokio::spawn(async move { client_from(source).get(&url).await })
}

/// Awaits a reply that must come without the limiter's clock moving further: a request wrongly
/// held would wait for it forever (tokio's paused clock spinning on), and fails here instead once
/// that clock has run an hour.
async fn answered(reply: impl Future<Output = Reply>) -> Reply {
    tokio::time::timeout(Duration::from_secs(3600), reply).await.expect("held, not answered")
}

/// A GET from `source`, answered without the limiter's clock moving.
async fn get_now(source: &str, url: &str) -> Reply {
    let http = client_from(source);
    answered(http.get(url)).await
}

/// The reply of a spawned GET, which must come without the limiter's clock moving further.
async fn released(get: JoinHandle<Reply>) -> Reply {
    answered(async { get.await.unwrap() }).await
}

/// A raw HTTP/1.1 GET from `source`, its connection left open until the stream is dropped.
async fn raw_get_from(source: &str, server: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(ip(source), 0)).unwrap();
    let mut stream = socket.connect(server).await.unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\nhost: test\r\n\r\n").await.unwrap();
    stream
}

fn status_and_field(reply: &Reply) -> (u16, &str) {
    (reply.status.as_u16(), reply.header("ratelimit"))
}

#[tokio::test(start_paused = true)]
async fn each_key_is_released_in_its_order_at_its_reserved_times() {
    let clock = ManualClock::new();
    let keyed = per_ip("1/s burst 1", &clock);
    let calls = Calls::default();
    let layer = RateLimitLayer::per_ip_queue(keyed.clone(), Duration::from_millis(2500));
    let server = Server::start(counting_router(&["/"], &calls).layer(layer.clone())).await;
    let url = server.url("/");

    let a1 = get_now(A, &url).await;
    assert_eq!(status_and_field(&a1), (200, r#""default";r=0;t=1"#));
    // A's next two are queued, due at 1 s and 2 s.
    let a2 = spawn_get(A, &url);
    backlog_becomes(&keyed, ip(A), Duration::from_secs(2)).await;
    let a3 = spawn_get(A, &url);
    backlog_becomes(&keyed, ip(A), Duration::from_secs(3)).await;
    // B has its own bucket: its first goes at once, its second is due at 1 s, not after A's.
    let b1 = get_now(B, &url).await;
    assert_eq!(status_and_field(&b1), (200, r#""default";r=0;t=1"#));
    let b2 = spawn_get(B, &url);
    backlog_becomes(&keyed, ip(B), Duration::from_secs(2)).await;

    // However long tokio's clock runs, nothing goes before the limiter's clock says so.
    let_time_pass().await;
    clock.set(Duration::from_nanos(999_999_999));
    let_time_pass().await;
    assert!(!a2.is_finished() && !a3.is_finished() && !b2.is_finished());
    assert_eq!(calls.count(), 2);

    clock.set(Duration::from_secs(1));
    let (a2, b2) = (released(a2).await, released(b2).await);
    // A's third waits behind it: 2 s of backlog, past w = 1, so t says w.
    assert_eq!(status_and_field(&a2), (200, r#""default";r=0;t=1"#), "t <= w");
    assert_eq!(status_and_field(&b2), (200, r#""default";r=0;t=1"#));
    let_time_pass().await;
    assert!(!a3.is_finished(), "due at 2 s");
    assert_eq!(calls.count(), 4);

    clock.set(Duration::from_secs(2));
    assert_eq!(status_and_field(&released(a3).await), (200, r#""default";r=0;t=1"#));
    assert_eq!(calls.count(), 5);
    let counts = layer.counts();
    assert_eq!((counts.admitted, counts.refused, counts.queued), (5, 0, 3));
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_refuses_only_its_own_key() {
    let clock = ManualClock::new();
    let keyed = per_ip("1/s burst 2", &clock);
    let calls = Calls::default();
    let layer = RateLimitLayer::per_ip_queue(keyed.clone(), Duration::from_secs(1));
    let server = Server::start(counting_router(&["/"], &calls).layer(layer.clone())).await;
    let url = server.url("/");

    // A: two at once, one queued (due at 1 s, a wait of exactly max_wait), then refusals.
    assert_eq!(get_now(A, &url).await.status, 200);
    assert_eq!(get_now(A, &url).await.status, 200);
    let a3 = spawn_get(A, &url);
    backlog_becomes(&keyed, ip(A), Duration::from_secs(3)).await;
    let a4 = get_now(A, &url).await;
    assert_eq!(a4.status, 429);
    assert_eq!(a4.header("retry-after"), "1");

    // B is untouched by A's queue: its burst goes at once, unqueued, with B's own figures.
    let b1 = get_now(B, &url).await;
    assert_eq!(status_and_field(&b1), (200, r#""default";r=1;t=1"#));
    let b2 = get_now(B, &url).await;
    assert_eq!(status_and_field(&b2), (200, r#""default";r=0;t=2"#));
    assert_eq!(keyed.check_n(&ip(A), 0).unwrap().reset_after(), Duration::from_secs(3));

    clock.set(Duration::from_secs(1));
    assert_eq!(status_and_field(&released(a3).await), (200, r#""default";r=0;t=2"#));
    let counts = layer.counts();
    assert_eq!(
        (counts.admitted, counts.refused, counts.queued),
        (5, 1, 1),
        "only A's third waited"
    );
    assert_eq!(calls.count(), 5);
}

#[tokio::test(start_paused = true)]
async fn a_request_past_max_wait_is_refused_at_once_and_takes_nothing() {
    let clock = ManualClock::new();
    // One every 500 ms; a request may wait at most 1.2 s, so two queue behind a full bucket.
    let keyed = per_ip("2/s burst 1", &clock);
    let calls = Calls::default();
    let layer = RateLimitLayer::per_ip_queue(keyed.clone(), Duration::from_millis(1200))
        .problem_details(true);
    let server = Server::start(counting_router(&["/"], &calls).layer(layer.clone())).await;
    let url = server.url("/");

    assert_eq!(get_now(A, &url).await.status, 200);
    let queued = [spawn_get(A, &url), spawn_get(A, &url)];
    backlog_becomes(&keyed, ip(A), Duration::from_millis(1500)).await;

    // The next would wait 1.5 s: 300 ms too long. Refused, and the bucket is as it was.
    let refused = get_now(A, &url).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("retry-after"), "1", "300 ms, rounded up");
    // 1.5 s of backlog, past the policy's w = 1: t says w.
    assert_eq!(refused.header("ratelimit"), r#""default";r=0;t=1"#, "t <= w");
    assert_eq!(refused.header("ratelimit-policy"), r#""default";q=2;w=1"#);
    assert_eq!(refused.header("content-type"), "application/problem+json");
    assert_eq!(keyed.check_n(&ip(A), 0).unwrap().reset_after(), Duration::from_millis(1500));

    // 1 ms before it fits, still refused; at 300 ms it fits exactly and is queued (due 1.5 s).
    clock.set(Duration::from_millis(299));
    assert_eq!(get_now(A, &url).await.status, 429);
    clock.set(Duration::from_millis(300));
    let fits = spawn_get(A, &url);
    backlog_becomes(&keyed, ip(A), Duration::from_millis(1700)).await;

    clock.set(Duration::from_millis(1500));
    for waiting in queued {
        assert_eq!(released(waiting).await.status, 200);
    }
    assert_eq!(status_and_field(&released(fits).await), (200, r#""default";r=0;t=1"#));
    let counts = layer.counts();
    assert_eq!((counts.admitted, counts.refused, counts.queued), (4, 2, 3));
    assert_eq!(calls.count(), 4);
}

#[tokio::test(start_paused = true)]
async fn a_client_that_hangs_up_gives_its_keys_place_back() {
    let clock = ManualClock::new();
    let keyed = per_ip("1/s burst 1", &clock);
    let calls = Calls::default();
    let layer = RateLimitLayer::per_ip_queue(keyed.clone(), Duration::from_secs(10));
    let server = Server::start(counting_router(&["/"], &calls).layer(layer.clone())).await;
    let url = server.url("/");
    assert_eq!(get_now(A, &url).await.status, 200);
    assert_eq!(get_now(B, &url).await.status, 200);

    // A raw connection from A is queued (due at 1 s) and closes; B's queued request stays.
    let b2 = spawn_get(B, &url);
    backlog_becomes(&keyed, ip(B), Duration::from_secs(2)).await;
    let raw = raw_get_from(A, server.addr).await;
    backlog_becomes(&keyed, ip(A), Duration::from_secs(2)).await;
    drop(raw);
    backlog_becomes(&keyed, ip(A), Duration::from_secs(1)).await;
    assert_eq!(keyed.check_n(&ip(B), 0).unwrap().reset_after(), Duration::from_secs(2));

    // A's next request takes the freed place: due at 1 s, not 2 s.
    let a2 = spawn_get(A, &url);
    backlog_becomes(&keyed, ip(A), Duration::from_secs(2)).await;
    clock.set(Duration::from_secs(1));
    assert_eq!(status_and_field(&released(a2).await), (200, r#""default";r=0;t=1"#));
    assert_eq!(released(b2).await.status, 200);
    assert_eq!(calls.count(), 4, "the abandoned request never reached the handler");
    let counts = layer.counts();
    assert_eq!((counts.admitted, counts.refused, counts.queued), (4, 0, 2));
}

#[tokio::test(start_paused = true)]
async fn a_hang_up_with_a_later_request_queued_behind_it_gives_nothing_back() {
    let clock = ManualClock::new();
    let keyed = per_ip("1/s burst 1", &clock);
    let calls = Calls::default();
    let layer = RateLimitLayer::per_ip_queue(keyed.clone(), Duration::from_secs(10));
    let server = Server::start(counting_router(&["/"], &calls).layer(layer)).await;
    let url = server.url("/");
    assert_eq!(get_now(A, &url).await.status, 200);

    let raw = raw_get_from(A, server.addr).await; // due at 1 s
    backlog_becomes(&keyed, ip(A), Duration::from_secs(2)).await;
    let behind = spawn_get(A, &url); // due at 2 s, standing on the first
    backlog_becomes(&keyed, ip(A), Duration::from_secs(3)).await;
    drop(raw);
    let_time_pass().await;
    assert_eq!(keyed.check_n(&ip(A), 0).unwrap().reset_after(), Duration::from_secs(3));

    // The later request keeps its place: not at 1 s, at 2 s.
    clock.set(Duration::from_secs(1));
    let_time_pass().await;
    assert!(!behind.is_finished());
    clock.set(Duration::from_secs(2));
    assert_eq!(released(behind).await.status, 200);
    assert_eq!(calls.count(), 2);
}

#[tokio::test(start_paused = true)]
async fn max_wait_zero_answers_exactly_as_the_meter() {
    let clock = ManualClock::new();
    let quota = "2/s burst 3";
    let meter = RateLimitLayer::per_ip(per_ip(quota, &clock));
    let queue = RateLimitLayer::per_ip_queue(per_ip(quota, &clock), Duration::ZERO);
    let meter_server = Server::start(counting_router(&["/"], &Calls::default()).layer(meter)).await;
    let queue_server =
        Server::start(counting_router(&["/"], &Calls::default()).layer(queue.clone())).await;

    // An irregular schedule over two keys, sent to both servers at each instant.
    let mut at = Duration::ZERO;
    let mut statuses = Vec::new();
    for i in 0..60 {
        at += Duration::from_millis([0, 0, 130, 0, 370, 40][i % 6]);
        clock.set(at);
        let source = [A, A, B, A, B, A, A][i % 7];
        let by_meter = get_now(source, &meter_server.url("/")).await;
        let by_queue = get_now(source, &queue_server.url("/")).await;
        assert_eq!(by_queue.status, by_meter.status, "request {i}");
        for field in ["ratelimit-policy", "ratelimit", "retry-after"] {
            assert_eq!(by_queue.all(field), by_meter.all(field), "request {i}: {field}");
        }
        statuses.push(by_meter.status.as_u16());
    }
    assert!(statuses.contains(&200) && statuses.contains(&429), "{statuses:?}");
    assert_eq!(queue.counts().queued, 0);
}

#[tokio::test(start_paused = true)]
async fn requests_without_a_key_are_refused_or_queue_in_one_shared_bucket() {
    let clock = ManualClock::new();
    let quota = "1/s burst 1".parse::<Quota>().unwrap();
    let x_api_key = || HeaderKey::new(HeaderName::from_static("x-api-key"));
    let keyed = || Arc::new(KeyedLimiter::<String, _>::with_clock(quota, clock.clone()));
    let max_wait = Duration::from_secs(5);

    // Refused with 400 (the default), nothing charged.
    let calls = Calls::default();
    let strict = RateLimitLayer::keyed_queue(keyed(), x_api_key(), max_wait);
    let server = Server::start(counting_router(&["/"], &calls).layer(strict.clone())).await;
    let reply = answered(client().get(&server.url("/"))).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.text(), "no rate-limit key: missing header x-api-key\n");
    assert!(!reply.headers.contains_key("ratelimit"), "nothing was charged");
    let counts = strict.counts();
    assert_eq!((counts.key_errors, counts.admitted, counts.queued, calls.count()), (1, 0, 0, 0));

    // Or queued together in one keyless bucket, apart from every real key.
    let calls = Calls::default();
    let shared = RateLimitLayer::keyed_queue(keyed(), x_api_key(), max_wait)
        .on_key_error(OnKeyError::Global);
    let server = Server::start(counting_router(&["/"], &calls).layer(shared.clone())).await;
    let url = server.url("/");
    assert_eq!(get_now(A, &url).await.status, 200);
    let second = tokio::spawn({
        let url = url.clone();
        async move { client().get_with(&url, &[("x-api-key", b"\xff")]).await }
    });
    let keyed_reply = answered(client().get_with(&url, &[("x-api-key", b"carol")])).await;
    assert_eq!(status_and_field(&keyed_reply), (200, r#""default";r=0;t=1"#));
    let_time_pass().await;
    assert!(!second.is_finished(), "queued behind the first keyless request");
    clock.set(Duration::from_secs(1));
    assert_eq!(status_and_field(&released(second).await), (200, r#""default";r=0;t=1"#));
    let counts = shared.counts();
    assert_eq!((counts.key_errors, counts.admitted, counts.queued), (2, 3, 1));

    // per_ip_queue with no peer address anywhere: 400.
    let no_peer = RateLimitLayer::per_ip_queue(per_ip("1/s", &clock), max_wait);
    let server = Server::start_without_connect_info(
        counting_router(&["/"], &Calls::default()).layer(no_peer),
    )
    .await;
    assert_eq!(answered(client().get(&server.url("/"))).await.status, 400);
}
