//! Envoy's rate-limit service over gRPC, driven by a client generated from Envoy's protos
//! (envoy-types) on a `ManualClock` (exact sequences) and on the real clock.

mod support;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use leakgate::{ManualClock, TscClock};
use std::time::{Duration, Instant};
use support::{any_port, serve_manual, serve_with, Served};
use tonic::transport::Channel;

fn d(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry { key: k.to_string(), value: v.to_string() })
            .collect(),
        ..Default::default()
    }
}

fn with_hits(mut descriptor: RateLimitDescriptor, hits: u64) -> RateLimitDescriptor {
    descriptor.hits_addend = Some(UInt64Value { value: hits });
    descriptor
}

fn with_limit(
    mut descriptor: RateLimitDescriptor,
    requests: u32,
    unit: i32,
) -> RateLimitDescriptor {
    descriptor.limit = Some(RateLimitOverride { requests_per_unit: requests, unit });
    descriptor
}

struct Client<'s, C: leakgate::Clock + 'static> {
    served: &'s Served<C>,
    client: RateLimitServiceClient<Channel>,
}

impl<'s, C: leakgate::Clock + Clone + 'static> Client<'s, C> {
    fn new(served: &'s Served<C>) -> Self {
        let url = format!("http://{}", served.grpc());
        let client =
            served.runtime.block_on(RateLimitServiceClient::connect(url)).expect("connect");
        Client { served, client }
    }

    fn call(
        &mut self,
        domain: &str,
        descriptors: Vec<RateLimitDescriptor>,
        hits: u32,
    ) -> Result<RateLimitResponse, tonic::Status> {
        let request = RateLimitRequest { domain: domain.into(), descriptors, hits_addend: hits };
        let client = &mut self.client;
        self.served
            .runtime
            .block_on(async { client.should_rate_limit(request).await.map(|r| r.into_inner()) })
    }

    fn ok(
        &mut self,
        domain: &str,
        descriptors: Vec<RateLimitDescriptor>,
        hits: u32,
    ) -> RateLimitResponse {
        self.call(domain, descriptors, hits).expect("an answer")
    }
}

/// A status's figures: (code, limit_remaining, reset in ms).
fn fig(status: &DescriptorStatus) -> (Code, u32, u128) {
    let reset = status
        .duration_until_reset
        .as_ref()
        .map_or(0, |d| d.seconds as u128 * 1000 + d.nanos as u128 / 1_000_000);
    (Code::try_from(status.code).unwrap(), status.limit_remaining, reset)
}

fn overall(response: &RateLimitResponse) -> Code {
    Code::try_from(response.overall_code).unwrap()
}

const RULES: &str = r#"
"edge/remote_address" = "2/s"
"edge/remote_address/10.0.0.9" = "5/s"
"edge/user" = "1/s burst 3"
"edge/beta" = { quota = "1/s", shadow = true }
"edge/odd" = "5/30s"
"#;

#[test]
fn exact_sequences_on_a_manual_clock() {
    let clock = ManualClock::new();
    let served = serve_manual(RULES, &clock);
    let mut c = Client::new(&served);
    let ip = |addr| vec![d(&[("remote_address", addr)])];
    let r = c.ok("edge", ip("1.2.3.4"), 0);
    assert_eq!((overall(&r), fig(&r.statuses[0])), (Code::Ok, (Code::Ok, 1, 500)));
    let limit = r.statuses[0].current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.name.as_str(), limit.requests_per_unit, limit.unit),
        ("edge/remote_address", 2, 1)
    );
    assert_eq!(fig(&c.ok("edge", ip("1.2.3.4"), 0).statuses[0]), (Code::Ok, 0, 1000));
    let r = c.ok("edge", ip("1.2.3.4"), 0);
    assert_eq!((overall(&r), fig(&r.statuses[0])), (Code::OverLimit, (Code::OverLimit, 0, 1000)));
    clock.advance(Duration::from_millis(499));
    assert_eq!(overall(&c.ok("edge", ip("1.2.3.4"), 0)), Code::OverLimit);
    clock.advance(Duration::from_millis(1));
    assert_eq!(fig(&c.ok("edge", ip("1.2.3.4"), 0).statuses[0]), (Code::Ok, 0, 1000));
    // Another address has its own bucket; an override of the path has its own quota.
    assert_eq!(fig(&c.ok("edge", ip("5.6.7.8"), 0).statuses[0]), (Code::Ok, 1, 500));
    assert_eq!(fig(&c.ok("edge", ip("10.0.0.9"), 0).statuses[0]), (Code::Ok, 4, 200));
    // A quota Envoy's units cannot express has no current_limit, but its figures.
    let r = c.ok("edge", vec![d(&[("odd", "x")])], 0);
    assert_eq!(fig(&r.statuses[0]), (Code::Ok, 4, 6000));
    assert!(r.statuses[0].current_limit.is_none());
}

#[test]
fn descriptors_are_judged_all_or_nothing() {
    let clock = ManualClock::new();
    let served = serve_manual(RULES, &clock);
    let mut c = Client::new(&served);
    // user/u1 has 3; spend them.
    assert_eq!(
        fig(&c.ok("edge", vec![with_hits(d(&[("user", "u1")]), 3)], 0).statuses[0]),
        (Code::Ok, 0, 3000)
    );
    // The address has room, the user not: refused, and the address is not charged.
    let r = c.ok("edge", vec![d(&[("remote_address", "1.1.1.1")]), d(&[("user", "u1")])], 0);
    assert_eq!(overall(&r), Code::OverLimit);
    assert_eq!(fig(&r.statuses[0]), (Code::Ok, 2, 0));
    assert_eq!(fig(&r.statuses[1]), (Code::OverLimit, 0, 3000));
    // Both with room: both charged, each reporting its own bucket.
    let r = c.ok("edge", vec![d(&[("remote_address", "1.1.1.1")]), d(&[("user", "u2")])], 0);
    assert_eq!(overall(&r), Code::Ok);
    assert_eq!(fig(&r.statuses[0]), (Code::Ok, 1, 500));
    assert_eq!(fig(&r.statuses[1]), (Code::Ok, 2, 1000));
}

#[test]
fn hits_addend_at_both_levels() {
    let clock = ManualClock::new();
    let served = serve_manual(RULES, &clock);
    let mut c = Client::new(&served);
    // The request's hits_addend is every descriptor's cost...
    let r = c.ok("edge", vec![d(&[("user", "a")])], 2);
    assert_eq!(fig(&r.statuses[0]), (Code::Ok, 1, 2000));
    // ...unless a descriptor names its own; 0 on a descriptor peeks.
    let r = c.ok("edge", vec![with_hits(d(&[("user", "a")]), 0)], 3);
    assert_eq!((overall(&r), fig(&r.statuses[0])), (Code::Ok, (Code::Ok, 1, 2000)));
    // Uneven costs in one request: 1 on a, 2 on b (burst 3 each).
    let r =
        c.ok("edge", vec![with_hits(d(&[("user", "a")]), 1), with_hits(d(&[("user", "b")]), 2)], 0);
    assert_eq!(overall(&r), Code::Ok);
    assert_eq!(
        (fig(&r.statuses[0]), fig(&r.statuses[1])),
        ((Code::Ok, 0, 3000), (Code::Ok, 1, 2000))
    );
    // 2 more on b would fit alone but a is full: nothing charged.
    let r =
        c.ok("edge", vec![with_hits(d(&[("user", "a")]), 1), with_hits(d(&[("user", "b")]), 1)], 0);
    assert_eq!(overall(&r), Code::OverLimit);
    assert_eq!(
        (fig(&r.statuses[0]).0, fig(&r.statuses[1])),
        (Code::OverLimit, (Code::Ok, 1, 2000))
    );
    // A cost above the burst can never conform.
    let r = c.ok("edge", vec![d(&[("user", "c")])], 4);
    assert_eq!(fig(&r.statuses[0]), (Code::OverLimit, 3, 0));
    // Costs too uneven to judge together are a request error.
    let e = c
        .call(
            "edge",
            vec![with_hits(d(&[("user", "e")]), 1), with_hits(d(&[("user", "f")]), 1 << 40)],
            0,
        )
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
}

#[test]
fn shadow_rules_answer_ok_while_counting() {
    let clock = ManualClock::new();
    let served = serve_manual(RULES, &clock);
    let mut c = Client::new(&served);
    for _ in 0..5 {
        let r = c.ok("edge", vec![d(&[("beta", "x")])], 0);
        assert_eq!(
            (overall(&r), Code::try_from(r.statuses[0].code).unwrap()),
            (Code::Ok, Code::Ok)
        );
    }
    let metrics = support::http_get(served.http(), "/metrics");
    assert!(
        metrics.contains("leakgate_rule_shadow_refused_total{rule=\"edge/beta\"} 4"),
        "{metrics}"
    );
    assert!(metrics.contains("leakgate_rule_admitted_total{rule=\"edge/beta\"} 1"), "{metrics}");
}

#[test]
fn descriptor_limits_override_with_a_bucket_of_their_own() {
    let clock = ManualClock::new();
    let served = serve_manual(RULES, &clock);
    let mut c = Client::new(&served);
    const MINUTE: i32 = 2;
    let over = || with_limit(d(&[("remote_address", "9.9.9.9")]), 1, MINUTE);
    let r = c.ok("edge", vec![over()], 0);
    assert_eq!(fig(&r.statuses[0]), (Code::Ok, 0, 60_000));
    let limit = r.statuses[0].current_limit.as_ref().unwrap();
    assert_eq!((limit.requests_per_unit, limit.unit), (1, MINUTE));
    assert_eq!(fig(&c.ok("edge", vec![over()], 0).statuses[0]).0, Code::OverLimit);
    // The file's rule for the same key is untouched.
    assert_eq!(
        fig(&c.ok("edge", vec![d(&[("remote_address", "9.9.9.9")])], 0).statuses[0]),
        (Code::Ok, 1, 500)
    );
    // Even where no rule applies, and a limit of 0 refuses.
    assert_eq!(
        fig(&c.ok("other", vec![with_limit(d(&[("k", "v")]), 3, 1)], 0).statuses[0]),
        (Code::Ok, 2, 333)
    );
    assert_eq!(
        overall(&c.ok("other", vec![with_limit(d(&[("k", "v")]), 0, 1)], 0)),
        Code::OverLimit
    );
    let e = c.call("edge", vec![with_limit(d(&[("k", "v")]), 3, 0)], 0).unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
}

#[test]
fn an_override_and_a_rule_are_judged_all_or_nothing() {
    let clock = ManualClock::new();
    let served = serve_manual(RULES, &clock);
    let mut c = Client::new(&served);
    const MINUTE: i32 = 2;
    let over = || with_limit(d(&[("remote_address", "8.8.8.8")]), 2, MINUTE);
    let user = || d(&[("user", "u1")]);
    // The rule's bucket (1/s burst 3) is spent; the override's (2/min) is whole.
    assert_eq!(overall(&c.ok("edge", vec![user()], 3)), Code::Ok);
    let r = c.ok("edge", vec![over(), user()], 0);
    assert_eq!(overall(&r), Code::OverLimit);
    assert_eq!(fig(&r.statuses[0]).0, Code::Ok);
    assert_eq!(fig(&r.statuses[1]).0, Code::OverLimit);
    // The refusal charged nothing: the override still takes two.
    assert_eq!(fig(&c.ok("edge", vec![over()], 0).statuses[0]), (Code::Ok, 1, 30_000));
    clock.advance(Duration::from_secs(3));
    // Now the override refuses, and the rule's bucket (refilled) is not charged.
    assert_eq!(overall(&c.ok("edge", vec![over()], 0)), Code::Ok);
    let r = c.ok("edge", vec![over(), user()], 0);
    assert_eq!(
        (fig(&r.statuses[0]).0, fig(&r.statuses[1]).0, overall(&r)),
        (Code::OverLimit, Code::Ok, Code::OverLimit)
    );
    assert_eq!(fig(&c.ok("edge", vec![user()], 3).statuses[0]).0, Code::Ok);
    // Counted under the override's rule.
    let text = support::http_get(served.http(), "/metrics");
    let line = "leakgate_rule_refused_total{rule=\"~override/2/minute\"} 1";
    assert!(text.lines().any(|l| l == line), "{text}");
}

#[test]
fn override_keys_take_their_memory_from_the_key_budget() {
    let served = serve_with("rules.toml", RULES, ManualClock::new(), |c| {
        c.grpc(any_port()).http(any_port()).key_memory(64 * 1024)
    });
    let mut c = Client::new(&served);
    let address = |i: usize| format!("{i:0>3000}");
    let mut refused = 0;
    for i in 0..40 {
        let over = with_limit(d(&[("remote_address", &address(i))]), 5, 2);
        refused += usize::from(overall(&c.ok("edge", vec![over], 0)) == Code::OverLimit);
    }
    // 64 KiB hold 20 keys of 3,039 bytes (`~override/5/minute/edge/remote_address/...`, each
    // charged its bytes and 194 more).
    assert_eq!(refused, 40 - 20);
    // A key held is still served.
    let again = with_limit(d(&[("remote_address", &address(0))]), 5, 2);
    assert_eq!(overall(&c.ok("edge", vec![again], 0)), Code::Ok);
    let text = support::http_get(served.http(), "/metrics");
    assert!(text.lines().any(|l| l == "leakgate_keys_refused_total 20"), "{text}");
}

#[test]
fn unknown_domains_empty_and_oversized_descriptors() {
    let clock = ManualClock::new();
    let served = serve_manual(RULES, &clock);
    let mut c = Client::new(&served);
    let r = c.ok("nobody", vec![d(&[("remote_address", "1.2.3.4")])], 0);
    assert_eq!(
        (overall(&r), fig(&r.statuses[0]), r.statuses[0].current_limit.is_none()),
        (Code::Ok, (Code::Ok, u32::MAX, 0), true)
    );
    let r = c.ok("edge", vec![d(&[])], 0);
    assert_eq!(fig(&r.statuses[0]), (Code::Ok, u32::MAX, 0));
    let invalid = |r: Result<RateLimitResponse, tonic::Status>| r.unwrap_err().code();
    assert_eq!(invalid(c.call("", vec![d(&[("a", "b")])], 0)), tonic::Code::InvalidArgument);
    assert_eq!(invalid(c.call("edge", vec![], 0)), tonic::Code::InvalidArgument);
    assert_eq!(
        invalid(c.call("edge", vec![d(&[("a", "b")]); 65], 0)),
        tonic::Code::InvalidArgument
    );
    let long = "v".repeat(5000);
    assert_eq!(
        invalid(c.call("edge", vec![d(&[("user", &long)])], 0)),
        tonic::Code::InvalidArgument
    );
    // Still serving.
    assert_eq!(overall(&c.ok("edge", vec![d(&[("user", "z")])], 0)), Code::Ok);
}

#[test]
fn clients_whose_deadline_passes_leave_the_server_serving() {
    let clock = ManualClock::new();
    let served = serve_manual(RULES, &clock);
    let mut c = Client::new(&served);
    // A deadline the server cannot meet (the gRPC timeout header says 1 ns, and the client
    // gives up after 1 µs): the calls end on the client's side, abandoned mid-flight.
    let client = &mut c.client;
    let mut gave_up = 0;
    for i in 0..100 {
        let mut request = tonic::Request::new(RateLimitRequest {
            domain: "edge".into(),
            descriptors: vec![d(&[("user", &format!("deadline-{i}"))])],
            hits_addend: 1,
        });
        request.set_timeout(Duration::from_nanos(1));
        let call = async {
            tokio::time::timeout(Duration::from_micros(1), client.should_rate_limit(request)).await
        };
        match served.runtime.block_on(call) {
            Err(_elapsed) => gave_up += 1,
            Ok(Err(status)) => {
                assert!(
                    matches!(status.code(), tonic::Code::DeadlineExceeded | tonic::Code::Cancelled),
                    "{status:?}"
                );
                gave_up += 1;
            }
            Ok(Ok(_)) => {}
        }
    }
    assert!(gave_up > 0, "no call outlived its deadline");
    assert_eq!(overall(&c.ok("edge", vec![d(&[("user", "after")])], 0)), Code::Ok);
}

#[test]
fn the_ietf_fields_when_asked() {
    let clock = ManualClock::new();
    let served = serve_with("rules.toml", RULES, clock.clone(), |c| {
        c.grpc(any_port()).rate_limit_headers(true)
    });
    let mut c = Client::new(&served);
    let headers = |r: &RateLimitResponse| -> Vec<(String, String)> {
        r.response_headers_to_add.iter().map(|h| (h.key.clone(), h.value.clone())).collect()
    };
    let r = c.ok("edge", vec![d(&[("user", "h")]), d(&[("remote_address", "3.3.3.3")])], 0);
    assert_eq!(
        headers(&r),
        [
            ("RateLimit-Policy".to_string(), "\"edge/remote_address\";q=2;w=1".to_string()),
            ("RateLimit".to_string(), "\"edge/remote_address\";r=1;t=1".to_string()),
        ]
    );
    c.ok("edge", vec![d(&[("user", "h")])], 2);
    let r = c.ok("edge", vec![d(&[("user", "h")])], 0);
    assert_eq!(overall(&r), Code::OverLimit);
    assert_eq!(headers(&r)[2], ("Retry-After".to_string(), "1".to_string()));
}

#[test]
fn envoys_yaml_configuration_with_replaces() {
    let yaml = r#"
domain: shop
descriptors:
  - key: user
    rate_limit: { name: per_user, unit: minute, requests_per_unit: 2 }
  - key: plan
    value: gold
    rate_limit: { unit: minute, requests_per_unit: 100, replaces: [{ name: per_user }] }
"#;
    let clock = ManualClock::new();
    let served = serve_with("config.yaml", yaml, clock.clone(), |c| c.grpc(any_port()));
    let mut c = Client::new(&served);
    for _ in 0..2 {
        assert_eq!(overall(&c.ok("shop", vec![d(&[("user", "ann")])], 0)), Code::Ok);
    }
    assert_eq!(overall(&c.ok("shop", vec![d(&[("user", "ann")])], 0)), Code::OverLimit);
    // A gold request: the gold limit replaces the per-user one.
    let r = c.ok("shop", vec![d(&[("user", "ann")]), d(&[("plan", "gold")])], 0);
    assert_eq!(overall(&r), Code::Ok);
    assert!(r.statuses[0].current_limit.is_none());
    assert_eq!(r.statuses[1].limit_remaining, 99);
}

#[test]
fn on_the_real_clock_admissions_stay_within_the_bound() {
    let served =
        serve_with("rules.toml", "\"rt/k\" = \"10/s\"\n", TscClock::new(), |c| c.grpc(any_port()));
    let mut c = Client::new(&served);
    let start = Instant::now();
    let mut admitted = 0u64;
    for _ in 0..40 {
        if overall(&c.ok("rt", vec![d(&[("k", "")])], 0)) == Code::Ok {
            admitted += 1;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let bound = 10.0 + 10.0 * elapsed + 1.0;
    assert!(admitted >= 10 && admitted as f64 <= bound, "{admitted} admitted in {elapsed:.3} s");
}
