//! Limits from a rules file through a real axum server and a real hyper client, on a
//! `ManualClock`: the default rule, a per-route rule, an override for one client IP, a rule with
//! two quotas, shadow mode, keys no rule matches, requests without a key; exact sequences of 200
//! and 429 and byte-exact fields.

mod support;

use leakgate::{ManualClock, RuleLimiter, Rules};
use leakgate_tower::{KeyTemplate, LiveRules, OnKeyError, RateLimitLayer, UnmatchedRoute};
use std::sync::Arc;
use std::time::Duration;
use support::{client, client_from, counting_router, Calls, HttpClient, Reply, Server};

/// The rules file of these tests. Keys are `http{route}/{ip}`: `http/search/127.0.0.1`.
const RULES: &str = r#"
"" = "3/s"                                # the default rule: every key no other rule matches
"http/search" = ["2/s burst 3", "4/min"]  # two quotas: both must conform
"http/items" = "1/s burst 2"              # each client on /items
"http/items/127.0.0.2" = "10/s burst 5"   # one client's own limit on /items
"http/beta" = { quota = "1/s", shadow = true }
"#;

const ROUTES: [&str; 5] = ["/search", "/items", "/other", "/beta", "/free"];

fn template() -> KeyTemplate {
    KeyTemplate::parse("http{route}/{ip}").unwrap()
}

/// A server limited by `rules` on `clock`, with its calls counted.
async fn serve(rules: Rules, clock: &ManualClock) -> (Server, Arc<LiveRules<ManualClock>>, Calls) {
    let live = Arc::new(LiveRules::with_clock(rules, clock.clone()));
    let calls = Calls::default();
    let layer = RateLimitLayer::rules(live.clone(), template());
    let server = Server::start(counting_router(&ROUTES, &calls).layer(layer)).await;
    (server, live, calls)
}

/// One step of a script: how long to advance the clock first, then the status, `RateLimit-Policy`,
/// `RateLimit` and `Retry-After` the response must carry (`None`: no such field).
type Step = (u64, u16, Option<&'static str>, Option<&'static str>, Option<&'static str>);

/// Runs `script` against `url` with `http`, checking every field byte for byte.
async fn run(http: &HttpClient, url: &str, clock: &ManualClock, script: &[Step]) -> Vec<Reply> {
    let mut replies = Vec::new();
    for (i, &(advance_ms, status, policy, limit, retry)) in script.iter().enumerate() {
        clock.advance(Duration::from_millis(advance_ms));
        let reply = http.get(url).await;
        assert_eq!(reply.status.as_u16(), status, "{url} step {i}");
        let field = |name: &str| {
            let values = reply.all(name);
            assert!(values.len() <= 1, "{url} step {i}: {name} repeated");
            values.first().map(|v| v.to_string())
        };
        assert_eq!(field("ratelimit-policy").as_deref(), policy, "{url} step {i}");
        assert_eq!(field("ratelimit").as_deref(), limit, "{url} step {i}");
        assert_eq!(field("retry-after").as_deref(), retry, "{url} step {i}");
        replies.push(reply);
    }
    replies
}

#[tokio::test]
async fn a_rule_with_two_quotas_announces_both_and_refuses_on_either() {
    let clock = ManualClock::new();
    let (server, _live, calls) = serve(Rules::from_toml(RULES).unwrap(), &clock).await;
    // 2/s burst 3: T = 0.5 s, tau = 1.5 s, so w = 2 and q = 4. 4/min: T = 15 s, tau = 60 s.
    let policy = Some(r#""http/search#0";q=4;w=2, "http/search#1";q=4;w=60"#);
    // One `RateLimit` item for the rule: the smallest remaining, the largest reset.
    let script: [Step; 7] = [
        (0, 200, policy, Some(r#""http/search";r=2;t=15"#), None),
        (0, 200, policy, Some(r#""http/search";r=1;t=30"#), None),
        (0, 200, policy, Some(r#""http/search";r=0;t=45"#), None),
        // The 2/s quota refuses; the 4/min one had room and keeps it.
        (0, 429, policy, Some(r#""http/search";r=0;t=45"#), Some("1")),
        (500, 200, policy, Some(r#""http/search";r=0;t=60"#), None),
        // The 2/s quota has room again; the 4/min one is full until 15 s after its fourth
        // unit came in, 13 s from now.
        (1500, 429, policy, Some(r#""http/search";r=0;t=58"#), Some("13")),
        (13000, 200, policy, Some(r#""http/search";r=0;t=60"#), None),
    ];
    run(&client(), &server.url("/search"), &clock, &script).await;
    assert_eq!(calls.count(), 5);
}

#[tokio::test]
async fn one_client_ip_has_its_own_rule() {
    let clock = ManualClock::new();
    let (server, live, calls) = serve(Rules::from_toml(RULES).unwrap(), &clock).await;
    let url = server.url("/items");
    let everyone = Some(r#""http/items";q=2;w=2"#);
    let script: [Step; 3] = [
        (0, 200, everyone, Some(r#""http/items";r=1;t=1"#), None),
        (0, 200, everyone, Some(r#""http/items";r=0;t=2"#), None),
        (0, 429, everyone, Some(r#""http/items";r=0;t=2"#), Some("1")),
    ];
    run(&client_from("127.0.0.1"), &url, &clock, &script).await;
    let own = Some(r#""http/items/127.0.0.2";q=10;w=1"#);
    let limit = |r: u8| match r {
        4 => Some(r#""http/items/127.0.0.2";r=4;t=1"#),
        3 => Some(r#""http/items/127.0.0.2";r=3;t=1"#),
        2 => Some(r#""http/items/127.0.0.2";r=2;t=1"#),
        1 => Some(r#""http/items/127.0.0.2";r=1;t=1"#),
        _ => Some(r#""http/items/127.0.0.2";r=0;t=1"#),
    };
    let script: [Step; 7] = [
        (0, 200, own, limit(4), None),
        (0, 200, own, limit(3), None),
        (0, 200, own, limit(2), None),
        (0, 200, own, limit(1), None),
        (0, 200, own, limit(0), None),
        (0, 429, own, limit(0), Some("1")),
        (100, 200, own, limit(0), None),
    ];
    run(&client_from("127.0.0.2"), &url, &clock, &script).await;
    assert_eq!(calls.count(), 8);
    // Each client has its own bucket, under its own rule.
    let buckets = live.limiter().buckets("http/items/", 0.0);
    let found: Vec<(&str, &str)> =
        buckets.iter().map(|b| (b.key.as_str(), b.rule.as_str())).collect();
    assert_eq!(
        found,
        [("http/items/127.0.0.1", "http/items"), ("http/items/127.0.0.2", "http/items/127.0.0.2")]
    );
}

#[tokio::test]
async fn keys_under_no_other_rule_get_the_default_rule() {
    let clock = ManualClock::new();
    let (server, _live, _calls) = serve(Rules::from_toml(RULES).unwrap(), &clock).await;
    let policy = Some(r#""default";q=3;w=1"#);
    let script: [Step; 5] = [
        (0, 200, policy, Some(r#""default";r=2;t=1"#), None),
        (0, 200, policy, Some(r#""default";r=1;t=1"#), None),
        (0, 200, policy, Some(r#""default";r=0;t=1"#), None),
        (0, 429, policy, Some(r#""default";r=0;t=1"#), Some("1")),
        (334, 200, policy, Some(r#""default";r=0;t=1"#), None),
    ];
    run(&client(), &server.url("/other"), &clock, &script).await;
    // Each key its own bucket under the default rule: /free from the same client is untouched.
    let reply = client().get(&server.url("/free")).await;
    assert_eq!(reply.header("ratelimit"), r#""default";r=2;t=1"#);
}

#[tokio::test]
async fn a_shadow_rule_admits_everything_announces_nothing_and_counts() {
    let clock = ManualClock::new();
    let (server, live, calls) = serve(Rules::from_toml(RULES).unwrap(), &clock).await;
    let script = [(0, 200, None, None, None); 4];
    run(&client(), &server.url("/beta"), &clock, &script).await;
    assert_eq!(calls.count(), 4);
    let beta = live.limiter().stats().into_iter().find(|s| s.rule == "http/beta").unwrap();
    assert_eq!((beta.admitted, beta.denied, beta.denied_in_shadow), (1, 0, 3));
}

#[tokio::test]
async fn a_key_no_rule_matches_is_admitted_untracked_and_announces_nothing() {
    let clock = ManualClock::new();
    let rules = Rules::from_toml(r#""http/search" = "1/h""#).unwrap();
    let (server, live, calls) = serve(rules, &clock).await;
    let script = [(0, 200, None, None, None); 20];
    run(&client(), &server.url("/other"), &clock, &script).await;
    assert_eq!(calls.count(), 20);
    assert!(live.limiter().buckets("", 0.0).is_empty(), "nothing tracked");
    // The rule still limits its own keys.
    let policy = Some(r#""http/search";q=1;w=3600"#);
    let script: [Step; 2] = [
        (0, 200, policy, Some(r#""http/search";r=0;t=3600"#), None),
        (0, 429, policy, Some(r#""http/search";r=0;t=3600"#), Some("3600")),
    ];
    run(&client(), &server.url("/search"), &clock, &script).await;
}

#[tokio::test]
async fn a_request_without_a_key_gets_400_or_the_default_rule() {
    let clock = ManualClock::new();
    let live = Arc::new(LiveRules::with_clock(Rules::from_toml(RULES).unwrap(), clock.clone()));
    // No ConnectInfo: `{ip}` cannot be found.
    let refuse = RateLimitLayer::rules(live.clone(), template());
    let app = counting_router(&ROUTES, &Calls::default()).layer(refuse.clone());
    let server = Server::start_without_connect_info(app).await;
    let reply = client().get(&server.url("/search")).await;
    assert_eq!(reply.status, 400);
    assert!(reply.all("ratelimit-policy").is_empty(), "no key, no rule to announce");
    assert!(reply.all("ratelimit").is_empty());
    assert_eq!(refuse.counts().key_errors, 1);

    // Under OnKeyError::Global every such request is the key "", under the default rule.
    let global = RateLimitLayer::rules(live.clone(), template()).on_key_error(OnKeyError::Global);
    let app = counting_router(&ROUTES, &Calls::default()).layer(global);
    let server = Server::start_without_connect_info(app).await;
    let policy = Some(r#""default";q=3;w=1"#);
    let script: [Step; 4] = [
        (0, 200, policy, Some(r#""default";r=2;t=1"#), None),
        (0, 200, policy, Some(r#""default";r=1;t=1"#), None),
        (0, 200, policy, Some(r#""default";r=0;t=1"#), None),
        (0, 429, policy, Some(r#""default";r=0;t=1"#), Some("1")),
    ];
    // Whatever the route: one shared bucket.
    run(&client(), &server.url("/search"), &clock, &script[..2]).await;
    run(&client(), &server.url("/items"), &clock, &script[2..]).await;
    let keys: Vec<String> = live.limiter().buckets("", 0.0).into_iter().map(|b| b.key).collect();
    assert_eq!(keys, [""]);
}

/// A path no route matches reached the layer (added with `Router::layer`) without axum's
/// `MatchedPath`, so `{route}` found nothing and the client got 400 instead of the router's 404.
/// Now such a request passes to the fallback unlimited, or is limited under a fallback route.
#[tokio::test]
async fn an_unmatched_route_gets_the_routers_404_unlimited_or_a_fallback_rule() {
    let clock = ManualClock::new();
    let live = Arc::new(LiveRules::with_clock(Rules::from_toml(RULES).unwrap(), clock.clone()));
    let calls = Calls::default();
    let layer = RateLimitLayer::rules(live.clone(), template());
    let server = Server::start(counting_router(&ROUTES, &calls).layer(layer.clone())).await;
    let http = client();
    // Far more than the default rule's 3/s: never limited, never charged, no fields.
    for _ in 0..5 {
        let reply = http.get(&server.url("/no/such/path")).await;
        assert_eq!(reply.status, 404);
        assert!(reply.all("ratelimit-policy").is_empty() && reply.all("ratelimit").is_empty());
    }
    let counts = layer.counts();
    assert_eq!((counts.exempt, counts.admitted, counts.key_errors), (5, 0, 0));
    assert!(live.limiter().buckets("", 0.0).is_empty(), "nothing tracked");
    // Matched routes are limited as before.
    assert_eq!(http.get(&server.url("/search")).await.status, 200);
    assert_eq!(calls.count(), 1);

    // A fallback route: unknown paths are the key http/unmatched/{ip}, under the default rule.
    let fallback = template().unmatched_route(UnmatchedRoute::Route("/unmatched".into()));
    let layer = RateLimitLayer::rules(live.clone(), fallback);
    let server = Server::start(counting_router(&ROUTES, &calls).layer(layer)).await;
    let policy = Some(r#""default";q=3;w=1"#);
    let script: [Step; 4] = [
        (0, 404, policy, Some(r#""default";r=2;t=1"#), None),
        (0, 404, policy, Some(r#""default";r=1;t=1"#), None),
        (0, 404, policy, Some(r#""default";r=0;t=1"#), None),
        (0, 429, policy, Some(r#""default";r=0;t=1"#), Some("1")),
    ];
    run(&http, &server.url("/a"), &clock, &script[..2]).await;
    run(&http, &server.url("/b/c"), &clock, &script[2..]).await;
    let keys: Vec<String> =
        live.limiter().buckets("http/un", 0.0).into_iter().map(|b| b.key).collect();
    assert_eq!(keys, ["http/unmatched/127.0.0.1"]);

    // The old answer, on request: a key that cannot be found (400 by default).
    let strict = template().unmatched_route(UnmatchedRoute::KeyError);
    let layer = RateLimitLayer::rules(live, strict);
    let server = Server::start(counting_router(&ROUTES, &calls).layer(layer)).await;
    assert_eq!(http.get(&server.url("/nope")).await.status, 400);
}

#[tokio::test]
async fn a_problem_body_names_every_quota_of_the_rule() {
    let clock = ManualClock::new();
    let live = LiveRules::with_clock(Rules::from_toml(RULES).unwrap(), clock.clone());
    let layer = RateLimitLayer::rules(live, template()).problem_details(true);
    let server = Server::start(counting_router(&ROUTES, &Calls::default()).layer(layer)).await;
    let http = client();
    for _ in 0..3 {
        assert_eq!(http.get(&server.url("/search")).await.status, 200);
    }
    let reply = http.get(&server.url("/search")).await;
    assert_eq!(reply.status, 429);
    assert_eq!(reply.header("content-type"), "application/problem+json");
    let problem: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    let names = serde_json::json!(["http/search#0", "http/search#1"]);
    assert_eq!(problem["violated-policies"], names);
}

/// Every response agrees with a twin `RuleLimiter` in lockstep, over several rules, keys and an
/// irregular schedule: status, `r`, `t` and `Retry-After`.
#[tokio::test]
async fn every_response_matches_a_twin_rule_limiter() {
    let clock = ManualClock::new();
    let twin_clock = ManualClock::new();
    let rules = Rules::from_toml(RULES).unwrap();
    let twin = RuleLimiter::with_clock(rules.clone(), twin_clock.clone());
    let (server, _live, calls) = serve(rules, &clock).await;
    let clients = [client_from("127.0.0.1"), client_from("127.0.0.2")];
    let names = [("/search", "http/search"), ("/items", "http/items"), ("/other", "default")];
    let mut step: u64 = 7;
    let mut admitted = 0;
    for i in 0..240 {
        step = step.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let advance = Duration::from_nanos((step >> 20) % 300_000_000);
        clock.advance(advance);
        twin_clock.advance(advance);
        let (route, rule) = names[(step >> 50) as usize % names.len()];
        let ip = ["127.0.0.1", "127.0.0.2"][(step >> 60) as usize % 2];
        let reply = clients[usize::from(ip.ends_with('2'))].get(&server.url(route)).await;
        let key = format!("http{route}/{ip}");
        let name =
            if route == "/items" && ip == "127.0.0.2" { "http/items/127.0.0.2" } else { rule };
        let (status, remaining, reset, retry) = match twin.check(&key) {
            Ok(ok) => (200, ok.remaining(), ok.reset_after(), None),
            Err(no) => (429, no.remaining(), no.reset_after(), no.retry_after()),
        };
        let secs_up = |d: Duration| d.as_secs() + u64::from(d.subsec_nanos() > 0);
        assert_eq!(reply.status.as_u16(), status, "request {i}: {key}");
        let want = format!(r#""{name}";r={remaining};t={}"#, secs_up(reset));
        assert_eq!(reply.header("ratelimit"), want, "request {i}: {key}");
        let want_retry = retry.map(|d| secs_up(d).to_string());
        let got_retry = reply.headers.get("retry-after").map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(got_retry, want_retry, "request {i}: {key}");
        admitted += usize::from(status == 200);
    }
    assert_eq!(calls.count(), admitted);
    assert!(admitted > 40 && admitted < 240, "the schedule exercises both answers: {admitted}");
}
