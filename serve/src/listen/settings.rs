//! [`Settings`]: the listeners' flags (caps, timeouts, authentication, TLS, allowed `Host`
//! names), the [`Config`] methods that set them, and [`Prepared`]: the same checked and loaded
//! at start, where a bad file is a clear error before anything listens.

use super::fd;
use super::tls::TlsFiles;
use super::watched::Deadlines;
use crate::auth::Secret;
use crate::config::{Config, ServeError};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::TlsAcceptor;

/// The listeners' settings, as given (see the [`Config`] methods below).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    max_connections: usize,
    header_timeout: Duration,
    /// Zero: never.
    idle_timeout: Duration,
    auth_file: Option<PathBuf>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_client_ca: Option<PathBuf>,
    allowed_hosts: Vec<String>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            max_connections: 10_000,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            auth_file: None,
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
            allowed_hosts: Vec::new(),
        }
    }
}

/// The settings checked and loaded, for `listeners` listeners.
#[derive(Clone)]
pub(crate) struct Prepared {
    /// Each listener's cap on connections open at once.
    pub(crate) cap: usize,
    pub(crate) deadlines: Deadlines,
    pub(crate) secret: Option<Arc<Secret>>,
    pub(crate) grpc_tls: Option<TlsAcceptor>,
    pub(crate) http_tls: Option<TlsAcceptor>,
    /// `Host` names the HTTP listener answers besides addresses and `localhost` (lower case).
    pub(crate) allowed_hosts: Arc<[String]>,
}

impl Settings {
    /// Checks the settings, reads the secret and the certificates, and fits the cap to the
    /// open-files limit in force.
    pub(crate) fn prepare(&self, listeners: usize) -> Result<Prepared, ServeError> {
        if self.header_timeout.is_zero() {
            return Err(ServeError::Settings("the header timeout must be more than zero".into()));
        }
        let secret = match &self.auth_file {
            Some(path) => Some(Arc::new(Secret::from_file(path)?)),
            None => None,
        };
        let tls = match (&self.tls_cert, &self.tls_key, &self.tls_client_ca) {
            (Some(cert), Some(key), client_ca) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: client_ca.clone(),
            }),
            (None, None, None) => None,
            (None, None, Some(_)) => {
                return Err(ServeError::Tls("a client CA needs --tls-cert and --tls-key".into()))
            }
            _ => return Err(ServeError::Tls("give both --tls-cert and --tls-key".into())),
        };
        let grpc_tls = tls.as_ref().map(|t| t.acceptor(b"h2")).transpose()?;
        let http_tls = tls.as_ref().map(|t| t.acceptor(b"http/1.1")).transpose()?;
        let limit = fd::open_files_limit();
        let cap = fd::fit(self.max_connections, listeners, limit);
        if cap < self.max_connections {
            tracing::warn!(
                cap,
                asked = self.max_connections,
                open_files = limit,
                "connections: at most {cap} per listener, to stay below the open-files limit"
            );
        } else {
            tracing::info!(cap, open_files = limit, "connections: at most {cap} per listener");
        }
        let idle = Some(self.idle_timeout).filter(|idle| !idle.is_zero());
        let allowed_hosts = self.allowed_hosts.iter().map(|h| h.to_ascii_lowercase()).collect();
        Ok(Prepared {
            cap,
            deadlines: Deadlines { header: self.header_timeout, idle },
            secret,
            grpc_tls,
            http_tls,
            allowed_hosts,
        })
    }
}

impl Config {
    /// The most connections each listener keeps open at once (default 10,000), lowered at
    /// start so that all listeners together stay below the open-files limit (see
    /// [`raise_open_files_limit`](crate::raise_open_files_limit)). One more connection is
    /// told so (RESP: `-ERR max number of clients reached`, HTTP: `503`) and closed.
    ///
    /// ```
    /// let config = leakgate_serve::Config::new("rules.toml").max_connections(100);
    /// # let _ = config;
    /// ```
    pub fn max_connections(mut self, max: usize) -> Config {
        self.listen.max_connections = max;
        self
    }

    /// The longest a client may take to send a whole request (an HTTP header, a RESP command,
    /// a TLS handshake and HTTP/2's preface), or to take a reply (default 10 s; more than
    /// zero). An HTTP connection waiting for its next request is closed after it too.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = leakgate_serve::Config::new("rules.toml").header_timeout(Duration::from_secs(5));
    /// # let _ = config;
    /// ```
    pub fn header_timeout(mut self, timeout: Duration) -> Config {
        self.listen.header_timeout = timeout;
        self
    }

    /// How long a RESP or gRPC connection may send nothing before it is closed (default 300 s;
    /// zero: never). A gRPC client that answers the service's HTTP/2 keep-alive pings is never
    /// idle.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = leakgate_serve::Config::new("rules.toml").idle_timeout(Duration::from_secs(60));
    /// # let _ = config;
    /// ```
    pub fn idle_timeout(mut self, timeout: Duration) -> Config {
        self.listen.idle_timeout = timeout;
        self
    }

    /// Asks every client for the secret in the file at `path` (read at start; missing, empty
    /// or unreadable is an error): RESP `AUTH <secret>`, gRPC metadata `authorization: Bearer
    /// <secret>`, HTTP `Authorization: Bearer <secret>` (on `/metrics` and `/buckets`; the
    /// page `/` asks for it).
    ///
    /// ```
    /// let config = leakgate_serve::Config::new("rules.toml").auth_file("/etc/leakgate/secret");
    /// # let _ = config;
    /// ```
    pub fn auth_file(mut self, path: impl Into<PathBuf>) -> Config {
        self.listen.auth_file = Some(path.into());
        self
    }

    /// Serves gRPC and HTTP over TLS with the certificate chain and private key in these PEM
    /// files (RESP stays plain).
    ///
    /// ```
    /// let config = leakgate_serve::Config::new("rules.toml").tls("cert.pem", "key.pem");
    /// # let _ = config;
    /// ```
    pub fn tls(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Config {
        self.listen.tls_cert = Some(cert.into());
        self.listen.tls_key = Some(key.into());
        self
    }

    /// With [`tls`](Config::tls): only clients with a certificate signed by a CA in this PEM
    /// file get through the handshake.
    ///
    /// ```
    /// let config = leakgate_serve::Config::new("rules.toml")
    ///     .tls("cert.pem", "key.pem")
    ///     .tls_client_ca("clients-ca.pem");
    /// # let _ = config;
    /// ```
    pub fn tls_client_ca(mut self, path: impl Into<PathBuf>) -> Config {
        self.listen.tls_client_ca = Some(path.into());
        self
    }

    /// A `Host` name the HTTP listener answers, besides IP addresses and `localhost` (against
    /// DNS rebinding, a request naming any other host is refused with `403`); `*`: any.
    ///
    /// ```
    /// let config = leakgate_serve::Config::new("rules.toml").http_allow_host("metrics.internal");
    /// # let _ = config;
    /// ```
    pub fn http_allow_host(mut self, name: impl Into<String>) -> Config {
        self.listen.allowed_hosts.push(name.into());
        self
    }
}
