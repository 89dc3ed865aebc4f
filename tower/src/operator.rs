//! [`OperatorView`]: a read-only JSON page of a layer's buckets and counters.

use crate::counters::Counts;
use crate::gate::{BucketView, GateInfo};
use crate::layer::Shared;
use bytes::Bytes;
use http::header::{ALLOW, CONTENT_TYPE};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use std::convert::Infallible;
use std::future::{ready, Ready};
use std::task::{Context, Poll};
use tower_service::Service;

/// The most buckets one answer lists, whatever `limit` asks for.
const MAX_LIMIT: usize = 10_000;
/// Buckets listed when `limit` is not given.
const DEFAULT_LIMIT: usize = 100;

/// A read-only JSON view of one [`RateLimitLayer`](crate::RateLimitLayer): its policy, its
/// counters, and its buckets, fullest first. Made by
/// [`RateLimitLayer::operator_view`](crate::RateLimitLayer::operator_view); mount it on a route
/// only operators can reach (an internal listener, or behind authentication): it lists client
/// keys.
///
/// Query parameters, all optional:
///
/// * `prefix=10.1.` lists only keys that start with it (the keyless bucket has no key and is
///   listed only when there is no prefix);
/// * `min_fill=0.5` lists only buckets at least that full (0.0 empty, 1.0 a whole burst in use);
/// * `limit=20` lists at most that many (100 by default, at most 10,000); `matched` tells how
///   many matched in all.
///
/// ```json
/// {"policy":"default","quota":"10/s burst 20","limit":{"kind":"keyed","capacity":262144,
///  "overflow_denials":0},"mode":"meter","counts":{"admitted":41,"refused":3,"queued":0,
///  "key_errors":0},"matched":1,"buckets":[{"key":"127.0.0.1","remaining":2,"fill":0.9,
///  "reset_after_ms":1800,"idle_ms":12}]}
/// ```
///
/// Only `GET` and `HEAD` are answered; anything else gets 405. Each answer walks the whole key
/// table without blocking anyone (a few tens of milliseconds for 262,144 tracked keys), so it is
/// for people looking, not for scraping every second.
///
/// ```
/// use leakgate::{KeyedLimiter, ManualClock, Quota};
/// use leakgate_tower::RateLimitLayer;
/// use tower::ServiceExt;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let keyed = KeyedLimiter::<std::net::IpAddr, _>::with_clock(Quota::per_second(10)?, ManualClock::new());
/// let view = RateLimitLayer::per_ip(keyed).operator_view();
/// let response = view.oneshot(http::Request::get("/?min_fill=0.5").body(())?).await?;
/// assert_eq!(response.status(), 200);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct OperatorView {
    shared: Shared,
}

/// What the view answers.
#[derive(serde::Serialize)]
struct Page<'a> {
    policy: &'a str,
    quota: String,
    limit: GateInfo,
    mode: Mode,
    counts: Counts,
    matched: usize,
    buckets: Vec<BucketView>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Meter,
    Queue { max_wait_ms: u128 },
}

/// The parsed query.
#[derive(Debug)]
struct Filter {
    prefix: Option<String>,
    min_fill: f64,
    limit: usize,
}

impl OperatorView {
    pub(crate) fn new(shared: Shared) -> Self {
        OperatorView { shared }
    }

    fn page(&self, filter: &Filter) -> Vec<u8> {
        let keep = |key: Option<&str>, fill: f64| {
            let prefix_ok = match (&filter.prefix, key) {
                (None, _) => true,
                (Some(prefix), Some(key)) => key.starts_with(prefix.as_str()),
                (Some(_), None) => false,
            };
            prefix_ok && fill >= filter.min_fill
        };
        let mut buckets = Vec::new();
        self.shared.gate.buckets(&keep, &mut buckets);
        let matched = buckets.len();
        buckets.sort_by(|a, b| b.fill.total_cmp(&a.fill).then_with(|| a.key.cmp(&b.key)));
        buckets.truncate(filter.limit);
        let page = Page {
            policy: self.shared.config.policy.name(),
            quota: self.shared.gate.quota().to_string(),
            limit: self.shared.gate.info(),
            mode: match &self.shared.queue {
                None => Mode::Meter,
                Some((_, max_wait)) => Mode::Queue { max_wait_ms: max_wait.as_millis() },
            },
            counts: self.shared.counters.counts(),
            matched,
            buckets,
        };
        // Strings, integers and finite floats always serialise.
        serde_json::to_vec(&page).unwrap_or_default()
    }
}

/// The filter a query asks for, or what is wrong with it.
fn parse_query(query: Option<&str>) -> Result<Filter, String> {
    let mut filter = Filter { prefix: None, min_fill: 0.0, limit: DEFAULT_LIMIT };
    for (name, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match &*name {
            "prefix" => filter.prefix = Some(value.into_owned()),
            "min_fill" => {
                filter.min_fill =
                    value.parse::<f64>().ok().filter(|f| (0.0..=1.0).contains(f)).ok_or_else(
                        || format!("min_fill must be a number from 0 to 1, not {value:?}"),
                    )?
            }
            "limit" => {
                filter.limit = value
                    .parse::<usize>()
                    .map_err(|_| format!("limit must be a whole number, not {value:?}"))?
                    .min(MAX_LIMIT)
            }
            other => {
                return Err(format!("unknown parameter {other:?} (known: prefix, min_fill, limit)"))
            }
        }
    }
    Ok(filter)
}

fn json(status: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

impl<B> Service<Request<B>> for OperatorView {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if request.method() != Method::GET && request.method() != Method::HEAD {
            let mut response = json(
                StatusCode::METHOD_NOT_ALLOWED,
                br#"{"error":"the operator view is read-only: GET or HEAD"}"#.to_vec(),
            );
            response.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            return ready(Ok(response));
        }
        let response = match parse_query(request.uri().query()) {
            Ok(filter) => json(StatusCode::OK, self.page(&filter)),
            Err(error) => {
                let body = serde_json::json!({ "error": error });
                json(StatusCode::BAD_REQUEST, serde_json::to_vec(&body).unwrap_or_default())
            }
        };
        ready(Ok(response))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_parse_or_say_why_not() {
        let f = parse_query(Some("prefix=10.0.&min_fill=0.25&limit=999999")).unwrap();
        assert_eq!((f.prefix.as_deref(), f.min_fill, f.limit), (Some("10.0."), 0.25, MAX_LIMIT));
        let f = parse_query(Some("prefix=a%2Fb+c")).unwrap();
        assert_eq!(f.prefix.as_deref(), Some("a/b c"));
        assert!(parse_query(Some("min_fill=2")).unwrap_err().contains("min_fill"));
        assert!(parse_query(Some("min_fill=NaN")).is_err());
        assert!(parse_query(Some("limit=-1")).unwrap_err().contains("limit"));
        assert!(parse_query(Some("sort=x")).unwrap_err().contains("unknown"));
        assert_eq!(parse_query(None).unwrap().limit, DEFAULT_LIMIT);
    }
}
