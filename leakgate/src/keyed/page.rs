//! A page: a run of groups of one shard, allocated the first time a key needs one of them.
//!
//! A table reserves only its list of pages up front; a page's groups (128 bytes each for `u64`
//! keys), their tags (4 bytes each) and one spare block of keys are allocated when an insert
//! first reaches the page, under the lock of the page's shard, and then live as long as the
//! table. So a table made for far more keys than it ever sees costs memory for the pages its keys
//! reach, never more than its capacity, and an allocation that fails is a page a key cannot use
//! (like a full one), not an abort.

use super::group::{Group, Keys, Side};
use super::key_blocks::SpareBlock;
use crate::sync::{AtomicU32, SetOnce};

/// A page's groups and their tags, index for index, and the spare block of keys its groups share.
pub(crate) struct Page<K> {
    groups: Vec<Group<K>>,
    /// Group `i`'s tags (see [`Side::tags`]): a dense array, 16 groups to a line.
    tags: Box<[AtomicU32]>,
    /// Boxed: read only while a group's keys change, and a page not yet allocated takes its
    /// place in the table's list of pages (2^16 entries at most) at the size of a `Page`.
    spare: Box<SpareBlock<Keys<K>>>,
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
        let mut tags = Vec::new();
        tags.try_reserve_exact(groups).ok()?;
        tags.extend((0..groups).map(|_| AtomicU32::new(0)));
        let spare = Box::new(SpareBlock::new());
        Some(Page { groups: lines, tags: tags.into_boxed_slice(), spare, first })
    }

    /// A page of one group, for a bucket outside any table (the shared overflow bucket).
    pub(crate) fn single() -> Self {
        let tags = Box::new([AtomicU32::new(0)]);
        Page { groups: vec![Group::new()], tags, spare: Box::new(SpareBlock::new()), first: 0 }
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

    /// Group `i`'s tags word, as a lookup reads it before the group's lines.
    #[inline(always)]
    pub(crate) fn tags(&self, i: usize) -> &AtomicU32 {
        &self.tags[i]
    }

    /// What group `i` shares with the page: its tags and the spare block of keys.
    #[inline(always)]
    pub(crate) fn side(&self, i: usize) -> Side<'_, K> {
        Side { tags: &self.tags[i], spare: &self.spare, index: i }
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
