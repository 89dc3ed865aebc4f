//! Heap bytes per key of a keyed table: leakgate's `KeyedLimiter::with_capacity(N)` and
//! governor's keyed limiter (a DashMap, grown as it fills), each filled with `N` fresh `u64` keys
//! `0..N` by one check each, every check admitted. Bytes are counted by a global allocator in
//! this binary: live bytes after the fill less live bytes before the table was made (requested
//! sizes, so the figure does not depend on the system allocator's rounding).
//!
//! `cargo bench --bench keyed_memory [-- N,N,... [xF]]` (default: 1000000): `xF` makes
//! leakgate's table `with_capacity(F * N)` (`x0.8`: the table of 2^k slots that
//! `with_capacity(N)` gave before small tables had headroom).

use governor::clock::DefaultClock;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use leakgate::{KeyedLimiter, Quota};
use std::alloc::{GlobalAlloc, Layout, System};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

type Governor = governor::RateLimiter<
    u64,
    DefaultKeyedStateStore<u64>,
    DefaultClock,
    NoOpMiddleware<<DefaultClock as governor::clock::Clock>::Instant>,
>;

/// Live heap bytes that `make` and `fill` leave, with what they made kept alive meanwhile.
fn bytes<T>(make: impl FnOnce() -> T, fill: impl FnOnce(&T)) -> usize {
    let before = LIVE.load(Ordering::Relaxed);
    let table = make();
    fill(&table);
    let after = LIVE.load(Ordering::Relaxed);
    drop(table);
    after - before
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let sizes: Vec<u64> = args
        .first()
        .map_or(vec![1_000_000], |a| a.split(',').map(|x| x.parse().expect("a number")).collect());
    let factor: f64 = args.get(1).map_or(1.0, |a| a.trim_start_matches('x').parse().expect("xF"));
    let quota = Quota::new(1, Duration::from_secs(1), 1_000_000_000).expect("quota");
    let max = NonZeroU32::new(u32::MAX).expect("not zero");
    let gquota = governor::Quota::per_second(max).allow_burst(max);
    println!("{:>9} {:>14} {:>14} {:>7}", "N", "leakgate B/key", "governor B/key", "ratio");
    for n in sizes {
        let leakgate = bytes(
            || KeyedLimiter::<u64>::with_capacity(quota, (n as f64 * factor) as usize),
            |lim| {
                for key in 0..n {
                    assert!(lim.check(&key).is_ok());
                }
            },
        );
        let governor = bytes(
            || -> Governor { governor::RateLimiter::keyed(gquota) },
            |lim| {
                for key in 0..n {
                    assert!(lim.check_key(&key).is_ok());
                }
            },
        );
        let (l, g) = (leakgate as f64 / n as f64, governor as f64 / n as f64);
        println!("{n:>9} {l:>14.1} {g:>14.1} {:>7.3}", l / g);
    }
}
