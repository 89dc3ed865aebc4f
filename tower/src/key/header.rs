//! [`HeaderKey`]: one bucket per value of a request header, such as an API key.

use super::{header_text, KeyError, KeyExtractor};
use http::request::Parts;
use http::HeaderName;

/// The value of a request header as the key: one bucket per API key, tenant or client id.
///
/// The header must appear exactly once, hold visible ASCII (leading and trailing spaces are
/// dropped), and be at most [`max_len`](HeaderKey::max_len) bytes (256 by default), since every
/// tracked key is kept in the limiter's table. Anything else has no key (see
/// [`OnKeyError`](crate::OnKeyError)). Put authentication in front of the limit when keys come
/// from clients: the limiter tracks any value it is sent, up to its capacity.
///
/// ```
/// use leakgate::{KeyedLimiter, Quota};
/// use leakgate_tower::{HeaderKey, RateLimitLayer};
///
/// let by_api_key = HeaderKey::new(http::HeaderName::from_static("x-api-key"));
/// let layer = RateLimitLayer::keyed(KeyedLimiter::new(Quota::per_minute(600)?), by_api_key);
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Debug)]
pub struct HeaderKey {
    name: HeaderName,
    max_len: usize,
}

impl HeaderKey {
    /// Keys from the header `name`.
    ///
    /// ```
    /// let key = leakgate_tower::HeaderKey::new(http::header::AUTHORIZATION);
    /// ```
    pub fn new(name: HeaderName) -> Self {
        HeaderKey { name, max_len: 256 }
    }

    /// Refuses values longer than `max_len` bytes as malformed.
    ///
    /// ```
    /// use leakgate_tower::HeaderKey;
    /// let key = HeaderKey::new(http::HeaderName::from_static("x-tenant")).max_len(64);
    /// ```
    pub fn max_len(mut self, max_len: usize) -> Self {
        self.max_len = max_len;
        self
    }

    /// The header's value in `request`, trimmed.
    pub(crate) fn value<'a>(&self, request: &'a Parts) -> Result<&'a str, KeyError> {
        let mut values = request.headers.get_all(&self.name).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return Err(if request.headers.contains_key(&self.name) {
                KeyError::malformed(format!("header {} appears more than once", self.name))
            } else {
                KeyError::missing(format!("header {}", self.name))
            });
        };
        let text = header_text(value, self.name.as_str())?.trim();
        if text.is_empty() {
            return Err(KeyError::missing(format!("header {} (it is empty)", self.name)));
        }
        if text.len() > self.max_len {
            return Err(KeyError::malformed(format!(
                "header {} is longer than {} bytes",
                self.name, self.max_len
            )));
        }
        Ok(text)
    }
}

impl KeyExtractor for HeaderKey {
    type Key = String;

    fn extract(&self, request: &Parts) -> Result<String, KeyError> {
        self.value(request).map(str::to_owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeyErrorKind;

    fn request(values: &[&[u8]]) -> Parts {
        let mut builder = http::Request::builder();
        for value in values {
            builder = builder.header("x-api-key", http::HeaderValue::from_bytes(value).unwrap());
        }
        builder.body(()).unwrap().into_parts().0
    }

    fn kind(values: &[&[u8]]) -> KeyErrorKind {
        let key = HeaderKey::new(HeaderName::from_static("x-api-key")).max_len(8);
        key.extract(&request(values)).unwrap_err().kind()
    }

    #[test]
    fn the_trimmed_value_is_the_key() {
        let key = HeaderKey::new(HeaderName::from_static("x-api-key"));
        assert_eq!(key.extract(&request(&[b"  abc-123 "])), Ok("abc-123".to_owned()));
    }

    #[test]
    fn bad_values_have_no_key() {
        assert_eq!(kind(&[]), KeyErrorKind::Missing);
        assert_eq!(kind(&[b"   "]), KeyErrorKind::Missing);
        assert_eq!(kind(&[b"a", b"b"]), KeyErrorKind::Malformed);
        assert_eq!(kind(&[b"caf\xe9"]), KeyErrorKind::Malformed);
        assert_eq!(kind(&[b"123456789"]), KeyErrorKind::Malformed);
    }
}
