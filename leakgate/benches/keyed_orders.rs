//! Keyed checks in any key order: leakgate's `KeyedLimiter` and governor's keyed limiter, each
//! filled with keys `0..N` in order (leakgate made `with_capacity(N)`, governor's DashMap grown
//! as it fills), then checked in three orders, every check admitted, in one process, the two in
//! turns (leakgate first in even rounds, governor first in odd ones), so that drift in the
//! machine's load hits both alike.
//!
//! Orders: `sequential` (step `i` checks key `i mod N`), `scattered` (key `i * M mod N` for a
//! large odd `M` prime to `N`: every key once per `N` steps, far from the one before) and
//! `random` (a key drawn at each step by an xorshift generator). On 2 threads each thread walks
//! the same order from its own offset. Prints, per (N, order, threads), the median over the
//! rounds of ns per check (the threads' time on a processor, from Linux's per-thread
//! `schedstat`, over all checks of all threads: on a machine shared with other work, time spent
//! waiting for a processor is left out), the median of each round's leakgate/governor ratio with
//! its range, the median ratio of wall times, and the floor: the median ns per check of a loop
//! that does only what any keyed table must (see [`Floor`]), in the same order.
//!
//! `cargo bench --bench keyed_orders [-- ROUNDS [N,N,...] [THREADS,...] [xF]]`: 7 rounds by
//! default, N in 1000 and 1000000, 1 and 2 threads. A last argument `xF` makes leakgate's table
//! `with_capacity(F * N)`: `x2` as `benches/keyed.rs` does, `x0.8` the table of 2^k slots that
//! `with_capacity(N)` gave before small tables had headroom (800 keys and a quarter more round up
//! to 1,024 slots).

#[path = "support/orders.rs"]
mod orders;

use governor::clock::DefaultClock;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use leakgate::{Clock, KeyedLimiter, Quota, TscClock};
use orders::{list, median, run, Op, Order};
use std::num::NonZeroU32;
use std::time::Duration;

type Governor = governor::RateLimiter<
    u64,
    DefaultKeyedStateStore<u64>,
    DefaultClock,
    NoOpMiddleware<<DefaultClock as governor::clock::Clock>::Instant>,
>;

impl Op for KeyedLimiter<u64, TscClock> {
    #[inline(always)]
    fn op(&self, key: &u64) -> bool {
        KeyedLimiter::check(self, key).is_ok()
    }
}

impl Op for Governor {
    #[inline(always)]
    fn op(&self, key: &u64) -> bool {
        self.check_key(key).is_ok()
    }
}

/// The floor: only what any lock-free keyed table written without `unsafe` must do per check,
/// on as many groups of four slots as leakgate's table has: hash the key (leakgate's hash, a
/// folded multiply twice), read its group's tags word (from a dense array, as leakgate does),
/// read-lock the group's keys (`RwLock::try_read`, the one way to compare keys of any type
/// while another thread may replace them) and compare one, read the clock and CAS the slot's
/// state word; nothing else (no second choice, no version, no epoch, no result to report).
struct Floor {
    tags: Vec<std::sync::atomic::AtomicU32>,
    groups: Vec<FloorGroup>,
    clock: TscClock,
}

struct FloorGroup {
    keys: std::sync::RwLock<Option<[u64; 4]>>,
    tats: [std::sync::atomic::AtomicU64; 4],
}

impl Floor {
    fn new(slots: u64) -> Self {
        let groups = (slots.next_power_of_two() / 4).max(16) as usize;
        Floor {
            tags: (0..groups).map(|_| std::sync::atomic::AtomicU32::new(0x0101_0101)).collect(),
            groups: (0..groups)
                .map(|i| FloorGroup {
                    keys: std::sync::RwLock::new(Some([i as u64; 4])),
                    tats: Default::default(),
                })
                .collect(),
            clock: TscClock::new(),
        }
    }
}

impl Op for Floor {
    #[inline(always)]
    fn op(&self, key: &u64) -> bool {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        const SEED: u64 = 0x9E37_79B9_7F4A_7C15;
        let fold = |a: u64, b: u64| {
            let p = u128::from(a) * u128::from(b);
            (p as u64) ^ ((p >> 64) as u64)
        };
        let hash = fold(fold(key ^ SEED, SEED), SEED | 1);
        let gi = (hash >> 16) as usize & (self.groups.len() - 1);
        if self.tags[gi].load(Acquire) == 0 {
            return false;
        }
        let group = &self.groups[gi];
        // As a table would: look again while a writer holds the keys, and CAS again when another
        // thread's CAS came first (two threads share the groups).
        let found = loop {
            if let Ok(keys) = group.keys.try_read() {
                break keys.as_ref().is_some_and(|keys| keys[0] == gi as u64);
            }
        };
        let now = self.clock.now_ns();
        let mut tat = group.tats[0].load(Acquire);
        while let Err(seen) =
            group.tats[0].compare_exchange(tat, tat.max(now) + 1, Relaxed, Acquire)
        {
            tat = seen;
        }
        found
    }
}

/// One (N, order, threads) row: `rounds` rounds, the two contenders in turns, and the floor.
fn row(
    (leakgate, governor, floor): (&impl Op, &impl Op, &Floor),
    (n, order, threads): (u64, Order, u64),
    rounds: u64,
) {
    // Enough steps per run to visit every key a few times, at least 2M.
    let per_thread = (3 * n).max(2_000_000) / threads;
    let (mut l, mut g, mut ratios, mut walls) = (vec![], vec![], vec![], vec![]);
    for round in 0..rounds {
        let (a, b) = if round % 2 == 0 {
            let a = run(leakgate, order, n, threads, per_thread, round);
            (a, run(governor, order, n, threads, per_thread, round))
        } else {
            let b = run(governor, order, n, threads, per_thread, round);
            (run(leakgate, order, n, threads, per_thread, round), b)
        };
        l.push(a.1);
        g.push(b.1);
        ratios.push(a.1 / b.1);
        walls.push(a.0 / b.0);
    }
    let floors = (0..rounds).map(|round| run(floor, order, n, threads, per_thread, round).1);
    let floor = median(floors.collect());
    let (lo, hi) = ratios.iter().fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let order = format!("{order:?}").to_lowercase();
    let (l, g, ratio, wall) = (median(l), median(g), median(ratios), median(walls));
    print!("{n:>9} {order:>10} {threads:>3} {l:>10.1} {g:>10.1} {ratio:>7.3} ");
    println!("{lo:>7.3}-{hi:<7.3} {wall:>7.3} {floor:>7.1}");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let rounds: u64 = args.first().map_or(7, |a| a.parse().expect("rounds"));
    let sizes = list(args.get(1), &[1_000, 1_000_000]);
    let thread_counts = list(args.get(2), &[1, 2]);
    let factor: f64 = args.get(3).map_or(1.0, |a| a.trim_start_matches('x').parse().expect("xF"));
    // Every check admitted, every bucket busy (a second of backlog per check), as in
    // `leakgate_baselines::KeyedContenders`.
    let quota = Quota::new(1, Duration::from_secs(1), 1_000_000_000).expect("quota");
    let max = NonZeroU32::new(u32::MAX).expect("not zero");
    let gquota = governor::Quota::per_second(max).allow_burst(max);
    println!(
        "rounds {rounds}, leakgate capacity {factor} x N; processor ns per check (the threads' \
         time on a processor over all checks), medians; then the ratio of wall times, and the \
         floor's ns per check"
    );
    println!(
        "{:>9} {:>10} {:>3} {:>10} {:>10} {:>7} {:>15} {:>7} {:>7}",
        "N", "order", "thr", "leakgate", "governor", "ratio", "ratio range", "wall", "floor"
    );
    for &n in &sizes {
        let leakgate = KeyedLimiter::<u64>::with_capacity(quota, (n as f64 * factor) as usize);
        let governor: Governor = governor::RateLimiter::keyed(gquota);
        let floor = Floor::new(leakgate.capacity() as u64);
        for key in 0..n {
            assert!(leakgate.op(&key) && governor.op(&key));
        }
        for order in [Order::Sequential, Order::Scattered, Order::Random] {
            for &threads in &thread_counts {
                row((&leakgate, &governor, &floor), (n, order, threads), rounds);
            }
        }
    }
}
