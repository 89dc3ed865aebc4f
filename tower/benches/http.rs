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
//! order rotates); each rate is the median over the rounds, and each "vs none" the median of the
//! per-round ratios to the run without a layer. Every quota is far above the
//! load, so every request is admitted and the figures are the cost of admitting: key lookup,
//! decision, and (for leakgate) the two RateLimit fields.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::{routing::get, Router};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use leakgate::{KeyedLimiter, Limiter, Quota};
use leakgate_tower::{RateLimitHeaders, RateLimitLayer};
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
        ("tower-governor per-ip", hello().layer(GovernorLayer::new(governor))),
        ("tower-governor, x-ratelimit-*", hello().layer(GovernorLayer::new(governor_headers))),
    ]
}

/// Starts `app` on an ephemeral loopback port.
async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let make = app.into_make_service_with_connect_info::<SocketAddr>();
        axum::serve(listener, make).await.unwrap();
    });
    addr
}

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// Requests/s over one slice: `clients.len()` tasks, each with its own connection, each sending
/// GETs one after another until the slice ends.
async fn slice(addr: SocketAddr, clients: &[HttpClient], length: Duration) -> f64 {
    let url: http::Uri = format!("http://{addr}/").parse().unwrap();
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
    done as f64 / start.elapsed().as_secs_f64()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Loopback requests/s per contender.
fn loopback(options: &Options) {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let mut servers = Vec::new();
        for (name, app) in contenders() {
            let addr = serve(app).await;
            let clients: Vec<HttpClient> = (0..options.clients)
                .map(|_| Client::builder(TokioExecutor::new()).build(HttpConnector::new()))
                .collect();
            // Warm up: connections open, tables and caches filled.
            slice(addr, &clients, options.slice / 2).await;
            servers.push((name, addr, clients, Vec::new()));
        }
        for round in 0..options.rounds {
            let n = servers.len();
            for k in 0..n {
                let (_, addr, clients, rates) = &mut servers[(round + k) % n];
                rates.push(slice(*addr, clients, options.slice).await);
            }
        }
        println!(
            "\nloopback: requests/s through axum, {} clients, {} rounds of {:?}, medians",
            options.clients, options.rounds, options.slice
        );
        println!(
            "{:<30} {:>12} {:>10} {:>16} {:>18}",
            "contender", "requests/s", "vs none", "wall us/req +", "cpu ns/req + (x2)"
        );
        // Each round's rate over the same round's rate without a layer: the load that other
        // processes put on the machine changes slowly, so a ratio within one round holds up
        // better than a ratio of medians.
        let base: Vec<f64> = servers[0].3.clone();
        for (name, _, _, rates) in &servers {
            let mut ratios: Vec<f64> = rates.iter().zip(&base).map(|(r, b)| r / b).collect();
            let ratio = median(&mut ratios);
            let rate = median(&mut rates.clone());
            // The extra wall time per request implied by the ratio, at this contender's rate.
            let extra_us = (1.0 / ratio - 1.0) * 1e6 / rate;
            println!(
                "{:<30} {:>12.0} {:>9.1}% {:>16.3} {:>18.0}",
                name,
                rate,
                (ratio - 1.0) * 100.0,
                extra_us,
                extra_us * 2_000.0
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
fn hello(
) -> impl Service<Request<Body>, Response = Response<Body>, Error = Infallible, Future: Send> + Clone
{
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
    println!("\nin process: one call through the layer (request built, service cloned, response dropped), {} rounds of {} calls, medians", options.rounds, options.calls);
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
