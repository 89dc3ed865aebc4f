//! Load: 64 concurrent clients (32 over RESP, 32 over gRPC) for 3 s on the real clock, against
//! eight keys. Every key's admissions stay within `burst + rate * t` (plus one), and every client
//! finishes: nothing hangs.

mod support;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use leakgate::TscClock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{any_port, serve_with};

const RUN: Duration = Duration::from_secs(3);
/// Each call must be answered within this, or the test fails as hung.
const CALL_LIMIT: Duration = Duration::from_secs(10);

#[test]
fn sixty_four_clients_for_three_seconds_stay_within_every_keys_bound() {
    // gRPC keys: 50/s burst 20 each. RESP keys: CL.THROTTLE burst 10 (max_burst 9), 100 per 1 s.
    let served = serve_with("rules.toml", "load = \"50/s burst 20\"\n", TscClock::new(), |c| {
        c.grpc(any_port()).resp(any_port())
    });
    let clients = support::runtime();
    let admitted: Arc<[AtomicU64; 8]> = Arc::new(Default::default());
    let calls = Arc::new(AtomicU64::new(0));
    let (grpc, resp) = (served.grpc(), served.resp());
    let (start, end) = clients.block_on(async {
        let start = Instant::now();
        let mut tasks = Vec::new();
        for client in 0..64usize {
            let (admitted, calls) = (admitted.clone(), calls.clone());
            let key = (client / 2) % 4;
            if client % 2 == 0 {
                tasks.push(tokio::spawn(async move {
                    let mut c =
                        RateLimitServiceClient::connect(format!("http://{grpc}")).await.unwrap();
                    while start.elapsed() < RUN {
                        let request = RateLimitRequest {
                            domain: "load".into(),
                            descriptors: vec![RateLimitDescriptor {
                                entries: vec![Entry { key: "k".into(), value: key.to_string() }],
                                ..Default::default()
                            }],
                            hits_addend: 1,
                        };
                        let answer =
                            tokio::time::timeout(CALL_LIMIT, c.should_rate_limit(request)).await;
                        let answer =
                            answer.expect("a gRPC call hung").expect("an answer").into_inner();
                        calls.fetch_add(1, Ordering::Relaxed);
                        if answer.overall_code == Code::Ok as i32 {
                            admitted[key].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }));
            } else {
                tasks.push(tokio::spawn(async move {
                    let client = redis::Client::open(format!("redis://{resp}/")).unwrap();
                    let mut con = client.get_multiplexed_async_connection().await.unwrap();
                    while start.elapsed() < RUN {
                        let mut cmd = redis::cmd("CL.THROTTLE");
                        cmd.arg(format!("load-{key}")).arg(9).arg(100).arg(1);
                        let reply =
                            tokio::time::timeout(CALL_LIMIT, cmd.query_async::<Vec<i64>>(&mut con))
                                .await;
                        let reply = reply.expect("a RESP call hung").expect("an answer");
                        calls.fetch_add(1, Ordering::Relaxed);
                        if reply[0] == 0 {
                            admitted[4 + key].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }));
            }
        }
        for task in tasks {
            tokio::time::timeout(RUN + CALL_LIMIT, task).await.expect("a client hung").unwrap();
        }
        (start, Instant::now())
    });
    let t = (end - start).as_secs_f64();
    let calls = calls.load(Ordering::Relaxed);
    for (i, count) in admitted.iter().enumerate() {
        let count = count.load(Ordering::Relaxed) as f64;
        let (burst, rate) = if i < 4 { (20.0, 50.0) } else { (10.0, 100.0) };
        let bound = burst + rate * t + 1.0;
        assert!(count <= bound, "key {i}: {count} admitted in {t:.2} s, bound {bound:.1}");
        assert!(count >= burst, "key {i}: {count} admitted in {t:.2} s, below one burst");
    }
    eprintln!("64 clients, {calls} calls in {t:.2} s ({:.0}/s, debug build)", calls as f64 / t);
}
