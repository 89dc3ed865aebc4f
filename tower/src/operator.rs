//! [`OperatorView`]: a read-only JSON page of a layer's buckets and counters.

use crate::config::Shared;
use crate::counters::Counts;
use crate::gate::{GateInfo, RuleView};
use bytes::Bytes;
use http::header::{ALLOW, CONTENT_TYPE};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use std::cmp;
use std::collections::BinaryHeap;
use std::convert::Infallible;
use std::fmt::Write as _;
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
///  "key_errors":0,"exempt":0},"matched":1,"buckets":[{"key":"127.0.0.1","remaining":2,"fill":0.9,
///  "reset_after_ms":1800,"idle_ms":12}]}
/// ```
///
/// A [`rules`](crate::RateLimitLayer::rules) layer has no one `quota`: its page lists each rule
/// in force with its quotas and counts (`RuleLimiter::stats`: admitted, denied, and denied in
/// shadow, kept by path across reloads), and each bucket (from `RuleLimiter::buckets`: one per
/// key and quota of its rule) names its rule and quota:
///
/// ```json
/// {"policy":"default","limit":{"kind":"rules"},"rules":[{"rule":"api","quotas":["10/s",
///  "1000/h"],"shadow":false,"admitted":10,"denied":1,"denied_in_shadow":0}],"mode":"meter",
///  "counts":{"admitted":10,"refused":1,"queued":0,"key_errors":0,"exempt":0},"matched":2,
///  "buckets":[{"key":"api/10.0.0.1","remaining":0,"fill":1.0,"reset_after_ms":1000,"idle_ms":0,"rule":"api",
///  "quota_index":0,"quota":"10/s"},{"key":"api/10.0.0.1","remaining":990,"fill":0.01,
///  "reset_after_ms":36000,"idle_ms":0,"rule":"api","quota_index":1,"quota":"1000/h"}]}
/// ```
///
/// Only `GET` and `HEAD` are answered; anything else gets 405. Each answer walks the whole key
/// table with `KeyedLimiter::snapshot` (every rule's tables, for rules), blocking no decision (55
/// to 100 ms for 200,000 tracked keys on a busy 2-core machine), and copies out only the buckets
/// it lists (a rules layer's limiter copies out every bucket that passes `prefix` and
/// `min_fill` first): it is for people looking, not for scraping every second.
///
/// ```
/// use leakgate::{KeyedLimiter, ManualClock, Quota};
/// use leakgate_tower::RateLimitLayer;
/// use tower::ServiceExt;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let keyed =
///     KeyedLimiter::<std::net::IpAddr, _>::with_clock(Quota::per_second(10)?, ManualClock::new());
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

impl std::fmt::Debug for OperatorView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorView")
            .field("policy", &self.shared.config.name.as_str())
            .field("quota", &self.shared.gate.quota())
            .finish_non_exhaustive()
    }
}

/// What the view answers.
#[derive(serde::Serialize)]
struct Page<'a> {
    policy: &'a str,
    /// The one quota of a global or keyed limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    quota: Option<String>,
    limit: GateInfo,
    /// The rules in force with their counts, for a rules limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    rules: Option<Vec<RuleView>>,
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

/// One bucket as the view lists it.
#[derive(Debug, serde::Serialize)]
struct BucketView {
    /// `None` for the bucket of a global limit or of the requests without a key.
    key: Option<String>,
    remaining: u64,
    fill: f64,
    reset_after_ms: u128,
    #[serde(skip_serializing_if = "Option::is_none")]
    idle_ms: Option<u128>,
    /// The rule whose quota the bucket enforces (rules only).
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    quota_index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    quota: Option<String>,
}

/// The fullest `limit` buckets seen so far, in a heap whose top is the one to drop first.
struct Fullest {
    limit: usize,
    heap: BinaryHeap<ByFill>,
}

/// Orders buckets so that the greater is the one to drop first: less full, then later key, then
/// (a rule's buckets of one key) later quota.
#[derive(Debug)]
struct ByFill(BucketView);

impl Ord for ByFill {
    fn cmp(&self, other: &Self) -> cmp::Ordering {
        other.0.fill.total_cmp(&self.0.fill).then_with(|| {
            (&self.0.key, self.0.quota_index).cmp(&(&other.0.key, other.0.quota_index))
        })
    }
}

impl PartialOrd for ByFill {
    fn partial_cmp(&self, other: &Self) -> Option<cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for ByFill {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == cmp::Ordering::Equal
    }
}

impl Eq for ByFill {}

impl Fullest {
    fn new(limit: usize) -> Self {
        Fullest { limit, heap: BinaryHeap::with_capacity(limit.min(1024) + 1) }
    }

    /// Whether a bucket `fill` full, keyed `key` (and for rules, its quota's index), would be
    /// kept now.
    fn would_keep(&self, fill: f64, key: Option<&str>, quota_index: Option<usize>) -> bool {
        if self.heap.len() < self.limit {
            return true;
        }
        self.heap.peek().is_some_and(|worst| {
            let worst = &worst.0;
            fill > worst.fill
                || (fill == worst.fill
                    && (key, quota_index) < (worst.key.as_deref(), worst.quota_index))
        })
    }

    fn offer(&mut self, bucket: BucketView) {
        self.heap.push(ByFill(bucket));
        if self.heap.len() > self.limit {
            self.heap.pop();
        }
    }

    /// Fullest first.
    fn into_sorted(self) -> Vec<BucketView> {
        self.heap.into_sorted_vec().into_iter().map(|b| b.0).collect()
    }
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
        let mut fullest = Fullest::new(filter.limit);
        let mut matched = 0;
        let mut text = String::new();
        let prefix = filter.prefix.as_deref();
        self.shared.gate.buckets(prefix, filter.min_fill, &mut |bucket| {
            if bucket.fill < filter.min_fill {
                return;
            }
            let key = bucket.key.map(|key| {
                text.clear();
                // Writing to a String cannot fail.
                let _ = write!(text, "{key}");
                text.as_str()
            });
            let prefix_ok = match (&filter.prefix, key) {
                (None, _) => true,
                (Some(prefix), Some(key)) => key.starts_with(prefix.as_str()),
                (Some(_), None) => false,
            };
            if !prefix_ok {
                return;
            }
            matched += 1;
            // Only the buckets that make the list are copied out.
            let quota_index = bucket.rule.as_ref().map(|rule| rule.quota_index);
            if fullest.would_keep(bucket.fill, key, quota_index) {
                fullest.offer(BucketView {
                    key: key.map(str::to_owned),
                    remaining: bucket.remaining,
                    fill: bucket.fill,
                    reset_after_ms: bucket.reset_after.as_millis(),
                    idle_ms: bucket.idle.map(|idle| idle.as_millis()),
                    rule: bucket.rule.as_ref().map(|rule| rule.path.to_owned()),
                    quota_index,
                    quota: bucket.rule.as_ref().map(|rule| rule.quota.to_string()),
                });
            }
        });
        let buckets = fullest.into_sorted();
        let page = Page {
            policy: self.shared.config.name.as_str(),
            quota: self.shared.gate.quota().map(|quota| quota.to_string()),
            limit: self.shared.gate.info(),
            rules: self.shared.gate.rules(),
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
    fn the_fullest_are_the_first_of_a_full_sort() {
        let view = |i: u64| BucketView {
            key: (!i.is_multiple_of(7)).then(|| format!("k{}", i % 50)),
            remaining: i,
            fill: ((i * 37) % 11) as f64 / 10.0,
            reset_after_ms: 0,
            idle_ms: None,
            rule: None,
            quota_index: None,
            quota: None,
        };
        for limit in [0, 1, 5, 64, 1000] {
            let mut fullest = Fullest::new(limit);
            for i in 0..300 {
                let bucket = view(i);
                if fullest.would_keep(bucket.fill, bucket.key.as_deref(), None) {
                    fullest.offer(bucket);
                }
            }
            let mut all: Vec<BucketView> = (0..300).map(view).collect();
            all.sort_by(|a, b| b.fill.total_cmp(&a.fill).then_with(|| a.key.cmp(&b.key)));
            all.truncate(limit);
            let got: Vec<(Option<String>, u64)> = fullest
                .into_sorted()
                .into_iter()
                .map(|b| (b.key, (b.fill * 10.0) as u64))
                .collect();
            let want: Vec<(Option<String>, u64)> =
                all.into_iter().map(|b| (b.key, (b.fill * 10.0) as u64)).collect();
            assert_eq!(got, want, "limit {limit}");
        }
    }

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
