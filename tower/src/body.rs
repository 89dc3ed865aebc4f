//! [`RefusalBody`]: the response bodies the layer can write its own 429 and 400 in, so that a
//! response through the layer keeps the inner service's body type (under axum, no second box).

use bytes::Bytes;
use http_body_util::combinators::{BoxBody, UnsyncBoxBody};
use http_body_util::{BodyExt, Either, Full};
use std::convert::Infallible;

/// A response body type that the layer can make a refusal of (an empty or short text or JSON
/// body). Responses through the layer keep the inner service's body type, so it must be one of
/// these:
///
/// * axum's `Body` (feature `axum`), `http_body_util::Full<Bytes>`, `BoxBody<Bytes, E>`,
///   `UnsyncBoxBody<Bytes, E>` and `String`;
/// * `Either<B, R>` for any body `B` and any `R` here: wrap an inner body the layer does not
///   know (tonic's, say) as `Either::Left` with `ServiceBuilder::map_response`, and the layer's
///   refusals are `Either::Right`;
/// * your own body types, by implementing this trait.
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::{Either, Full};
/// use leakgate_tower::RefusalBody;
///
/// let body: Either<String, Full<Bytes>> = RefusalBody::refusal(Bytes::from_static(b"{}"));
/// assert!(matches!(body, Either::Right(_)));
/// ```
pub trait RefusalBody {
    /// A body holding `bytes`.
    fn refusal(bytes: Bytes) -> Self;
}

#[cfg(feature = "axum")]
impl RefusalBody for axum::body::Body {
    fn refusal(bytes: Bytes) -> Self {
        axum::body::Body::from(bytes)
    }
}

impl RefusalBody for Full<Bytes> {
    fn refusal(bytes: Bytes) -> Self {
        Full::new(bytes)
    }
}

impl<E: 'static> RefusalBody for BoxBody<Bytes, E> {
    fn refusal(bytes: Bytes) -> Self {
        Full::new(bytes).map_err(|never: Infallible| match never {}).boxed()
    }
}

impl<E: 'static> RefusalBody for UnsyncBoxBody<Bytes, E> {
    fn refusal(bytes: Bytes) -> Self {
        Full::new(bytes).map_err(|never: Infallible| match never {}).boxed_unsync()
    }
}

impl RefusalBody for String {
    fn refusal(bytes: Bytes) -> Self {
        // The layer writes ASCII text or JSON only, so nothing is lost.
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl<B, R: RefusalBody> RefusalBody for Either<B, R> {
    fn refusal(bytes: Bytes) -> Self {
        Either::Right(R::refusal(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn text<B: http_body::Body>(body: B) -> String
    where
        B::Error: std::fmt::Debug,
    {
        String::from_utf8(body.collect().await.unwrap().to_bytes().to_vec()).unwrap()
    }

    #[tokio::test]
    async fn every_refusal_body_holds_the_bytes() {
        let bytes = || Bytes::from_static(b"too many");
        assert_eq!(text(<Full<Bytes>>::refusal(bytes())).await, "too many");
        assert_eq!(text(<BoxBody<Bytes, std::io::Error>>::refusal(bytes())).await, "too many");
        assert_eq!(text(<UnsyncBoxBody<Bytes, String>>::refusal(bytes())).await.len(), 8);
        assert_eq!(String::refusal(bytes()), "too many");
        assert_eq!(text(<Either<String, Full<Bytes>>>::refusal(bytes())).await, "too many");
        #[cfg(feature = "axum")]
        assert_eq!(text(axum::body::Body::refusal(bytes())).await, "too many");
    }
}
