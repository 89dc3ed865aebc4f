//! Meter mode through a real axum server and a real hyper client, with a `ManualClock`: exact
//! sequences of 200 and 429, byte-exact header values, one limiter shared by every route.

mod support;

use http::StatusCode;
use leakgate::{KeyedLimiter, Limiter, ManualClock, Quota};
use leakgate_tower::{RateLimitHeaders, RateLimitLayer};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use support::{client, client_from, counting_router, parse_list, Calls, Server};

fn quota(s: &str) -> Quota {
    s.parse().unwrap()
}

#[tokio::test]
async fn a_global_quota_gives_the_exact_sequence_and_fields() {
    let clock = ManualClock::new();
    let calls = Calls::default();
    let lim = Limiter::with_clock(quota("2/s"), clock.clone());
    let app = counting_router(&["/"], &calls).layer(RateLimitLayer::global(lim));
    let server = Server::start(app).await;
    let http = client();
    let url = server.url("/");

    // (advance before the request in ms, status, RateLimit, Retry-After)
    let script: [(u64, u16, &str, Option<&str>); 8] = [
        (0, 200, r#""default";r=1;t=1"#, None),
        (0, 200, r#""default";r=0;t=1"#, None),
        (0, 429, r#""default";r=0;t=1"#, Some("1")),
        (499, 429, r#""default";r=0;t=1"#, Some("1")),
        (1, 200, r#""default";r=0;t=1"#, None),
        (1250, 200, r#""default";r=1;t=1"#, None),
        (3000, 200, r#""default";r=1;t=1"#, None),
        (0, 200, r#""default";r=0;t=1"#, None),
    ];
    for (i, (advance, status, limit, retry)) in script.into_iter().enumerate() {
        clock.advance(Duration::from_millis(advance));
        let reply = http.get(&url).await;
        assert_eq!(reply.status.as_u16(), status, "step {i}");
        assert_eq!(reply.header("ratelimit-policy"), r#""default";q=2;w=1"#, "step {i}");
        assert_eq!(reply.header("ratelimit"), limit, "step {i}");
        assert_eq!(
            reply.headers.get("retry-after").map(|v| v.to_str().unwrap()),
            retry,
            "step {i}"
        );
        if status == 429 {
            assert!(reply.body.is_empty(), "step {i}");
        } else {
            assert_eq!(reply.text(), "ok");
        }
    }
    assert_eq!(calls.count(), 6, "a refused request never reaches the handler");
}

/// Every response agrees with a twin limiter in lockstep: status, `r`, `t` and `Retry-After`,
/// over an irregular schedule on a quota whose emission interval is not whole milliseconds.
#[tokio::test]
async fn every_response_matches_the_limiter_model() {
    let q = quota("7/s burst 3");
    let clock = ManualClock::new();
    let twin_clock = ManualClock::new();
    let twin = Limiter::with_clock(q, twin_clock.clone());
    let calls = Calls::default();
    let app = counting_router(&["/"], &calls)
        .layer(RateLimitLayer::global(Limiter::with_clock(q, clock.clone())));
    let server = Server::start(app).await;
    let http = client();
    let url = server.url("/");
    let mut step_ns: u64 = 1;
    let mut admitted = 0;
    for i in 0..200 {
        // A deterministic, irregular schedule: steps from 0 to ~400 ms.
        step_ns = step_ns.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let advance = Duration::from_nanos((step_ns >> 24) % 400_000_000);
        clock.advance(advance);
        twin_clock.advance(advance);
        let reply = http.get(&url).await;
        let (status, remaining, reset, retry) = match twin.check() {
            Ok(ok) => (200, ok.remaining(), ok.reset_after(), None),
            Err(no) => (429, no.remaining(), no.reset_after(), no.retry_after()),
        };
        let secs_up = |d: Duration| d.as_secs() + u64::from(d.subsec_nanos() > 0);
        assert_eq!(reply.status.as_u16(), status, "request {i}");
        let want = format!(r#""default";r={remaining};t={}"#, secs_up(reset));
        assert_eq!(reply.header("ratelimit"), want, "request {i}");
        let want_retry = retry.map(|d| secs_up(d).to_string());
        let got_retry = reply.headers.get("retry-after").map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(got_retry, want_retry, "request {i}");
        admitted += usize::from(status == 200);
    }
    assert_eq!(calls.count(), admitted);
    assert!(admitted > 20 && admitted < 200, "the schedule exercises both answers: {admitted}");
}

#[tokio::test]
async fn every_route_and_clone_shares_one_limiter() {
    let clock = ManualClock::new();
    let calls = Calls::default();
    let lim = Arc::new(Limiter::with_clock(quota("3/min"), clock.clone()));
    let app =
        counting_router(&["/a", "/b", "/c"], &calls).layer(RateLimitLayer::global(lim.clone()));
    let server = Server::start(app).await;
    // Two clients, so two connections: axum clones the router per connection and the route
    // services per request.
    let (one, two) = (client(), client_from("127.0.0.2"));
    let statuses = [
        one.get(&server.url("/a")).await.status,
        two.get(&server.url("/b")).await.status,
        one.get(&server.url("/c")).await.status,
        two.get(&server.url("/a")).await.status,
        one.get(&server.url("/b")).await.status,
    ];
    assert_eq!(statuses, [200, 200, 200, 429, 429].map(|s| StatusCode::from_u16(s).unwrap()));
    assert_eq!(calls.count(), 3);
    // The caller's Arc sees the same bucket.
    assert!(lim.check().is_err());
    clock.advance(Duration::from_secs(20));
    let reply = two.get(&server.url("/c")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("ratelimit-policy"), r#""default";q=3;w=60"#);
    assert_eq!(reply.header("ratelimit"), r#""default";r=0;t=60"#);
}

#[tokio::test]
async fn each_peer_address_has_its_own_bucket() {
    let clock = ManualClock::new();
    let calls = Calls::default();
    let keyed = KeyedLimiter::<IpAddr, _>::with_clock(quota("1/s burst 2"), clock.clone());
    let app = counting_router(&["/"], &calls).layer(RateLimitLayer::per_ip(keyed));
    let server = Server::start(app).await;
    let url = server.url("/");
    let (a, b) = (client_from("127.0.0.1"), client_from("127.0.0.2"));
    let mut seen = Vec::new();
    for http in [&a, &a, &a, &b, &b, &b, &a] {
        seen.push(http.get(&url).await.status.as_u16());
    }
    assert_eq!(seen, [200, 200, 429, 200, 200, 429, 429]);
    clock.advance(Duration::from_secs(1));
    let reply = a.get(&url).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("ratelimit-policy"), r#""default";q=2;w=2"#);
    assert_eq!(reply.header("ratelimit"), r#""default";r=0;t=2"#);
    assert_eq!(calls.count(), 5);
}

#[tokio::test]
async fn a_problem_body_names_the_policy() {
    let lim = Limiter::with_clock(quota("1/h"), ManualClock::new());
    let layer = RateLimitLayer::global(lim).policy_name("hourly").unwrap().problem_details(true);
    let server = Server::start(counting_router(&["/"], &Calls::default()).layer(layer)).await;
    let http = client();
    assert_eq!(http.get(&server.url("/")).await.status, 200);
    let reply = http.get(&server.url("/")).await;
    assert_eq!(reply.status, 429);
    assert_eq!(reply.header("content-type"), "application/problem+json");
    assert_eq!(reply.header("retry-after"), "3600");
    assert_eq!(reply.header("ratelimit-policy"), r#""hourly";q=1;w=3600"#);
    assert_eq!(reply.header("ratelimit"), r#""hourly";r=0;t=3600"#);
    let problem: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(problem["type"], "https://iana.org/assignments/http-problem-types#quota-exceeded");
    assert_eq!(problem["status"], 429);
    assert_eq!(problem["violated-policies"], serde_json::json!(["hourly"]));
    assert_eq!(problem["detail"], "retry in 3600 s");
}

#[tokio::test]
async fn headers_can_be_limited_to_refusals_or_turned_off() {
    for (mode, on_200, on_429) in [
        (RateLimitHeaders::Always, true, true),
        (RateLimitHeaders::OnRefusal, false, true),
        (RateLimitHeaders::Never, false, false),
    ] {
        let lim = Limiter::with_clock(quota("1/s"), ManualClock::new());
        let layer = RateLimitLayer::global(lim).headers(mode);
        let server = Server::start(counting_router(&["/"], &Calls::default()).layer(layer)).await;
        let http = client();
        let ok = http.get(&server.url("/")).await;
        let no = http.get(&server.url("/")).await;
        assert_eq!((ok.status.as_u16(), no.status.as_u16()), (200, 429));
        assert_eq!(ok.headers.contains_key("ratelimit"), on_200, "{mode:?}");
        assert_eq!(ok.headers.contains_key("ratelimit-policy"), on_200, "{mode:?}");
        assert_eq!(no.headers.contains_key("ratelimit"), on_429, "{mode:?}");
        assert_eq!(no.header("retry-after"), "1", "{mode:?}: Retry-After is always sent");
    }
}

/// Two layers on one route: each adds its own item, and the fields parse as one list each.
#[tokio::test]
async fn nested_layers_add_one_item_each() {
    let clock = ManualClock::new();
    let per_ip = KeyedLimiter::<IpAddr, _>::with_clock(quota("10/s"), clock.clone());
    let global = Limiter::with_clock(quota("100/min"), clock.clone());
    let app = counting_router(&["/"], &Calls::default())
        .layer(RateLimitLayer::per_ip(per_ip).policy_name("per-ip").unwrap())
        .layer(RateLimitLayer::global(global).policy_name("global").unwrap());
    let server = Server::start(app).await;
    let reply = client().get(&server.url("/")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.all("ratelimit-policy"), [r#""per-ip";q=10;w=1"#, r#""global";q=100;w=60"#]);
    assert_eq!(reply.all("ratelimit"), [r#""per-ip";r=9;t=1"#, r#""global";r=99;t=1"#]);
    let joined = reply.all("ratelimit").join(", ");
    let parsed = parse_list(&joined);
    assert_eq!(parsed[0], ("per-ip".to_owned(), vec![("r".to_owned(), 9), ("t".to_owned(), 1)]));
    assert_eq!(parsed[1], ("global".to_owned(), vec![("r".to_owned(), 99), ("t".to_owned(), 1)]));
}

/// The fields are valid Structured Field lists for awkward quotas too.
#[tokio::test]
async fn fields_parse_as_structured_field_lists() {
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(quota("100/s burst 20"), clock.clone());
    let layer = RateLimitLayer::global(lim).policy_name(r#"burst "b" \ 20"#).unwrap();
    let server = Server::start(counting_router(&["/"], &Calls::default()).layer(layer)).await;
    let reply = client().get(&server.url("/")).await;
    let policy = parse_list(reply.header("ratelimit-policy"));
    assert_eq!(
        policy,
        [(r#"burst "b" \ 20"#.to_owned(), vec![("q".into(), 100), ("w".into(), 1)])]
    );
    let limit = parse_list(reply.header("ratelimit"));
    assert_eq!(limit, [(r#"burst "b" \ 20"#.to_owned(), vec![("r".into(), 19), ("t".into(), 1)])]);
}

/// A handler shapes the 429: its status, body and headers go out as it made them, the layer
/// adding `Retry-After` and the `RateLimit` fields only where the handler did not set them.
#[tokio::test]
async fn a_refusal_handler_shapes_the_429() {
    let clock = ManualClock::new();
    let calls = Calls::default();
    let lim = Limiter::with_clock(quota("1/s"), clock.clone());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let layer = RateLimitLayer::global(lim).problem_details(true).on_refusal({
        let seen = seen.clone();
        move |refusal| {
            seen.lock().unwrap().push((
                refusal.request().uri.path().to_owned(),
                refusal.remaining(),
                refusal.retry_after(),
                refusal.policies().map(str::to_owned).collect::<Vec<_>>(),
            ));
            if refusal.request().uri.path() == "/own" {
                // Its own response, with its own Retry-After: kept.
                let mut own = http::Response::new(bytes::Bytes::from_static(b"busy, come back"));
                *own.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                own.headers_mut().insert("retry-after", http::HeaderValue::from_static("30"));
                return own;
            }
            // The layer's response, with a header added.
            let default = refusal.into_response();
            assert_eq!(default.status(), 429);
            assert_eq!(default.headers()["content-type"], "application/problem+json");
            let mut response = default;
            response.headers_mut().insert("x-limited", http::HeaderValue::from_static("yes"));
            response
        }
    });
    let app = counting_router(&["/", "/own"], &calls).layer(layer);
    let server = Server::start(app).await;
    let http = client();
    assert_eq!(http.get(&server.url("/")).await.status, 200);

    let reply = http.get(&server.url("/")).await;
    assert_eq!(reply.status, 429);
    assert_eq!(reply.header("x-limited"), "yes");
    assert_eq!(reply.header("retry-after"), "1");
    assert_eq!(reply.header("ratelimit"), r#""default";r=0;t=1"#);
    assert!(reply.text().contains("quota-exceeded"), "{}", reply.text());

    let reply = http.get(&server.url("/own")).await;
    assert_eq!((reply.status.as_u16(), reply.text()), (503, "busy, come back"));
    assert_eq!(reply.header("retry-after"), "30", "the handler's own");
    assert_eq!(reply.header("ratelimit-policy"), r#""default";q=1;w=1"#, "added");
    assert_eq!(reply.header("ratelimit"), r#""default";r=0;t=1"#, "added");
    assert_eq!(calls.count(), 1, "refused requests never reach the handler");

    let seen = seen.lock().unwrap();
    let wait = Some(Duration::from_secs(1));
    let default = vec!["default".to_owned()];
    assert_eq!(*seen, [("/".into(), 0, wait, default.clone()), ("/own".into(), 0, wait, default)]);
}
