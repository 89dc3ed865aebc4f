//! Rules reloaded while a real server serves them (levels kept, new limits and new fields at
//! once), and the operator view of a rules layer.

mod support;

use leakgate::{ManualClock, Rules};
use leakgate_tower::{KeyTemplate, LiveRules, RateLimitLayer};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use support::{client, counting_router, Calls, HttpClient, Server};

const ROUTES: [&str; 3] = ["/search", "/items", "/other"];

fn template() -> KeyTemplate {
    KeyTemplate::parse("http{route}/{ip}").unwrap()
}

/// GETs `url` and returns the status, `RateLimit-Policy`, `RateLimit` and `Retry-After`.
async fn get(http: &HttpClient, url: &str) -> (u16, String, String, String) {
    let reply = http.get(url).await;
    let field = |name: &str| reply.all(name).join(", ");
    let fields = (field("ratelimit-policy"), field("ratelimit"), field("retry-after"));
    (reply.status.as_u16(), fields.0, fields.1, fields.2)
}

fn answer(status: u16, policy: &str, limit: &str, retry: &str) -> (u16, String, String, String) {
    (status, policy.to_owned(), limit.to_owned(), retry.to_owned())
}

#[tokio::test]
async fn a_reload_while_serving_keeps_levels_and_applies_the_new_limits() {
    let clock = ManualClock::new();
    let first = r#"
        "http/items" = "1/s burst 2"
        "http/search" = "2/s burst 3"
    "#;
    let live = Arc::new(LiveRules::with_clock(Rules::from_toml(first).unwrap(), clock.clone()));
    let layer = RateLimitLayer::rules(live.clone(), template());
    let calls = Calls::default();
    let server = Server::start(counting_router(&ROUTES, &calls).layer(layer.clone())).await;
    let http = client();
    let (items, search, other) =
        (server.url("/items"), server.url("/search"), server.url("/other"));

    let policy = r#""http/items";q=2;w=2"#;
    assert_eq!(get(&http, &items).await, answer(200, policy, r#""http/items";r=1;t=1"#, ""));
    assert_eq!(get(&http, &items).await, answer(200, policy, r#""http/items";r=0;t=2"#, ""));
    assert_eq!(get(&http, &items).await, answer(429, policy, r#""http/items";r=0;t=2"#, "1"));
    let policy = r#""http/search";q=4;w=2"#;
    assert_eq!(get(&http, &search).await, answer(200, policy, r#""http/search";r=2;t=1"#, ""));
    assert_eq!(get(&http, &other).await, answer(200, "", "", ""), "no rule yet");

    // The same server, the same connection: new rules in force at once.
    let second = r#"
        "http/items" = ["1/s burst 4", "6/min"]  # a larger burst, and a second quota
        "http/other" = "1/s"                     # a new rule
                                                 # http/search: no rule any more
    "#;
    live.reload(Rules::from_toml(second).unwrap());

    // /items keeps what it could admit under the first quota: nothing (burst 4 now: the two more
    // units come at 1/s, a reload hands none out); the new 6/min quota (T = 10 s) starts empty.
    let policy = r#""http/items#0";q=4;w=4, "http/items#1";q=6;w=60"#;
    assert_eq!(get(&http, &items).await, answer(429, policy, r#""http/items";r=0;t=4"#, "1"));
    clock.advance(Duration::from_secs(1));
    assert_eq!(get(&http, &items).await, answer(200, policy, r#""http/items";r=0;t=10"#, ""));
    assert_eq!(get(&http, &items).await, answer(429, policy, r#""http/items";r=0;t=10"#, "1"));
    // No rule matches /search's key any more: admitted, untracked, nothing announced.
    for _ in 0..5 {
        assert_eq!(get(&http, &search).await, answer(200, "", "", ""));
    }
    let policy = r#""http/other";q=1;w=1"#;
    assert_eq!(get(&http, &other).await, answer(200, policy, r#""http/other";r=0;t=1"#, ""));
    assert_eq!(get(&http, &other).await, answer(429, policy, r#""http/other";r=0;t=1"#, "1"));

    // Time refills the carried level at the new rate.
    clock.advance(Duration::from_secs(1));
    let policy = r#""http/items#0";q=4;w=4, "http/items#1";q=6;w=60"#;
    assert_eq!(get(&http, &items).await, answer(200, policy, r#""http/items";r=0;t=19"#, ""));
    assert_eq!(layer.counts().admitted, 12);
    assert_eq!(layer.counts().refused, 4);
    assert_eq!(calls.count(), 12);
}

#[tokio::test]
async fn the_operator_view_lists_rules_counts_and_buckets() {
    let clock = ManualClock::new();
    let rules = r#"
        "http/search" = ["10/s", "1000/h"]
        "http/beta" = { quota = "1/s", shadow = true }
    "#;
    let live = Arc::new(LiveRules::with_clock(Rules::from_toml(rules).unwrap(), clock.clone()));
    let layer = RateLimitLayer::rules(live.clone(), template());
    let app = counting_router(&["/search", "/beta", "/other"], &Calls::default())
        .layer(layer.clone())
        .route_service("/ops", layer.operator_view());
    let server = Server::start(app).await;
    let http = client();
    for _ in 0..11 {
        http.get(&server.url("/search")).await;
    }
    for _ in 0..2 {
        http.get(&server.url("/beta")).await;
    }
    http.get(&server.url("/other")).await;
    let view = |query: &'static str| {
        let url = server.url(&format!("/ops{query}"));
        async move {
            let reply = client().get(&url).await;
            assert_eq!(reply.status, 200);
            serde_json::from_slice::<Value>(&reply.body).unwrap()
        }
    };

    let page = view("?prefix=http/search").await;
    assert_eq!(page["limit"], json!({"kind": "rules"}));
    assert!(page.get("quota").is_none(), "no one quota for the whole layer");
    assert_eq!(
        page["rules"],
        json!([
            {"rule": "http/beta", "quotas": ["1/s"], "shadow": true,
             "admitted": 1, "denied": 0, "denied_in_shadow": 1},
            {"rule": "http/search", "quotas": ["10/s", "1000/h"], "shadow": false,
             "admitted": 10, "denied": 1, "denied_in_shadow": 0},
        ])
    );
    assert_eq!(
        page["counts"],
        json!({"admitted": 13, "refused": 1, "queued": 0, "key_errors": 0, "exempt": 0})
    );
    assert_eq!(page["matched"], 2);
    assert_eq!(
        page["buckets"],
        json!([
            {"key": "http/search/127.0.0.1", "remaining": 0, "fill": 1.0, "reset_after_ms": 1000,
             "idle_ms": 0, "rule": "http/search", "quota_index": 0, "quota": "10/s"},
            {"key": "http/search/127.0.0.1", "remaining": 990, "fill": 0.01,
             "reset_after_ms": 36000, "idle_ms": 0, "rule": "http/search", "quota_index": 1,
             "quota": "1000/h"},
        ])
    );
    // min_fill reaches the limiter's own filter: only the full bucket.
    let page = view("?prefix=http/search&min_fill=0.5").await;
    assert_eq!(page["matched"], 1);
    assert_eq!(page["buckets"][0]["quota"], "10/s");

    // Counts are kept by path across a reload; the view shows the rules now in force.
    live.reload(Rules::from_toml(r#""http/search" = "5/s""#).unwrap());
    let page = view("").await;
    let rules = json!([{"rule": "http/search", "quotas": ["5/s"], "shadow": false,
                        "admitted": 10, "denied": 1, "denied_in_shadow": 0}]);
    assert_eq!(page["rules"], rules);
    assert_eq!(page["buckets"][0]["remaining"], 0, "the level of 10 kept, capped at 5");
}
