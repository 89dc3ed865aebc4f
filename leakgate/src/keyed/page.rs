//! A page: a run of groups of one shard, allocated the first time a key needs one of them.
//!
//! A table reserves only its list of pages up front; a page's groups (128 bytes each for `u64`
//! keys) and their side data (96 bytes each) are allocated when an insert first reaches the page, under the lock
//! of the page's shard, and then live as long as the table. So a table made for far more keys than
//! it ever sees costs memory for the pages its keys reach, never more than its capacity, and an
//! allocation that fails is a page a key cannot use (like a full one), not an abort.

use super::group::{Group, Side};
use crate::sync::SetOnce;

/// A page's groups and their side data, index for index.
pub(crate) struct Page<K> {
    groups: Vec<Group<K>>,
    sides: Vec<Side<K>>,
    /// The table-wide index of the page's first group.
    first: usize,
}

impl<K> Page<K> {
    /// A page of `groups` empty groups, the first at table-wide index `first`, or `None` if the
    /// memory cannot be had.
    fn try_new(groups: usize, first: usize) -> Option<Self> {
        let mut lines = Vec::new();
        lines.try_reserve_exact(groups).ok()?;
        lines.extend((0..groups).map(|_| Group::new()));
        let mut sides = Vec::new();
        sides.try_reserve_exact(groups).ok()?;
        sides.extend((0..groups).map(|_| Side::new()));
        Some(Page { groups: lines, sides, first })
    }

    /// A page of one group, for a bucket outside any table (the shared overflow bucket).
    pub(crate) fn single() -> Self {
        Page { groups: vec![Group::new()], sides: vec![Side::new()], first: 0 }
    }

    /// Group `i` of the page (`i` below the page size): its line, all a lookup reads.
    #[inline(always)]
    pub(crate) fn line(&self, i: usize) -> &Group<K> {
        &self.groups[i]
    }

    /// The table-wide index of group `i` of the page.
    pub(crate) fn group_index(&self, i: usize) -> usize {
        self.first + i
    }

    /// Group `i`'s side data, for cold paths.
    pub(crate) fn side(&self, i: usize) -> &Side<K> {
        &self.sides[i]
    }
}

/// A page that may not be allocated yet.
pub(crate) struct LazyPage<K>(SetOnce<Page<K>>);

impl<K> LazyPage<K> {
    pub(crate) fn new() -> Self {
        LazyPage(SetOnce::new())
    }

    /// The page, if allocated: if not, none of its slots was ever used. Lock-free.
    #[inline(always)]
    pub(crate) fn get(&self) -> Option<&Page<K>> {
        self.0.get()
    }

    /// The page, allocated with `groups` groups (the first at table-wide index `first`) if it was
    /// not; `None` if that allocation fails. The caller holds the lock of the page's shard, which
    /// serialises allocations of the page.
    pub(crate) fn get_or_alloc(&self, groups: usize, first: usize) -> Option<&Page<K>> {
        match self.0.get() {
            Some(page) => Some(page),
            None => Some(self.0.set(Page::try_new(groups, first)?)),
        }
    }
}
