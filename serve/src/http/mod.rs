//! The operator's listener: `GET /metrics` (Prometheus text), `GET /buckets` (JSON) and `GET /`
//! (one self-contained page listing the buckets, to filter and sort; no external assets).
//!
//! It lists client keys: serve it where only operators reach it.

mod buckets;
mod metrics;
mod redis_buckets;

use crate::limits::Limits;
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
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The page, served as it is.
const PAGE: &str = include_str!("page.html");

/// Serves HTTP on `listener` until `shutdown`; then stops accepting and lets requests in flight
/// finish.
pub(crate) async fn serve<C: Clock + 'static>(
    listener: TcpListener,
    limits: Arc<Limits<C>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let app = Router::new()
        .route("/", get(page::<C>))
        .route("/metrics", get(prometheus::<C>))
        .route("/buckets", get(bucket_list::<C>))
        .with_state(limits);
    let stop = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(stop).await {
        tracing::error!(error = %e, "HTTP listener stopped");
    }
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
