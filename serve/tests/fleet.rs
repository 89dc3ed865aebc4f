//! Several `serve` instances on one real `redis-server`: one limit shared within its bound,
//! rules pushed to all of them, and Redis killed and restarted under them.

mod support;

use leakgate::TscClock;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::{any_port, http_get, raw, read_reply, serve_with, RedisServer, Served};

fn instance(redis: &RedisServer, rules: &str) -> Served<TscClock> {
    serve_with("rules.toml", rules, TscClock::new(), |c| {
        c.resp(any_port())
            .http(any_port())
            .redis(redis.url())
            .redis_deadline(Duration::from_millis(50))
    })
}

/// Starts `serve` instances on the real clock. `start_with_clock` would make them send the
/// caller's clock; the fleet must run on Redis's own time, as the CLI does.
fn fleet_instance(redis: &RedisServer, rules: &str) -> Served<TscClock> {
    let rules = support::RulesFile::toml(rules);
    let runtime = support::runtime();
    let config = leakgate_serve::Config::new(&rules.path)
        .resp(any_port())
        .http(any_port())
        .redis(redis.url())
        .redis_deadline(Duration::from_millis(200));
    let running = runtime.block_on(leakgate_serve::start(config)).expect("an instance on Redis");
    support::Served::from_parts(runtime, running, rules)
}

fn ask(s: &mut TcpStream, command: &str) -> String {
    s.write_all(format!("{command}\r\n").as_bytes()).unwrap();
    read_reply(s)
}

#[test]
fn two_instances_share_one_keys_limit_within_its_bound() {
    let redis = RedisServer::start();
    let rules = "fleet = \"20/s burst 5\"\n";
    let a = fleet_instance(&redis, rules);
    let b = fleet_instance(&redis, rules);
    // CL.THROTTLE's buckets are shared too: a burst of 3, one per hour, through both.
    let (mut sa, mut sb) = (raw(a.resp()), raw(b.resp()));
    let mut cell_admitted = 0;
    for i in 0..6 {
        let s = if i % 2 == 0 { &mut sa } else { &mut sb };
        cell_admitted +=
            usize::from(ask(s, "CL.THROTTLE shared 2 1 3600").starts_with("*5\r\n:0\r\n"));
    }
    assert_eq!(cell_admitted, 3);
    // Both instances hammer one key for about a second, from two clients each.
    let start = Instant::now();
    let admitted: usize = std::thread::scope(|scope| {
        let workers: Vec<_> = [a.resp(), a.resp(), b.resp(), b.resp()]
            .into_iter()
            .map(|addr| {
                scope.spawn(move || {
                    let mut s = raw(addr);
                    let mut admitted = 0;
                    while start.elapsed() < Duration::from_millis(1000) {
                        admitted += usize::from(
                            ask(&mut s, "LG.CHECK fleet/k").starts_with("*5\r\n:0\r\n"),
                        );
                    }
                    admitted
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let bound = 5.0 + 20.0 * elapsed + 1.0;
    eprintln!("two instances admitted {admitted} in {elapsed:.2} s (bound {bound:.1})");
    assert!(
        admitted as f64 <= bound,
        "{admitted} admitted in {elapsed:.2} s: the bound is {bound:.1}"
    );
    assert!(admitted >= 5 + 10, "{admitted} admitted in {elapsed:.2} s: far below the rate");
}

#[test]
fn cl_throttle_keeps_one_bucket_per_key_across_the_fleet() {
    let redis = RedisServer::start();
    let a = fleet_instance(&redis, "");
    let b = fleet_instance(&redis, "");
    let (mut sa, mut sb) = (raw(a.resp()), raw(b.resp()));
    // The reproducer's calls, spread over two instances: max_burst 4, then 5, one a minute.
    let mut admitted = 0;
    for i in 0..16 {
        let s = if i % 2 == 0 { &mut sa } else { &mut sb };
        let max_burst = if i < 8 { 4 } else { 5 };
        let reply = ask(s, &format!("CL.THROTTLE k {max_burst} 1 60"));
        admitted += usize::from(reply.starts_with("*5\r\n:0\r\n"));
    }
    assert_eq!(admitted, 6);
    // One Redis key for the key, whatever the parameters.
    let mut con = redis::Client::open(redis.url()).unwrap().get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("leakgate:*").query(&mut con).unwrap();
    assert_eq!(keys, ["leakgate:tat1:k"]);
}

#[test]
fn cl_throttle_without_redis_is_decided_at_this_instances_share() {
    let redis = RedisServer::start();
    let served = serve_with("rules.toml", "", TscClock::new(), |c| {
        c.resp(any_port())
            .redis(redis.url())
            .redis_deadline(Duration::from_millis(50))
            .redis_failure_policy(leakgate_redis::FailurePolicy::Local { expected_servers: 2 })
    });
    let mut s = raw(served.resp());
    assert!(ask(&mut s, "CL.THROTTLE k 9 1 3600").starts_with("*5\r\n:0\r\n:10\r\n:9\r\n"));
    redis.pause();
    // A burst of 10 over 2 instances: this one's share is 5.
    let admitted = (0..8)
        .filter(|_| ask(&mut s, "CL.THROTTLE k 9 1 3600").starts_with("*5\r\n:0\r\n"))
        .count();
    redis.resume();
    assert_eq!(admitted, 5);
}

#[test]
fn rules_pushed_through_redis_reach_every_instance() {
    let redis = RedisServer::start();
    let a = fleet_instance(&redis, "api = \"10/s\"\n");
    let b = fleet_instance(&redis, "api = \"10/s\"\n");
    let mut pushed = leakgate::Rules::new();
    pushed.insert("api", ["3/s".parse().unwrap()]);
    pushed.insert("web", ["7/min".parse().unwrap()]).shadow(true);
    let pushed_at = Instant::now();
    let version = leakgate_redis::push_rules(&redis.url(), "leakgate:", &pushed).unwrap();
    assert_eq!(version, 1);
    for served in [&a, &b] {
        let mut s = raw(served.resp());
        while !ask(&mut s, "LG.RULE web/x").contains("7/min (shadow)") {
            assert!(pushed_at.elapsed() < Duration::from_secs(10), "never picked up");
            std::thread::sleep(Duration::from_millis(20));
        }
        let metrics = http_get(served.http(), "/buckets");
        assert!(metrics.contains("\"source\":\"redis version 1\""), "{metrics}");
    }
    eprintln!("both instances had version 1 in force {:?} after the push", pushed_at.elapsed());
}

#[test]
fn redis_killed_and_restarted() {
    let mut redis = RedisServer::start();
    let served = instance(&redis, "api = \"100/s\"\n");
    let open = serve_with("rules.toml", "api = \"100/s\"\n", TscClock::new(), |c| {
        c.resp(any_port())
            .redis(redis.url())
            .redis_deadline(Duration::from_millis(50))
            .redis_failure_policy(leakgate_redis::FailurePolicy::Allow)
    });
    let mut s = raw(served.resp());
    assert!(ask(&mut s, "LG.CHECK api/k").starts_with("*5\r\n:0\r\n"));
    redis.kill();
    // The policy decides: this one fails open.
    let mut o = raw(open.resp());
    for _ in 0..5 {
        assert!(
            ask(&mut o, "LG.CHECK api/k").starts_with("*5\r\n:0\r\n"),
            "not admitted by the allow policy"
        );
    }
    // Every call answers within a bound of its deadline (50 ms), refused by the default policy.
    for _ in 0..20 {
        let asked = Instant::now();
        let reply = ask(&mut s, "LG.CHECK api/k");
        assert!(asked.elapsed() < Duration::from_secs(2), "a call took {:?}", asked.elapsed());
        assert!(reply.starts_with("*5\r\n:1\r\n"), "not refused while Redis is away: {reply:?}");
    }
    let metrics = http_get(served.http(), "/metrics");
    let errors = metrics
        .lines()
        .find(|l| l.starts_with("leakgate_rule_errors_total{rule=\"api\"}"))
        .unwrap();
    assert_eq!(errors, "leakgate_rule_errors_total{rule=\"api\"} 20");
    redis.restart();
    let restarted = Instant::now();
    while !ask(&mut s, "LG.CHECK api/k").starts_with("*5\r\n:0\r\n") {
        assert!(restarted.elapsed() < Duration::from_secs(15), "limiting never resumed");
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("limiting resumed {:?} after Redis came back", restarted.elapsed());
}

#[test]
fn an_instance_starts_while_redis_is_down_and_limits_once_it_is_back() {
    let mut redis = RedisServer::start();
    redis.kill();
    // Booting during an outage: the service starts and the failure policy answers meanwhile.
    let served = instance(&redis, "api = \"2/h\"\n");
    let mut s = raw(served.resp());
    for _ in 0..5 {
        let asked = Instant::now();
        let reply = ask(&mut s, "LG.CHECK api/k");
        assert!(asked.elapsed() < Duration::from_secs(2), "a call took {:?}", asked.elapsed());
        assert!(reply.starts_with("*5\r\n:1\r\n"), "not refused by the policy: {reply:?}");
    }
    redis.restart();
    let restarted = Instant::now();
    while !ask(&mut s, "LG.CHECK api/k").starts_with("*5\r\n:0\r\n") {
        assert!(restarted.elapsed() < Duration::from_secs(15), "limiting never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Limiting, on Redis's bucket: the second of the burst of 2 is admitted, the third is not.
    assert!(ask(&mut s, "LG.CHECK api/k").starts_with("*5\r\n:0\r\n"));
    assert!(ask(&mut s, "LG.CHECK api/k").starts_with("*5\r\n:1\r\n"));
    eprintln!("limiting started {:?} after Redis came up", restarted.elapsed());
}

#[test]
fn a_graceful_stop_answers_the_calls_in_flight() {
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
    use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
    let redis = RedisServer::start();
    let mut served = serve_with("rules.toml", "api = \"100/s\"\n", TscClock::new(), |c| {
        c.grpc(any_port()).redis(redis.url()).redis_deadline(Duration::from_millis(800))
    });
    let grpc = served.grpc();
    let clients = support::runtime();
    let mut client =
        clients.block_on(RateLimitServiceClient::connect(format!("http://{grpc}"))).unwrap();
    // Redis frozen: a call waits for its deadline, in flight meanwhile.
    redis.pause();
    let call = clients.spawn(async move {
        let request = RateLimitRequest {
            domain: "api".into(),
            descriptors: vec![RateLimitDescriptor {
                entries: vec![Entry { key: "k".into(), value: String::new() }],
                ..Default::default()
            }],
            hits_addend: 1,
        };
        client.should_rate_limit(request).await
    });
    std::thread::sleep(Duration::from_millis(200));
    let stopping = Instant::now();
    served.stop();
    // The stop waited for the call, which got its answer: refused by the policy (Redis gave none).
    let answer =
        clients.block_on(call).unwrap().expect("the call in flight is answered").into_inner();
    assert_eq!(answer.overall_code, 2, "OVER_LIMIT from the deny policy");
    assert!(stopping.elapsed() >= Duration::from_millis(300), "stopped before the call ended");
    assert!(std::net::TcpStream::connect(grpc).is_err(), "still accepting after the stop");
    redis.resume();
}

#[test]
fn buckets_in_redis_are_listed_by_every_instance() {
    let redis = RedisServer::start();
    let rules = "view = \"1/h burst 10\"\nother = \"5/s\"\n";
    let a = fleet_instance(&redis, rules);
    let b = fleet_instance(&redis, rules);
    let mut sb = raw(b.resp());
    assert!(ask(&mut sb, "LG.CHECK view/alice 4").starts_with("*5\r\n:0\r\n:6\r\n"));
    assert!(ask(&mut sb, "LG.CHECK view/bob 1").starts_with("*5\r\n:0\r\n:9\r\n"));
    assert!(ask(&mut sb, "CL.THROTTLE user123 9 1 3600 2").starts_with("*5\r\n:0\r\n:10\r\n:8\r\n"));
    // Instance a lists what b charged: the buckets are the fleet's.
    let page: serde_json::Value = serde_json::from_str(&http_get(a.http(), "/buckets")).unwrap();
    assert_eq!(page["backend"], "redis");
    let rows = page["buckets"].as_array().unwrap();
    let keys: Vec<&str> = rows.iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["cl.throttle/user123", "view/alice", "view/bob"]);
    // A CL.THROTTLE bucket is listed under the quota of its last charge.
    let cell = &rows[0];
    assert_eq!(
        (cell["rule"].as_str(), cell["quota"].as_str()),
        (Some("cl.throttle"), Some("1/h burst 10"))
    );
    assert_eq!(cell["remaining"].as_u64(), Some(8));
    let level = cell["level"].as_f64().unwrap();
    assert!((1.99..=2.0).contains(&level), "level {level}");
    let alice = &rows[1];
    assert_eq!((alice["rule"].as_str(), alice["remaining"].as_u64()), (Some("view"), Some(6)));
    let level = alice["level"].as_f64().unwrap();
    assert!((3.99..=4.0).contains(&level), "level {level}");
    assert!(alice["idle_ms"].is_null());
    // Filters: a prefix, and "at least 30% full".
    let busy: serde_json::Value =
        serde_json::from_str(&http_get(a.http(), "/buckets?prefix=view/&min_fill=0.3")).unwrap();
    let keys: Vec<&str> =
        busy["buckets"].as_array().unwrap().iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["view/alice"]);
    // Listing peeks at each bucket: the peeks are not counted as admissions.
    let metrics = http_get(a.http(), "/metrics");
    assert!(metrics.contains("leakgate_rule_admitted_total{rule=\"view\"} 0"), "{metrics}");
}
