//! What the interleaved keyed benches (`keyed_orders`, `keyed_concurrency`) share: the orders
//! their threads walk the keys in, the run that times one operation per key on a number of
//! threads, and the medians and argument lists of their tables. A bench takes it with
//! `#[path = "support/orders.rs"] mod orders;` (it is not a criterion bench: no `mod support`).

use std::hint::black_box;
use std::sync::Barrier;
use std::time::Instant;

/// A large odd multiplier, prime to every N measured (it is prime to 2 and 5).
pub(crate) const M: u64 = 0x9E37_79B9_7F4A_7C15;

/// The order of the keys: `Sequential` (step `i` takes key `i mod N`), `Scattered` (key
/// `i * M mod N`: every key once per `N` steps, far from the one before) and `Random` (a key
/// drawn at each step by an xorshift generator).
#[derive(Clone, Copy, Debug)]
#[allow(dead_code, reason = "keyed_concurrency walks only the scattered and random orders")]
pub(crate) enum Order {
    Sequential,
    Scattered,
    Random,
}

impl Order {
    /// The key of step `i` of `n` keys (`mul` is `M mod n`); `state` is the random order's
    /// generator.
    #[inline(always)]
    fn key(self, i: u64, n: u64, mul: u64, state: &mut u64) -> u64 {
        match self {
            Order::Sequential => {
                if i >= n {
                    i % n
                } else {
                    i
                }
            }
            Order::Scattered => ((u128::from(i) * u128::from(mul)) % u128::from(n)) as u64,
            Order::Random => {
                *state ^= *state << 13;
                *state ^= *state >> 7;
                *state ^= *state << 17;
                ((u128::from(*state) * u128::from(n)) >> 64) as u64
            }
        }
    }
}

/// One operation of a contender on `key`: whether it succeeded (each bench's contenders
/// implement it; every operation of a run must succeed).
pub(crate) trait Op: Sync {
    fn op(&self, key: &u64) -> bool;
}

/// This thread's time on a processor so far, in nanoseconds (Linux: the first field of
/// `/proc/thread-self/schedstat`). Time the thread spent waiting for a processor while other
/// programs ran is not in it.
fn cpu_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("Linux schedstat");
    stat.split_whitespace().next().and_then(|ns| ns.parse().ok()).expect("a count of ns")
}

/// `steps` operations per thread on `threads` threads in `order`, each thread (and each round)
/// from its own place in the order: ns per operation, over all operations of all threads, as
/// (wall time, processor time of the threads).
pub(crate) fn run(
    lim: &impl Op,
    order: Order,
    n: u64,
    threads: u64,
    steps: u64,
    round: u64,
) -> (f64, f64) {
    let barrier = Barrier::new(threads as usize + 1);
    let mul = M % n;
    let (wall, cpu) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    let offset = (t * n / threads + round * 7_919) % n;
                    let mut state = 0x2545_F491_4F6C_DD1D ^ (t + 1).wrapping_mul(M) ^ round;
                    let mut ok = 0u64;
                    barrier.wait();
                    let start = cpu_ns();
                    for i in 0..steps {
                        let key = order.key(offset + i, n, mul, &mut state);
                        ok += u64::from(lim.op(black_box(&key)));
                    }
                    let cpu = cpu_ns() - start;
                    assert_eq!(ok, steps, "every operation succeeds");
                    cpu
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let cpu: u64 = workers.into_iter().map(|w| w.join().expect("bench thread")).sum();
        (start.elapsed(), cpu)
    });
    let ops = (steps * threads) as f64;
    (wall.as_nanos() as f64 / ops, cpu as f64 / ops)
}

/// The median of `v` (the mean of the middle two for an even count).
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// A comma-separated list of numbers from the command line, or `default`.
pub(crate) fn list(arg: Option<&String>, default: &[u64]) -> Vec<u64> {
    arg.map_or_else(
        || default.to_vec(),
        |a| a.split(',').map(|x| x.parse().expect("a number")).collect(),
    )
}
