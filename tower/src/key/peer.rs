//! [`PeerIp`]: the client's IP address, from the connection or from the proxies you trust.

use super::forwarded::{self, Hop};
use super::{KeyError, KeyExtractor};
use http::header::{HeaderName, FORWARDED};
use http::request::Parts;
use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// The key of [`RateLimitLayer::per_ip`](crate::RateLimitLayer::per_ip): the client's IP address.
///
/// The peer address comes from the request's extensions: axum's `ConnectInfo<SocketAddr>` (serve
/// with `into_make_service_with_connect_info::<SocketAddr>()`; feature `axum`, on by default), or
/// a plain `SocketAddr` that a hyper or tonic server inserts itself. IPv4-mapped IPv6 addresses
/// (`::ffff:192.0.2.1`, from dual-stack sockets) count as their IPv4 address.
///
/// By default `Forwarded` and `X-Forwarded-For` are ignored: any client can write them. Behind a
/// reverse proxy, name the proxies' networks and the one header they append to
/// ([`behind_proxies`](PeerIp::behind_proxies)); the header is then read only on connections from
/// those networks, from the right, and the first address that is not a trusted proxy is the
/// client.
///
/// ```
/// use leakgate::{KeyedLimiter, Quota};
/// use leakgate_tower::{PeerIp, ProxyHeader, RateLimitLayer};
///
/// let peer = PeerIp::behind_proxies(ProxyHeader::XForwardedFor, ["10.0.0.0/8".parse()?]);
/// let layer = RateLimitLayer::keyed(KeyedLimiter::new(Quota::per_second(10)?), peer);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct PeerIp {
    proxies: Option<Arc<Proxies>>,
    /// IPv6 clients are keyed by their first this many bits (128, the whole address, if unset).
    ipv6_prefix: Option<u8>,
}

#[derive(Debug)]
struct Proxies {
    header: ProxyHeader,
    trusted: Vec<IpNet>,
}

/// The header a trusted reverse proxy appends the client's address to.
///
/// ```
/// use leakgate_tower::{PeerIp, ProxyHeader};
/// let peer = PeerIp::behind_proxies(ProxyHeader::Forwarded, ["127.0.0.1/32".parse()?]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxyHeader {
    /// `Forwarded: for=...` (RFC 7239).
    Forwarded,
    /// `X-Forwarded-For: client, proxy1, ...`.
    XForwardedFor,
}

impl ProxyHeader {
    fn name(self) -> HeaderName {
        match self {
            ProxyHeader::Forwarded => FORWARDED,
            ProxyHeader::XForwardedFor => HeaderName::from_static("x-forwarded-for"),
        }
    }
}

impl PeerIp {
    /// The connection's peer address; forwarding headers are ignored.
    ///
    /// ```
    /// let peer = leakgate_tower::PeerIp::new();
    /// ```
    pub fn new() -> Self {
        PeerIp { proxies: None, ipv6_prefix: None }
    }

    /// The client's address as reported by the proxies in `trusted`, which append it to
    /// `header`. A request whose connection is not from a trusted network is keyed by its peer
    /// address, whatever its headers say. A request from a trusted proxy without the header, or
    /// whose client entry is not an address (`unknown`, an obfuscated name, text), has no key
    /// (see [`OnKeyError`](crate::OnKeyError)).
    ///
    /// ```
    /// use leakgate_tower::{PeerIp, ProxyHeader};
    /// let trusted = ["10.0.0.0/8".parse()?, "fd00::/8".parse()?];
    /// let peer = PeerIp::behind_proxies(ProxyHeader::XForwardedFor, trusted);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn behind_proxies(header: ProxyHeader, trusted: impl IntoIterator<Item = IpNet>) -> Self {
        let trusted = trusted.into_iter().map(|net| net.trunc()).collect();
        PeerIp { proxies: Some(Arc::new(Proxies { header, trusted })), ipv6_prefix: None }
    }

    /// Keys IPv6 clients by the network of their first `bits` bits (at most 128): an IPv6
    /// client usually holds a whole /64 and can send each request from another address of it,
    /// so `ipv6_prefix(64)` gives the /64 one bucket. IPv4 addresses are kept whole.
    ///
    /// ```
    /// use leakgate::{KeyedLimiter, Quota};
    /// use leakgate_tower::{PeerIp, RateLimitLayer};
    /// let peer = PeerIp::new().ipv6_prefix(64);
    /// let layer = RateLimitLayer::keyed(KeyedLimiter::new(Quota::per_second(10)?), peer);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn ipv6_prefix(mut self, bits: u8) -> Self {
        self.ipv6_prefix = Some(bits.min(128));
        self
    }

    /// The client address of `request`, cut to the IPv6 prefix if one is set.
    pub(crate) fn client(&self, request: &Parts) -> Result<IpAddr, KeyError> {
        let client = self.unmasked_client(request)?;
        Ok(match (client, self.ipv6_prefix) {
            (IpAddr::V6(v6), Some(bits)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
                IpAddr::V6((u128::from(v6) & mask).into())
            }
            _ => client,
        })
    }

    fn unmasked_client(&self, request: &Parts) -> Result<IpAddr, KeyError> {
        let peer = socket_peer(request)?;
        let Some(proxies) = &self.proxies else { return Ok(peer) };
        if !proxies.trusts(peer) {
            return Ok(peer);
        }
        let name = proxies.header.name();
        let lines = request.headers.get_all(&name);
        let hops: Vec<Hop> = match proxies.header {
            ProxyHeader::Forwarded => forwarded::forwarded(lines),
            ProxyHeader::XForwardedFor => forwarded::x_forwarded_for(lines),
        };
        forwarded::client(&hops, |addr| proxies.trusts(addr), name.as_str())
    }
}

impl Proxies {
    fn trusts(&self, addr: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(&addr))
    }
}

impl KeyExtractor for PeerIp {
    type Key = IpAddr;

    fn extract(&self, request: &Parts) -> Result<IpAddr, KeyError> {
        self.client(request)
    }
}

/// The connection's peer address, from axum's `ConnectInfo` or a plain `SocketAddr` extension.
fn socket_peer(request: &Parts) -> Result<IpAddr, KeyError> {
    #[cfg(feature = "axum")]
    if let Some(info) = request.extensions.get::<axum::extract::ConnectInfo<SocketAddr>>() {
        return Ok(info.0.ip().to_canonical());
    }
    match request.extensions.get::<SocketAddr>() {
        Some(addr) => Ok(addr.ip().to_canonical()),
        None => Err(KeyError::missing(
            "the peer address (serve with into_make_service_with_connect_info::<SocketAddr>(), \
             or insert the SocketAddr into the request's extensions)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeyErrorKind;

    fn request(peer: &str, headers: &[(&str, &[u8])]) -> Parts {
        let mut builder = http::Request::builder();
        for (name, value) in headers {
            builder = builder.header(*name, http::HeaderValue::from_bytes(value).unwrap());
        }
        let (mut parts, ()) = builder.body(()).unwrap().into_parts();
        parts.extensions.insert(peer.parse::<SocketAddr>().unwrap());
        parts
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn forwarding_headers_are_ignored_by_default() {
        let req = request(
            "192.0.2.1:5000",
            &[("x-forwarded-for", b"1.2.3.4"), ("forwarded", b"for=1.2.3.4")],
        );
        assert_eq!(PeerIp::new().extract(&req), Ok(ip("192.0.2.1")));
    }

    #[test]
    fn a_mapped_peer_counts_as_ipv4() {
        let req = request("[::ffff:192.0.2.1]:5000", &[]);
        assert_eq!(PeerIp::new().extract(&req), Ok(ip("192.0.2.1")));
    }

    #[test]
    fn only_trusted_peers_are_believed() {
        let peer =
            PeerIp::behind_proxies(ProxyHeader::XForwardedFor, ["10.0.0.0/8".parse().unwrap()]);
        let spoofed = request("192.0.2.1:5000", &[("x-forwarded-for", b"1.2.3.4")]);
        assert_eq!(peer.extract(&spoofed), Ok(ip("192.0.2.1")));
        let proxied =
            request("10.1.1.1:5000", &[("x-forwarded-for", b"6.6.6.6, 198.51.100.4, 10.2.2.2")]);
        assert_eq!(peer.extract(&proxied), Ok(ip("198.51.100.4")));
    }

    #[test]
    fn only_the_named_header_is_read() {
        let peer = PeerIp::behind_proxies(ProxyHeader::Forwarded, ["10.0.0.0/8".parse().unwrap()]);
        let req = request(
            "10.1.1.1:5000",
            &[("x-forwarded-for", b"6.6.6.6"), ("forwarded", b"for=198.51.100.4")],
        );
        assert_eq!(peer.extract(&req), Ok(ip("198.51.100.4")));
        let without = request("10.1.1.1:5000", &[("x-forwarded-for", b"6.6.6.6")]);
        assert_eq!(peer.extract(&without).unwrap_err().kind(), KeyErrorKind::Missing);
    }

    #[test]
    fn ipv6_clients_can_be_keyed_by_network() {
        let v6 = request("[2001:db8:1:2:3:4:5:6]:80", &[]);
        let v4 = request("192.0.2.1:80", &[]);
        assert_eq!(PeerIp::new().ipv6_prefix(64).extract(&v6), Ok(ip("2001:db8:1:2::")));
        assert_eq!(PeerIp::new().ipv6_prefix(48).extract(&v6), Ok(ip("2001:db8:1::")));
        assert_eq!(PeerIp::new().ipv6_prefix(0).extract(&v6), Ok(ip("::")));
        assert_eq!(PeerIp::new().ipv6_prefix(200).extract(&v6), Ok(ip("2001:db8:1:2:3:4:5:6")));
        assert_eq!(PeerIp::new().ipv6_prefix(64).extract(&v4), Ok(ip("192.0.2.1")));
    }

    #[test]
    fn no_peer_address_is_a_missing_key() {
        let (parts, ()) = http::Request::new(()).into_parts();
        assert_eq!(PeerIp::new().extract(&parts).unwrap_err().kind(), KeyErrorKind::Missing);
    }
}
