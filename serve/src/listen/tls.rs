//! TLS for the gRPC and HTTP listeners (rustls, with the `ring` provider): the certificate
//! chain and key from PEM files, and with a client CA, only clients holding a certificate it
//! signed get through the handshake.

use crate::config::ServeError;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// The files TLS is made of (`--tls-cert`, `--tls-key`, `--tls-client-ca`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsFiles {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    pub(crate) client_ca: Option<PathBuf>,
}

impl TlsFiles {
    /// An acceptor that offers `alpn` (`h2` for gRPC, `http/1.1` for HTTP); a file that is
    /// missing or holds no usable certificate or key is a clear error.
    pub(crate) fn acceptor(&self, alpn: &[u8]) -> Result<TlsAcceptor, ServeError> {
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_error(&self.cert, e))?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for cert in certificates(ca)? {
                    roots.add(cert).map_err(|e| tls_error(ca, e))?;
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .map_err(|e| tls_error(ca, e))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let key = PrivateKeyDer::from_pem_file(&self.key).map_err(|e| tls_error(&self.key, e))?;
        let mut config = builder
            .with_single_cert(certificates(&self.cert)?, key)
            .map_err(|e| tls_error(&self.cert, e))?;
        config.alpn_protocols = vec![alpn.to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// Every certificate in the PEM file at `path` (at least one).
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, ServeError> {
    let certs = CertificateDer::pem_file_iter(path).map_err(|e| tls_error(path, e))?;
    let certs: Vec<_> = certs.collect::<Result<_, _>>().map_err(|e| tls_error(path, e))?;
    if certs.is_empty() {
        return Err(tls_error(path, "no PEM certificate in it"));
    }
    Ok(certs)
}

fn tls_error(path: &Path, e: impl std::fmt::Display) -> ServeError {
    ServeError::Tls(format!("{}: {e}", path.display()))
}
