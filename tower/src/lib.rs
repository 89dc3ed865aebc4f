//! Rate limiting for HTTP servers built on tower (axum, hyper, tonic), with leakgate's exact,
//! lock-free GCRA and the IETF `RateLimit` header fields.
//!
//! [`RateLimitLayer`] limits requests per client IP ([`RateLimitLayer::per_ip`]), per key found
//! in the request ([`RateLimitLayer::keyed`] with a [`KeyExtractor`]: [`PeerIp`] behind trusted
//! proxies, [`HeaderKey`], [`KeyTemplate`], or a closure), or all together
//! ([`RateLimitLayer::global`]), or by key path under a rules file ([`RateLimitLayer::rules`]
//! with [`LiveRules`]: routes, per-client overrides and several quotas at once, reloadable while
//! serving). Each but rules has a queue mode that holds requests until their turn instead of
//! refusing them: [`RateLimitLayer::per_ip_queue`], [`RateLimitLayer::keyed_queue`],
//! [`RateLimitLayer::global_queue`].
//!
//! * **One limiter per layer.** Every service the layer makes, every route under it and every
//!   clone share one limiter through an `Arc`, unlike tower's own `RateLimit`, which keeps its
//!   state per clone (and axum clones services).
//! * **How many at once, too.** [`ConcurrencyLimitLayer`] bounds the requests in the handlers at
//!   once (globally or per key, fixed or with an adaptive limit that learns from 5xx, 429s,
//!   timeouts and latency: per key, each key its own) and refuses the rest at once with 503 and
//!   `Retry-After`.
//! * **Refused requests never reach the handler.** They get `429 Too Many Requests` with
//!   `Retry-After` (whole seconds, rounded up) and, optionally, an `application/problem+json`
//!   body; or whatever response [`RateLimitLayer::on_refusal`] makes of each [`Refusal`].
//! * **Unmatched routes pass.** With `{route}` in a [`KeyTemplate`], a request that matches no
//!   route goes on to the router's 404 unlimited, or is limited under a fallback route
//!   ([`UnmatchedRoute`]); any extractor may exempt a request ([`KeyError::exempt`]).
//! * **Standard headers.** Every response carries `RateLimit-Policy` and `RateLimit`, Structured
//!   Field lists per draft-ietf-httpapi-ratelimit-headers-10: `"default";q=100;w=60` and
//!   `"default";r=42;t=7`, where `r` is the bucket's `remaining()` and `t` its `reset_after()`
//!   in whole seconds, rounded up. How `q` and `w` describe a GCRA quota is explained below.
//! * **Operators can look.** [`RateLimitLayer::operator_view`] is a read-only JSON route listing
//!   the fullest buckets (by key prefix and level) and the layer's [`Counts`].
//!
//! ```
//! use axum::{routing::get, Router};
//! use leakgate::{KeyedLimiter, Quota};
//! use leakgate_tower::RateLimitLayer;
//!
//! let per_ip = KeyedLimiter::new("100/min".parse::<Quota>()?);
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::per_ip(per_ip));
//! // Serve with app.into_make_service_with_connect_info::<std::net::SocketAddr>(): the layer
//! // reads the peer address from ConnectInfo. Responses then carry
//! //   RateLimit-Policy: "default";q=100;w=60
//! //   RateLimit: "default";r=99;t=1
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The header values for a GCRA quota
//!
//! A quota `count/period burst b` admits `b` requests at once and refills at `count/period`; it
//! is full again `tau = b * period / count` after it was emptied. The draft's policy is a quota
//! `q` per window of `w` whole seconds, so the layer announces `w = max(1, ceil(tau))` and
//! `q = floor(w * count / period)`. Then `r <= b <= q` and `t <= w` on every response, and a
//! client spending `q` per `w` never exceeds the quota's sustained rate. When `tau` is whole
//! seconds this is exactly `q = b; w = tau`: `N/s` is `q=N;w=1`, `100/min` is `q=100;w=60`,
//! `1/s burst 10` is `q=10;w=10`. `100/s burst 20` (`tau` = 0.2 s) is `q=100;w=1` (the rate; `r`
//! never says more than 20), and `7/min burst 1` is `q=1;w=9` (`q` rounded down).
//!
//! # Limits from rules
//!
//! [`RateLimitLayer::rules`] checks each request against leakgate's
//! [`RuleLimiter`](leakgate::RuleLimiter), under the key path its extractor builds (a
//! [`KeyTemplate`] such as `"http{route}/{ip}"`, or a closure returning a `String`): the key is
//! limited by the rule of its longest configured prefix cut at `/`, with its own bucket under
//! each of the rule's quotas, all or nothing. Each response announces that rule: one
//! `RateLimit-Policy` item per quota (named by the rule's path, or `path#0`, `path#1`, ... for
//! several; the default rule `""` is `default`), and one `RateLimit` item named by the rule's
//! path with the decision, which for several quotas is leakgate's combined figure (smallest
//! `remaining()`, largest `reset_after()`). A key no rule matches is admitted untracked, and a
//! key under a rule in shadow mode is admitted and counted: neither gets any field. Rules are
//! reloaded with [`LiveRules::reload`], which changes the limits and the fields together, every
//! key keeping its level. Meter only: leakgate's rules have no queue mode.
//!
//! ```
//! use axum::{routing::get, Router};
//! use leakgate::Rules;
//! use leakgate_tower::{KeyTemplate, LiveRules, RateLimitLayer};
//! use std::sync::Arc;
//!
//! let mut rules = Rules::new();
//! rules.insert("", ["20/s burst 40".parse()?]);
//! rules.insert("http/search", ["2/s burst 5".parse()?, "100/h".parse()?]);
//! rules.insert("http/search/203.0.113.9", ["50/s".parse()?]);
//! let live = Arc::new(LiveRules::new(rules));
//! let layer = RateLimitLayer::rules(live.clone(), KeyTemplate::parse("http{route}/{ip}")?);
//! let app: Router = Router::new().route("/search", get(|| async { "results" })).layer(layer);
//! // GET /search from 198.51.100.7 (key "http/search/198.51.100.7"), the first time:
//! //   RateLimit-Policy: "http/search#0";q=6;w=3, "http/search#1";q=100;w=3600
//! //   RateLimit: "http/search";r=4;t=36
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # hyper and tonic
//!
//! The layer works on any `http::Request` and keeps the inner service's response body type, which
//! must be a [`RefusalBody`] so the layer can answer 429 and 400 in it: axum's `Body`,
//! `Full<Bytes>`, `BoxBody`, `UnsyncBoxBody`, `String`, or `Either<AnyBody, Full<Bytes>>` for any
//! other. So it wraps hyper services (with `tower::ServiceBuilder` and hyper-util's
//! `TowerToHyperService`) and tonic servers (`Server::builder().layer(...)`, after a
//! `map_response(|r| r.map(Either::Left))` so tonic's body becomes an `Either`). [`PeerIp`] then
//! reads a plain `SocketAddr` from the request's extensions, which the accept loop inserts; for
//! tonic, a closure key extractor can read `TcpConnectInfo` instead. gRPC clients see a 429 as the
//! status `UNAVAILABLE`, and the `RateLimit` fields as response metadata.
//!
//! # Queue mode
//!
//! [`RateLimitLayer::global_queue`] holds a request that does not conform until its turn, up to
//! `max_wait`, using [`leakgate::Limiter::until_ready_n_timeout`]: places are given in arrival
//! order, a request that would wait longer is refused at once, and a request whose connection
//! closes while it waits gives its place back if no later one is queued behind it.
//! [`RateLimitLayer::keyed_queue`] and [`RateLimitLayer::per_ip_queue`] do the same per key, with
//! [`leakgate::KeyedLimiter::until_ready_n_timeout`]: each key has its own queue, so a key's
//! backlog never delays another key. A released request's `RateLimit` field gives its bucket's
//! level as it goes on; a refused one gets a 429 whose `Retry-After` says how much later the same
//! request would fit within `max_wait`. A queue may hold its bucket full for up to `max_wait`
//! beyond the policy's window `w`; `t` then says `w`, so `t <= w` holds on every response. With
//! `max_wait` zero a queue answers as the meter does (save that a keyed limiter's shared
//! overflow bucket serves meters only).
//!
//! ```
//! use axum::{routing::get, Router};
//! use leakgate::{KeyedLimiter, Quota};
//! use leakgate_tower::RateLimitLayer;
//! use std::time::Duration;
//!
//! // Each client IP: 2 requests a second, bursts of 4 at once; more wait up to 5 s for a turn.
//! let per_ip = KeyedLimiter::new("2/s burst 4".parse::<Quota>()?);
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::per_ip_queue(per_ip, Duration::from_secs(5)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod body;
mod concurrency;
mod config;
mod counters;
mod future;
mod gate;
mod handler;
mod headers;
mod key;
mod layer;
mod live_rules;
mod operator;
mod refusal;
mod service;

pub use body::RefusalBody;
pub use concurrency::{ConcurrencyFuture, ConcurrencyLimit, ConcurrencyLimitLayer};
pub use config::{IntoShared, RateLimitHeaders};
pub use counters::Counts;
pub use future::ResponseFuture;
pub use handler::Refusal;
pub use headers::InvalidPolicyName;
pub use ipnet::IpNet;
pub use key::{
    HeaderKey, KeyError, KeyErrorKind, KeyExtractor, KeyTemplate, OnKeyError, PeerIp, ProxyHeader,
    TemplateError, UnmatchedRoute,
};
pub use layer::RateLimitLayer;
pub use live_rules::LiveRules;
pub use operator::OperatorView;
pub use service::RateLimit;

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
