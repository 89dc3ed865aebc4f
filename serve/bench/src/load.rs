//! The clients: RESP (one command in flight, or pipelined), gRPC, Redis INCRBY+EXPIRE, and the
//! in-process floors (leakgate's RuleLimiter, Limitador's in-memory limiter), 64 at once.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const CLIENTS: usize = 64;
pub const KEYS: u64 = 1000;
/// Each key's quota: 100 per second, 100 at once.
pub const PER_KEY: u64 = 100;

/// What one client counted: decisions, admitted, latencies (ns).
pub type Tally = (u64, u64, Vec<u64>);

/// A small per-client PRNG for key choice.
pub fn next_key(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state % KEYS
}

/// Runs `clients` copies of `client` until `stop`, on the current runtime, and merges them.
pub async fn run<F, Fut>(clients: usize, stop: Arc<AtomicBool>, client: F) -> Tally
where
    F: Fn(usize, Arc<AtomicBool>) -> Fut,
    Fut: std::future::Future<Output = Tally> + Send + 'static,
{
    let tasks: Vec<_> = (0..clients).map(|i| tokio::spawn(client(i, stop.clone()))).collect();
    let mut all = (0, 0, Vec::new());
    for task in tasks {
        let (d, a, l) = task.await.expect("a client");
        all.0 += d;
        all.1 += a;
        all.2.extend(l);
    }
    all
}

/// One RESP connection sending `CL.THROTTLE key 99 100 1` with `depth` commands per write.
pub async fn resp_client(
    addr: SocketAddr,
    seed: usize,
    depth: usize,
    stop: Arc<AtomicBool>,
) -> Tally {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ (seed as u64 + 1);
    let (mut decisions, mut admitted, mut latencies) = (0, 0, Vec::with_capacity(1 << 16));
    let mut out = Vec::with_capacity(depth * 64);
    let mut buf = vec![0u8; 64 * 1024];
    while !stop.load(Ordering::Relaxed) {
        out.clear();
        for _ in 0..depth {
            let key = format!("k{}", next_key(&mut state));
            out.extend_from_slice(format!("*5\r\n$11\r\nCL.THROTTLE\r\n${}\r\n{key}\r\n$2\r\n99\r\n$3\r\n100\r\n$1\r\n1\r\n", key.len()).as_bytes());
        }
        let sent = Instant::now();
        stream.write_all(&out).await.expect("write");
        // Each reply is six lines, `*5` and five integers; an error would be one line.
        let mut filled = 0;
        loop {
            let n = stream.read(&mut buf[filled..]).await.expect("read");
            assert!(n > 0, "the server closed the connection");
            filled += n;
            let text = &buf[..filled];
            assert!(
                !text.starts_with(b"-") && !text.windows(3).any(|w| w == b"\n-E"),
                "{}",
                String::from_utf8_lossy(text)
            );
            if text.iter().filter(|&&b| b == b'\n').count() == depth * 6 {
                admitted += text.windows(8).filter(|w| *w == b"*5\r\n:0\r\n").count() as u64;
                break;
            }
        }
        let took = sent.elapsed().as_nanos() as u64;
        for _ in 0..depth {
            latencies.push(took);
        }
        decisions += depth as u64;
    }
    (decisions, admitted, latencies)
}

/// gRPC: `per_channel` clients share each HTTP/2 connection, one call in flight each.
pub async fn grpc_client(
    channel: tonic::transport::Channel,
    seed: usize,
    stop: Arc<AtomicBool>,
) -> Tally {
    let mut client = RateLimitServiceClient::new(channel);
    let mut state = 0x2545_f491_4f6c_dd1du64 ^ (seed as u64 + 1);
    let (mut decisions, mut admitted, mut latencies) = (0, 0, Vec::with_capacity(1 << 16));
    while !stop.load(Ordering::Relaxed) {
        let request = RateLimitRequest {
            domain: "bench".into(),
            descriptors: vec![RateLimitDescriptor {
                entries: vec![Entry { key: "k".into(), value: next_key(&mut state).to_string() }],
                ..Default::default()
            }],
            hits_addend: 1,
        };
        let sent = Instant::now();
        let answer = client.should_rate_limit(request).await.expect("an answer").into_inner();
        latencies.push(sent.elapsed().as_nanos() as u64);
        decisions += 1;
        admitted += u64::from(answer.overall_code == Code::Ok as i32);
    }
    (decisions, admitted, latencies)
}

/// envoyproxy/ratelimit's Redis traffic: per decision, a pipelined `INCRBY key 1` and
/// `EXPIRE key 1` on the key of the current one-second window.
pub async fn incr_client(
    mut con: redis::aio::MultiplexedConnection,
    seed: usize,
    stop: Arc<AtomicBool>,
) -> Tally {
    let mut state = 0x1234_5678_9abc_def1u64 ^ (seed as u64 + 1);
    let (mut decisions, mut admitted, mut latencies) = (0, 0, Vec::with_capacity(1 << 16));
    while !stop.load(Ordering::Relaxed) {
        let window =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let key = format!("bench_k_{}_{window}", next_key(&mut state));
        let sent = Instant::now();
        let (count, _): (u64, i64) = redis::pipe()
            .cmd("INCRBY")
            .arg(&key)
            .arg(1)
            .cmd("EXPIRE")
            .arg(&key)
            .arg(1)
            .query_async(&mut con)
            .await
            .expect("INCRBY+EXPIRE");
        latencies.push(sent.elapsed().as_nanos() as u64);
        decisions += 1;
        admitted += u64::from(count <= PER_KEY);
    }
    (decisions, admitted, latencies)
}

/// Runs `check` on `CLIENTS` OS threads until `run` has passed; each call timed.
pub fn threads(run: Duration, check: impl Fn(u64) -> bool + Sync) -> (Tally, Duration) {
    let start = Instant::now();
    let tallies: Vec<Tally> = std::thread::scope(|scope| {
        let check = &check;
        let handles: Vec<_> = (0..CLIENTS)
            .map(|i| {
                scope.spawn(move || {
                    let mut state = 0xdead_beef_u64 ^ (i as u64 + 1);
                    let (mut d, mut a, mut l) = (0u64, 0u64, Vec::with_capacity(1 << 18));
                    while start.elapsed() < run {
                        let key = next_key(&mut state);
                        let t = Instant::now();
                        a += u64::from(check(key));
                        l.push(t.elapsed().as_nanos() as u64);
                        d += 1;
                    }
                    (d, a, l)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let elapsed = start.elapsed();
    let mut all = (0, 0, Vec::new());
    for (d, a, l) in tallies {
        all.0 += d;
        all.1 += a;
        all.2.extend(l);
    }
    (all, elapsed)
}

pub fn stopper(run: Duration) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || {
        std::thread::sleep(run);
        flag.store(true, Ordering::Relaxed);
    });
    stop
}
