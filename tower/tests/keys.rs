//! Finding the key of a request through a real server: spoofed forwarding headers, trusted
//! proxies, header keys, templates, closures, and every way a key can be missing or malformed.

mod support;

use http::request::Parts;
use leakgate::{KeyedLimiter, ManualClock, Quota};
use leakgate_tower::{
    HeaderKey, KeyError, KeyTemplate, OnKeyError, PeerIp, ProxyHeader, RateLimitLayer,
};
use std::net::IpAddr;
use std::time::Duration;
use support::{client, client_from, counting_router, Calls, Server};

/// A keyed limiter of one request per hour per key, so every second request of a key is a 429.
fn one_per_hour<K: std::hash::Hash + Eq + Clone + Send + Sync>() -> KeyedLimiter<K, ManualClock> {
    KeyedLimiter::with_clock("1/h".parse().unwrap(), ManualClock::new())
}

fn x_api_key() -> HeaderKey {
    HeaderKey::new(http::HeaderName::from_static("x-api-key"))
}

#[tokio::test]
async fn a_spoofed_x_forwarded_for_from_an_untrusted_peer_is_ignored() {
    let keyed = std::sync::Arc::new(one_per_hour::<IpAddr>());
    // Only 127.0.0.2 is a trusted proxy.
    let peer =
        PeerIp::behind_proxies(ProxyHeader::XForwardedFor, ["127.0.0.2/32".parse().unwrap()]);
    let app = counting_router(&["/"], &Calls::default())
        .layer(RateLimitLayer::keyed(keyed.clone(), peer));
    let server = Server::start(app).await;
    let url = server.url("/");
    let untrusted = client_from("127.0.0.1");
    // Each request claims another client: all are charged to 127.0.0.1.
    let first = untrusted.get_with(&url, &[("x-forwarded-for", b"203.0.113.1")]).await;
    let second = untrusted.get_with(&url, &[("x-forwarded-for", b"203.0.113.2")]).await;
    assert_eq!((first.status.as_u16(), second.status.as_u16()), (200, 429));
    let keys: Vec<IpAddr> = keyed.snapshot().into_iter().map(|s| s.key).collect();
    assert_eq!(keys, ["127.0.0.1".parse::<IpAddr>().unwrap()]);

    // The trusted proxy's header is believed, read from the right.
    let proxy = client_from("127.0.0.2");
    let via = |chain: &'static [u8]| {
        let proxy = proxy.clone();
        let url = url.clone();
        async move { proxy.get_with(&url, &[("x-forwarded-for", chain)]).await.status.as_u16() }
    };
    assert_eq!(via(b"6.6.6.6, 198.51.100.7").await, 200);
    assert_eq!(via(b"198.51.100.7").await, 429, "same client, other spoofed prefix");
    assert_eq!(via(b"198.51.100.8, 127.0.0.2").await, 200, "trusted hops are skipped");
    let mut keys: Vec<String> = keyed.snapshot().into_iter().map(|s| s.key.to_string()).collect();
    keys.sort();
    assert_eq!(keys, ["127.0.0.1", "198.51.100.7", "198.51.100.8"]);
}

#[tokio::test]
async fn forwarded_is_read_only_when_named() {
    let keyed = std::sync::Arc::new(one_per_hour::<IpAddr>());
    let peer = PeerIp::behind_proxies(ProxyHeader::Forwarded, ["127.0.0.0/8".parse().unwrap()]);
    let app = counting_router(&["/"], &Calls::default())
        .layer(RateLimitLayer::keyed(keyed.clone(), peer));
    let server = Server::start(app).await;
    let http = client();
    let url = server.url("/");
    let reply =
        http.get_with(&url, &[("forwarded", br#"for="[2001:db8::7]:4711";proto=https"#)]).await;
    assert_eq!(reply.status, 200);
    // X-Forwarded-For is not the named header: a trusted peer without Forwarded has no key.
    let reply = http.get_with(&url, &[("x-forwarded-for", b"198.51.100.1")]).await;
    assert_eq!(reply.status, 400);
    assert!(reply.text().contains("forwarded from a trusted proxy"), "{}", reply.text());
    let keys: Vec<String> = keyed.snapshot().into_iter().map(|s| s.key.to_string()).collect();
    assert_eq!(keys, ["2001:db8::7"]);
}

#[tokio::test]
async fn a_header_key_gives_each_value_its_bucket() {
    let calls = Calls::default();
    let layer = RateLimitLayer::keyed(one_per_hour::<String>(), x_api_key());
    let server = Server::start(counting_router(&["/"], &calls).layer(layer)).await;
    let (http, url) = (client(), server.url("/"));
    let mut seen = Vec::new();
    for key in [b"alice".as_slice(), b"bob", b" alice ", b"bob"] {
        seen.push(http.get_with(&url, &[("x-api-key", key)]).await.status.as_u16());
    }
    assert_eq!(seen, [200, 200, 429, 429]);
    assert_eq!(calls.count(), 2);
}

#[tokio::test]
async fn bad_header_keys_are_refused_with_400_and_never_charged() {
    let calls = Calls::default();
    let layer = RateLimitLayer::keyed(one_per_hour::<String>(), x_api_key().max_len(16));
    let counts_layer = layer.clone();
    let server = Server::start(counting_router(&["/"], &calls).layer(layer)).await;
    let (http, url) = (client(), server.url("/"));
    type Headers<'a> = &'a [(&'a str, &'a [u8])];
    let cases: [(Headers<'_>, &str); 5] = [
        (&[], "no rate-limit key: missing header x-api-key"),
        (&[("x-api-key", b"   ")], "no rate-limit key: missing header x-api-key (it is empty)"),
        (&[("x-api-key", b"caf\xe9")], "bad rate-limit key: x-api-key is not visible ASCII"),
        (
            &[("x-api-key", b"a"), ("x-api-key", b"b")],
            "bad rate-limit key: header x-api-key appears more than once",
        ),
        (
            &[("x-api-key", b"0123456789abcdefg")],
            "bad rate-limit key: header x-api-key is longer than 16 bytes",
        ),
    ];
    for (headers, why) in cases {
        let reply = http.get_with(&url, headers).await;
        assert_eq!(reply.status, 400, "{why}");
        assert_eq!(reply.text(), format!("{why}\n"));
        assert_eq!(reply.header("content-type"), "text/plain; charset=utf-8");
        assert_eq!(reply.header("ratelimit-policy"), r#""default";q=1;w=3600"#);
        assert!(!reply.headers.contains_key("ratelimit"), "nothing was charged");
    }
    assert_eq!(calls.count(), 0);
    assert_eq!(counts_layer.counts().key_errors, 5);
    assert_eq!(http.get_with(&url, &[("x-api-key", b"ok")]).await.status, 200);
}

#[tokio::test]
async fn a_failing_extractor_can_count_as_one_global_key() {
    let calls = Calls::default();
    let layer = RateLimitLayer::keyed(one_per_hour::<String>(), x_api_key())
        .on_key_error(OnKeyError::Global)
        .problem_details(true);
    let server = Server::start(counting_router(&["/"], &calls).layer(layer.clone())).await;
    let (http, url) = (client(), server.url("/"));
    // The anonymous requests share one bucket, apart from every real key.
    assert_eq!(http.get(&url).await.status, 200);
    assert_eq!(http.get_with(&url, &[("x-api-key", b"\xff")]).await.status, 429);
    assert_eq!(http.get_with(&url, &[("x-api-key", b"carol")]).await.status, 200);
    let reply = http.get(&url).await;
    assert_eq!(reply.status, 429);
    assert_eq!(reply.header("ratelimit"), r#""default";r=0;t=3600"#);
    assert_eq!(calls.count(), 2);
    assert_eq!(layer.counts().key_errors, 3);
}

#[tokio::test]
async fn no_peer_address_is_a_400_with_a_hint_or_a_problem() {
    let keyed = one_per_hour::<IpAddr>();
    let layer = RateLimitLayer::per_ip(keyed).problem_details(true);
    let server =
        Server::start_without_connect_info(counting_router(&["/"], &Calls::default()).layer(layer))
            .await;
    let reply = client().get(&server.url("/")).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.header("content-type"), "application/problem+json");
    let problem: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(problem["status"], 400);
    assert!(problem["detail"].as_str().unwrap().contains("into_make_service_with_connect_info"));
}

#[tokio::test]
async fn a_malformed_chain_from_a_trusted_proxy_is_refused() {
    let peer =
        PeerIp::behind_proxies(ProxyHeader::XForwardedFor, ["127.0.0.1/32".parse().unwrap()]);
    let layer = RateLimitLayer::keyed(one_per_hour::<IpAddr>(), peer);
    let server = Server::start(counting_router(&["/"], &Calls::default()).layer(layer)).await;
    let (http, url) = (client(), server.url("/"));
    for chain in [b"not-an-ip".as_slice(), b"\xff\xfe", b"unknown", b"198.51.100.1:70000"] {
        let reply = http.get_with(&url, &[("x-forwarded-for", chain)]).await;
        assert_eq!(reply.status, 400, "{chain:?}");
        assert!(
            reply.text().starts_with("bad rate-limit key: x-forwarded-for"),
            "{}",
            reply.text()
        );
    }
    // Garbage to the left of the client is never read.
    let reply = http.get_with(&url, &[("x-forwarded-for", b"\xff\xfe, 198.51.100.1")]).await;
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn a_template_keys_by_route_and_client() {
    let keyed = std::sync::Arc::new(one_per_hour::<String>());
    let template = KeyTemplate::parse("api{route}/{ip}").unwrap();
    let app = counting_router(&["/users/{id}", "/orders"], &Calls::default())
        .layer(RateLimitLayer::keyed(keyed.clone(), template));
    let server = Server::start(app).await;
    let (a, b) = (client_from("127.0.0.1"), client_from("127.0.0.3"));
    let mut seen = Vec::new();
    for (http, path) in [(&a, "/users/1"), (&a, "/users/2"), (&a, "/orders"), (&b, "/users/3")] {
        seen.push(http.get(&server.url(path)).await.status.as_u16());
    }
    assert_eq!(seen, [200, 429, 200, 200], "one bucket per route and client, not per path");
    let mut keys: Vec<String> = keyed.snapshot().into_iter().map(|s| s.key).collect();
    keys.sort();
    assert_eq!(
        keys,
        ["api/orders/127.0.0.1", "api/users/{id}/127.0.0.1", "api/users/{id}/127.0.0.3"]
    );
}

#[tokio::test]
async fn a_template_passes_unmatched_routes_through_unlimited_in_meter_and_queue() {
    for queue in [false, true] {
        let keyed = std::sync::Arc::new(one_per_hour::<String>());
        let template = KeyTemplate::parse("api{route}/{ip}").unwrap();
        let layer = if queue {
            RateLimitLayer::keyed_queue(keyed.clone(), template, Duration::from_secs(1))
        } else {
            RateLimitLayer::keyed(keyed.clone(), template)
        };
        // OnKeyError::Global would charge a key error to the shared bucket: an exempt
        // request is not a key error and takes nothing.
        let layer = layer.on_key_error(OnKeyError::Global);
        let app = counting_router(&["/orders"], &Calls::default()).layer(layer.clone());
        let server = Server::start(app).await;
        let http = client();
        for _ in 0..3 {
            let reply = http.get(&server.url("/missing")).await;
            assert_eq!(reply.status, 404, "queue {queue}");
            assert!(reply.all("ratelimit").is_empty() && reply.all("ratelimit-policy").is_empty());
        }
        assert_eq!(http.get(&server.url("/orders")).await.status, 200);
        assert_eq!(http.get(&server.url("/orders")).await.status, 429);
        let counts = layer.counts();
        assert_eq!((counts.exempt, counts.key_errors, counts.admitted), (3, 0, 1), "queue {queue}");
        assert_eq!(keyed.snapshot().len(), 1, "only the matched route's bucket");
    }
}

#[tokio::test]
async fn a_closure_can_exempt_requests() {
    let keyed = std::sync::Arc::new(one_per_hour::<String>());
    let key = |req: &Parts| -> Result<String, KeyError> {
        if req.uri.path() == "/healthz" {
            return Err(KeyError::exempt("health checks"));
        }
        Ok("everyone".to_owned())
    };
    let layer = RateLimitLayer::keyed(keyed, key);
    let app = counting_router(&["/", "/healthz"], &Calls::default()).layer(layer.clone());
    let server = Server::start(app).await;
    let http = client();
    assert_eq!(http.get(&server.url("/")).await.status, 200);
    assert_eq!(http.get(&server.url("/")).await.status, 429);
    for _ in 0..3 {
        assert_eq!(http.get(&server.url("/healthz")).await.status, 200);
    }
    assert_eq!(layer.counts().exempt, 3);
}

#[tokio::test]
async fn a_closure_is_a_key_extractor() {
    let clock = ManualClock::new();
    let keyed = KeyedLimiter::<u32, _>::with_clock("2/s".parse::<Quota>().unwrap(), clock.clone());
    // The tenant number from the query: /?tenant=7.
    let tenant = |req: &Parts| -> Result<u32, KeyError> {
        let query = req.uri.query().ok_or_else(|| KeyError::missing("a query"))?;
        let value = query.strip_prefix("tenant=").ok_or_else(|| KeyError::missing("tenant="))?;
        value.parse().map_err(|_| KeyError::malformed(format!("tenant {value:?} is not a number")))
    };
    let layer = RateLimitLayer::keyed(keyed, tenant);
    let server = Server::start(counting_router(&["/"], &Calls::default()).layer(layer)).await;
    let http = client();
    let mut seen = Vec::new();
    for query in ["tenant=1", "tenant=1", "tenant=1", "tenant=2", "tenant=x", ""] {
        seen.push(http.get(&server.url(&format!("/?{query}"))).await.status.as_u16());
    }
    assert_eq!(seen, [200, 200, 429, 200, 400, 400]);
    clock.advance(Duration::from_millis(500));
    assert_eq!(http.get(&server.url("/?tenant=1")).await.status, 200);
}

/// Regression (reproducer `adv_tower_forwarded_empty_pair.rs`): a valid RFC 7239 element with an
/// empty pair before `for=` (`forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )`)
/// from a trusted proxy was refused as malformed, so the request got no key (a 400).
#[test]
fn a_forwarded_element_with_an_empty_pair_before_for_is_keyed() {
    let peer = PeerIp::behind_proxies(ProxyHeader::Forwarded, ["10.0.0.0/8".parse().unwrap()]);
    for value in
        ["for=192.0.2.43;;proto=http", "proto=http;;for=192.0.2.43", "proto=http;for=192.0.2.43"]
    {
        let (mut parts, ()) =
            http::Request::builder().header("forwarded", value).body(()).unwrap().into_parts();
        parts.extensions.insert("10.1.2.3:4000".parse::<std::net::SocketAddr>().unwrap());
        let got = leakgate_tower::KeyExtractor::extract(&peer, &parts);
        assert_eq!(got, Ok("192.0.2.43".parse::<IpAddr>().unwrap()), "Forwarded: {value}");
    }
}
