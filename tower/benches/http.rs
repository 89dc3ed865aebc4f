//! What the layer costs a server: requests/s through an axum hello-world on loopback, with no
//! layer, with leakgate's layer and with tower-governor's, and the cost of one call through each
//! layer in process.
//!
//! ```sh
//! cargo bench -p leakgate-tower --bench http                         # the defaults below
//! cargo bench -p leakgate-tower --bench http -- --rounds 21 --slice-ms 400 --clients 32
//! ```
//!
//! One process, one tokio runtime of two workers serving every contender on its own port and
//! driving one hyper client pool per contender; contenders are interleaved in every round (the
//! order rotates); each rate is the median over the rounds, and each comparison ("vs none", the
//! layer's CPU time per request, its CPU cost in percent) the median of the per-round comparisons
//! with the run without a layer. CPU time is the process's own, read from Linux's per-thread
//! schedstat, so other processes' load on a shared machine does not count. Server and clients run
//! on two runtimes with their own named threads, so the server's share is reported too: what a
//! server whose clients are elsewhere pays per request (the clients' share includes parsing the
//! fields the server sends).
//! Every quota is far above the load, so every request is admitted and the figures are the cost
//! of admitting: key lookup, decision, and (for leakgate) the two RateLimit fields.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::{routing::get, Router};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use leakgate::{KeyedLimiter, Limiter, Quota, Rules};
use leakgate_tower::{KeyTemplate, LiveRules, RateLimitHeaders, RateLimitLayer};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tower::{Layer, Service};
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::GovernorLayer;

/// How the run is shaped.
struct Options {
    rounds: usize,
    slice: Duration,
    clients: usize,
    calls: usize,
}

fn options() -> Options {
    let mut options =
        Options { rounds: 15, slice: Duration::from_millis(300), clients: 16, calls: 200_000 };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = || args.get(i + 1).and_then(|v| v.parse::<u64>().ok());
        match args[i].as_str() {
            "--rounds" => options.rounds = value().expect("--rounds N") as usize,
            "--slice-ms" => options.slice = Duration::from_millis(value().expect("--slice-ms N")),
            "--clients" => options.clients = value().expect("--clients N") as usize,
            "--calls" => options.calls = value().expect("--calls N") as usize,
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    options
}

/// A quota no benchmark reaches: 10^9 per second, burst 10^9.
fn huge() -> Quota {
    "1000000000/s".parse().unwrap()
}

/// A rules layer whose keys are `http{path}/{ip}`, under one rule of `quotas` huge quotas (so
/// every request is admitted): a default rule and a per-client override that no request hits,
/// so the key is resolved among several paths.
fn rules_layer(quotas: usize) -> RateLimitLayer {
    let mut rules = Rules::new();
    rules.insert("", [huge()]);
    rules.insert("http", vec![huge(); quotas]);
    rules.insert("http/other/127.0.0.1", [huge()]);
    let template = KeyTemplate::parse("http{path}/{ip}").unwrap();
    RateLimitLayer::rules(LiveRules::new(rules), template)
}

/// The contenders, by name, as layers over one router.
fn contenders() -> Vec<(&'static str, Router)> {
    let hello = || Router::new().route("/", get(|| async { "hello" }));
    let governor =
        GovernorConfigBuilder::default().per_nanosecond(1).burst_size(u32::MAX).finish().unwrap();
    // tower-governor's header mode: x-ratelimit-limit and x-ratelimit-remaining on every answer,
    // the nearest thing it has to the RateLimit fields.
    let governor_headers = GovernorConfigBuilder::default()
        .per_nanosecond(1)
        .burst_size(u32::MAX)
        .use_headers()
        .finish()
        .unwrap();
    vec![
        ("no layer", hello()),
        (
            "leakgate per-ip",
            hello().layer(RateLimitLayer::per_ip(KeyedLimiter::<IpAddr>::new(huge()))),
        ),
        (
            "leakgate per-ip, no fields",
            hello().layer(
                RateLimitLayer::per_ip(KeyedLimiter::<IpAddr>::new(huge()))
                    .headers(RateLimitHeaders::Never),
            ),
        ),
        ("leakgate global", hello().layer(RateLimitLayer::global(Limiter::new(huge())))),
        ("leakgate rules, 1 quota", hello().layer(rules_layer(1))),
        ("tower-governor per-ip", hello().layer(GovernorLayer::new(governor))),
        ("tower-governor, x-ratelimit-*", hello().layer(GovernorLayer::new(governor_headers))),
    ]
}

/// The name of the server runtime's threads (how their CPU time is told from the clients').
const SERVER_THREAD: &str = "http-server";

/// Starts `app` on an ephemeral loopback port, served by `server`.
fn serve(server: &tokio::runtime::Runtime, app: Router) -> SocketAddr {
    let listener = server.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    server.spawn(async move {
        let make = app.into_make_service_with_connect_info::<SocketAddr>();
        axum::serve(listener, make).await.unwrap();
    });
    addr
}

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// What one slice measured.
#[derive(Clone, Copy)]
struct Sample {
    /// Requests per second of wall time.
    rate: f64,
    /// This process's CPU time per request, in ns (client and server together), when the OS
    /// tells it.
    cpu_ns: Option<f64>,
    /// The server threads' share of it.
    server_cpu_ns: Option<f64>,
}

/// One thread's CPU time so far, and whether it serves.
#[derive(Clone, Copy)]
struct ThreadCpu {
    ns: u64,
    server: bool,
}

/// CPU nanoseconds each thread of this process has run, by thread id (Linux's
/// `/proc/self/task/*/schedstat`, and `comm` for the name; `None` elsewhere).
fn thread_cpu_ns() -> Option<HashMap<u64, ThreadCpu>> {
    let mut threads = HashMap::new();
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let task = task.ok()?;
        let Ok(id) = task.file_name().to_string_lossy().parse::<u64>() else { continue };
        // A thread may end between the listing and the read: it is simply not counted.
        let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else { continue };
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let ns = stat.split_whitespace().next()?.parse().ok()?;
        threads.insert(id, ThreadCpu { ns, server: name.trim_end() == SERVER_THREAD });
    }
    Some(threads)
}

/// CPU nanoseconds this process's threads ran since `start`: all of them, and the server's.
fn cpu_ns_since(start: &HashMap<u64, ThreadCpu>) -> Option<(u64, u64)> {
    let (mut all, mut server) = (0, 0);
    for (id, now) in thread_cpu_ns()? {
        let ran = now.ns.saturating_sub(start.get(&id).map_or(0, |t| t.ns));
        all += ran;
        if now.server {
            server += ran;
        }
    }
    Some((all, server))
}

/// One slice: `clients.len()` tasks, each with its own connection, each sending GETs one after
/// another until the slice ends.
async fn slice(addr: SocketAddr, clients: &[HttpClient], length: Duration) -> Sample {
    let url: http::Uri = format!("http://{addr}/").parse().unwrap();
    let cpu_start = thread_cpu_ns();
    let start = Instant::now();
    let deadline = start + length;
    let tasks: Vec<_> = clients
        .iter()
        .map(|client| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                let mut done = 0u64;
                while Instant::now() < deadline {
                    let response = client.get(url.clone()).await.unwrap();
                    assert_eq!(response.status(), 200);
                    response.into_body().collect().await.unwrap();
                    done += 1;
                }
                done
            })
        })
        .collect();
    let mut done = 0;
    for task in tasks {
        done += task.await.unwrap();
    }
    let rate = done as f64 / start.elapsed().as_secs_f64();
    let cpu = cpu_start.and_then(|start| cpu_ns_since(&start));
    let per_request = |ns: u64| ns as f64 / done as f64;
    Sample {
        rate,
        cpu_ns: cpu.map(|(all, _)| per_request(all)),
        server_cpu_ns: cpu.map(|(_, server)| per_request(server)),
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Loopback requests/s and CPU time per request, per contender.
fn loopback(options: &Options) {
    let runtime = |name: &str| {
        let builder = &mut tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(2).thread_name(name).enable_all().build().unwrap()
    };
    let server = runtime(SERVER_THREAD);
    let addrs: Vec<_> =
        contenders().into_iter().map(|(name, app)| (name, serve(&server, app))).collect();
    runtime("http-client").block_on(async {
        let mut servers = Vec::new();
        for (name, addr) in addrs {
            let clients: Vec<HttpClient> = (0..options.clients)
                .map(|_| Client::builder(TokioExecutor::new()).build(HttpConnector::new()))
                .collect();
            // Warm up: connections open, tables and caches filled.
            slice(addr, &clients, options.slice / 2).await;
            servers.push((name, addr, clients, Vec::<Sample>::new()));
        }
        for round in 0..options.rounds {
            let n = servers.len();
            for k in 0..n {
                let (_, addr, clients, samples) = &mut servers[(round + k) % n];
                samples.push(slice(*addr, clients, options.slice).await);
            }
        }
        println!(
            "\nloopback: axum hello-world, {} keep-alive clients in the same process, {} rounds \
             of {:?}, medians",
            options.clients, options.rounds, options.slice
        );
        println!(
            "{:<30} {:>11} {:>9} {:>11} {:>13} {:>9} {:>11} {:>12}",
            "contender",
            "requests/s",
            "vs none",
            "cpu ns/req",
            "layer cpu ns",
            "cpu cost",
            "server ns",
            "server cost"
        );
        // Comparisons are made within a round (the load other processes put on the machine
        // changes slowly) and then the median is taken. CPU time per request is the steadier
        // figure on a shared machine: another process's load slows the wall clock, not the
        // work each request takes.
        let base: Vec<Sample> = servers[0].3.clone();
        for (name, _, _, samples) in &servers {
            let mut ratios: Vec<f64> =
                samples.iter().zip(&base).map(|(s, b)| s.rate / b.rate).collect();
            let mut rates: Vec<f64> = samples.iter().map(|s| s.rate).collect();
            let cpu: Option<Vec<f64>> = samples.iter().map(|s| s.cpu_ns).collect();
            let extra: Option<Vec<f64>> =
                samples.iter().zip(&base).map(|(s, b)| Some(s.cpu_ns? - b.cpu_ns?)).collect();
            let cost: Option<Vec<f64>> =
                samples.iter().zip(&base).map(|(s, b)| Some(s.cpu_ns? / b.cpu_ns? - 1.0)).collect();
            let server: Option<Vec<f64>> = samples.iter().map(|s| s.server_cpu_ns).collect();
            let server_cost: Option<Vec<f64>> = samples
                .iter()
                .zip(&base)
                .map(|(s, b)| Some(s.server_cpu_ns? / b.server_cpu_ns? - 1.0))
                .collect();
            let percent = |v: Option<Vec<f64>>| {
                v.map_or("n/a".to_owned(), |mut v| format!("{:+.1}%", median(&mut v) * 100.0))
            };
            let show = |v: Option<Vec<f64>>, scale: f64, unit: &str| match v {
                Some(mut v) => format!("{:.0}{unit}", median(&mut v) * scale),
                None => "n/a".to_owned(),
            };
            println!(
                "{:<30} {:>11.0} {:>8.1}% {:>11} {:>13} {:>9} {:>11} {:>12}",
                name,
                median(&mut rates),
                (median(&mut ratios) - 1.0) * 100.0,
                show(cpu, 1.0, ""),
                show(extra, 1.0, ""),
                percent(cost),
                show(server, 1.0, ""),
                percent(server_cost),
            );
        }
    });
}

/// Calls `service` once on a request that is ready at once, as axum does: a clone per request.
fn call_once<S>(service: &S, request: Request<Body>) -> S::Response
where
    S: Service<Request<Body>> + Clone,
    S::Error: std::fmt::Debug,
{
    let mut cx = Context::from_waker(Waker::noop());
    let mut service = service.clone();
    assert!(matches!(service.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    let mut future = pin!(service.call(request));
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(Ok(response)) => response,
        _ => panic!("the inner service answers at once"),
    }
}

/// Nanoseconds per call through `service`, over `calls` calls.
fn per_call<S, B>(service: &S, calls: usize) -> f64
where
    S: Service<Request<Body>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
{
    let peer = ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000)));
    let start = Instant::now();
    for _ in 0..calls {
        let request = Request::get("/").extension(peer).body(Body::empty()).unwrap();
        let response = call_once(service, request);
        assert_eq!(response.status(), 200);
        std::hint::black_box(response);
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}

/// The hello handler as a tower service that answers at once.
fn hello() -> impl Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone {
    tower::service_fn(|_: Request<Body>| {
        std::future::ready(Ok::<_, Infallible>(Response::new(Body::from("hello"))))
    })
}

/// In-process ns per call per contender.
fn in_process(options: &Options) {
    let per_ip =
        RateLimitLayer::per_ip(Arc::new(KeyedLimiter::<IpAddr>::new(huge()))).layer(hello());
    let per_ip_quiet = RateLimitLayer::per_ip(KeyedLimiter::<IpAddr>::new(huge()))
        .headers(RateLimitHeaders::Never)
        .layer(hello());
    let global = RateLimitLayer::global(Limiter::new(huge())).layer(hello());
    let template = KeyTemplate::parse("http{path}/{ip}").unwrap();
    let keyed_template =
        RateLimitLayer::keyed(KeyedLimiter::<String>::new(huge()), template).layer(hello());
    let rules_one = rules_layer(1).layer(hello());
    let rules_two = rules_layer(2).layer(hello());
    let governor = GovernorLayer::new(
        GovernorConfigBuilder::default().per_nanosecond(1).burst_size(u32::MAX).finish().unwrap(),
    )
    .layer(hello());
    let governor_headers = GovernorLayer::new(
        GovernorConfigBuilder::default()
            .per_nanosecond(1)
            .burst_size(u32::MAX)
            .use_headers()
            .finish()
            .unwrap(),
    )
    .layer(hello());
    let bare = hello();
    type Measure = Box<dyn Fn(usize) -> f64>;
    let measure: Vec<(&str, Measure)> = vec![
        ("no layer", Box::new(move |n| per_call(&bare, n))),
        ("leakgate per-ip", Box::new(move |n| per_call(&per_ip, n))),
        ("leakgate per-ip, no fields", Box::new(move |n| per_call(&per_ip_quiet, n))),
        ("leakgate global", Box::new(move |n| per_call(&global, n))),
        ("leakgate keyed, template key", Box::new(move |n| per_call(&keyed_template, n))),
        ("leakgate rules, 1 quota", Box::new(move |n| per_call(&rules_one, n))),
        ("leakgate rules, 2 quotas", Box::new(move |n| per_call(&rules_two, n))),
        ("tower-governor per-ip", Box::new(move |n| per_call(&governor, n))),
        ("tower-governor, x-ratelimit-*", Box::new(move |n| per_call(&governor_headers, n))),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); measure.len()];
    for (_, f) in &measure {
        f(options.calls / 4);
    }
    for round in 0..options.rounds {
        for k in 0..measure.len() {
            let i = (round + k) % measure.len();
            times[i].push(measure[i].1(options.calls));
        }
    }
    println!(
        "\nin process: one call through the layer (request built, service cloned, response \
         dropped), {} rounds of {} calls, medians",
        options.rounds, options.calls
    );
    println!("{:<30} {:>10} {:>14}", "contender", "ns/call", "layer ns/call");
    // The layer's cost: each round's time less the same round's time without a layer.
    let base: Vec<f64> = times[0].clone();
    for ((name, _), times) in measure.iter().zip(&times) {
        let mut extra: Vec<f64> = times.iter().zip(&base).map(|(t, b)| t - b).collect();
        println!("{:<30} {:>10.0} {:>14.0}", name, median(&mut times.clone()), median(&mut extra));
    }
}

fn main() {
    let options = options();
    in_process(&options);
    loopback(&options);
}
