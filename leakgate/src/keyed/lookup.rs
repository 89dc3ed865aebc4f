//! The lock-free lookup of a key in the table: its two windows by turns, group by group, then
//! (only when both are full) its probe sequence past them up to its reach. See [`super::table`]
//! for where keys may be and why a lookup may stop early.

use super::group::tag_of;
use super::slot::Found;
use super::table::{second_start, start, Table};
use crate::sync::Ordering;
use std::borrow::Borrow;
use std::hash::Hash;

impl<K: Hash + Eq + Clone> Table<K> {
    /// The slot holding `key`, if the table tracks it. Lock-free.
    ///
    /// Always inlined into the check: at a million keys a check waits on cache misses, and only
    /// a short straight path lets the processor start the next check's misses meanwhile.
    /// Measured with 1M keys, one thread: 320 ns called, 182 ns inlined (when a group's keys
    /// were behind a pointer).
    #[inline(always)]
    pub(crate) fn find<Q>(&self, key: &Q, hash: u64) -> Option<Found<'_, K>>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let tag = tag_of(hash);
        // Both windows lie in the home shard: `position(hash, p)` and `second(hash, p)`.
        let base = self.home(hash) << self.shard_shift;
        let (first, second) = (start(hash), second_start(hash));
        // A second window that starts where the first does adds nothing (in a shard of one
        // group, always): it is done from the start.
        let two = (first ^ second) & self.group_mask != 0;
        let (mut first_open, mut second_open) = (true, two);
        for p in 0..self.window {
            // Each window's group in turn. The handle is made where it is returned: passed
            // through another call's result it went through memory.
            if first_open {
                match self.at(base | (first.wrapping_add(p) & self.group_mask)) {
                    Some(at) => match at.find(key, tag) {
                        (Some((slot, version)), _) => return Some(at.found(slot, version)),
                        (None, unused) => first_open = !unused,
                    },
                    None => first_open = false,
                }
            }
            if second_open {
                match self.at(base | (second.wrapping_add(p) & self.group_mask)) {
                    Some(at) => match at.find(key, tag) {
                        (Some((slot, version)), _) => return Some(at.found(slot, version)),
                        (None, unused) => second_open = !unused,
                    },
                    None => second_open = false,
                }
            }
            if !first_open && !second_open {
                return None;
            }
        }
        // Keys go past their windows only when both are full (and so stay full).
        if !first_open || (two && !second_open) {
            return None;
        }
        self.find_past_window(key, hash)
    }

    /// Asks for the tags of `hash`'s windows and the lines of its first window's first group
    /// (see [`Group::touch`](super::group::Group::touch)), in a table larger than a core's
    /// caches: call it before reading the clock, then [`Table::find`].
    ///
    /// A table filled to 95% holds three keys in four in the first window's first group and one
    /// in eight in the second's (1M keys: 76% and 12%, the rest further on), so only the first
    /// group's lines are asked for: asking for both groups' (a second 128-byte pair, on another
    /// page) cost more than it saved (1M keys, one thread: 1.03-1.14x governor's time a check,
    /// against 0.92-1.04x).
    #[inline(always)]
    pub(crate) fn touch(&self, hash: u64) {
        if !self.prefetch {
            return;
        }
        if let Some(at) = self.at(self.position(hash, 0)) {
            // Relaxed: the value is not used; the load only brings the line of tags in.
            std::hint::black_box(at.page.tags(at.index).load(Ordering::Relaxed));
            at.line().touch();
        }
        if let Some(at) = self.at(self.second(hash, 0)) {
            // Relaxed: as above.
            std::hint::black_box(at.page.tags(at.index).load(Ordering::Relaxed));
        }
    }

    /// The rest of [`Table::find`], for a key whose window has no unused slot: the probe sequence
    /// up to its window's reach. Kept out of line so the lookup path stays short.
    #[cold]
    #[inline(never)]
    fn find_past_window<Q>(&self, key: &Q, hash: u64) -> Option<Found<'_, K>>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let tag = tag_of(hash);
        for p in self.window..self.reach(hash) {
            let at = self.at(self.position(hash, p))?;
            match at.find(key, tag) {
                (Some((slot, version)), _) => return Some(at.found(slot, version)),
                (None, true) => return None,
                (None, false) => {}
            }
        }
        None
    }
}
