//! The responses the layer makes itself: `429 Too Many Requests` (shaped by the layer's refusal
//! handler, if any) and `400 Bad Request`, with their bodies as bytes (the future turns them
//! into the inner service's body type).

use crate::config::{Config, RateLimitHeaders};
use crate::gate::Level;
use crate::handler::Refusal;
use crate::headers::{self, Policy, RATELIMIT, RATELIMIT_POLICY};
use crate::key::KeyError;
use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::request::Parts;
use http::{HeaderValue, Response, StatusCode};
use std::time::Duration;

/// The draft's problem type for a request over its quota.
const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// `application/problem+json` (RFC 9457).
const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");

/// A problem details object (RFC 9457), with the draft's `violated-policies` member.
#[derive(serde::Serialize)]
struct Problem<'a> {
    r#type: &'a str,
    title: &'a str,
    status: u16,
    detail: String,
    #[serde(rename = "violated-policies", skip_serializing_if = "Option::is_none")]
    violated_policies: Option<Vec<&'a str>>,
}

/// The 429 for a request that did not conform: `Retry-After` when it can ever conform, the
/// `RateLimit` fields of `policy` unless turned off, and a problem body if asked for; then
/// shaped by the layer's refusal handler, if it has one, which gets `request` and this response
/// and whose response gets the same fields where it lacks them. For a rule with several quotas
/// the body names every one of them: the decision does not say which refused.
pub(crate) fn too_many_requests(
    config: &Config,
    request: &Parts,
    policy: Option<&Policy>,
    level: Level,
    retry_after: Option<Duration>,
) -> Response<Bytes> {
    let body = if config.problem_details {
        let detail = match retry_after {
            Some(wait) => format!("retry in {} s", headers::whole_seconds_up(wait)),
            None => "the request is larger than the quota's burst and can never conform".to_owned(),
        };
        let problem = Problem {
            r#type: QUOTA_EXCEEDED,
            title: "Too many requests: the quota is used up",
            status: StatusCode::TOO_MANY_REQUESTS.as_u16(),
            detail,
            violated_policies: policy.map(|policy| policy.item_names().collect()),
        };
        problem_body(&problem)
    } else {
        Bytes::new()
    };
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    if config.problem_details {
        response.headers_mut().insert(CONTENT_TYPE, PROBLEM_JSON);
    }
    add_refusal_fields(&mut response, config, policy, level, retry_after);
    let Some(handler) = &config.on_refusal else {
        return response;
    };
    let refusal = Refusal {
        request,
        remaining: level.remaining,
        reset_after: level.reset_after,
        retry_after,
        policy,
        response,
    };
    let mut shaped = handler.shape(refusal);
    add_refusal_fields(&mut shaped, config, policy, level, retry_after);
    shaped
}

/// Adds `Retry-After` (when the request can ever conform) and the `RateLimit` fields of `policy`
/// (unless turned off) to a refusal, each only if the response has no such field yet.
fn add_refusal_fields(
    response: &mut Response<Bytes>,
    config: &Config,
    policy: Option<&Policy>,
    level: Level,
    retry_after: Option<Duration>,
) {
    let fields = response.headers_mut();
    if let Some(wait) = retry_after.filter(|_| !fields.contains_key(RETRY_AFTER)) {
        fields.insert(RETRY_AFTER, headers::retry_after(wait));
    }
    let policy = policy.filter(|_| config.headers != RateLimitHeaders::Never);
    if let Some(policy) = policy.filter(|_| !fields.contains_key(RATELIMIT_POLICY)) {
        fields.append(RATELIMIT_POLICY, policy.field());
    }
    if let Some(policy) = policy.filter(|_| !fields.contains_key(RATELIMIT)) {
        fields.append(RATELIMIT, policy.service_limit(level.remaining, level.reset_after));
    }
}

/// The 400 for a request whose key could not be found. Nothing was charged, so there is no
/// `RateLimit` field; the layer's policy is still announced (a rules layer has none: without a
/// key there is no rule).
pub(crate) fn bad_request(config: &Config, error: &KeyError) -> Response<Bytes> {
    let (body, content_type) = if config.problem_details {
        let problem = Problem {
            r#type: "about:blank",
            title: "Bad Request",
            status: StatusCode::BAD_REQUEST.as_u16(),
            detail: error.to_string(),
            violated_policies: None,
        };
        (problem_body(&problem), PROBLEM_JSON)
    } else {
        (Bytes::from(format!("{error}\n")), HeaderValue::from_static("text/plain; charset=utf-8"))
    };
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::BAD_REQUEST;
    let fields = response.headers_mut();
    fields.insert(CONTENT_TYPE, content_type);
    if let Some(policy) =
        config.policy.as_ref().filter(|_| config.headers == RateLimitHeaders::Always)
    {
        fields.append(RATELIMIT_POLICY, policy.field());
    }
    response
}

fn problem_body(problem: &Problem<'_>) -> Bytes {
    // Serialising a struct of strings and integers cannot fail.
    Bytes::from(serde_json::to_vec(problem).unwrap_or_default())
}
