//! Envoy's rate-limit service over gRPC: `envoy.service.ratelimit.v3.RateLimitService/
//! ShouldRateLimit`, with Envoy's own protos (the `envoy-types` crate carries them generated,
//! so no `protoc` runs at build time).
//!
//! * `request`: descriptors to keys (`D/k1/v1/k2/v2`) and costs (`hits_addend`);
//! * `judge`: all or nothing, each descriptor's figures;
//! * `answer`: `current_limit` in Envoy's units, and the IETF fields.
//!
//! Connections come through the listener's gate (a cap, fitted to the open-files limit, and a
//! back-off when accepting fails), optionally behind TLS; the HTTP/2 preface is due within the
//! header timeout, and the service pings idle connections (HTTP/2 keep-alive), closing those
//! that neither answer within the header timeout nor send anything within the idle timeout.
//! With a secret, every call must carry the metadata `authorization: Bearer <secret>`, else it
//! is answered `UNAUTHENTICATED`.

mod answer;
mod judge;
mod request;

use crate::auth::Secret;
use crate::limits::Limits;
use crate::listen::{incoming, Gate, Prepared};
use crate::metrics::Listener;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use leakgate::Clock;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tonic::{Request, Response, Status};

/// The bytes of HTTP/2's connection preface, due within the header timeout.
const PREFACE: usize = 24;
/// The longest interval between the service's HTTP/2 keep-alive pings on a quiet connection.
const KEEPALIVE: Duration = Duration::from_secs(60);

/// The service.
struct Rls<C: Clock + 'static> {
    limits: Arc<Limits<C>>,
    headers: bool,
}

#[tonic::async_trait]
impl<C: Clock + 'static> RateLimitService for Rls<C> {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let started = Instant::now();
        let answer = self.answer(request.get_ref()).await;
        let stats = self.limits.metrics.listener(Listener::Grpc);
        stats.record(started.elapsed(), answer.is_err());
        answer.map(Response::new)
    }
}

impl<C: Clock + 'static> Rls<C> {
    async fn answer(&self, request: &RateLimitRequest) -> Result<RateLimitResponse, Status> {
        let parts = request::parts(request).map_err(Status::invalid_argument)?;
        let judged = judge::judge(&self.limits, parts, self.headers).await;
        let judged = judged.map_err(Status::invalid_argument)?;
        let overall = if judged.refused { Code::OverLimit } else { Code::Ok };
        let response_headers_to_add = match &judged.tightest {
            Some(t) => answer::headers(&t.rule, &t.quotas, t.remaining, t.reset, t.retry),
            None => Vec::new(),
        };
        Ok(RateLimitResponse {
            overall_code: overall as i32,
            statuses: judged.statuses,
            response_headers_to_add,
            ..Default::default()
        })
    }
}

/// Serves gRPC through `gate` until `shutdown`; then stops accepting and lets the calls in
/// flight finish.
pub(crate) async fn serve<C: Clock + 'static>(
    gate: Gate,
    limits: Arc<Limits<C>>,
    mut shutdown: watch::Receiver<bool>,
    headers: bool,
    prepared: Prepared,
) {
    let secret = prepared.secret.clone();
    let service = RateLimitServiceServer::with_interceptor(Rls { limits, headers }, move |call| {
        authenticate(secret.as_deref(), call)
    });
    let deadlines = prepared.deadlines;
    let (taken, accepting) = incoming(gate, prepared.grpc_tls.clone(), PREFACE, deadlines);
    let incoming = futures_util::stream::unfold(taken, |mut taken| async move {
        let conn = taken.recv().await?;
        Some((Ok::<_, std::io::Error>(conn), taken))
    });
    let stop = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    // Pings often enough that a live client is never idle for the idle timeout.
    let keepalive = deadlines.idle.map_or(KEEPALIVE, |idle| (idle / 2).min(KEEPALIVE));
    let served = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(keepalive))
        .http2_keepalive_timeout(Some(deadlines.header))
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, stop)
        .await;
    if let Err(e) = served {
        tracing::error!(error = %e, "gRPC listener stopped");
    }
    // The server has dropped the connections' receiver: the accepting task ends and closes the
    // listener; waiting for it means the port no longer accepts once this returns.
    let _ = accepting.await;
}

/// Lets a call through when no secret is set, or when its metadata carries
/// `authorization: Bearer <secret>`.
#[allow(clippy::result_large_err)] // tonic's interceptor signature
fn authenticate(secret: Option<&Secret>, call: Request<()>) -> Result<Request<()>, Status> {
    let Some(secret) = secret else { return Ok(call) };
    match call.metadata().get("authorization") {
        Some(value) if secret.matches_bearer(value.as_bytes()) => Ok(call),
        _ => Err(Status::unauthenticated(
            "this service asks for its secret: metadata authorization: Bearer <secret>",
        )),
    }
}
