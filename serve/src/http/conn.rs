//! Serving the HTTP listener's connections with hyper (HTTP/1.1): axum's own `serve` offers
//! neither a header timeout nor a cap, so connections come from the listener's gate (through
//! TLS when configured) and each is served with hyper's header-read timeout, which also
//! closes a kept-alive connection that sends no next request within it.

use crate::listen::Watched;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// How long a shutdown waits for requests in flight.
const DRAIN: Duration = Duration::from_secs(5);

/// Serves every connection `taken` yields with `app` until `shutdown`; then stops taking new
/// ones, lets each finish its request in flight, and returns.
pub(crate) async fn serve_connections(
    mut taken: mpsc::Receiver<Watched>,
    app: Router,
    header_timeout: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            conn = taken.recv() => {
                let Some(conn) = conn else { break };
                let service = TowerToHyperService::new(app.clone());
                let stop = shutdown.clone();
                connections.spawn(one(conn, service, header_timeout, stop));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stopping(&mut shutdown) => break,
        }
    }
    drop(taken);
    let drained =
        tokio::time::timeout(DRAIN, async { while connections.join_next().await.is_some() {} });
    if drained.await.is_err() {
        tracing::warn!("HTTP: connections still open after {DRAIN:?}: closed");
    }
}

/// One connection, until it closes, misses a deadline, or the service stops.
async fn one(
    conn: Watched,
    service: TowerToHyperService<Router>,
    header_timeout: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(header_timeout).keep_alive(true);
    let served = builder.serve_connection(TokioIo::new(conn), service);
    tokio::pin!(served);
    tokio::select! {
        _ = served.as_mut() => {}
        _ = stopping(&mut shutdown) => {
            served.as_mut().graceful_shutdown();
            let _ = served.await;
        }
    }
}

/// Resolves once `shutdown` turns true (or its sender is gone).
async fn stopping(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}
