//! Keyed concurrency limits: `try_acquire` + release (the permit dropped) per key, leakgate's
//! `KeyedConcurrencyLimiter` (the lock-free keyed table) beside the sharded-`Mutex` table it
//! replaced (64 shards, each a `HashMap` of counts under a `std` mutex, a key removed at 0: kept
//! here as it was) and beside `KeyedLimiter::check` on the same keys (every check admitted), in
//! one process, the three in turns (the first one rotating each round) so that drift in the
//! machine's load hits all alike.
//!
//! Every key is used once before measuring (leakgate's tables hold every key: `with_capacity(N)`,
//! the lock-free one filled while every key holds a permit, so no key took another's slot; the
//! mutex table holds none, since its keys go at 0). Orders: `scattered` (key `i * M mod N`:
//! every key once per `N` steps, far from the one before) and `random` (xorshift). On 2 threads
//! each thread walks the order from its own offset; keys may meet, and the limit (64) is above
//! what two threads can hold, so every acquire succeeds. Prints, per (N, order, threads), the
//! median over the rounds of the threads' processor ns per operation (Linux `schedstat`), and
//! the median of each round's ratio to the keyed rate check and to the mutex table.
//!
//! `cargo bench --bench keyed_concurrency [-- ROUNDS [N,N,...] [THREADS,...]]`: 7 rounds by
//! default, N in 1000 and 1000000, 1 and 2 threads.

#[path = "support/orders.rs"]
mod orders;

use leakgate::{KeyedConcurrencyLimiter, KeyedLimiter, Quota};
use orders::{list, median, run, Op, Order};
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::hint::black_box;
use std::sync::Mutex;
use std::time::Duration;

/// The limit per key: above what two threads hold at once.
const MAX: u32 = 64;

impl Op for KeyedConcurrencyLimiter<u64> {
    #[inline(always)]
    fn op(&self, key: &u64) -> bool {
        let permit = self.try_acquire(key);
        black_box(&permit);
        permit.is_some()
    }
}

impl Op for KeyedLimiter<u64> {
    #[inline(always)]
    fn op(&self, key: &u64) -> bool {
        self.check(key).is_ok()
    }
}

/// The table `KeyedConcurrencyLimiter` had before: 64 shards, each a `HashMap` of the keys with
/// permits in flight under a short `Mutex`, room reserved up front, a key removed at 0.
/// One shard of [`Sharded`]: its keys with permits in flight, and how many each holds.
type Shard = crossbeam_utils::CachePadded<Mutex<HashMap<u64, u32>>>;

struct Sharded {
    shards: Box<[Shard]>,
    hasher: RandomState,
    per_shard: usize,
}

impl Sharded {
    fn with_capacity(capacity: usize) -> Self {
        let per_shard = capacity.div_ceil(64).max(1);
        let shards = (0..64)
            .map(|_| {
                crossbeam_utils::CachePadded::new(Mutex::new(HashMap::with_capacity(per_shard)))
            })
            .collect();
        Sharded { shards, hasher: RandomState::new(), per_shard }
    }

    #[inline(always)]
    fn shard(&self, key: &u64) -> &Mutex<HashMap<u64, u32>> {
        &self.shards[(self.hasher.hash_one(key) >> 58) as usize % 64]
    }
}

impl Op for Sharded {
    #[inline(always)]
    fn op(&self, key: &u64) -> bool {
        {
            let mut map = self.shard(key).lock().unwrap();
            let full = map.len() >= self.per_shard;
            match map.get_mut(key) {
                Some(held) if *held + 1 > MAX => return false,
                Some(held) => *held += 1,
                None if full => return false,
                None => {
                    map.insert(*key, 1);
                }
            }
        }
        black_box(key);
        let mut map = self.shard(key).lock().unwrap();
        if let Some(held) = map.get_mut(key) {
            *held -= 1;
            if *held == 0 {
                map.remove(key);
            }
        }
        true
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let rounds: u64 = args.first().map_or(7, |a| a.parse().expect("rounds"));
    let sizes = list(args.get(1), &[1_000, 1_000_000]);
    let thread_counts = list(args.get(2), &[1, 2]);
    let quota = Quota::new(1, Duration::from_secs(1), 1_000_000_000).expect("quota");
    println!(
        "rounds {rounds}; processor ns per operation (acquire + release, or one rate check), \
         medians; ratios: median of each round's"
    );
    println!(
        "{:>9} {:>10} {:>3} {:>10} {:>10} {:>10} {:>9} {:>9}",
        "N", "order", "thr", "lockfree", "mutex", "rate", "lf/rate", "lf/mutex"
    );
    for &n in &sizes {
        let lockfree = KeyedConcurrencyLimiter::<u64>::with_capacity(MAX, n as usize).unwrap();
        let mutex = Sharded::with_capacity(n as usize);
        let rate = KeyedLimiter::<u64>::with_capacity(quota, n as usize);
        // Every key given a slot while all are held, so that none took another's at 0.
        let held: Vec<_> = (0..n).map(|key| lockfree.try_acquire(&key).unwrap()).collect();
        drop(held);
        for key in 0..n {
            assert!(mutex.op(&key) && rate.op(&key));
        }
        for order in [Order::Scattered, Order::Random] {
            for &threads in &thread_counts {
                let steps = (3 * n).max(2_000_000) / threads;
                let (mut l, mut m, mut r, mut lr, mut lm) =
                    (vec![], vec![], vec![], vec![], vec![]);
                for round in 0..rounds {
                    let mut got = [0.0; 3];
                    for j in 0..3 {
                        let which = (j + round as usize) % 3;
                        got[which] = match which {
                            0 => run(&lockfree, order, n, threads, steps, round).1,
                            1 => run(&mutex, order, n, threads, steps, round).1,
                            _ => run(&rate, order, n, threads, steps, round).1,
                        };
                    }
                    l.push(got[0]);
                    m.push(got[1]);
                    r.push(got[2]);
                    lr.push(got[0] / got[2]);
                    lm.push(got[0] / got[1]);
                }
                let order = format!("{order:?}").to_lowercase();
                let (l, m, r, lr, lm) = (median(l), median(m), median(r), median(lr), median(lm));
                println!(
                    "{n:>9} {order:>10} {threads:>3} {l:>10.1} {m:>10.1} {r:>10.1} {lr:>9.3} {lm:>9.3}"
                );
            }
        }
    }
}
