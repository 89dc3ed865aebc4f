//! [`KeyTemplate`]: a key built from parts of the request, such as `api/{route}/{ip}`.

use super::{HeaderKey, KeyError, KeyExtractor, PeerIp};
use http::request::Parts;
use http::HeaderName;
use std::fmt::{self, Write as _};
use std::sync::Arc;

/// A key built from literal text and parts of the request, one bucket per distinct result.
///
/// Placeholders:
///
/// | placeholder | value |
/// |---|---|
/// | `{ip}` | the client address, as [`PeerIp`] finds it (see [`peer`](KeyTemplate::peer)) |
/// | `{method}` | the request method, `GET` |
/// | `{route}` | the matched route template, `/users/{id}` (axum's `MatchedPath`; feature `axum`) |
/// | `{path}` | the request path as sent, `/users/42` |
/// | `{header:NAME}` | a header's value, checked as by [`HeaderKey`] |
///
/// `{{` and `}}` stand for literal braces. `{route}` keeps one bucket per route whatever its
/// parameters, so `"{route}"` limits each endpoint as a whole; `{path}` is written by the client,
/// so a key with it can take as many values as clients invent (each a slot in the table). Keys of
/// the form `api/search/{ip}` are the `/`-separated paths that leakgate's rules are written for
/// (see [`RateLimitLayer::rules`](crate::RateLimitLayer::rules)).
///
/// ```
/// use leakgate::{KeyedLimiter, Quota};
/// use leakgate_tower::{KeyTemplate, RateLimitLayer};
///
/// // Each client gets its own bucket on each endpoint.
/// let template = KeyTemplate::parse("api{route}/{ip}")?;
/// let layer = RateLimitLayer::keyed(KeyedLimiter::new(Quota::per_second(20)?), template);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct KeyTemplate {
    source: Arc<str>,
    pieces: Arc<[Piece]>,
    peer: PeerIp,
    unmatched: UnmatchedRoute,
}

/// What `{route}` does for a request that matched no route: under axum, one that reaches the
/// router's fallback (a 404), which has no `MatchedPath`. Set with
/// [`KeyTemplate::unmatched_route`].
///
/// A layer added with `Router::layer` sees those requests without a route; one added with
/// `Router::route_layer` never sees them. A layer wrapped around the whole router from outside
/// (say with `tower::ServiceBuilder`) runs before routing and never sees a route: put it inside,
/// with `Router::layer`, or every request is unmatched.
///
/// ```
/// use leakgate_tower::{KeyTemplate, UnmatchedRoute};
/// // Requests to unknown paths share one bucket per client, under the key "api/unmatched/{ip}".
/// let template = KeyTemplate::parse("api{route}/{ip}")?
///     .unmatched_route(UnmatchedRoute::Route("/unmatched".into()));
/// # Ok::<(), leakgate_tower::TemplateError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnmatchedRoute {
    /// Not limited (the default): the request goes on to the router's fallback uncharged and
    /// without `RateLimit` fields (its key is [exempt](crate::KeyError::exempt)), and is counted
    /// in [`Counts::exempt`](crate::Counts::exempt).
    #[default]
    Unlimited,
    /// `{route}` reads as this text: the request is limited under the key the template makes
    /// with it, so unknown paths share a bucket (per client, with `{ip}` in the template).
    Route(String),
    /// A key that cannot be found ([`KeyErrorKind::Missing`](crate::KeyErrorKind::Missing)):
    /// 400, or the shared bucket of keyless requests, as the layer's
    /// [`OnKeyError`](crate::OnKeyError) says.
    KeyError,
}

#[derive(Debug)]
enum Piece {
    Literal(String),
    Ip,
    Method,
    #[cfg(feature = "axum")]
    Route,
    Path,
    Header(HeaderKey),
}

/// A key template that does not parse.
///
/// ```
/// let err = leakgate_tower::KeyTemplate::parse("user/{nope}").unwrap_err();
/// assert!(err.to_string().contains("{nope}"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError {
    template: String,
    reason: String,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid key template {:?}: {}", self.template, self.reason)
    }
}

impl std::error::Error for TemplateError {}

impl KeyTemplate {
    /// Parses a template.
    ///
    /// ```
    /// use leakgate_tower::KeyTemplate;
    /// assert!(KeyTemplate::parse("{method} {path}").is_ok());
    /// assert!(KeyTemplate::parse("tenant/{header:x-tenant}").is_ok());
    /// assert!(KeyTemplate::parse("{unclosed").is_err());
    /// ```
    pub fn parse(template: &str) -> Result<Self, TemplateError> {
        let fail = |reason: String| TemplateError { template: template.to_owned(), reason };
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = template;
        while let Some(i) = rest.find(['{', '}']) {
            literal.push_str(&rest[..i]);
            let (brace, after) = (rest.as_bytes()[i], &rest[i + 1..]);
            if after.as_bytes().first() == Some(&brace) {
                literal.push(char::from(brace));
                rest = &after[1..];
                continue;
            }
            if brace == b'}' {
                return Err(fail("a lone '}' (write '}}' for a brace)".to_owned()));
            }
            let end = after.find('}').ok_or_else(|| fail("a '{' is never closed".to_owned()))?;
            if !literal.is_empty() {
                pieces.push(Piece::Literal(std::mem::take(&mut literal)));
            }
            pieces.push(placeholder(&after[..end]).map_err(fail)?);
            rest = &after[end + 1..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal));
        }
        if pieces.is_empty() {
            return Err(fail("it is empty: every request would share one key".to_owned()));
        }
        Ok(KeyTemplate {
            source: template.into(),
            pieces: pieces.into(),
            peer: PeerIp::new(),
            unmatched: UnmatchedRoute::Unlimited,
        })
    }

    /// What `{route}` does when the request matched no route ([`UnmatchedRoute::Unlimited`]
    /// unless set). Templates without `{route}` are not affected.
    ///
    /// ```
    /// use leakgate_tower::{KeyTemplate, UnmatchedRoute};
    /// // Unknown paths are limited as one more route, per client.
    /// let template = KeyTemplate::parse("http{route}/{ip}")?
    ///     .unmatched_route(UnmatchedRoute::Route("/404".into()));
    /// # Ok::<(), leakgate_tower::TemplateError>(())
    /// ```
    pub fn unmatched_route(mut self, unmatched: UnmatchedRoute) -> Self {
        self.unmatched = unmatched;
        self
    }

    /// How `{ip}` finds the client (by default the connection's peer, as [`PeerIp::new`]).
    ///
    /// ```
    /// use leakgate_tower::{KeyTemplate, PeerIp, ProxyHeader};
    /// let peer = PeerIp::behind_proxies(ProxyHeader::Forwarded, ["10.0.0.0/8".parse()?]);
    /// let template = KeyTemplate::parse("search/{ip}")?.peer(peer);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn peer(mut self, peer: PeerIp) -> Self {
        self.peer = peer;
        self
    }

    /// The key of `request`.
    fn render(&self, request: &Parts) -> Result<String, KeyError> {
        let mut key = String::with_capacity(64);
        for piece in self.pieces.iter() {
            match piece {
                Piece::Literal(text) => key.push_str(text),
                Piece::Ip => {
                    // Writing to a String cannot fail.
                    let _ = write!(key, "{}", self.peer.client(request)?);
                }
                Piece::Method => key.push_str(request.method.as_str()),
                #[cfg(feature = "axum")]
                Piece::Route => match request.extensions.get::<axum::extract::MatchedPath>() {
                    Some(route) => key.push_str(route.as_str()),
                    None => match &self.unmatched {
                        UnmatchedRoute::Unlimited => {
                            return Err(KeyError::exempt("no route matched the request"))
                        }
                        UnmatchedRoute::Route(text) => key.push_str(text),
                        UnmatchedRoute::KeyError => {
                            return Err(KeyError::missing("the matched route (axum's MatchedPath)"))
                        }
                    },
                },
                Piece::Path => key.push_str(request.uri.path()),
                Piece::Header(header) => key.push_str(header.value(request)?),
            }
        }
        Ok(key)
    }
}

/// The piece for the placeholder `{name}`.
fn placeholder(name: &str) -> Result<Piece, String> {
    match name {
        "ip" => Ok(Piece::Ip),
        "method" => Ok(Piece::Method),
        #[cfg(feature = "axum")]
        "route" => Ok(Piece::Route),
        #[cfg(not(feature = "axum"))]
        "route" => Err("{route} needs the feature \"axum\"".to_owned()),
        "path" => Ok(Piece::Path),
        _ => match name.strip_prefix("header:") {
            Some(header) => HeaderName::from_bytes(header.as_bytes())
                .map(|name| Piece::Header(HeaderKey::new(name)))
                .map_err(|_| format!("{{{name}}}: {header:?} is not a header name")),
            None => Err(format!(
                "unknown placeholder {{{name}}} (known: {{ip}}, {{method}}, {{route}}, {{path}}, \
                 {{header:NAME}})"
            )),
        },
    }
}

impl KeyExtractor for KeyTemplate {
    type Key = String;

    fn extract(&self, request: &Parts) -> Result<String, KeyError> {
        self.render(request)
    }
}

impl fmt::Display for KeyTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeyErrorKind;
    use std::net::SocketAddr;

    fn request() -> Parts {
        let (mut parts, ()) = http::Request::post("/users/42?x=1")
            .header("x-tenant", "acme")
            .body(())
            .unwrap()
            .into_parts();
        parts.extensions.insert("192.0.2.1:4000".parse::<SocketAddr>().unwrap());
        parts
    }

    fn render(template: &str) -> Result<String, KeyError> {
        KeyTemplate::parse(template).unwrap().extract(&request())
    }

    #[test]
    fn placeholders_are_filled_in() {
        assert_eq!(render("api/search/{ip}").unwrap(), "api/search/192.0.2.1");
        assert_eq!(render("{method} {path}").unwrap(), "POST /users/42");
        assert_eq!(render("t/{header:x-tenant}/{{x}}").unwrap(), "t/acme/{x}");
    }

    #[test]
    fn a_missing_part_is_a_missing_key() {
        assert_eq!(render("{header:x-user}").unwrap_err().kind(), KeyErrorKind::Missing);
    }

    #[cfg(feature = "axum")]
    #[test]
    fn an_unmatched_route_is_exempt_a_fallback_route_or_a_missing_key() {
        assert_eq!(render("a{route}/{ip}").unwrap_err().kind(), KeyErrorKind::Exempt);
        let with = |unmatched| {
            let template = KeyTemplate::parse("a{route}/{ip}").unwrap().unmatched_route(unmatched);
            template.extract(&request())
        };
        assert_eq!(with(UnmatchedRoute::Route("/none".into())).unwrap(), "a/none/192.0.2.1");
        assert_eq!(with(UnmatchedRoute::KeyError).unwrap_err().kind(), KeyErrorKind::Missing);
    }

    #[test]
    fn bad_templates_are_refused() {
        for bad in ["", "{", "a}b", "{nope}", "{header:bad name}", "{}"] {
            assert!(KeyTemplate::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn display_is_the_source() {
        assert_eq!(KeyTemplate::parse("a/{ip}").unwrap().to_string(), "a/{ip}");
    }
}
