//! The layer on a plain hyper server (no axum): the accept loop puts the peer `SocketAddr` in
//! each request's extensions, and the handler's `Full<Bytes>` body stays the response body.

mod support;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use leakgate::{KeyedLimiter, ManualClock, Quota};
use leakgate_tower::RateLimitLayer;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use tower::{ServiceBuilder, ServiceExt};

#[tokio::test]
async fn a_hyper_service_is_limited_per_peer() {
    let keyed = KeyedLimiter::<IpAddr, _>::with_clock(
        "1/min".parse::<Quota>().unwrap(),
        ManualClock::new(),
    );
    let service = ServiceBuilder::new().layer(RateLimitLayer::per_ip(keyed)).service_fn(
        |_: Request<Incoming>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("ok"))))
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        loop {
            let (stream, peer) = listener.accept().await.unwrap();
            let service = service.clone().map_request(move |mut request: Request<Incoming>| {
                request.extensions_mut().insert::<SocketAddr>(peer);
                request
            });
            tokio::spawn(async move {
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
                let _ = connection.await;
            });
        }
    });
    let url = format!("http://{addr}/");
    let (a, b) = (support::client_from("127.0.0.1"), support::client_from("127.0.0.2"));
    let first = a.get(&url).await;
    assert_eq!((first.status.as_u16(), first.text()), (200, "ok"));
    assert_eq!(first.header("ratelimit"), r#""default";r=0;t=60"#);
    let second = a.get(&url).await;
    assert_eq!((second.status.as_u16(), second.header("retry-after")), (429, "60"));
    assert_eq!(b.get(&url).await.status, 200);
    server.abort();
}
