//! [`Key`]: a tracked key's bytes, inside its entry when short (most keys: addresses, user ids),
//! so that reading a table (a lookup's comparison, a page's scan) follows no pointer and a short
//! key costs no allocation of its own.

use std::ops::Deref;

/// The longest key kept inside the entry.
pub(crate) const INLINE: usize = 22;

/// A key's bytes: up to [`INLINE`] inside, longer ones on the heap.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Key {
    Inline(u8, [u8; INLINE]),
    Heap(Box<[u8]>),
}

impl Key {
    /// A copy of `bytes`.
    pub(crate) fn new(bytes: &[u8]) -> Key {
        if bytes.len() <= INLINE {
            let mut inline = [0u8; INLINE];
            inline[..bytes.len()].copy_from_slice(bytes);
            // At most INLINE (22): fits a u8.
            Key::Inline(bytes.len() as u8, inline)
        } else {
            Key::Heap(bytes.into())
        }
    }
}

impl Deref for Key {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Key::Inline(len, bytes) => &bytes[..usize::from(*len)],
            Key::Heap(bytes) => bytes,
        }
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_keys_stay_inside_and_every_key_reads_back() {
        for len in [0, 1, INLINE, INLINE + 1, 4096] {
            let bytes: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let key = Key::new(&bytes);
            assert_eq!(&*key, &bytes[..]);
            assert_eq!(matches!(key, Key::Inline(..)), len <= INLINE);
        }
        assert_eq!(std::mem::size_of::<Key>(), 24);
    }
}
