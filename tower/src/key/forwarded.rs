//! Reading the chain of addresses a request passed through: `Forwarded` (RFC 7239) and
//! `X-Forwarded-For`.
//!
//! Each proxy appends the address it received the request from, so the chain reads, left to
//! right, client, proxy 1, proxy 2, ...; only the entries appended by proxies we trust are true.
//! [`client`] walks from the right, skipping trusted proxies, and stops at the first address that
//! is not one: everything to its left was written by that untrusted party and may be forged, so it
//! is never read, and garbage there never fails the request.
//!
//! The field values are read as bytes: a forged non-ASCII entry must not hide the genuine entries
//! appended after it.

use super::KeyError;
use http::header::GetAll;
use http::HeaderValue;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One entry of the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hop {
    /// An address.
    Addr(IpAddr),
    /// `unknown`, an obfuscated identifier, an element without `for=`, or text that is not an
    /// address.
    Unknown,
}

/// The hops of every `X-Forwarded-For` line, in order.
pub(crate) fn x_forwarded_for(lines: GetAll<'_, HeaderValue>) -> Vec<Hop> {
    let mut hops = Vec::new();
    for line in lines {
        for element in line.as_bytes().split(|&b| b == b',') {
            let element = trim(element);
            if !element.is_empty() {
                hops.push(node(element));
            }
        }
    }
    hops
}

/// The `for=` hops of every `Forwarded` line, in order.
pub(crate) fn forwarded(lines: GetAll<'_, HeaderValue>) -> Vec<Hop> {
    let mut hops = Vec::new();
    for line in lines {
        for element in split_outside_quotes(line.as_bytes(), b',') {
            let element = trim(element);
            if !element.is_empty() {
                hops.push(for_parameter(element).map_or(Hop::Unknown, |value| node(&value)));
            }
        }
    }
    hops
}

/// The client: the rightmost hop that is not a trusted proxy. When every hop is trusted, the
/// leftmost one (the request started inside the trusted network).
pub(crate) fn client(
    hops: &[Hop],
    is_trusted: impl Fn(IpAddr) -> bool,
    header: &str,
) -> Result<IpAddr, KeyError> {
    for hop in hops.iter().rev() {
        match *hop {
            Hop::Addr(addr) if is_trusted(addr) => continue,
            Hop::Addr(addr) => return Ok(addr),
            Hop::Unknown => {
                return Err(KeyError::malformed(format!(
                    "{header}: the hop before a trusted proxy is not an IP address"
                )))
            }
        }
    }
    match hops.first() {
        Some(Hop::Addr(addr)) => Ok(*addr),
        _ => Err(KeyError::missing(format!("{header} from a trusted proxy"))),
    }
}

/// The value of the `for` parameter of one `Forwarded` element, unquoted. Empty pairs are
/// skipped (`forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )`, RFC 7239);
/// a pair without `=` makes the element unreadable.
fn for_parameter(element: &[u8]) -> Option<Vec<u8>> {
    for pair in split_outside_quotes(element, b';') {
        let pair = trim(pair);
        if pair.is_empty() {
            continue;
        }
        let eq = pair.iter().position(|&b| b == b'=')?;
        if trim(&pair[..eq]).eq_ignore_ascii_case(b"for") {
            return Some(unquote(trim(&pair[eq + 1..])));
        }
    }
    None
}

/// A node (`192.0.2.1`, `192.0.2.1:80`, `[2001:db8::1]`, `[2001:db8::1]:80`, a bare IPv6
/// address), as an address or [`Hop::Unknown`]. IPv4-mapped IPv6 addresses become IPv4.
fn node(text: &[u8]) -> Hop {
    let Ok(text) = std::str::from_utf8(text) else {
        return Hop::Unknown;
    };
    let addr = if let Some(rest) = text.strip_prefix('[') {
        rest.split_once(']')
            .filter(|(_, after)| after.is_empty() || is_port(after))
            .and_then(|(inside, _)| inside.parse::<Ipv6Addr>().ok())
            .map(IpAddr::V6)
    } else if let Ok(addr) = text.parse::<IpAddr>() {
        Some(addr)
    } else {
        text.split_once(':')
            .filter(|(_, port)| is_port(&format!(":{port}")))
            .and_then(|(host, _)| host.parse::<Ipv4Addr>().ok())
            .map(IpAddr::V4)
    };
    addr.map_or(Hop::Unknown, |addr| Hop::Addr(addr.to_canonical()))
}

/// `:` followed by a port number (0 to 65535) (RFC 7239 also allows obfuscated ports: `:_abc`).
fn is_port(text: &str) -> bool {
    let Some(port) = text.strip_prefix(':') else { return false };
    let digits = port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok();
    let obfuscated = port.starts_with('_') && port.len() > 1;
    digits || obfuscated
}

/// Splits at `sep` where it is not inside a quoted string.
fn split_outside_quotes(text: &[u8], sep: u8) -> impl Iterator<Item = &[u8]> {
    let mut in_quotes = false;
    let mut escaped = false;
    text.split(move |&b| {
        if escaped {
            escaped = false;
            return false;
        }
        match b {
            b'\\' if in_quotes => escaped = true,
            b'"' => in_quotes = !in_quotes,
            _ => {}
        }
        b == sep && !in_quotes
    })
}

/// A token as is, or a quoted string with its quotes and backslash escapes removed.
fn unquote(value: &[u8]) -> Vec<u8> {
    let Some(inner) = value.strip_prefix(b"\"").and_then(|v| v.strip_suffix(b"\"")) else {
        return value.to_vec();
    };
    let mut out = Vec::with_capacity(inner.len());
    let mut bytes = inner.iter();
    while let Some(&b) = bytes.next() {
        out.push(if b == b'\\' { bytes.next().copied().unwrap_or(b'\\') } else { b });
    }
    out
}

/// Strips spaces and tabs (optional whitespace) from both ends.
fn trim(text: &[u8]) -> &[u8] {
    let start = text.iter().position(|b| !matches!(b, b' ' | b'\t')).unwrap_or(text.len());
    let end = text.iter().rposition(|b| !matches!(b, b' ' | b'\t')).map_or(start, |i| i + 1);
    &text[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;

    fn hops(
        name: &str,
        lines: &[&[u8]],
        parse: fn(GetAll<'_, HeaderValue>) -> Vec<Hop>,
    ) -> Vec<Hop> {
        let mut map = HeaderMap::new();
        let name = http::HeaderName::from_bytes(name.as_bytes()).unwrap();
        for line in lines {
            map.append(&name, HeaderValue::from_bytes(line).unwrap());
        }
        parse(map.get_all(&name))
    }

    fn addr(s: &str) -> Hop {
        Hop::Addr(s.parse().unwrap())
    }

    #[test]
    fn x_forwarded_for_lists_every_line_in_order() {
        let got =
            hops("x-forwarded-for", &[b"203.0.113.7, 10.0.0.1", b" 10.0.0.2 ,,"], x_forwarded_for);
        assert_eq!(got, [addr("203.0.113.7"), addr("10.0.0.1"), addr("10.0.0.2")]);
    }

    #[test]
    fn nodes_with_ports_brackets_and_mapped_addresses() {
        let got = hops(
            "x-forwarded-for",
            &[b"192.0.2.1:8080, [2001:db8::1]:443, [2001:db8::2], 2001:db8::3, ::ffff:192.0.2.9"],
            x_forwarded_for,
        );
        let want = ["192.0.2.1", "2001:db8::1", "2001:db8::2", "2001:db8::3", "192.0.2.9"];
        assert_eq!(got, want.map(addr));
    }

    #[test]
    fn garbage_is_unknown_not_an_error() {
        let got = hops(
            "x-forwarded-for",
            &[b"\xff\xfe, not-an-ip, 1.2.3.4:99999, [::1]x"],
            x_forwarded_for,
        );
        assert_eq!(got, [Hop::Unknown; 4]);
    }

    #[test]
    fn forwarded_reads_for_in_any_case_and_quoting() {
        let got = hops(
            "forwarded",
            &[
                br#"for=192.0.2.60;proto=http;by=203.0.113.43, FOR="[2001:db8:cafe::17]:4711""#,
                br#"proto=https;for="198.51.100.\7", for=unknown, for=_hidden, by=10.0.0.1"#,
            ],
            forwarded,
        );
        let want = [
            addr("192.0.2.60"),
            addr("2001:db8:cafe::17"),
            addr("198.51.100.7"),
            Hop::Unknown,
            Hop::Unknown,
            Hop::Unknown,
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn empty_pairs_are_skipped_wherever_they_are() {
        let got = hops(
            "forwarded",
            &[b"proto=http;;for=192.0.2.43, ;for=192.0.2.44;, for=192.0.2.45;;;", b";;"],
            forwarded,
        );
        assert_eq!(got, [addr("192.0.2.43"), addr("192.0.2.44"), addr("192.0.2.45"), Hop::Unknown]);
        // A pair without "=" is not a pair: the element cannot be read.
        assert_eq!(hops("forwarded", &[b"proto;for=192.0.2.1"], forwarded), [Hop::Unknown]);
    }

    #[test]
    fn commas_and_semicolons_inside_quotes_do_not_split() {
        let got = hops("forwarded", &[br#"host="a,b;c";for=192.0.2.1, for="10.0.0.1""#], forwarded);
        assert_eq!(got, [addr("192.0.2.1"), addr("10.0.0.1")]);
    }

    #[test]
    fn the_client_is_the_rightmost_untrusted_hop() {
        let trusted = |ip: IpAddr| ip.to_string().starts_with("10.");
        let chain = [addr("6.6.6.6"), addr("203.0.113.7"), addr("10.0.0.1"), addr("10.0.0.2")];
        assert_eq!(client(&chain, trusted, "h"), Ok("203.0.113.7".parse().unwrap()));
        // Garbage left of the client is never read.
        let chain = [Hop::Unknown, addr("203.0.113.7"), addr("10.0.0.1")];
        assert_eq!(client(&chain, trusted, "h"), Ok("203.0.113.7".parse().unwrap()));
        // All trusted: the leftmost.
        let chain = [addr("10.9.9.9"), addr("10.0.0.1")];
        assert_eq!(client(&chain, trusted, "h"), Ok("10.9.9.9".parse().unwrap()));
    }

    #[test]
    fn an_unreadable_hop_where_the_client_should_be_is_an_error() {
        let trusted = |ip: IpAddr| ip.to_string().starts_with("10.");
        let err = client(&[addr("1.1.1.1"), Hop::Unknown, addr("10.0.0.1")], trusted, "h");
        assert_eq!(err.unwrap_err().kind(), crate::KeyErrorKind::Malformed);
        assert_eq!(client(&[], trusted, "h").unwrap_err().kind(), crate::KeyErrorKind::Missing);
    }
}
