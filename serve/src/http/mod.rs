//! The operator's listener: `GET /metrics` (Prometheus text), `GET /buckets` (JSON) and `GET /`
//! (one self-contained page listing the buckets, to filter and sort; no external assets).
//!
//! It lists client keys: serve it where only operators reach it, and with a secret
//! (`--auth-file`), which `/metrics` and `/buckets` then ask for (see `guard`, which also
//! checks the `Host` against DNS rebinding). Connections: see `conn`.

mod buckets;
mod conn;
mod guard;
mod metrics;
mod redis_buckets;
mod row;

use crate::limits::Limits;
use crate::listen::{incoming, Gate, Prepared};
use crate::metrics::Listener;
use axum::extract::{Query, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;
use leakgate::Clock;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::watch;

/// The page, served as it is.
const PAGE: &str = include_str!("page.html");

/// What a connection beyond the listener's cap reads before it is closed.
pub(crate) const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
    Content-Type: text/plain\r\nContent-Length: 28\r\nConnection: close\r\n\r\n\
    too many connections: later\n";

/// Serves HTTP through `gate` until `shutdown`; then stops accepting and lets requests in
/// flight finish.
pub(crate) async fn serve<C: Clock + 'static>(
    gate: Gate,
    limits: Arc<Limits<C>>,
    shutdown: watch::Receiver<bool>,
    prepared: Prepared,
) {
    let guard = guard::Guard {
        secret: prepared.secret.clone(),
        allowed_hosts: prepared.allowed_hosts.clone(),
    };
    let app = Router::new()
        .route("/", get(page::<C>))
        .route("/metrics", get(prometheus::<C>))
        .route("/buckets", get(bucket_list::<C>))
        .with_state(limits)
        .layer(axum::middleware::from_fn_with_state(guard, guard::check));
    let deadlines = prepared.deadlines;
    let (taken, accepting) = incoming(gate, prepared.http_tls.clone(), 0, deadlines);
    conn::serve_connections(taken, app, deadlines.header, shutdown).await;
    // The receiver is gone with `serve_connections`: the listener closes as the task ends.
    let _ = accepting.await;
}

async fn page<C: Clock + 'static>(State(limits): State<Arc<Limits<C>>>) -> impl IntoResponse {
    let started = Instant::now();
    let response = Html(PAGE);
    limits.metrics.listener(Listener::Http).record(started.elapsed(), false);
    response
}

async fn prometheus<C: Clock + 'static>(State(limits): State<Arc<Limits<C>>>) -> impl IntoResponse {
    let started = Instant::now();
    let text = metrics::render(&limits);
    limits.metrics.listener(Listener::Http).record(started.elapsed(), false);
    ([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text)
}

async fn bucket_list<C: Clock + 'static>(
    State(limits): State<Arc<Limits<C>>>,
    Query(filter): Query<buckets::Filter>,
) -> impl IntoResponse {
    let started = Instant::now();
    if let Some(why) = filter.invalid() {
        limits.metrics.listener(Listener::Http).record(started.elapsed(), true);
        let json = serde_json::json!({ "error": why }).to_string();
        return (StatusCode::BAD_REQUEST, [(CONTENT_TYPE, "application/json")], json);
    }
    let json = buckets::render(&limits, &filter).await;
    limits.metrics.listener(Listener::Http).record(started.elapsed(), false);
    (StatusCode::OK, [(CONTENT_TYPE, "application/json")], json)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_refusal_is_one_whole_response() {
        let text = std::str::from_utf8(super::REFUSAL).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("Content-Length: {}", body.len())), "{text}");
    }
}
