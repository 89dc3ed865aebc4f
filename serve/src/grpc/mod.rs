//! Envoy's rate-limit service over gRPC: `envoy.service.ratelimit.v3.RateLimitService/
//! ShouldRateLimit`, with Envoy's own protos (the `envoy-types` crate carries them generated,
//! so no `protoc` runs at build time).
//!
//! * `request`: descriptors to keys (`D/k1/v1/k2/v2`) and costs (`hits_addend`);
//! * `judge`: all or nothing, each descriptor's figures;
//! * `answer`: `current_limit` in Envoy's units, and the IETF fields.

mod answer;
mod judge;
mod request;

use crate::limits::Limits;
use crate::metrics::Listener;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use leakgate::Clock;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

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

/// Serves gRPC on `listener` until `shutdown`; then stops accepting and lets the calls in
/// flight finish.
pub(crate) async fn serve<C: Clock + 'static>(
    listener: TcpListener,
    limits: Arc<Limits<C>>,
    mut shutdown: watch::Receiver<bool>,
    headers: bool,
) {
    let service = RateLimitServiceServer::new(Rls { limits, headers });
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let stop = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    let served = tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, stop)
        .await;
    if let Err(e) = served {
        tracing::error!(error = %e, "gRPC listener stopped");
    }
}
