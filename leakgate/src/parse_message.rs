//! [`ParseMessage`]: what a quota string that did not parse got wrong, in words.
//!
//! The parser writes its message through `core::fmt`, so it needs no allocator: with the feature
//! `alloc` (on with `std`) the message is kept whole, and without it, in a buffer of
//! [`INLINE`] bytes, cut at a character boundary with `…` when longer (the messages name the bad
//! part first and quote the whole input last, so a cut loses the end of the quote).

use core::fmt;
use core::ops::Deref;

/// Bytes of message kept without an allocator (the type is one more byte).
#[cfg(any(test, not(feature = "alloc")))]
const INLINE: usize = 95;

/// The message of [`QuotaError::Parse`](crate::QuotaError::Parse): which part of the quota
/// string is wrong, and what was expected. Reads as a `&str` (`Deref`, `AsRef`, `Display`).
///
/// Without the feature `alloc` (or `std`) a message longer than 95 bytes is cut to fit, at a
/// character boundary, ending in `…`.
///
/// ```
/// use leakgate::{Quota, QuotaError};
/// let Err(QuotaError::Parse(why)) = "10/fortnight".parse::<Quota>() else { panic!() };
/// assert!(why.starts_with("expected a unit"));
/// assert!(why.contains("\"fortnight\""));
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ParseMessage {
    #[cfg(feature = "alloc")]
    text: alloc::boxed::Box<str>,
    #[cfg(not(feature = "alloc"))]
    text: Inline,
}

impl ParseMessage {
    /// The message `args` formats to (cut to fit, without `alloc`).
    pub(crate) fn new(args: fmt::Arguments<'_>) -> Self {
        #[cfg(feature = "alloc")]
        let text = alloc::fmt::format(args).into_boxed_str();
        #[cfg(not(feature = "alloc"))]
        let text = Inline::format(args);
        ParseMessage { text }
    }

    /// The message.
    ///
    /// ```
    /// let e = "10/s burst".parse::<leakgate::Quota>().unwrap_err();
    /// let leakgate::QuotaError::Parse(why) = e else { panic!() };
    /// assert_eq!(why.as_str(), "missing the number after \"burst\" in \"10/s burst\"");
    /// ```
    pub fn as_str(&self) -> &str {
        #[cfg(feature = "alloc")]
        return &self.text;
        #[cfg(not(feature = "alloc"))]
        return self.text.as_str();
    }
}

impl Deref for ParseMessage {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for ParseMessage {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<str> for ParseMessage {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ParseMessage {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for ParseMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for ParseMessage {
    /// As a string: `QuotaError::Parse("...")`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// A message in a fixed buffer: its first `len` bytes are UTF-8, the rest zero. (Also in tests
/// with `alloc`: its own tests run there, as a test build of leakgate always has `std`.)
#[cfg(any(test, not(feature = "alloc")))]
#[derive(Clone, PartialEq, Eq, Hash)]
struct Inline {
    bytes: [u8; INLINE],
    len: u8,
}

#[cfg(any(test, not(feature = "alloc")))]
impl Inline {
    /// The ellipsis that ends a cut message.
    const CUT: &'static str = "\u{2026}";

    fn format(args: fmt::Arguments<'_>) -> Self {
        let mut inline = Inline { bytes: [0; INLINE], len: 0 };
        // An error only means the text did not fit (`write_str` below): then it ends in `…`,
        // in the room kept for it.
        if fmt::Write::write_fmt(&mut inline, args).is_err() {
            let at = usize::from(inline.len);
            inline.bytes[at..at + Self::CUT.len()].copy_from_slice(Self::CUT.as_bytes());
            inline.len += Self::CUT.len() as u8;
        }
        inline
    }

    fn as_str(&self) -> &str {
        // Never fails: only whole characters are copied in (`write_str`).
        core::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

#[cfg(any(test, not(feature = "alloc")))]
impl fmt::Write for Inline {
    /// Appends `s`, or as many of its characters as fit with room left for `…`, and then fails.
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let at = usize::from(self.len);
        // `at` never passes `INLINE - CUT.len()`: the room for `…` is always kept.
        let room = INLINE - Self::CUT.len() - at;
        let mut fit = s.len().min(room);
        while !s.is_char_boundary(fit) {
            fit -= 1;
        }
        self.bytes[at..at + fit].copy_from_slice(&s.as_bytes()[..fit]);
        self.len += fit as u8;
        if fit == s.len() {
            Ok(())
        } else {
            Err(fmt::Error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_message_is_kept_whole() {
        let m = Inline::format(format_args!("{:?} is not a unit", "x"));
        assert_eq!(m.as_str(), "\"x\" is not a unit");
        assert_eq!(
            ParseMessage::new(format_args!("{:?} is not a unit", "x")),
            *"\"x\" is not a unit"
        );
    }

    #[test]
    fn a_long_message_is_cut_at_a_character_and_ends_in_an_ellipsis() {
        // Two-byte characters from every offset: the cut lands inside one for half of them.
        for pad in 0..8 {
            let long = "µ".repeat(100);
            let m = Inline::format(format_args!("{:pad$}{long}", ""));
            let s = m.as_str();
            assert!(s.len() <= INLINE && s.len() >= INLINE - 1, "{pad}: {}", s.len());
            assert!(s.ends_with("µ…"), "{pad}: {s}");
            assert_eq!(s.chars().count(), pad + (s.len() - pad - 3) / 2 + 1, "{pad}: {s}");
        }
    }

    #[test]
    fn what_fits_beside_the_ellipsis_is_whole_and_one_byte_more_is_cut() {
        let exact = "a".repeat(INLINE - 3);
        assert_eq!(Inline::format(format_args!("{exact}")).as_str(), exact);
        let over = "a".repeat(INLINE - 2);
        let cut = Inline::format(format_args!("{over}"));
        assert_eq!(cut.as_str(), format!("{}…", &over[..INLINE - 3]));
        // Written in many pieces, as formatting does.
        let pieces =
            Inline::format(format_args!("{}{}{}", "a".repeat(40), "b".repeat(40), "c".repeat(40)));
        assert_eq!(
            pieces.as_str(),
            format!("{}{}{}…", "a".repeat(40), "b".repeat(40), "c".repeat(12))
        );
        assert_eq!(Inline::format(format_args!("")).as_str(), "");
    }

    #[test]
    fn reads_as_a_str() {
        let m = ParseMessage::new(format_args!("bad {}", 1));
        assert_eq!(format!("{m}"), "bad 1");
        assert_eq!(format!("{m:?}"), "\"bad 1\"");
        assert!(m.starts_with("bad"));
        assert_eq!(m, "bad 1");
        assert_eq!(m.as_ref(), "bad 1");
    }
}
