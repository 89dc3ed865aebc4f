//! Which bucket a request is charged to: the [`KeyExtractor`] trait and the extractors that come
//! with the crate.
//!
//! * [`PeerIp`]: the client's IP address, from the connection or, behind proxies you name, from
//!   `Forwarded` / `X-Forwarded-For`;
//! * [`HeaderKey`]: a header's value, such as an API key;
//! * [`KeyTemplate`]: a string built from the request (`"api/{route}/{ip}"`);
//! * any closure `Fn(&http::request::Parts) -> Result<K, KeyError>`.

mod forwarded;
mod header;
mod peer;
mod template;

pub use header::HeaderKey;
pub use peer::{PeerIp, ProxyHeader};
pub use template::{KeyTemplate, TemplateError, UnmatchedRoute};

use http::request::Parts;
use std::borrow::Cow;
use std::fmt;
use std::hash::Hash;

/// Finds the key of a request: the bucket it is charged to.
///
/// Implemented by the crate's extractors and by every closure
/// `Fn(&http::request::Parts) -> Result<K, KeyError>`. Keys are shown by the operator view, so they
/// implement `Display`.
///
/// ```
/// use http::request::Parts;
/// use leakgate::{KeyedLimiter, Quota};
/// use leakgate_tower::{KeyError, RateLimitLayer};
///
/// // One bucket per tenant, named by the first path segment: /acme/orders -> "acme".
/// let tenant = |req: &Parts| {
///     let first = req.uri.path().split('/').nth(1).unwrap_or("");
///     if first.is_empty() {
///         return Err(KeyError::missing("a tenant in the path"));
///     }
///     Ok(first.to_owned())
/// };
/// let layer = RateLimitLayer::keyed(KeyedLimiter::new(Quota::per_second(50)?), tenant);
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key: what one bucket is kept for.
    type Key: Hash + Eq + Clone + Send + Sync + fmt::Display + 'static;

    /// The key of `request`, or why it has none.
    fn extract(&self, request: &Parts) -> Result<Self::Key, KeyError>;
}

impl<K, F> KeyExtractor for F
where
    F: Fn(&Parts) -> Result<K, KeyError> + Send + Sync + 'static,
    K: Hash + Eq + Clone + Send + Sync + fmt::Display + 'static,
{
    type Key = K;

    fn extract(&self, request: &Parts) -> Result<K, KeyError> {
        self(request)
    }
}

/// Why a request's key could not be found. What then happens is the layer's [`OnKeyError`].
///
/// ```
/// use leakgate_tower::{KeyError, KeyErrorKind};
/// let e = KeyError::missing("header x-api-key");
/// assert_eq!(e.kind(), KeyErrorKind::Missing);
/// assert_eq!(e.to_string(), "no rate-limit key: missing header x-api-key");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyError {
    kind: KeyErrorKind,
    detail: Cow<'static, str>,
}

/// Why a request has no key: its source is absent, or present but unusable, or the request is
/// exempt from the limit.
///
/// ```
/// use leakgate_tower::{KeyError, KeyErrorKind};
/// assert_eq!(KeyError::malformed("x").kind(), KeyErrorKind::Malformed);
/// assert_eq!(KeyError::exempt("health checks").kind(), KeyErrorKind::Exempt);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyErrorKind {
    /// What the key is made of is not in the request (a header, the peer address).
    Missing,
    /// It is there but cannot be used (not UTF-8, not an address, repeated, too long).
    Malformed,
    /// The request is not under this limit (a route the router does not know, under
    /// [`UnmatchedRoute::Unlimited`]; or whatever a closure extractor exempts): it passes to the
    /// inner service uncharged and without `RateLimit` fields, whatever [`OnKeyError`] says, and
    /// is counted in [`Counts::exempt`](crate::Counts::exempt).
    Exempt,
}

impl KeyError {
    /// The key's source is absent; `what` names it ("header x-api-key").
    ///
    /// ```
    /// let e = leakgate_tower::KeyError::missing("the peer address");
    /// assert_eq!(e.detail(), "the peer address");
    /// ```
    pub fn missing(what: impl Into<Cow<'static, str>>) -> Self {
        KeyError { kind: KeyErrorKind::Missing, detail: what.into() }
    }

    /// The key's source is present but unusable; `why` says how.
    ///
    /// ```
    /// let e = leakgate_tower::KeyError::malformed("x-api-key is not visible ASCII");
    /// assert!(e.to_string().contains("not visible ASCII"));
    /// ```
    pub fn malformed(why: impl Into<Cow<'static, str>>) -> Self {
        KeyError { kind: KeyErrorKind::Malformed, detail: why.into() }
    }

    /// The request is exempt from the limit; `why` says why ("no route matched"). The layer
    /// passes it on uncharged, whatever [`OnKeyError`] says.
    ///
    /// ```
    /// use http::request::Parts;
    /// use leakgate::{KeyedLimiter, Quota};
    /// use leakgate_tower::{KeyError, RateLimitLayer};
    ///
    /// // One bucket per API key; health checks are never limited.
    /// let key = |req: &Parts| {
    ///     if req.uri.path() == "/healthz" {
    ///         return Err(KeyError::exempt("health checks"));
    ///     }
    ///     let key = req.headers.get("x-api-key").ok_or(KeyError::missing("header x-api-key"))?;
    ///     Ok(key.to_str().map_err(|_| KeyError::malformed("x-api-key is not ASCII"))?.to_owned())
    /// };
    /// let layer = RateLimitLayer::keyed(KeyedLimiter::new(Quota::per_second(10)?), key);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn exempt(why: impl Into<Cow<'static, str>>) -> Self {
        KeyError { kind: KeyErrorKind::Exempt, detail: why.into() }
    }

    /// Which way it failed.
    ///
    /// ```
    /// # use leakgate_tower::{KeyError, KeyErrorKind};
    /// assert_eq!(KeyError::missing("x").kind(), KeyErrorKind::Missing);
    /// ```
    pub fn kind(&self) -> KeyErrorKind {
        self.kind
    }

    /// What was missing or wrong.
    ///
    /// ```
    /// assert_eq!(leakgate_tower::KeyError::malformed("bad").detail(), "bad");
    /// ```
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            KeyErrorKind::Missing => write!(f, "no rate-limit key: missing {}", self.detail),
            KeyErrorKind::Malformed => write!(f, "bad rate-limit key: {}", self.detail),
            KeyErrorKind::Exempt => write!(f, "not rate-limited: {}", self.detail),
        }
    }
}

impl std::error::Error for KeyError {}

/// What the layer does with a request whose key cannot be found (an exempt request,
/// [`KeyErrorKind::Exempt`], always passes uncharged).
///
/// ```
/// use leakgate::{KeyedLimiter, Quota};
/// use leakgate_tower::{OnKeyError, RateLimitLayer};
/// // Requests without a usable peer address share one bucket instead of being refused.
/// let layer = RateLimitLayer::per_ip(KeyedLimiter::new(Quota::per_second(10)?))
///     .on_key_error(OnKeyError::Global);
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnKeyError {
    /// Answer `400 Bad Request` saying what was missing; the handler is not called and nothing
    /// is charged. The default: a key that cannot be found is usually a bug or a forged request.
    #[default]
    Reject,
    /// Charge the request to one bucket shared by every request without a key, with the
    /// limiter's quota, and go on as for any other key. Under
    /// [`rules`](crate::RateLimitLayer::rules), that bucket is the key `""`, which only the
    /// default rule `""` matches (no default rule: admitted untracked).
    Global,
}

/// Header values that are text: visible ASCII and spaces, as `HeaderValue::to_str` accepts.
pub(crate) fn header_text<'a>(
    value: &'a http::HeaderValue,
    name: &str,
) -> Result<&'a str, KeyError> {
    value.to_str().map_err(|_| KeyError::malformed(format!("{name} is not visible ASCII")))
}
