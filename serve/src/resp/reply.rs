//! Writing replies into a connection's output buffer, in RESP2 or, after `HELLO 3`, RESP3 (whose
//! replies to this server's commands differ only in the null and in maps).

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

/// The null: `$-1\r\n` (RESP2's null bulk string) or `_\r\n` (RESP3).
pub(crate) fn null(out: &mut BytesMut, resp3: bool) {
    out.put_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" });
}

/// A map header of `len` pairs: `%len\r\n` in RESP3, an array of `2 * len` elements in RESP2.
pub(crate) fn map(out: &mut BytesMut, len: usize, resp3: bool) {
    if resp3 {
        let _ = write!(out.writer(), "%{len}\r\n");
    } else {
        array(out, 2 * len);
    }
}

/// `*len\r\n`: an array header; its `len` elements follow.
pub(crate) fn array(out: &mut BytesMut, len: usize) {
    let _ = write!(out.writer(), "*{len}\r\n");
}
