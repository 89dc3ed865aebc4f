//! The bounded table behind [`KeyedLimiter`](crate::KeyedLimiter): shards of open-addressed groups
//! of four buckets, in lazily allocated pages.
//!
//! # Implementation details
//!
//! **Where a key may be.** A key's hash picks its *home* shard (low bits) and two start groups in
//! it (other bits). From the first start group the key's *probe sequence* runs through every
//! group of the table: the groups of its home shard from that group on (wrapping), then the same
//! positions in each following shard. A key has two *windows* of [`WINDOW`] groups each: the
//! first positions of its probe sequence, and as many groups of its home shard from its second
//! start group. A new key goes into whichever window has an unused slot nearer its start (the
//! first window on a tie): two choices keep keys near their starts in a nearly full table, where
//! one window made a key pass a few groups on average and put some keys past their window (see
//! [`super::capacity`]). A key is placed past its windows, further along its probe sequence, only
//! when every slot of both holds a busy bucket; the first start group's reach (see
//! [`Group::reach`]) records how far such keys went, so lookups of missing keys stop there.
//!
//! **Why lookups may stop early.** Slots are used in order and never emptied, and a key is placed
//! in the first unused slot of a window, or in an idle slot only when neither window has an
//! unused slot left, so a lookup stops looking in a window at its first group that has an unused
//! slot (or an unallocated page, which has only unused ones): a key placed in that window would
//! sit at or before it. A lookup looks in both windows by turns, group by group, and stops when
//! it finds the key or both windows are done. Lookups are lock-free (see [`super::group`] for how
//! a slot's state and its key stay paired).
//!
//! **Locks.** Every write to a group happens under the lock of the group's shard, and every insert
//! of a key holds its home shard's lock, so one key is never inserted twice and a search for it
//! under that lock is exact. An insert past the window writes to other shards: it takes the
//! table's *spill* lock first, then its home lock, then each other shard's lock in turn; inserts
//! within a window hold one lock at a time, so no cycle can form.
//!
//! **Forgotten keys.** A slot changes key only when its bucket is empty (see
//! [`Group::idle_tat`]); its key is then forgotten. Every new bucket starts at or above the
//! latest time the table used to judge a slot idle, so a key that comes back, even through a
//! thread that read the clock before its bucket was forgotten, or after the clock went back, is
//! never given more than the bucket it lost would have given it.

use super::group::{Group, Side, SLOTS};
use super::hasher::RandomSeed;
use super::page::{LazyPage, Page};
use super::slot::Found;
use crate::sync::{self, AtomicU64, Mutex, Ordering};
use crossbeam_utils::CachePadded;
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};

/// How many groups (of [`SLOTS`] slots) form a key's window, from its hash.
pub(crate) const WINDOW: usize = 16;

/// Pages hold at least this many groups (512 KiB of lines and keys, and 16 KiB of tags, for
/// `u64` keys), or a whole shard if it is smaller: so tables of up to 2^20 slots have one page
/// per shard, and the list of pages a lookup reads stays short (128 entries at 2^21 slots).
const MIN_PAGE_GROUPS: usize = 4096;

/// The size of a table's groups above which a lookup asks for its lines ahead (see
/// [`Table::touch`]): a megabyte, a core's own cache on recent processors.
const PREFETCH_BYTES: usize = 1 << 20;

/// A table has at most 2^16 pages, so its list of pages stays small however large its capacity.
const MAX_PAGES_LOG2: u32 = 16;

pub(crate) struct Table<K> {
    /// Group `g` of shard `s` is group `(s << shard_shift | g) & page_mask` of page
    /// `(s << shard_shift | g) >> page_shift`.
    pages: Box<[LazyPage<K>]>,
    page_shift: u32,
    page_mask: usize,
    shard_mask: usize,
    /// log2 of the groups per shard.
    pub(super) shard_shift: u32,
    pub(super) group_mask: usize,
    /// Groups in a window: [`WINDOW`], or fewer in a shard that small.
    pub(super) window: usize,
    hasher: RandomSeed,
    /// Whether [`Table::touch`] asks for lines ahead: only when the groups outgrow a core's own
    /// caches ([`PREFETCH_BYTES`]). In a smaller table they are in cache already, and asking
    /// costs the lookup its own work twice (1,000 keys, one thread: 2-3 ns of about 31).
    pub(super) prefetch: bool,
    /// One lock per shard: held only while giving a slot of the shard to a key, never by a
    /// lookup.
    pub(super) shards: Box<[CachePadded<Mutex<()>>]>,
    /// Held by an insert that places a key past its window, before any shard lock.
    pub(super) spill: Mutex<()>,
    /// Written by inserts only; alone on their line so they never slow lookups.
    pub(super) marks: CachePadded<Marks>,
}

pub(super) struct Marks {
    /// The latest clock reading (nanoseconds, so that it needs no conversion when the quota
    /// changes) at which a slot was judged idle and its key forgotten, or a request the table
    /// holds no bucket for (a peek) was decided. Every new bucket starts at or above it. Only
    /// grows.
    pub(super) idle: AtomicU64,
    /// No slot of the table can be idle before this time (rate units, reset to 0 when the quota
    /// changes; 0: no such bound): when
    /// the whole table was last searched for room, every slot was used and busy until at least
    /// this time minus one, and a slot's `busy_until` never decreases. New keys before it are
    /// refused without a search. Only grows.
    pub(super) no_room_before: AtomicU64,
    /// The least state (units of the rate in force; 0: no bound) a new bucket opens at: the
    /// state in which the changes of quota so far left a bucket the table held idle throughout
    /// (see `Rate::level_in`: a larger burst adds nothing at once), so that a key forgotten or
    /// never seen opens no fuller than a key the table kept. Written by `set_quota` (or a
    /// reload's compile, before the table is shared) under every shard lock; read by inserts
    /// under their home lock, so each reads the value of the rate it works in.
    pub(super) fresh: AtomicU64,
    /// When the changes of quota were made (see [`ChangedAt`]).
    pub(super) changed_at: ChangedAt,
}

/// The clock reading (nanoseconds) at which the change to the rate of epoch `e` was made, kept at
/// `e & 1` for the two epochs a rate cell keeps: a group converted late, by the first check
/// that meets it, is converted as of the change, not as of that check (its bucket must not go on
/// refilling at the old rate after the change). Written by `set_quota` under every shard lock
/// before it publishes the epoch; read under a shard lock by the conversions of that epoch, so
/// each reads its own epoch's time (a later one with the same parity needs every lock).
pub(crate) struct ChangedAt([AtomicU64; 2]);

impl ChangedAt {
    /// When the change to the rate of `epoch` was made (0 for the first rate).
    pub(crate) fn of(&self, epoch: u64) -> u64 {
        // Relaxed: under a shard lock, which the writer held (see the type's docs).
        self.0[(epoch & 1) as usize].load(Ordering::Relaxed)
    }

    /// Records that the change to the rate of `epoch` was made at `now_ns`. Under every shard
    /// lock.
    pub(crate) fn record(&self, epoch: u64, now_ns: u64) {
        // Relaxed: see `of`.
        self.0[(epoch & 1) as usize].store(now_ns, Ordering::Relaxed);
    }
}

impl<K> Table<K> {
    /// A table of `shards` shards of `slots_per_shard` slots; both powers of two, and
    /// `slots_per_shard` at least [`SLOTS`]. Allocates only the list of pages.
    pub(crate) fn new(shards: usize, slots_per_shard: usize) -> Self {
        assert!(shards.is_power_of_two() && slots_per_shard.is_power_of_two());
        assert!(slots_per_shard >= SLOTS, "a shard holds at least one group");
        let groups_per_shard = slots_per_shard / SLOTS;
        let groups = shards * groups_per_shard;
        let page_groups = (groups >> MAX_PAGES_LOG2).max(MIN_PAGE_GROUPS).min(groups_per_shard);
        Table {
            pages: (0..groups / page_groups).map(|_| LazyPage::new()).collect(),
            page_shift: page_groups.trailing_zeros(),
            page_mask: page_groups - 1,
            shard_mask: shards - 1,
            shard_shift: groups_per_shard.trailing_zeros(),
            group_mask: groups_per_shard - 1,
            window: WINDOW.min(groups_per_shard),
            hasher: RandomSeed::new(),
            prefetch: groups.saturating_mul(std::mem::size_of::<Group<K>>()) > PREFETCH_BYTES,
            shards: (0..shards).map(|_| CachePadded::new(Mutex::new(()))).collect(),
            spill: Mutex::new(()),
            marks: CachePadded::new(Marks {
                idle: AtomicU64::new(0),
                no_room_before: AtomicU64::new(0),
                fresh: AtomicU64::new(0),
                changed_at: ChangedAt([AtomicU64::new(0), AtomicU64::new(0)]),
            }),
        }
    }

    /// Slots in all.
    pub(crate) fn capacity(&self) -> usize {
        self.positions() * SLOTS
    }

    /// Groups in all: the length of every probe sequence.
    pub(super) fn positions(&self) -> usize {
        (self.shard_mask + 1) << self.shard_shift
    }

    pub(super) fn window(&self) -> usize {
        self.window
    }

    #[inline]
    pub(crate) fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        self.hasher.hash_one(key)
    }

    /// A hash's home shard.
    #[inline]
    pub(crate) fn home(&self, hash: u64) -> usize {
        hash as usize & self.shard_mask
    }

    /// The shard of the group at global index `gi`.
    pub(super) fn shard_of(&self, gi: usize) -> usize {
        gi >> self.shard_shift
    }

    /// The end of the run of positions, from `p`, that lie in one shard.
    pub(super) fn shard_run_end(&self, p: usize) -> usize {
        ((p >> self.shard_shift) + 1) << self.shard_shift
    }

    /// The global index of the group at position `p` of `hash`'s probe sequence (the first `window`
    /// positions are its first window).
    #[inline(always)]
    pub(super) fn position(&self, hash: u64, p: usize) -> usize {
        let shard = (self.home(hash) + (p >> self.shard_shift)) & self.shard_mask;
        shard << self.shard_shift | (start(hash).wrapping_add(p) & self.group_mask)
    }

    /// The global index of the group at position `p` (below the window) of `hash`'s second
    /// window.
    #[inline(always)]
    pub(super) fn second(&self, hash: u64, p: usize) -> usize {
        self.home(hash) << self.shard_shift | (second_start(hash).wrapping_add(p) & self.group_mask)
    }

    /// Whether `hash`'s second window starts elsewhere than its first (when it does not, as in
    /// a shard of one group, it is the first window again, and searches skip it).
    pub(super) fn two_windows(&self, hash: u64) -> bool {
        self.second(hash, 0) != self.position(hash, 0)
    }

    /// The group at global index `gi`; `None` if its page was never allocated (so none of its
    /// slots was ever used).
    #[inline(always)]
    pub(super) fn at(&self, gi: usize) -> Option<At<'_, K>> {
        let page = self.pages[gi >> self.page_shift].get()?;
        Some(At { page, index: gi & self.page_mask })
    }

    /// The slot `slot` of group `gi`, as a handle found at version `version` (where a reservation
    /// left it): `None` if its page was never allocated.
    pub(crate) fn found_at(&self, gi: usize, slot: usize, version: u32) -> Option<Found<'_, K>> {
        self.at(gi).map(|at| at.found(slot, version))
    }

    /// As [`Table::at`], allocating the group's page if needed; `None` if that fails. The caller
    /// holds the lock of the group's shard.
    pub(super) fn at_or_alloc(&self, gi: usize) -> Option<At<'_, K>> {
        let first = gi & !self.page_mask;
        let page = self.pages[gi >> self.page_shift].get_or_alloc(self.page_mask + 1, first)?;
        Some(At { page, index: gi & self.page_mask })
    }

    /// How far past the window keys of `hash`'s window were placed: the probe sequence a search
    /// must cover (at least the window).
    pub(super) fn reach(&self, hash: u64) -> usize {
        let reach = self.at(self.position(hash, 0)).map_or(0, |at| at.line().reach() as usize);
        reach.max(self.window)
    }

    /// Runs `f` on every allocated group with its shard and what it shares with its page (for a
    /// change of quota).
    pub(crate) fn for_each_group(&self, mut f: impl FnMut(usize, &Group<K>, &Side<'_, K>)) {
        let page_groups = self.page_mask + 1;
        for (i, page) in self.pages.iter().enumerate() {
            let Some(page) = page.get() else { continue };
            for j in 0..page_groups {
                f(self.shard_of(i * page_groups + j), page.line(j), &page.side(j));
            }
        }
    }

    /// Converts group `gi` with `conversion` (see `requota.rs`), under its shard's lock.
    pub(crate) fn convert_group(&self, gi: usize, conversion: &impl super::request::EpochOf<K>) {
        if let Some(at) = self.at(gi) {
            conversion.convert(at.line(), &at.side());
        }
    }

    /// When the changes of quota were made (see [`ChangedAt`]).
    pub(crate) fn changed_at(&self) -> &ChangedAt {
        &self.marks.changed_at
    }

    /// The least state a new bucket opens at (see [`Marks::fresh`]), in the rate in force.
    pub(crate) fn fresh(&self) -> u64 {
        // Relaxed: see `Marks::fresh` (written and read under shard locks, or before sharing).
        self.marks.fresh.load(Ordering::Relaxed)
    }

    /// Sets the least state a new bucket opens at (see [`Marks::fresh`]): under every shard
    /// lock, with the rate it is counted in published in the same hold, or before the table is
    /// shared.
    pub(crate) fn set_fresh(&self, state: u64) {
        // Relaxed: see `Marks::fresh`.
        self.marks.fresh.store(state, Ordering::Relaxed);
    }

    /// Forgets the bound on when a slot may next be idle (its units are the old quota's).
    pub(crate) fn forget_room_bound(&self) {
        // Relaxed: called under every shard lock, which inserts (its only readers) take.
        self.marks.no_room_before.store(0, Ordering::Relaxed);
    }

    /// Every tracked key with its `TAT` and last use, without blocking checks: a group that
    /// changes key while read is read again (under its shard's lock after a few tries, which
    /// holds up inserts only).
    pub(crate) fn for_each(&self, mut f: impl FnMut(K, u64, u32, u32))
    where
        K: Clone,
    {
        let allocated =
            (self.pages.iter().enumerate()).filter_map(|(i, page)| Some((i, page.get()?)));
        let page_groups = self.page_mask + 1;
        let groups = allocated.flat_map(|(i, page)| {
            (0..page_groups).map(move |j| (i * page_groups + j, page.line(j), page.side(j)))
        });
        for (gi, group, side) in groups {
            let slots = (0..3).find_map(|_| group.read_all(&side)).unwrap_or_else(|| {
                let _shard = sync::lock(&self.shards[self.shard_of(gi)]);
                // Under the lock no slot of the group changes key, so this read succeeds.
                group.read_all(&side).unwrap_or_default()
            });
            let epoch = group.epoch();
            for (key, tat, used) in slots {
                f(key, tat, used, epoch);
            }
        }
    }
}

/// A group of a table: its page and its index there.
pub(super) struct At<'t, K> {
    pub(super) page: &'t Page<K>,
    pub(super) index: usize,
}

impl<K> Clone for At<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for At<'_, K> {}

impl<'t, K> At<'t, K> {
    /// The group's line.
    #[inline(always)]
    pub(super) fn line(self) -> &'t Group<K> {
        self.page.line(self.index)
    }

    /// What the group shares with its page: its tags, the spare block of keys.
    #[inline(always)]
    pub(super) fn side(self) -> Side<'t, K> {
        self.page.side(self.index)
    }

    /// The slot holding `key` in this group (see [`Group::find`]).
    #[inline(always)]
    pub(super) fn find<Q>(self, key: &Q, tag: u8) -> (Option<(usize, u32)>, bool)
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        self.line().find(&self.side(), key, tag)
    }

    /// The handle on slot `slot` of the group, found at group version `version`.
    #[inline(always)]
    pub(super) fn found(self, slot: usize, version: u32) -> Found<'t, K> {
        Found::new(self.page, self.index, slot, version)
    }
}

/// The first start group of `hash` in its home shard (before masking): bits 16 and up. The home
/// shard takes the low bits, and the tag the top 8 (`tag_of`).
#[inline(always)]
pub(super) fn start(hash: u64) -> usize {
    (hash >> 16) as usize
}

/// The second start group of `hash` (before masking): bits 6 to 15, then bits 38 to 55, none of
/// which pick the home shard, the tag, or (up to 2^22 groups a shard, the largest table) the
/// first start group.
#[inline(always)]
pub(super) fn second_start(hash: u64) -> usize {
    ((hash >> 6) & 0x3ff | (hash >> 38 & 0x3_ffff) << 10) as usize
}
