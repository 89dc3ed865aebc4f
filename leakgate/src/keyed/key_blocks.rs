//! A group's keys, read without a lock while a new key is published: two blocks and the group's
//! version.
//!
//! # Implementation details
//!
//! A lookup must compare its key with the keys of a group while an insert may be giving one of
//! the group's slots to a new key. Keys are never changed while a lookup may read them. The
//! group's keys are kept twice, whole, in two blocks, each under a reader-writer lock that
//! lookups take only with `try_read`, which never waits:
//!
//! * the **main** block sits on the line right after the group's own line (a lookup at a million
//!   keys fetches both as one pair: one cache miss, where keys behind a pointer in the line cost
//!   a second miss after the first);
//! * the **spare** block sits with the group's cold side data.
//!
//! The group's version (a `u32`, wrapping) says which block is whole: **even**, the main block
//! holds the current keys (and the spare block the same keys); **odd**, a writer is rewriting the
//! main block and the spare block holds the current keys. A writer (holding the group's shard
//! lock, so one at a time) publishes new keys in five steps:
//!
//! 1. writes them into the spare block (waiting for the read locks of lookups still reading it
//!    under an odd version from an earlier publication);
//! 2. bumps the version to odd (`Release`): lookups now read the spare block;
//! 3. writes them into the main block (waiting for the read locks of lookups that read it under
//!    the even version before);
//! 4. stores the group's new tags (`Release`);
//! 5. bumps the version to even (`Release`): lookups read the main block again.
//!
//! Tags come after both blocks: a lookup that sees a new tag (its load is `Acquire`) reads, in
//! either block, the keys published with it or later ones, never a slot's earlier key under its
//! new tag (which could match a lookup of that earlier key, or of the copy an unused slot holds).
//! Until then the new key is not found by its tag, and its lookup goes to the insert path, which
//! waits for the writer's lock.
//!
//! A lookup reads the version (`Acquire`), then the block it names. If `try_read` fails, a writer
//! holds that block, which happens only when the version the lookup read is out of date (the block
//! it names is being rewritten): the lookup reads the version again. Each such retry means a
//! writer moved on a step: lookups stay lock-free. A block a lookup reads under an out-of-date
//! version holds keys that are whole, of an earlier or a later publication; the group's version
//! check around every use of a slot (`slot.rs`) then makes the lookup start over, as it does for
//! any change of key. Writers wait only for lookups that hold a read lock, a few key comparisons
//! each; only inserts, which hold the shard lock, ever wait.

use super::group::Keys;
use crate::sync::{AtomicU32, Ordering, RwLock};
use std::sync::TryLockError;

/// One copy of a group's keys (`None` before the group's first key), read and written whole.
pub(crate) struct KeyBlock<K>(RwLock<Option<Keys<K>>>);

impl<K> KeyBlock<K> {
    pub(crate) fn new() -> Self {
        KeyBlock(RwLock::new(None))
    }

    /// Runs `f` on the keys unless a writer holds the block (`Err(())`), without waiting.
    #[inline(always)]
    fn try_read<R>(&self, f: impl FnOnce(Option<&Keys<K>>) -> R) -> Result<R, ()> {
        let keys = match self.0.try_read() {
            Ok(keys) => keys,
            // Blocks are written with no user code running under their lock (see `write`), so a
            // block is never poisoned; if one were, its keys are whole all the same.
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return Err(()),
        };
        Ok(f(keys.as_ref()))
    }

    /// The keys, cloned, for a writer that holds the shard lock of a group whose main block this
    /// is (so the version is even and no block is being written: the read succeeds at once).
    pub(crate) fn current_locked(&self) -> Option<Keys<K>>
    where
        K: Clone,
    {
        self.try_read(|keys| keys.cloned()).ok().flatten()
    }

    /// Replaces the keys, waiting for the lookups reading them; returns the keys replaced, for
    /// the caller to drop after every lock is released (a key's `Drop` is user code).
    fn write(&self, keys: Keys<K>) -> Option<Keys<K>> {
        // Only a move runs under the lock: nothing can panic and poison it.
        let mut block = self.0.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        block.replace(keys)
    }
}

/// The group's version, tags and two blocks of keys, as one protocol (see the module docs).
pub(crate) struct KeyBlocks<'g, K> {
    pub(crate) version: &'g AtomicU32,
    pub(crate) tags: &'g AtomicU32,
    pub(crate) main: &'g KeyBlock<K>,
    pub(crate) spare: &'g KeyBlock<K>,
}

impl<K> KeyBlocks<'_, K> {
    /// Runs `f` on the keys current at `version` (a value the group's version held, read with
    /// `Acquire`), without waiting: `Err(())` when that version is out of date and its block is
    /// being rewritten (read the version again).
    #[inline(always)]
    pub(crate) fn read<R>(
        &self,
        version: u32,
        f: impl FnOnce(Option<&Keys<K>>) -> R,
    ) -> Result<R, ()> {
        let block = if version & 1 == 0 { self.main } else { self.spare };
        block.try_read(f)
    }

    /// Publishes `keys` with the group's new `tags` (under the shard lock): returns the version a
    /// lookup that sees them reads, and the keys displaced, to drop last.
    pub(crate) fn publish(&self, keys: Keys<K>, tags: u32) -> (u32, [Option<Keys<K>>; 2])
    where
        K: Clone,
    {
        // Relaxed: only lock holders write the version, and the lock orders them.
        let even = self.version.load(Ordering::Relaxed);
        debug_assert_eq!(even & 1, 0, "a version is odd only while a writer holds the lock");
        let spare = self.spare.write(keys.clone());
        // Release: a lookup that reads this version (Acquire) sees the spare block written.
        self.version.store(even.wrapping_add(1), Ordering::Release);
        let main = self.main.write(keys);
        // Release: a lookup that sees a new tag (Acquire) reads whole blocks of these keys.
        self.tags.store(tags, Ordering::Release);
        // Release: as for the odd version, for the main block.
        let published = even.wrapping_add(2);
        self.version.store(published, Ordering::Release);
        (published, [spare, main])
    }
}
