//! `leakgate serve`'s figures on this machine: decisions per second, p50 and p99 latency, and the
//! service's own CPU per decision, with 64 concurrent clients, over RESP (one command in flight
//! per connection, and pipelined) and gRPC, in memory and with `--redis`; beside, in the same
//! run, the in-process floors (leakgate's `RuleLimiter`, Limitador's in-memory limiter, each
//! called from 64 threads) and the Redis `INCRBY`+`EXPIRE` fixed window that envoyproxy/ratelimit
//! sends per descriptor.
//!
//! The service runs in this process on a runtime of its own (threads `lg-serve*`), the clients on
//! another (`lg-client*`); both share the machine's cores, as a sidecar and its callers do.
//!
//! ```text
//! cargo run --release --manifest-path serve/bench/Cargo.toml --target-dir target/serve-bench \
//!     -- [SECONDS per scenario, default 5] [SERVER THREADS, default 2]
//! ```
//! The `--redis` rows need `redis-server` (scripts/ensure-redis.sh); they are skipped without it.

mod load;
mod measure;

use leakgate::{RuleLimiter, Rules};
use load::{CLIENTS, PER_KEY};
use measure::{thread_cpu, Figures, HEADER};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn runtime(name: &str, threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("a runtime")
}

struct Bench {
    seconds: Duration,
    server_threads: usize,
    rules: tempfile::NamedTempFile,
}

/// A redis-server of the bench's own on a free port, killed when dropped.
struct Redis(Child, u16);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn redis_server() -> Option<Redis> {
    let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .spawn()
        .ok()?;
    let redis = Redis(child, port);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(redis)
}

impl Bench {
    /// Serves the bench rules (in memory, or on `redis`), runs `clients` against it, and
    /// measures.
    fn served<F, Fut>(&self, name: &str, redis: Option<&Redis>, clients: F) -> Figures
    where
        F: FnOnce(SocketAddr, SocketAddr, Arc<std::sync::atomic::AtomicBool>) -> Fut,
        Fut: std::future::Future<Output = load::Tally>,
    {
        let server = runtime("lg-serve", self.server_threads);
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let mut config = leakgate_serve::Config::new(self.rules.path()).grpc(any).resp(any);
        if let Some(redis) = redis {
            config = config
                .redis(format!("redis://127.0.0.1:{}/", redis.1))
                .redis_deadline(Duration::from_millis(100));
        }
        let running = server.block_on(leakgate_serve::start(config)).expect("the service starts");
        let (grpc, resp) = (running.grpc_addr().unwrap(), running.resp_addr().unwrap());
        let client = runtime("lg-client", 2);
        // One second of warm-up, then the measured run.
        let warm = load::stopper(Duration::from_secs(1));
        let _ = client.block_on(clients_of(&clients, grpc, resp, warm));
        let cpu_before = thread_cpu("lg-serve");
        let started = Instant::now();
        let stop = load::stopper(self.seconds);
        let (decisions, admitted, latencies) = client.block_on(clients(grpc, resp, stop));
        let elapsed = started.elapsed();
        let server_cpu = Some(thread_cpu("lg-serve").saturating_sub(cpu_before));
        server.block_on(running.shutdown());
        Figures { name: name.to_string(), decisions, admitted, elapsed, latencies, server_cpu }
    }
}

/// Runs the client factory once more for the warm-up (`F` is consumed by the measured run, so
/// the warm-up calls a reference).
async fn clients_of<F, Fut>(
    clients: &F,
    grpc: SocketAddr,
    resp: SocketAddr,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> load::Tally
where
    F: FnOnce(SocketAddr, SocketAddr, Arc<std::sync::atomic::AtomicBool>) -> Fut,
    Fut: std::future::Future<Output = load::Tally>,
{
    let _ = (clients, grpc, resp);
    // The warm-up only needs the service to have run: a short RESP pipeline does that.
    load::run(4, stop, move |i, stop| load::resp_client(resp, i, 8, stop)).await
}

fn resp(
    depth: usize,
) -> impl FnOnce(
    SocketAddr,
    SocketAddr,
    Arc<std::sync::atomic::AtomicBool>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = load::Tally>>> {
    move |_, resp, stop| {
        Box::pin(load::run(CLIENTS, stop, move |i, stop| load::resp_client(resp, i, depth, stop)))
    }
}

fn grpc() -> impl FnOnce(
    SocketAddr,
    SocketAddr,
    Arc<std::sync::atomic::AtomicBool>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = load::Tally>>> {
    move |grpc, _, stop| {
        Box::pin(async move {
            // Eight HTTP/2 connections, eight callers on each (as a few Envoys with many streams).
            let mut channels = Vec::new();
            let n: usize =
                std::env::var("BENCH_GRPC_CHANNELS").ok().and_then(|v| v.parse().ok()).unwrap_or(8);
            for _ in 0..n {
                let endpoint =
                    tonic::transport::Endpoint::from_shared(format!("http://{grpc}")).unwrap();
                channels.push(endpoint.tcp_nodelay(true).connect().await.expect("gRPC connect"));
            }
            load::run(CLIENTS, stop, move |i, stop| {
                load::grpc_client(channels[i % n].clone(), i, stop)
            })
            .await
        })
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seconds = Duration::from_secs_f64(args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5.0));
    let server_threads = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2);
    let rules = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    std::fs::write(rules.path(), format!("bench = \"{PER_KEY}/s\"\n")).unwrap();
    let bench = Bench { seconds, server_threads, rules };
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpu
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("?")
        .trim()
        .to_string();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("leakgate serve, {seconds:?} per scenario, {CLIENTS} clients, {} keys at {PER_KEY}/s each; {model}, {cores} cores; service runtime: {server_threads} threads\n", load::KEYS);
    println!("{HEADER}");
    let mut rows = Vec::new();
    let mut show = |f: Figures| {
        println!("{}", f.row());
        rows.push(f);
    };
    if std::env::var("BENCH_ONLY_GRPC").is_ok() {
        show(bench.served("gRPC ShouldRateLimit, in memory", None, grpc()));
        return;
    }
    show(bench.served("RESP CL.THROTTLE, in memory, pipelined 16", None, resp(16)));
    show(bench.served("RESP CL.THROTTLE, in memory, 1 in flight", None, resp(1)));
    show(bench.served("gRPC ShouldRateLimit, in memory", None, grpc()));
    // The in-process floors, 64 threads each.
    let mut rules = Rules::new();
    rules.insert("bench", [format!("{PER_KEY}/s").parse().unwrap()]);
    let lim = RuleLimiter::new(rules);
    let names: Vec<String> = (0..load::KEYS).map(|k| format!("bench/k{k}")).collect();
    let ((d, a, l), elapsed) = load::threads(seconds, |k| lim.check(&names[k as usize]).is_ok());
    show(Figures {
        name: "in process: leakgate RuleLimiter".into(),
        decisions: d,
        admitted: a,
        elapsed,
        latencies: l,
        server_cpu: None,
    });
    show(limitador_floor(seconds));
    match redis_server() {
        Some(redis) => {
            show(bench.served("RESP CL.THROTTLE, --redis, pipelined 16", Some(&redis), resp(16)));
            show(bench.served("RESP CL.THROTTLE, --redis, 1 in flight", Some(&redis), resp(1)));
            show(bench.served("gRPC ShouldRateLimit, --redis", Some(&redis), grpc()));
            show(incr_expire(&redis, seconds));
        }
        None => println!("(no redis-server: the --redis rows are skipped)"),
    }
}

fn limitador_floor(seconds: Duration) -> Figures {
    use limitador::limit::{Context, Expression, Limit};
    let limiter = limitador::RateLimiter::new(100_000);
    let limit = Limit::new("bench", PER_KEY, 1, [], [Expression::parse("k").unwrap()]);
    limiter.add_limit(limit);
    let namespace: limitador::limit::Namespace = "bench".into();
    let ((d, a, l), elapsed) = load::threads(seconds, |k| {
        let ctx: Context =
            std::collections::HashMap::from([("k".to_string(), k.to_string())]).into();
        !limiter.check_rate_limited_and_update(&namespace, &ctx, 1).expect("limitador").limited
    });
    Figures {
        name: "in process: Limitador in-memory".into(),
        decisions: d,
        admitted: a,
        elapsed,
        latencies: l,
        server_cpu: None,
    }
}

fn incr_expire(redis: &Redis, seconds: Duration) -> Figures {
    let client_rt = runtime("lg-client", 2);
    let url = format!("redis://127.0.0.1:{}/", redis.1);
    let started = Instant::now();
    let (d, a, l) = client_rt.block_on(async {
        let client = redis::Client::open(url).unwrap();
        let mut cons = Vec::new();
        for _ in 0..8 {
            cons.push(client.get_multiplexed_async_connection().await.expect("redis"));
        }
        let stop = load::stopper(seconds);
        load::run(CLIENTS, stop, move |i, stop| load::incr_client(cons[i % 8].clone(), i, stop))
            .await
    });
    Figures {
        name: "Redis INCRBY+EXPIRE fixed window (client)".into(),
        decisions: d,
        admitted: a,
        elapsed: started.elapsed(),
        latencies: l,
        server_cpu: None,
    }
}
