//! A group's keys, read without a lock while a new key is published: two blocks and the group's
//! version.
//!
//! # Implementation details
//!
//! A lookup must compare its key with the keys of a group while an insert may be giving one of
//! the group's slots to a new key. Keys are never changed while a lookup may read them. The
//! group's keys are kept in a block under a reader-writer lock that lookups take only with
//! `try_read`, which never waits, and while a writer rewrites that block they are read from a
//! second copy:
//!
//! * the **main** block sits on the line right after the group's own line (a lookup at a million
//!   keys fetches both as one pair: one cache miss, where keys behind a pointer in the line cost
//!   a second miss after the first);
//! * the **spare** block belongs to the group's page, one for all its groups, and holds the keys
//!   of the group whose keys were last published, with that group's index. Every writer of a
//!   page's groups holds the lock of the page's shard, so one writer at a time uses it, and a
//!   spare per group (as there was before: 14 bytes a slot for `u64` keys, a quarter of the
//!   table) would only ever be read for the one group being written.
//!
//! The group's version (a `u32`, wrapping) says which block is whole: **even**, the main block
//! holds the current keys; **odd**, a writer is rewriting the main block and the page's spare
//! block holds the group's current keys. A writer (holding the shard lock, so one at a time per
//! page) publishes new keys in five steps:
//!
//! 1. writes them, with the group's index, into the page's spare block (waiting for the read
//!    locks of lookups still reading it under an odd version from an earlier publication, of
//!    this group or another);
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
//! holds that block; if the spare block holds another group's keys, the publication the odd
//! version belonged to is over. Either happens only when the version the lookup read is out of
//! date: the lookup reads the version again, and each such retry means a writer moved on a step,
//! so lookups stay lock-free. A block a lookup reads under an out-of-date version holds keys that
//! are whole, of an earlier or a later publication; the group's version check around every use of
//! a slot (`slot.rs`) then makes the lookup start over, as it does for any change of key. Writers
//! wait only for lookups that hold a read lock, a few key comparisons each; only inserts, which
//! hold the shard lock, ever wait.

use crate::sync::{AtomicU32, Ordering, RwLock, RwLockReadGuard};
use std::sync::TryLockError;

/// Runs `f` on the value under `lock` unless a writer holds it (`Err(())`), without waiting.
#[inline(always)]
fn try_read<T, R>(lock: &RwLock<T>, f: impl FnOnce(&T) -> R) -> Result<R, ()> {
    let value = match lock.try_read() {
        Ok(value) => value,
        // Blocks are written with no user code running under their lock (see `write`), so a
        // block is never poisoned; if one were, its keys are whole all the same.
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(TryLockError::WouldBlock) => return Err(()),
    };
    Ok(f(&value))
}

/// Replaces the value under `lock`, waiting for the lookups reading it; returns the value
/// replaced, for the caller to drop after every lock is released (a key's `Drop` is user code).
fn write<T>(lock: &RwLock<Option<T>>, value: T) -> Option<T> {
    // Only a move runs under the lock: nothing can panic and poison it.
    let mut block = lock.write().unwrap_or_else(|poisoned| poisoned.into_inner());
    block.replace(value)
}

/// A group's main copy of its keys (`None` before the group's first key), read and written whole.
/// `T` is what a block holds, a group's `Keys` (generic so that this protocol needs nothing of
/// `group.rs`).
pub(crate) struct KeyBlock<T>(RwLock<Option<T>>);

impl<T> KeyBlock<T> {
    pub(crate) fn new() -> Self {
        KeyBlock(RwLock::new(None))
    }

    /// The keys (`None` before the group's first key) under a read lock, unless a writer holds
    /// the block (`Err(())`), without waiting. The lookup path: the caller compares keys in
    /// place while holding the guard, with nothing of its own going through memory on the way
    /// (a closure taking its arguments by reference stored them on the stack just before the
    /// lock's atomic instruction, which waits for those stores).
    #[inline(always)]
    pub(crate) fn try_lock(&self) -> Result<RwLockReadGuard<'_, Option<T>>, ()> {
        match self.0.try_read() {
            Ok(keys) => Ok(keys),
            // See `try_read`.
            Err(TryLockError::Poisoned(poisoned)) => Ok(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => Err(()),
        }
    }

    /// The keys, cloned, for a writer that holds the shard lock of the block's group (so the
    /// version is even and no block is being written: the read succeeds at once).
    pub(crate) fn current_locked(&self) -> Option<T>
    where
        T: Clone,
    {
        try_read(&self.0, |keys| keys.clone()).ok().flatten()
    }
}

/// A page's spare copy of the keys of the group it last published, with that group's index in
/// the page (see the module docs).
pub(crate) struct SpareBlock<T>(RwLock<Option<(usize, T)>>);

impl<T> SpareBlock<T> {
    pub(crate) fn new() -> Self {
        SpareBlock(RwLock::new(None))
    }
}

/// A group's version, tags and two blocks of keys, as one protocol (see the module docs).
pub(crate) struct KeyBlocks<'g, T> {
    pub(crate) version: &'g AtomicU32,
    pub(crate) tags: &'g AtomicU32,
    pub(crate) main: &'g KeyBlock<T>,
    pub(crate) spare: &'g SpareBlock<T>,
    /// The group's index in its page: whose keys the spare block must hold to be read.
    pub(crate) index: usize,
}

impl<T> KeyBlocks<'_, T> {
    /// Runs `f` on the keys current at `version` (a value the group's version held, read with
    /// `Acquire`), without waiting: `Err(())` when that version is out of date (its block is being
    /// rewritten, or the spare block has moved on to another group): read the version again.
    #[inline(always)]
    pub(crate) fn read<R>(&self, version: u32, f: impl FnOnce(Option<&T>) -> R) -> Result<R, ()> {
        if version & 1 == 0 {
            try_read(&self.main.0, |keys| f(keys.as_ref()))
        } else {
            self.read_spare(f)
        }
    }

    /// [`KeyBlocks::read`] under an odd version: rare, kept out of the lookup path.
    #[cold]
    #[inline(never)]
    pub(crate) fn read_spare<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> Result<R, ()> {
        try_read(&self.spare.0, |spare| match spare {
            Some((index, keys)) if *index == self.index => Ok(f(Some(keys))),
            _ => Err(()),
        })?
    }

    /// Publishes `keys` with the group's new `tags` (under the shard lock): returns the version a
    /// lookup that sees them reads, and the keys displaced, to drop last.
    pub(crate) fn publish(&self, keys: T, tags: u32) -> (u32, [Option<T>; 2])
    where
        T: Clone,
    {
        // Relaxed: only lock holders write the version, and the lock orders them.
        let even = self.version.load(Ordering::Relaxed);
        debug_assert_eq!(even & 1, 0, "a version is odd only while a writer holds the lock");
        let spare = write(&self.spare.0, (self.index, keys.clone())).map(|(_, keys)| keys);
        // Release: a lookup that reads this version (Acquire) sees the spare block written.
        self.version.store(even.wrapping_add(1), Ordering::Release);
        let main = write(&self.main.0, keys);
        // Release: a lookup that sees a new tag (Acquire) reads whole blocks of these keys.
        self.tags.store(tags, Ordering::Release);
        // Release: as for the odd version, for the main block.
        let published = even.wrapping_add(2);
        self.version.store(published, Ordering::Release);
        (published, [spare, main])
    }
}
