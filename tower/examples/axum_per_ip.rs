//! A runnable axum server limited per client IP, with an operator view on its own port.
//!
//! ```sh
//! cargo run -p leakgate-tower --example axum_per_ip            # 127.0.0.1:3000, 5/s burst 10
//! cargo run -p leakgate-tower --example axum_per_ip -- 127.0.0.1:8080 "100/min"
//! curl -i http://127.0.0.1:3000/              # RateLimit-Policy and RateLimit on every answer
//! curl -s 'http://127.0.0.1:3001/ratelimit?min_fill=0.5'   # the fullest buckets, as JSON
//! ```
//!
//! Behind a reverse proxy, replace `per_ip` with `RateLimitLayer::keyed(keyed,
//! PeerIp::behind_proxies(ProxyHeader::XForwardedFor, [proxy networks]))`, or the address of
//! the proxy would be every client's key.

use axum::{routing::get, Router};
use leakgate::{KeyedLimiter, Quota};
use leakgate_tower::RateLimitLayer;
use std::net::SocketAddr;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args.next().as_deref().unwrap_or("127.0.0.1:3000").parse()?;
    let quota: Quota = args.next().as_deref().unwrap_or("5/s burst 10").parse()?;

    let layer = RateLimitLayer::per_ip(KeyedLimiter::new(quota))
        .policy_name("per-ip")?
        .problem_details(true);
    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route(
            "/users/{id}",
            get(|axum::extract::Path(id): axum::extract::Path<u32>| async move {
                format!("user {id}\n")
            }),
        )
        .layer(layer.clone());
    // The operator view on the next port, which only the machine itself can reach.
    let admin = Router::new().route_service("/ratelimit", layer.operator_view());
    let admin_addr = SocketAddr::new([127, 0, 0, 1].into(), addr.port().wrapping_add(1));

    let listener = tokio::net::TcpListener::bind(addr).await?;
    let admin_listener = tokio::net::TcpListener::bind(admin_addr).await?;
    println!("serving http://{addr}/ with {quota} per client IP");
    println!("operator view: http://{admin_addr}/ratelimit?prefix=&min_fill=0&limit=100");
    let admin = tokio::spawn(async move { axum::serve(admin_listener, admin).await });
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
    admin.await??;
    Ok(())
}
