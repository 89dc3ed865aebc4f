//! What a request must show before it reaches a handler: a `Host` this service answers to
//! (against DNS rebinding), and, when the service has a secret, `Authorization: Bearer
//! <secret>` (everywhere but the page `/`, which holds no data and asks for the secret itself).
//!
//! **The `Host` rule.** A web page on another site can make a browser send requests here by
//! pointing its own name at this address (DNS rebinding); the browser then sends that name as
//! `Host`. So a request whose `Host` is a name is answered only for `localhost` (and names
//! under `.localhost`) and the names given with `--http-allow-host` (`*`: any name); an IP
//! address (the bound one, or any other the client used) is always answered, and so is a
//! request with no `Host` at all (no browser sends one). Anything else gets `403`.

use crate::auth::Secret;
use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, HOST, WWW_AUTHENTICATE};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::Ipv4Addr;
use std::sync::Arc;

/// The checks, shared by every request of the listener.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    pub(crate) secret: Option<Arc<Secret>>,
    /// `Host` names answered besides addresses and `localhost`, in lower case.
    pub(crate) allowed_hosts: Arc<[String]>,
}

/// The middleware: refuses what [`Guard`] does not let through.
pub(crate) async fn check(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    if let Some(host) = request.headers().get(HOST) {
        let host = host.to_str().unwrap_or("");
        if !host_allowed(host, &guard.allowed_hosts) {
            let message = format!(
                "this service does not answer for Host {host:?} (DNS rebinding): \
                 use its address, or start it with --http-allow-host NAME\n"
            );
            return (StatusCode::FORBIDDEN, message).into_response();
        }
    }
    if let Some(secret) = &guard.secret {
        let shown = request.headers().get(AUTHORIZATION).map(|v| v.as_bytes());
        if request.uri().path() != "/" && !shown.is_some_and(|v| secret.matches_bearer(v)) {
            let headers = [(WWW_AUTHENTICATE, "Bearer realm=\"leakgate\"")];
            let message = "this service asks for its secret: Authorization: Bearer <secret>\n";
            return (StatusCode::UNAUTHORIZED, headers, message).into_response();
        }
    }
    next.run(request).await
}

/// Whether a request naming `host` (a `Host` header's value) is answered (see the module's
/// documentation).
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    if host.starts_with('[') {
        // An IPv6 address, `[::1]:9090`.
        return true;
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    name.parse::<Ipv4Addr>().is_ok()
        || name == "localhost"
        || name.ends_with(".localhost")
        || allowed.iter().any(|a| a == "*" || a == &name || a.strip_suffix('.') == Some(&name))
}

#[cfg(test)]
mod tests {
    use super::host_allowed;

    #[test]
    fn addresses_and_localhost_are_answered_other_names_only_when_allowed() {
        let none: &[String] = &[];
        for host in ["127.0.0.1:9090", "127.0.0.1", "10.1.2.3:80", "[::1]:9090", "localhost:9090"] {
            assert!(host_allowed(host, none), "{host}");
        }
        assert!(host_allowed("LOCALHOST", none) && host_allowed("app.localhost:1", none));
        for host in
            ["evil.example", "evil.example:9090", "localhost.evil.example", "127.0.0.1.nip.io"]
        {
            assert!(!host_allowed(host, none), "{host}");
        }
        let allowed = ["metrics.internal".to_string()];
        assert!(host_allowed("Metrics.Internal:9090", &allowed));
        assert!(host_allowed("metrics.internal.", &allowed));
        assert!(!host_allowed("evil.example", &allowed));
        assert!(host_allowed("evil.example", &["*".to_string()]));
    }
}
