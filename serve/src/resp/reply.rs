//! Writing RESP2 replies into a connection's output buffer.

use bytes::{BufMut, BytesMut};
use std::io::Write as _;

/// `+text\r\n`.
pub(crate) fn simple(out: &mut BytesMut, text: &str) {
    out.put_u8(b'+');
    out.put_slice(text.as_bytes());
    out.put_slice(b"\r\n");
}

/// `-text\r\n`; line breaks in `text` become spaces (an error is one line).
pub(crate) fn error(out: &mut BytesMut, text: &str) {
    out.put_u8(b'-');
    for &b in text.as_bytes() {
        out.put_u8(if b == b'\r' || b == b'\n' { b' ' } else { b });
    }
    out.put_slice(b"\r\n");
}

/// `:n\r\n`.
pub(crate) fn integer(out: &mut BytesMut, n: i64) {
    // Writing to a BytesMut cannot fail.
    let _ = write!(out.writer(), ":{n}\r\n");
}

/// `$len\r\nbytes\r\n`.
pub(crate) fn bulk(out: &mut BytesMut, bytes: &[u8]) {
    let _ = write!(out.writer(), "${}\r\n", bytes.len());
    out.put_slice(bytes);
    out.put_slice(b"\r\n");
}

/// `$-1\r\n`: the null bulk string.
pub(crate) fn null(out: &mut BytesMut) {
    out.put_slice(b"$-1\r\n");
}

/// `*len\r\n`: an array header; its `len` elements follow.
pub(crate) fn array(out: &mut BytesMut, len: usize) {
    let _ = write!(out.writer(), "*{len}\r\n");
}
