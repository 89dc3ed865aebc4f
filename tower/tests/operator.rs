//! The operator view through a real server: buckets by fill, prefix and level filters, counters,
//! bad queries, and read-only methods.

mod support;

use leakgate::{KeyedLimiter, ManualClock, Quota};
use leakgate_tower::RateLimitLayer;
use serde_json::{json, Value};
use std::net::IpAddr;
use support::{client, client_from, counting_router, Calls, Server};

#[tokio::test]
async fn the_view_lists_buckets_fullest_first_with_counts() {
    let clock = ManualClock::new();
    let keyed =
        KeyedLimiter::<IpAddr, _>::with_clock("10/s".parse::<Quota>().unwrap(), clock.clone());
    let layer = RateLimitLayer::per_ip(keyed).policy_name("per-ip").unwrap();
    let app = counting_router(&["/"], &Calls::default())
        .layer(layer.clone())
        .route_service("/ops", layer.operator_view());
    let server = Server::start(app).await;
    let (a, b) = (client_from("127.0.0.1"), client_from("127.0.0.2"));
    for _ in 0..5 {
        a.get(&server.url("/")).await;
    }
    for _ in 0..2 {
        b.get(&server.url("/")).await;
    }
    let view = |query: &'static str| {
        let url = server.url(&format!("/ops{query}"));
        async move {
            let reply = client().get(&url).await;
            (reply.status.as_u16(), serde_json::from_slice::<Value>(&reply.body).unwrap())
        }
    };

    let (status, page) = view("").await;
    assert_eq!(status, 200);
    assert_eq!(page["policy"], "per-ip");
    assert_eq!(page["quota"], "10/s");
    assert_eq!(page["mode"], "meter");
    assert_eq!(page["limit"]["kind"], "keyed");
    assert_eq!(page["limit"]["overflow_denials"], 0);
    assert_eq!(
        page["counts"],
        json!({"admitted": 7, "refused": 0, "queued": 0, "key_errors": 0, "exempt": 0})
    );
    assert_eq!(page["matched"], 2);
    let buckets = page["buckets"].as_array().unwrap();
    assert_eq!(buckets[0]["key"], "127.0.0.1");
    assert_eq!(buckets[0]["remaining"], 5);
    assert_eq!(buckets[0]["fill"], 0.5);
    assert_eq!(buckets[0]["reset_after_ms"], 500);
    assert_eq!(buckets[1]["key"], "127.0.0.2");
    assert_eq!(buckets[1]["remaining"], 8);

    let (_, page) = view("?prefix=127.0.0.2").await;
    assert_eq!(page["matched"], 1);
    assert_eq!(page["buckets"][0]["key"], "127.0.0.2");
    let (_, page) = view("?min_fill=0.3").await;
    assert_eq!(page["buckets"].as_array().unwrap().len(), 1);
    let (_, page) = view("?limit=1").await;
    assert_eq!((page["matched"].as_u64(), page["buckets"].as_array().unwrap().len()), (Some(2), 1));

    // Time drains the buckets: idle keys are empty, then reclaimed.
    clock.advance(std::time::Duration::from_secs(1));
    let (_, page) = view("?min_fill=0.01").await;
    assert_eq!(page["matched"], 0);
}

#[tokio::test]
async fn bad_queries_and_writes_are_refused() {
    let keyed =
        KeyedLimiter::<IpAddr, _>::with_clock("1/s".parse::<Quota>().unwrap(), ManualClock::new());
    let view = RateLimitLayer::per_ip(keyed).operator_view();
    let server = Server::start(axum::Router::new().route_service("/ops", view)).await;
    let http = client();
    for query in ["?min_fill=2", "?limit=many", "?order=desc"] {
        let reply = http.get(&server.url(&format!("/ops{query}"))).await;
        assert_eq!(reply.status, 400, "{query}");
        let error: Value = serde_json::from_slice(&reply.body).unwrap();
        assert!(error["error"].is_string());
    }
    let mut raw = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    raw.write_all(b"DELETE /ops HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n").await.unwrap();
    let mut answer = String::new();
    raw.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("allow: get, head"), "{answer}");
}
