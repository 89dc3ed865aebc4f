//! The operator's listener: `/metrics`, `/buckets`, and the page `/` in headless Chromium.

mod support;

use leakgate::ManualClock;
use serde_json::Value;
use std::time::Duration;
use support::chromium::Chromium;
use support::{exchange, http_get, raw, serve_manual};

const RULES: &str = r#"
message_send = "10/s"
api = "100/s burst 20"
"api/beta" = { quota = "1/s", shadow = true }
"#;

/// Fills: alice 0.8, carol 0.6, bob 0.3, api/x 0.25; and one CL.THROTTLE bucket.
fn fill_some_buckets(served: &support::Served<ManualClock>) {
    let mut s = raw(served.resp());
    for (key, cost, left) in [
        ("message_send/alice", 8, 2),
        ("message_send/bob", 3, 7),
        ("message_send/carol", 6, 4),
        ("api/x", 5, 15),
    ] {
        s.write_all_str(&format!("LG.CHECK {key} {cost}\r\n"));
        let reply = support::read_reply(&mut s);
        assert!(reply.starts_with(&format!("*5\r\n:0\r\n:{left}\r\n")), "{key}: {reply}");
    }
    exchange(
        &mut s,
        b"CL.THROTTLE user123 15 30 60 4\r\n",
        "*5\r\n:0\r\n:16\r\n:12\r\n:-1\r\n:8\r\n",
    );
}

trait WriteStr {
    fn write_all_str(&mut self, text: &str);
}

impl WriteStr for std::net::TcpStream {
    fn write_all_str(&mut self, text: &str) {
        std::io::Write::write_all(self, text.as_bytes()).unwrap();
    }
}

#[test]
fn buckets_lists_filters_and_caps() {
    let clock = ManualClock::new();
    let served = serve_manual(RULES, &clock);
    fill_some_buckets(&served);
    clock.advance(Duration::from_millis(100)); // each message_send bucket drains 1 unit
    let page: Value = serde_json::from_str(&http_get(served.http(), "/buckets")).unwrap();
    assert_eq!(page["matched"], 5);
    let keys: Vec<&str> =
        page["buckets"].as_array().unwrap().iter().map(|b| b["key"].as_str().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "api/x",
            "cl.throttle/user123",
            "message_send/alice",
            "message_send/bob",
            "message_send/carol"
        ]
    );
    let alice = &page["buckets"][2];
    assert_eq!(alice["rule"], "message_send");
    assert_eq!(alice["quota"], "10/s");
    assert_eq!(alice["level"], 7.0);
    assert_eq!(alice["remaining"], 3);
    assert_eq!(alice["fill"], 0.7);
    assert_eq!(alice["reset_after_ms"], 700);
    assert_eq!(alice["idle_ms"], 100);
    // "Every bucket under message_send below 50% left".
    let busy: Value = serde_json::from_str(&http_get(
        served.http(),
        "/buckets?prefix=message_send/&min_fill=0.5",
    ))
    .unwrap();
    let keys: Vec<&str> =
        busy["buckets"].as_array().unwrap().iter().map(|b| b["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["message_send/alice", "message_send/carol"]);
    let capped: Value = serde_json::from_str(&http_get(served.http(), "/buckets?limit=2")).unwrap();
    assert_eq!((capped["matched"].as_u64(), capped["listed"].as_u64()), (Some(5), Some(2)));
    let cell = &page["buckets"][1];
    assert_eq!(
        (cell["rule"].as_str(), cell["quota"].as_str()),
        (Some("cl.throttle"), Some("30/min burst 16"))
    );
    assert_eq!((cell["remaining"].as_u64(), cell["idle_ms"].as_u64()), (Some(12), Some(100)));
}

#[test]
fn buckets_come_a_page_at_a_time_after_a_cursor() {
    let clock = ManualClock::new();
    let served = serve_manual(RULES, &clock);
    fill_some_buckets(&served);
    let mut keys = Vec::new();
    let mut path = "/buckets?limit=2".to_string();
    for _ in 0..3 {
        let page: Value = serde_json::from_str(&http_get(served.http(), &path)).unwrap();
        assert_eq!(page["matched"], 5);
        let rows = page["buckets"].as_array().unwrap();
        keys.extend(rows.iter().map(|b| b["key"].as_str().unwrap().to_string()));
        match page["next_cursor"].as_str() {
            Some(cursor) => {
                let cursor: String = cursor
                    .bytes()
                    .map(|b| match b {
                        b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => {
                            (b as char).to_string()
                        }
                        _ => format!("%{b:02X}"),
                    })
                    .collect();
                path = format!("/buckets?limit=2&cursor={cursor}");
            }
            None => {
                assert_eq!(rows.len(), 1);
                break;
            }
        }
    }
    let want = [
        "api/x",
        "cl.throttle/user123",
        "message_send/alice",
        "message_send/bob",
        "message_send/carol",
    ];
    assert_eq!(keys, want);
    // A prefix longer than any key, or a cursor this service never gave: a clear 400.
    let long = format!("/buckets?prefix={}", "k".repeat(4097));
    for (path, why) in [(long.as_str(), "at most 4096 bytes"), ("/buckets?cursor=nope", "cursor")] {
        let (status, body) = support::http_get_any(served.http(), path);
        assert_eq!(status, 400, "{path}: {body}");
        assert!(body.contains(why), "{body}");
    }
}

#[test]
fn metrics_count_per_rule_and_per_listener() {
    let clock = ManualClock::new();
    let served = serve_manual(RULES, &clock);
    let mut s = raw(served.resp());
    for _ in 0..3 {
        s.write_all_str("LG.CHECK api/beta/u\r\n");
        assert!(support::read_reply(&mut s).starts_with("*5\r\n:0\r\n"));
    }
    s.write_all_str("LG.CHECK message_send/m 11\r\n");
    assert!(support::read_reply(&mut s).starts_with("*5\r\n:1\r\n"));
    exchange(
        &mut s,
        b"NOSUCH\r\n",
        "-ERR unknown command 'NOSUCH', with args beginning with: \r\n",
    );
    let text = http_get(served.http(), "/metrics");
    for line in [
        "leakgate_rule_admitted_total{rule=\"api/beta\"} 1",
        "leakgate_rule_shadow_refused_total{rule=\"api/beta\"} 2",
        "leakgate_rule_refused_total{rule=\"message_send\"} 1",
        "leakgate_rule_errors_total{rule=\"message_send\"} 0",
        "leakgate_requests_total{listener=\"resp\"} 5",
        "leakgate_request_errors_total{listener=\"resp\"} 1",
        "leakgate_request_duration_seconds_count{listener=\"resp\"} 5",
        "leakgate_request_duration_seconds_bucket{listener=\"resp\",le=\"+Inf\"} 5",
        "leakgate_rules_in_force 3",
        "leakgate_key_memory_limit_bytes 268435456",
        "leakgate_keys_refused_total 0",
        "# TYPE leakgate_request_duration_seconds histogram",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    // Buckets are cumulative and never decrease.
    let counts: Vec<u64> = text
        .lines()
        .filter(|l| l.starts_with("leakgate_request_duration_seconds_bucket{listener=\"resp\""))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
}

#[test]
fn the_page_filters_and_sorts_in_a_real_browser() {
    let clock = ManualClock::new();
    let served = serve_manual(RULES, &clock);
    fill_some_buckets(&served);
    let page = http_get(served.http(), "/");
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "the page loads nothing from elsewhere"
    );
    let mut browser = Chromium::open(&format!("http://{}/", served.http()));
    let rows = "[...document.querySelectorAll('#buckets tbody tr')].map(r => r.dataset.key)";
    browser.wait_for("document.body.dataset.refreshed");
    assert_eq!(browser.eval(&format!("{rows}.length")), 5);
    // Filter: type a prefix, then a fill.
    browser.eval("const p = document.getElementById('prefix'); p.value = 'message_send/'; p.dispatchEvent(new Event('input'))");
    browser.wait_for(&format!("{rows}.length === 3"));
    browser.eval("const f = document.getElementById('min_fill'); f.value = '50'; f.dispatchEvent(new Event('input'))");
    browser.wait_for(&format!("{rows}.length === 2"));
    assert_eq!(browser.eval(rows), serde_json::json!(["message_send/alice", "message_send/carol"]));
    // Sort: fill (fullest first), again (emptiest first), then by key.
    browser.eval("document.querySelector('th[data-col=fill]').click()");
    assert_eq!(browser.eval(rows), serde_json::json!(["message_send/alice", "message_send/carol"]));
    browser.eval("document.querySelector('th[data-col=fill]').click()");
    assert_eq!(browser.eval(rows), serde_json::json!(["message_send/carol", "message_send/alice"]));
    assert_eq!(
        browser.eval("document.querySelector('th[data-col=fill]').getAttribute('aria-sort')"),
        "ascending"
    );
    browser.eval("document.querySelector('th[data-col=remaining]').click()");
    assert_eq!(browser.eval(rows), serde_json::json!(["message_send/carol", "message_send/alice"]));
    // The view is in the address, so it can be shared.
    let search = browser.eval("location.search");
    assert_eq!(search, "?prefix=message_send%2F&min_fill=0.5&sort=remaining&dir=desc");
    // It refreshes itself: a bucket that fills up appears without a reload.
    let mut s = raw(served.resp());
    exchange(&mut s, b"LG.CHECK message_send/bob 5\r\n", "*5\r\n:0\r\n:2\r\n");
    browser.wait_for(&format!("{rows}.length === 3"));
    assert_eq!(
        browser.eval(rows),
        serde_json::json!(["message_send/carol", "message_send/bob", "message_send/alice"])
    );
    let cells = browser.eval(
        "[...document.querySelectorAll('#buckets tbody tr')[1].children].map(td => td.textContent)",
    );
    assert_eq!(cells[0], "message_send/bob");
    assert_eq!(cells[2], "10/s");
    assert_eq!(cells[5], "2");
    // A page at a time: two per page, the next page, back to the first.
    browser.eval("const l = document.getElementById('limit'); l.value = '2'; l.dispatchEvent(new Event('input'))");
    browser.wait_for("document.getElementById('next').disabled === false");
    assert_eq!(browser.eval(&format!("{rows}.length")), 2);
    browser.eval("document.getElementById('next').click()");
    browser.wait_for(&format!("{rows}.length === 1"));
    assert!(browser.eval("location.search").as_str().unwrap().contains("cursor="));
    browser.eval("document.getElementById('first').click()");
    browser.wait_for(&format!("{rows}.length === 2"));
    let png = browser.screenshot();
    assert!(png.starts_with(b"\x89PNG"));
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("leakgate-serve-page.png");
    std::fs::write(&shot, png).unwrap();
    eprintln!("screenshot: {}", shot.display());
}
