//! The routes of `leakgate jobs ui`: the page (no token needed: it holds no data and asks for
//! the token), and the JSON API behind `Authorization: Bearer TOKEN`. A browser cannot send that
//! header cross-site without a CORS preflight this server never answers, so the POST actions need
//! no CSRF token. Bodies are never read; lists are bounded ([`MAX_LANES`], [`MAX_DEAD`],
//! [`MAX_RUNS`], [`PREVIEW`]); the page escapes every value itself (it sets `textContent` only), and every
//! answer carries `nosniff` and a CSP that allows no other origin.

use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use leakgate_jobs::{Error, Jobs, Requeue};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

/// Lanes listed by `/api/status` (the rest are counted in `"lanes_left_out"`).
const MAX_LANES: usize = 500;
/// Dead jobs listed by `/api/dead` at most.
const MAX_DEAD: usize = 100;
/// Runs listed by `/api/runs` at most (the chart's last minute at up to this many starts).
const MAX_RUNS: usize = 2000;
/// Bytes of a dead job's payload shown.
const PREVIEW: usize = 200;
/// The largest request body accepted (none is read).
const MAX_BODY: u64 = 4096;

const PAGE: &str = include_str!("ui.html");

#[derive(Clone)]
struct Ui {
    jobs: Jobs,
    token: Arc<str>,
}

/// The dashboard's routes on `jobs`, the API guarded by `token`.
pub(super) fn router(jobs: Jobs, token: String) -> Router {
    let ui = Ui { jobs, token: token.into() };
    let api = Router::new()
        .route("/api/status", get(status))
        .route("/api/dead", get(dead))
        .route("/api/runs", get(runs))
        .route("/api/requeue", post(requeue))
        .route("/api/cancel", post(cancel))
        .route("/api/pause", post(pause))
        .route("/api/resume", post(resume))
        .route_layer(axum::middleware::from_fn_with_state(ui.clone(), authorized));
    Router::new()
        .route("/", get(page))
        .merge(api)
        .with_state(ui)
        .layer(axum::middleware::from_fn(guard))
}

/// Refuses a large body before anything runs, and marks every answer `nosniff` with a CSP.
async fn guard(request: Request, next: Next) -> Response {
    let length = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let chunked = request.headers().contains_key(header::TRANSFER_ENCODING);
    let mut response = if chunked || length.is_some_and(|n| n > MAX_BODY) {
        error(StatusCode::PAYLOAD_TOO_LARGE, "request bodies are not read (4 KiB at most)")
    } else {
        next.run(request).await
    };
    let headers = response.headers_mut();
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
             connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
        ),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// 401 unless the request carries `Authorization: Bearer TOKEN`.
async fn authorized(State(ui): State<Ui>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer)
        .unwrap_or("");
    if same(given.as_bytes(), ui.token.as_bytes()) {
        next.run(request).await
    } else {
        let mut response =
            error(StatusCode::UNAUTHORIZED, "a valid Authorization: Bearer token is needed");
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        response
    }
}

/// The credentials of `Authorization: Bearer TOKEN` (the scheme's case does not matter).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Equality whose time does not depend on where the bytes differ (only on the lengths).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

fn body(status: StatusCode, value: &Value) -> Response {
    let mut response = (status, value.to_string()).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn error(status: StatusCode, why: &str) -> Response {
    body(status, &json!({ "error": why }))
}

/// A library error as an answer: the caller's mistakes are 4xx, the database's 500.
fn failed(e: &Error) -> Response {
    let status = match e {
        Error::UnknownJob(_) | Error::UnknownLane(_) => StatusCode::NOT_FOUND,
        Error::BadLane(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, &e.to_string())
}

async fn page() -> Response {
    let mut response = PAGE.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    response
}

async fn status(State(ui): State<Ui>) -> Response {
    match ui.jobs.status().await {
        Ok(mut lanes) => {
            let left_out = lanes.len().saturating_sub(MAX_LANES);
            lanes.truncate(MAX_LANES);
            let mut doc = super::status::to_json(ui.jobs.backend(), &lanes);
            doc["lanes_left_out"] = json!(left_out);
            body(StatusCode::OK, &doc)
        }
        Err(e) => failed(&e),
    }
}

async fn dead(State(ui): State<Ui>, Query(q): Query<HashMap<String, String>>) -> Response {
    let limit = match q.get("limit").map(|n| n.parse::<usize>()) {
        None => 50,
        Some(Ok(n)) => n.min(MAX_DEAD),
        Some(Err(_)) => return error(StatusCode::BAD_REQUEST, "limit must be a whole number"),
    };
    let lane = q.get("lane").map(String::as_str).filter(|l| !l.is_empty());
    match ui.jobs.dead(lane, limit).await {
        Ok(jobs) => {
            let list: Vec<Value> = jobs
                .iter()
                .map(|job| {
                    let shown = &job.payload[..job.payload.len().min(PREVIEW)];
                    let ago = SystemTime::now().duration_since(job.died).unwrap_or_default();
                    json!({
                        "id": job.id,
                        "lane": job.lane,
                        "attempts": job.attempts,
                        "error": job.error,
                        "died_s_ago": ago.as_secs_f64(),
                        "payload_preview": String::from_utf8_lossy(shown),
                        "payload_bytes": job.payload.len(),
                    })
                })
                .collect();
            body(StatusCode::OK, &json!({ "dead": list }))
        }
        Err(e) => failed(&e),
    }
}

/// A lane's latest runs for the chart: when each started (seconds before now, on this server's
/// clock) and how late it was after its slot; with the lateness p50, p99 and max over them.
async fn runs(State(ui): State<Ui>, Query(q): Query<HashMap<String, String>>) -> Response {
    let lane = match lane(&q) {
        Ok(lane) => lane,
        Err(r) => return r.into_response(),
    };
    let runs = match ui.jobs.recent_runs(lane, MAX_RUNS).await {
        Ok(runs) => runs,
        Err(e) => return failed(&e),
    };
    let now_ns = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    let list: Vec<Value> = runs
        .iter()
        .map(|r| {
            json!([now_ns.saturating_sub(r.started_ns) as f64 / 1e9, r.lateness().as_secs_f64()])
        })
        .collect();
    let mut late: Vec<f64> = runs.iter().map(|r| r.lateness().as_secs_f64()).collect();
    late.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let i = ((late.len() as f64 * q).ceil() as usize).clamp(1, late.len().max(1)) - 1;
        late.get(i).copied()
    };
    body(
        StatusCode::OK,
        &json!({
            "lane": lane,
            "runs": list,
            "lateness_s": {"p50": at(0.5), "p99": at(0.99), "max": late.last()},
            "limit": MAX_RUNS,
        }),
    )
}

/// A request missing what it needs: answered 400 with the reason.
struct Response400(&'static str);

impl IntoResponse for Response400 {
    fn into_response(self) -> Response {
        error(StatusCode::BAD_REQUEST, self.0)
    }
}

/// The `id` of an action, or a 400.
fn id(q: &HashMap<String, String>) -> Result<i64, Response400> {
    q.get("id").and_then(|n| n.parse().ok()).ok_or(Response400("give ?id=N, a job's id"))
}

/// The `lane` of an action, or a 400.
fn lane(q: &HashMap<String, String>) -> Result<&str, Response400> {
    q.get("lane")
        .map(String::as_str)
        .filter(|l| !l.is_empty())
        .ok_or(Response400("give ?lane=LANE"))
}

fn counted(done: Result<u64, Error>) -> Response {
    match done {
        Ok(n) => body(StatusCode::OK, &json!({ "count": n })),
        Err(e) => failed(&e),
    }
}

fn done(done: Result<(), Error>) -> Response {
    match done {
        Ok(()) => body(StatusCode::OK, &json!({ "ok": true })),
        Err(e) => failed(&e),
    }
}

async fn requeue(State(ui): State<Ui>, Query(q): Query<HashMap<String, String>>) -> Response {
    match id(&q) {
        Ok(id) => counted(ui.jobs.requeue(Requeue::Ids(vec![id])).await),
        Err(r) => r.into_response(),
    }
}

async fn cancel(State(ui): State<Ui>, Query(q): Query<HashMap<String, String>>) -> Response {
    match id(&q) {
        Ok(id) => counted(ui.jobs.cancel(&[id]).await),
        Err(r) => r.into_response(),
    }
}

async fn pause(State(ui): State<Ui>, Query(q): Query<HashMap<String, String>>) -> Response {
    match lane(&q) {
        Ok(lane) => done(ui.jobs.pause(lane).await),
        Err(r) => r.into_response(),
    }
}

async fn resume(State(ui): State<Ui>, Query(q): Query<HashMap<String, String>>) -> Response {
    match lane(&q) {
        Ok(lane) => done(ui.jobs.resume(lane).await),
        Err(r) => r.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::{bearer, same};

    #[test]
    fn the_token_is_compared_whole() {
        assert!(same(b"abcdef", b"abcdef"));
        for other in [&b"abcdeg"[..], b"abcde", b"abcdefg", b"", b"Abcdef"] {
            assert!(!same(b"abcdef", other), "{other:?}");
        }
    }

    #[test]
    fn the_scheme_is_bearer_in_any_case() {
        assert_eq!(bearer("Bearer t0ken"), Some("t0ken"));
        assert_eq!(bearer("bearer t0ken"), Some("t0ken"));
        assert_eq!(bearer("Basic dXNlcjpwYXNz"), None);
        assert_eq!(bearer("Bearer"), None);
    }
}
