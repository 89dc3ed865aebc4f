//! Opt-in authentication: one secret, read from a file (`--auth-file`, or the file
//! `LEAKGATE_AUTH_FILE` names), never from the command line, where any local user could read it
//! in the process list. Every listener asks for it in its clients' own way: RESP `AUTH`, gRPC
//! metadata `authorization: Bearer <secret>`, HTTP `Authorization: Bearer <secret>`.
//!
//! Candidates are compared in constant time (`subtle`): how long a comparison takes says
//! nothing about how many leading bytes were right (only whether the length was).

use crate::config::ServeError;
use std::fmt;
use std::path::Path;
use subtle::ConstantTimeEq;

/// The secret every client must present. Its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(Box<[u8]>);

impl Secret {
    /// Reads the secret from the file at `path`: its text without surrounding white space,
    /// printable ASCII without spaces (so that it fits an HTTP header and a RESP argument as it
    /// is). A file that is missing, unreadable or empty is an error.
    pub(crate) fn from_file(path: &Path) -> Result<Secret, ServeError> {
        let error = |what: String| ServeError::Auth(format!("{}: {what}", path.display()));
        let bytes = std::fs::read(path).map_err(|e| error(format!("cannot read it: {e}")))?;
        let secret = bytes.trim_ascii();
        if secret.is_empty() {
            return Err(error("it is empty: put one secret in it".into()));
        }
        if !secret.iter().all(|b| b.is_ascii_graphic()) {
            return Err(error(
                "the secret must be printable ASCII without spaces (e.g. `openssl rand -hex 32`)"
                    .into(),
            ));
        }
        warn_if_others_can_read(path);
        Ok(Secret(secret.into()))
    }

    /// Whether `candidate` is the secret (constant time in its bytes).
    pub(crate) fn matches(&self, candidate: &[u8]) -> bool {
        bool::from(self.0.ct_eq(candidate))
    }

    /// Whether `value`, an `Authorization` header's, is `Bearer <the secret>` (the scheme's
    /// case does not matter).
    pub(crate) fn matches_bearer(&self, value: &[u8]) -> bool {
        let Some(space) = value.iter().position(|&b| b == b' ') else { return false };
        let (scheme, token) = value.split_at(space);
        scheme.eq_ignore_ascii_case(b"bearer") && self.matches(token.trim_ascii())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// Logs a warning when users other than the owner may read the secret's file.
fn warn_if_others_can_read(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.permissions().mode() & 0o044 != 0 {
            tracing::warn!(file = %path.display(), "the auth file can be read by other users: chmod 600 it");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret_in(text: &[u8]) -> (tempfile::TempDir, Result<Secret, ServeError>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, text).unwrap();
        let secret = Secret::from_file(&path);
        (dir, secret)
    }

    #[test]
    fn the_file_holds_one_secret_its_line_end_aside() {
        let (_dir, secret) = secret_in(b"s3cret-token\n");
        let secret = secret.unwrap();
        assert!(secret.matches(b"s3cret-token"));
        assert!(!secret.matches(b"s3cret-toke") && !secret.matches(b"s3cret-token\n"));
        assert!(secret.matches_bearer(b"Bearer s3cret-token"));
        assert!(secret.matches_bearer(b"bearer  s3cret-token"));
        assert!(!secret.matches_bearer(b"Basic s3cret-token"));
        assert!(!secret.matches_bearer(b"Bearers3cret-token"));
        assert_eq!(format!("{secret:?}"), "Secret(..)");
    }

    #[test]
    fn missing_empty_or_spaced_secrets_are_refused_with_the_reason() {
        let missing = Secret::from_file(Path::new("/no/such/secret")).unwrap_err().to_string();
        assert!(missing.contains("/no/such/secret: cannot read it"), "{missing}");
        let (_dir, empty) = secret_in(b" \n");
        assert!(empty.unwrap_err().to_string().contains("it is empty"));
        let (_dir, spaced) = secret_in(b"two words\n");
        assert!(spaced.unwrap_err().to_string().contains("printable ASCII without spaces"));
    }
}
